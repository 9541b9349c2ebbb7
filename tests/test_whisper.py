"""Whisper end to end through the CLI and LoadGen on its tiny variant (a seeded WhisperForConditionalGeneration of
the real input shape: 128 mel bins x 3,000 frames, 1,500 encoder positions; a tokenizer trained here), plus the
fidelity checks against the reference's own code and libraries:

- an AccuracyOnly and a VALID Offline PerformanceOnly run (tokens/s, the round's result field), then TEST01;
- the official speech2text/accuracy_eval.py scores the run's mlperf_log_accuracy.json, and planted logs (exact
  answers; dropped, substituted, split and joined words), with the tiny manifest through its own arguments: equal
  to ours to 4 significant digits;
- our log-mel features against transformers' WhisperFeatureExtractor (the path vLLM takes for the reference) and
  openai-whisper's log_mel_spectrogram, on the same waveform;
- batched greedy decoding: the same tokens at batch 8 as at batch 1;
- the real model and LibriSpeech downloads against a local mirror (127.0.0.1).

Sized for a 2-core machine: one tiny build, one reference pair of runs (the audit's), one TEST01 run."""
from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import (TINY_UNAVOIDABLE, _tiny_fixture, assert_test01_passed, metadata_under, offline_audit_env,
                            offline_samples, official_root, route, run_audit, run_official, staged_official_check)

BASE = ("--benchmarks=whisper", "--model_variant=tiny", "--scenarios=Offline")
SHORT = offline_samples(28)                 # two passes over the 14 tiny samples
tiny_whisper = _tiny_fixture("tiny_whisper", "whisper", "The tiny Whisper: model, tokenizer, synthetic "
                                                        "LibriSpeech-format repacked set and its log-mel features.")


@pytest.fixture(scope="module")
def env(tiny_whisper, tmp_path_factory):
    """A private build/ holding the reference PerformanceOnly and AccuracyOnly runs (TEST01 is verified against
    them; the accuracy and performance tests read them too)."""
    return offline_audit_env(tiny_whisper, tmp_path_factory, "whisper", BASE, SHORT)


def _runs(env) -> dict[str, dict]:
    return {m["test_mode"]: m for m in metadata_under(Path(env["MLPERF_BUILD_DIR"]) / "logs")}


def _data(env) -> Path:
    return Path(env["MLPERF_SCRATCH_PATH"]) / "data" / "librispeech" / "tiny"


def _official(env, log_dir: Path, tmp_path: Path) -> float:
    """accuracy_eval.py's accuracy for ``log_dir``/mlperf_log_accuracy.json with the tiny manifest."""
    script = official_root("speech2text", "accuracy_eval.py")
    try:
        r = run_official([script, "--log_dir", log_dir, "--dataset_dir", _data(env), "--manifest",
                          _data(env) / "dev-all-repack.json"], tmp_path)
    except AssertionError as e:
        if "ModuleNotFoundError" in str(e):
            pytest.skip(f"the official script's imports are missing here: {str(e).splitlines()[-1]}")
        raise
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("Word Error Rate:")][-1]
    return float(line.rsplit("accuracy=", 1)[1].rstrip("%"))


def _sig4(a: float, b: float) -> bool:
    return float(f"{a:.4g}") == float(f"{b:.4g}")


def test_whisper_offline_accuracy_official_metric_and_accuracy_eval(env, tmp_path):
    from code.whisper import accuracy, dataset

    m = _runs(env)["AccuracyOnly"]
    acc = m["accuracy"]
    text = (Path(m["log_dir"]) / "accuracy.txt").read_text()
    assert text.startswith("Word Error Rate: ") and ", accuracy=" in text.splitlines()[0]
    assert acc["metrics"]["samples"] == 14 and not acc["passed"]     # a random tiny model: WER ~100%
    theirs = _official(env, Path(m["log_dir"]), tmp_path)
    ours = acc["metrics"]["ACCURACY"]
    # planted logs: the exact transcripts (100%), and words dropped, substituted, split, joined, upper-cased
    manifest = json.loads((_data(env) / "dev-all-repack.json").read_text())
    rng = np.random.default_rng(0)

    def noisy(t: str) -> str:
        w = t.split()
        out = []
        for i, x in enumerate(w):
            r = rng.random()
            if r < 0.08:
                continue                                  # deletion
            out.append("zzz" if r < 0.16 else x[:2] + " " + x[2:] if r < 0.22 and len(x) > 4 else x.upper())
            if 0.22 <= r < 0.28 and i + 1 < len(w):
                out[-1] = x + w[i + 1]                    # two words joined (the concatenation rule's case)
        return " ".join(out) + (" extra" if rng.random() < 0.5 else "")
    figures = [("run", ours, theirs)]
    for name, fn in (("exact", lambda t: t), ("noisy", noisy)):
        d = tmp_path / name
        d.mkdir()
        entries = [{"seq_id": i, "qsl_idx": i, "data": dataset.to_labels(fn(e["transcript"])).tobytes().hex().upper()}
                   for i, e in enumerate(manifest)]
        (d / "mlperf_log_accuracy.json").write_text(json.dumps(entries))
        mine = accuracy.score(d / "mlperf_log_accuracy.json", [e["transcript"] for e in manifest], d / "accuracy.txt",
                              96.95)["metrics"]["ACCURACY"]
        figures.append((name, mine, _official(env, d, tmp_path)))
    print("FIGURE whisper tiny accuracy (ours | official accuracy_eval.py): "
          + "; ".join(f"{n} {a:.6g} | {b:.6g}" for n, a, b in figures))
    for n, a, b in figures:
        assert _sig4(a, b), (n, a, b)
    assert figures[1][1] == 100.0 and 30 < figures[2][1] < 95


def test_whisper_offline_performance_valid_tokens(env):
    m = _runs(env)["PerformanceOnly"]
    assert m["valid"], m["invalid_reasons"]
    assert m["loadgen_errors"] == []
    t = m["tokens"]
    assert t["result_field"] == "result_tokens_per_second" and t["tokens_per_second"] > 0
    assert 2 <= t["tokens_per_sample"] <= 24                   # answers end at varied lengths, at most 24 tokens
    assert t["effective_sample_concatenate_permutation"] is True   # whisper's mlperf.conf


def test_whisper_offline_test01_pass(env):
    r, d, rec = run_audit(env, "TEST01", "whisper", BASE, SHORT)
    assert_test01_passed(r, d, rec, 4096)


def test_whisper_staged_export_official_checker(env, tmp_path):
    """The module's Offline runs and TEST01 staged, truncated and exported for v6.1 (whisper is in both of its
    categories, datacenter and edge: Offline alone): the official checker reports only what a tiny CPU run cannot
    avoid (its length and sample counts)."""
    sub, errors = staged_official_check(env, tmp_path, "v6.1")
    assert list(sub.rglob("whisper/Offline/accuracy/accuracy.txt")) and list(sub.rglob("whisper/Offline/TEST01"))
    assert [ln for ln in errors if not any(re.search(p, ln) for p in TINY_UNAVOIDABLE)] == [], errors


def test_whisper_batched_greedy_is_batch1(tiny_whisper):
    """Batch 8 against batch 1, token for token, on every tiny sample (and the answers are not all alike)."""
    from code.whisper import model

    scratch = Path(tiny_whisper["MLPERF_SCRATCH_PATH"])
    feats = np.load(scratch / "preprocessed_data" / "whisper" / "tiny" / "features.npy")
    m, tok = model.load(scratch / "models" / "whisper" / "tiny")
    dec = model.Decoder(m, tok, model.TINY_MAX_NEW_TOKENS, 2)
    batched = dec.tokens(feats[:8]) + dec.tokens(feats[8:])
    single = [dec.tokens(feats[i:i + 1])[0] for i in range(len(feats))]
    assert batched == single
    assert len({tuple(t) for t in single}) >= len(single) // 2 and len({len(t) for t in single}) >= 3
    assert all(t[-1] == dec.eot or len(t) == model.TINY_MAX_NEW_TOKENS for t in single)


def test_whisper_features_match_transformers_and_openai_whisper(tiny_whisper):
    """The reference's features: vLLM runs the checkpoint's WhisperFeatureExtractor (128 mel bins, 30 s padding);
    openai-whisper's log_mel_spectrogram is the original. Ours is neither (code.whisper.features, numpy)."""
    import torch
    import whisper.audio as wa
    from transformers import WhisperFeatureExtractor

    from code.whisper import dataset, features

    data = _data(tiny_whisper)
    entry = json.loads((data / "dev-all-repack.json").read_text())[0]
    audio = dataset.read_audio(data / entry["files"][0]["fname"], "")
    ours = features.log_mel(audio)
    hf = WhisperFeatureExtractor(feature_size=128)(audio, sampling_rate=16000, return_tensors="np").input_features[0]
    ow = wa.log_mel_spectrogram(torch.from_numpy(wa.pad_or_trim(audio)), n_mels=128).numpy()
    stored = np.load(Path(tiny_whisper["MLPERF_SCRATCH_PATH"]) / "preprocessed_data" / "whisper" / "tiny"
                     / "features.npy", mmap_mode="r")[0]
    print(f"FIGURE whisper log-mel max |ours - transformers| {np.abs(ours - hf).max():.2e}, "
          f"|ours - openai-whisper| {np.abs(ours - ow).max():.2e}")
    assert ours.shape == hf.shape == ow.shape == (128, 3000)
    assert np.abs(ours - hf).max() < 1e-4 and np.abs(ours - ow).max() < 1e-4
    assert np.array_equal(stored, ours)
    # a clip over 30 s is cut at 30 s, as both references do
    long = np.concatenate([audio] * (1 + 16000 * 31 // audio.size))
    hf_long = WhisperFeatureExtractor(feature_size=128)(long, sampling_rate=16000,
                                                        return_tensors="np").input_features[0]
    assert np.abs(features.log_mel(long) - hf_long).max() < 1e-4


def test_whisper_round_entries_and_gpu_blocks():
    from code.common.rounds import ROUNDS
    from code.main import plan

    entries = [ROUNDS[v].benchmarks["whisper"] for v in ("v5.1", "v6.0", "v6.1")]
    assert entries[0] == entries[1] == entries[2]
    e = entries[0]
    assert e.benchmark == "whisper" and e.loadgen_model == "whisper"
    for cat in ("edge", "datacenter", "datacenter,edge"):
        assert e.required_scenarios(cat) == ("Offline",)
    assert e.accuracy_min == {"ACCURACY": (100.0 - 2.0671) * 0.99} and round(e.accuracy_min["ACCURACY"], 2) == 96.95
    assert (e.dataset_size, e.performance_sample_count) == (1633, 1633)
    assert e.compliance_tests == ("TEST01",) and e.test01_sampling_target == 4096
    assert e.result_field == {"Offline": "result_tokens_per_second"}
    with pytest.raises(Exception, match="not part of MLPerf Inference v5.0"):
        ROUNDS["v5.0"].entry("whisper")
    for system, bs in (("H100-SXM-80GBx1", 64), ("H200-SXM-141GBx1", 96), ("B200-SXM-180GBx8", 128)):
        _, [s] = plan(["--action=info", "--benchmarks=whisper", "--scenarios=Offline", f"--system_name={system}"])
        assert s.values["gpu_batch_size"] == bs and s.precision == "bf16"


def _flac(audio: np.ndarray) -> bytes:
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, audio, 16000, format="FLAC", subtype="PCM_16")
    return buf.getvalue()


def _librispeech_tar(split: str, speakers: tuple[int, ...]) -> tuple[bytes, dict[str, tuple[np.ndarray, str]]]:
    """A LibriSpeech-layout tar.gz: per speaker one chapter of three FLAC clips and its trans.txt."""
    rng = np.random.default_rng(speakers[0])
    buf, clips = io.BytesIO(), {}
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for spk in speakers:
            chap = spk * 10
            lines = []
            for u in range(3):
                uid = f"{spk}-{chap}-{u:04d}"
                secs = 20.0 if u == 1 else 4.0 + u          # 4 s, 20 s, 6 s: packs of (4, 20) and (6)
                audio = (0.1 * rng.standard_normal(int(16000 * secs))).astype(np.float32)
                text = f"WORD{u} OF SPEAKER {spk}"
                clips[uid] = (audio, text)
                lines.append(f"{uid} {text}")
                add(f"LibriSpeech/{split}/{spk}/{chap}/{uid}.flac", _flac(audio))
            add(f"LibriSpeech/{split}/{spk}/{chap}/{spk}-{chap}.trans.txt", ("\n".join(lines) + "\n").encode())
    return buf.getvalue(), clips


def test_whisper_downloads_model_and_librispeech_via_local_mirror(tiny_whisper, mirror, tmp_path, monkeypatch):
    """The real paths: the R2 model (md5 list, a Whisper folder of 128 mel bins), the R2 preprocessed set, and the
    two LibriSpeech tarballs (the reference's URLs; md5-checked), converted and repacked; a tarball whose md5 differs
    is refused."""
    from code.common.errors import HarnessError
    from code.whisper import dataset, download

    ck = Path(tiny_whisper["MLPERF_SCRATCH_PATH"]) / "models" / "whisper" / "tiny"
    files = {f"whisper-large-v3/{p.name}": p.read_bytes() for p in ck.iterdir() if p.is_file()}
    mirror.add_r2(download.MODEL_URI, "https://inference.mlcommons-storage.org/whisper_model", files)
    found = download.download_model(tmp_path / "model", log=lambda *_: None)
    assert found == tmp_path / "model" / "whisper-large-v3" and (tmp_path / "model" / "download.json").is_file()

    # the reference's preprocessed set through R2 (whisper-dataset.uri): the tiny set's manifest and WAVs
    data = _data(tiny_whisper)
    files = {str(p.relative_to(data)): p.read_bytes() for p in data.rglob("*") if p.is_file() and p.suffix in (".json", ".wav")}
    mirror.add_r2(download.DATASET_URI, "https://inference.mlcommons-storage.org/whisper_dataset", files)
    got = download.download_preprocessed(tmp_path / "mlc", log=lambda *_: None)
    assert got == tmp_path / "mlc" / "dev-all-repack.json" and len(dataset.read_manifest(got, "")) == 14

    tars = {"dev-clean": _librispeech_tar("dev-clean", (84, 174)), "dev-other": _librispeech_tar("dev-other", (116,))}
    pins = {}
    for split, (blob, _) in tars.items():
        url = download.LIBRISPEECH[split][0]
        mirror.routes[route(url)] = blob
        pins[split] = (url, hashlib.md5(blob).hexdigest())
    with pytest.raises(HarnessError, match="checksum mismatch"):       # the real md5s: these bytes are not LibriSpeech
        download.download_data(tmp_path / "bad", log=lambda *_: None)
    monkeypatch.setattr(download, "LIBRISPEECH", pins)
    manifest = download.download_data(tmp_path / "data", log=lambda *_: None)
    ents = dataset.read_manifest(manifest, "")
    assert len(ents) == 6                                  # per chapter: (4 s + 0.5 s + 20 s) and (6 s)
    first = ents[0]
    assert first["transcript"] == "word0 of speaker 174 word1 of speaker 174"    # chapters in sorted path order
    assert abs(first["original_duration"] - 24.5) < 1e-6 and first["files"][0]["fname"].startswith("dev-all-repack/")
    clips = {**tars["dev-clean"][1], **tars["dev-other"][1]}
    got = dataset.read_audio(tmp_path / "data" / first["files"][0]["fname"], "")
    want = np.concatenate([clips["174-1740-0000"][0], np.zeros(8000, np.float32), clips["174-1740-0001"][0]])
    assert got.size == want.size and np.abs(got - want).max() < 1 / 32768 + 1e-6
