"""SDXL accuracy step on CPU with the tiny (seeded random-weight) scorers.

The accuracy logs come from real LoadGen runs in a child process whose SUT returns synthetic
uint8 images; a PerformanceOnly run with accuracy_log_probability=1 repeats samples, which is
how real logs get duplicate qsl_idx entries. The tiny FID is 192-d (pytorch-fid's block 1;
the real one is pool3, 2048-d).
"""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from code.common.errors import HarnessError, MissingDataError, RunError
from code.sdxl import accuracy, scorers

pytestmark = [pytest.mark.timeout(170), pytest.mark.usefixtures("one_torch_thread")]

SIZE = 64                  # synthetic image side; the scorers resize to 224 / 299 anyway
N = 12                     # unique samples in the evaluated log

# Child process: LoadGen Offline over images.npy. The SUT answers a repeated sample with the
# image + 100 so that "first entry wins" is observable.
_LOADGEN = textwrap.dedent("""
    import array, sys
    import numpy as np, mlperf_loadgen as lg
    images, out, mode = np.load(sys.argv[1]), sys.argv[2], sys.argv[3]
    n, keep, seen = len(images), [], set()
    def issue(qs):
        rs = []
        for q in qs:
            im = images[q.index] if q.index not in seen else images[q.index] + np.uint8(100)
            seen.add(q.index)
            b = array.array("B", im.tobytes()); keep.append(b)
            rs.append(lg.QuerySampleResponse(q.id, b.buffer_info()[0], len(b)))
        lg.QuerySamplesComplete(rs)
    sut = lg.ConstructSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(n, n, lambda s: None, lambda s: None)
    ts = lg.TestSettings(); ts.scenario = lg.TestScenario.Offline
    if mode == "dups":
        ts.mode = lg.TestMode.PerformanceOnly
        ts.accuracy_log_probability = 1.0; ts.accuracy_log_rng_seed = 1
        ts.min_query_count = 2 * n + 3; ts.min_duration_ms = 0; ts.offline_expected_qps = 1
    else:
        ts.mode = lg.TestMode.AccuracyOnly
    ls = lg.LogSettings(); ls.log_output.outdir = out; ls.log_output.copy_summary_to_stdout = False
    lg.StartTestWithLogSettings(sut, qsl, ts, ls)
    lg.DestroyQSL(qsl); lg.DestroySUT(sut)
""")


def loadgen_log(tmp: Path, images: np.ndarray, mode: str = "acc") -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    np.save(tmp / "images.npy", images)
    subprocess.run([sys.executable, "-c", _LOADGEN, str(tmp / "images.npy"), str(tmp), mode],
                   check=True, timeout=60)
    return tmp / "mlperf_log_accuracy.json"


@pytest.fixture(scope="module")
def tiny(tiny_sdxl):
    """The tiny variant's seeded scorers (seed 0) as the session's tiny SDXL build wrote them (download_model:
    scorers.build_tiny_scorers), read only: building another set here cost 7 CPU-s."""
    from code.common import paths

    models = paths.models_dir("sdxl", "tiny")
    files = scorers.scorer_files(models, "tiny")
    clip, inception = scorers.load_scorers(models, "tiny")
    return {"models": models, "files": files, "clip": clip, "inception": inception}


def captions_for(n: int) -> list[str]:
    things = ["cat", "dog", "red car", "city street at night", "bowl of fruit", "mountain lake"]
    return [f"a photo of a {things[i % len(things)]}, number {i}" for i in range(n)]


def noise_images(seed: int, n: int = N) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, SIZE, SIZE, 3), dtype=np.uint8)


def run_eval(log, out, tiny, **kw):
    args = dict(captions=captions_for(N), variant="tiny", models_dir=tiny["models"], data_dir=out,
                image_size=(SIZE, SIZE), sample_ids=None, fid_stats=None)
    args.update(kw)
    return accuracy.evaluate(str(log), str(out), **args)


def test_sdxl_scorer_sources_match_libraries():
    from open_clip.pretrained import get_pretrained_url
    from pytorch_fid.inception import FID_WEIGHTS_URL

    assert scorers.CLIP_URL == get_pretrained_url("ViT-B-32", "openai")
    assert scorers.CLIP_SHA256 in scorers.CLIP_URL
    assert scorers.INCEPTION_URL == FID_WEIGHTS_URL
    assert scorers.INCEPTION_SHA256.startswith("6726825d")


def test_sdxl_accuracy_report_closed_ranges():
    # The submission checker reads accuracy.txt with these patterns (constants.py ACC_PATTERN).
    pat = {k: re.compile(rf".*'{k}':\s+'?([\d.]+).*") for k in ("CLIP_SCORE", "FID_SCORE")}
    text = accuracy.report_text(23.9090641761635, 31.749353325665, "reference", 5000, [1, 2], [1, 2])
    first = text.splitlines()[0]
    assert first == "Accuracy Results: {'FID_SCORE': '23.9090641761635', 'CLIP_SCORE': '31.749353325665'}"
    assert [l for l in text.splitlines() if pat["CLIP_SCORE"].match(l)] == [first]
    assert float(pat["FID_SCORE"].match(first).group(1)) == 23.9090641761635
    assert "Accuracy check: PASSED" in text and "Compliance images: 2/2" in text
    for fid, clip in ((23.96, 31.75), (23.5, 31.68), (23.0, 31.75), (23.5, 31.82)):
        assert not accuracy.within_closed_range(clip, fid)
        assert "Accuracy check: FAILED" in accuracy.report_text(fid, clip, "reference", 5000)
    assert accuracy.within_closed_range(accuracy.closed_range("CLIP_SCORE")[0], accuracy.closed_range("FID_SCORE")[1])


def test_sdxl_accuracy_log_formats_and_dedup(tmp_path):
    images = np.arange(5 * 2 * 2 * 3, dtype=np.uint8).reshape(5, 2, 2, 3)
    log = loadgen_log(tmp_path / "lg", images, mode="dups")
    entries = list(accuracy.iter_log_entries(log))
    assert len(entries) > 5 and len({e["qsl_idx"] for e in entries}) == 5       # LoadGen repeated samples
    unique = dict(accuracy.iter_unique_images(log, (2, 2)))
    assert sorted(unique) == list(range(5))
    for i, im in unique.items():
        np.testing.assert_array_equal(im, images[i])                           # first entry wins
    # Any valid JSON layout parses the same way.
    for name, dump in (("one_line", lambda f: json.dump(entries, f)),
                       ("indented", lambda f: json.dump(entries, f, indent=2))):
        p = tmp_path / f"{name}.json"
        with open(p, "w") as f:
            dump(f)
        assert list(accuracy.iter_log_entries(p)) == entries


def test_sdxl_accuracy_offline_accuracyonly_tiny(tiny, tmp_path):
    images = noise_images(1)
    log = loadgen_log(tmp_path / "lg", images, mode="dups")
    out = tmp_path / "acc"
    ids = [3, 7, 11, 50]                     # 50: no such sample
    res = run_eval(log, out, tiny, sample_ids=ids)

    text = (out / "accuracy.txt").read_text()
    assert res["text"] == text
    first = text.splitlines()[0]
    m = re.fullmatch(r"Accuracy Results: \{'FID_SCORE': '([^']+)', 'CLIP_SCORE': '([^']+)'\}", first)
    assert m, first
    fid, clip = float(m.group(1)), float(m.group(2))
    assert fid == res["metrics"]["FID_SCORE"] and clip == res["metrics"]["CLIP_SCORE"]
    assert res["passed"] is None and "NOT APPLICABLE" in text
    assert f"Samples scored: {N}" in text                                     # duplicates dropped
    assert "missing qsl_idx [50]" in text

    # Noise vs. the smooth synthetic reference statistics: clearly not collapsed.
    assert math.isfinite(fid) and fid > 1.0, fid
    # Random-weight CLIP: a finite cosine x 100, and the pure function agrees (other batching).
    assert math.isfinite(clip) and -100.0 <= clip <= 100.0
    assert accuracy.clip_score(images, captions_for(N), scorer=tiny["clip"]) == pytest.approx(clip, rel=1e-5,
                                                                                           abs=1e-5)
    # Compliance images: the first (not the repeated, +100) image, lossless PNG, and captions.txt.
    from PIL import Image

    img_dir = out / "images"
    assert sorted(p.name for p in img_dir.iterdir()) == ["11.png", "3.png", "7.png", "captions.txt"]
    for i in (3, 7, 11):
        np.testing.assert_array_equal(np.asarray(Image.open(img_dir / f"{i}.png")), images[i])
    caps = captions_for(N)
    assert (img_dir / "captions.txt").read_text() == "".join(f"{i}  {caps[i]}\n" for i in (3, 7, 11))
    assert not [p for p in out.iterdir() if p.name.startswith(".")]           # no staging leftovers


def test_sdxl_accuracy_fid_identical_sets_near_zero(tiny, tmp_path):
    images = scorers.synthetic_images(np.random.default_rng(7), N, SIZE)
    mu, sigma = scorers.activation_stats(tiny["inception"].activations(images))
    stats = tmp_path / "same.npz"
    scorers.save_fid_stats(stats, mu, sigma)
    fid = accuracy.fid_from_images(images, stats, inception=tiny["inception"])
    assert abs(fid) < 1e-3, fid


def _assert_clean(out: Path):
    assert not (out / "accuracy.txt").exists()
    assert not (out / "images").exists()
    assert not list(out.glob(".*")), list(out.glob(".*"))


def _assert_one_line(err: HarnessError):
    assert "\n" not in err.cause and err.fix
    assert err.render().startswith("error: ") and "Traceback" not in err.render()


def test_sdxl_accuracy_errors_leave_nothing(tiny, tmp_path):
    images = noise_images(2, 4)
    good = loadgen_log(tmp_path / "lg", images)
    ids = [0, 1]

    cases = {}
    cases["missing"] = tmp_path / "nope.json"
    truncated = tmp_path / "truncated.json"
    truncated.write_text(good.read_text()[: len(good.read_text()) * 2 // 3])
    cases["truncated"] = truncated
    garbage = tmp_path / "garbage.json"
    garbage.write_text("not json at all\n")
    cases["garbage"] = garbage
    empty = tmp_path / "empty.json"
    empty.write_text("[\n]\n")
    cases["empty"] = empty
    for name, log in cases.items():
        out = tmp_path / f"out_{name}"
        out.mkdir()
        with pytest.raises(RunError) as e:
            run_eval(log, out, tiny, captions=captions_for(4), sample_ids=ids)
        _assert_one_line(e.value)
        _assert_clean(out)

    out = tmp_path / "out_size"
    out.mkdir()
    with pytest.raises(RunError, match="expected 32x32x3"):                   # wrong image size
        run_eval(good, out, tiny, captions=captions_for(4), image_size=(32, 32), sample_ids=ids)
    _assert_clean(out)
    out = tmp_path / "out_caps"
    out.mkdir()
    with pytest.raises(RunError, match="no caption"):                        # dataset mismatch
        run_eval(good, out, tiny, captions=captions_for(2), sample_ids=ids)
    _assert_clean(out)

    out = tmp_path / "out_weights"
    out.mkdir()
    with pytest.raises(MissingDataError, match="scorer weights not found") as e:
        run_eval(good, out, tiny, models_dir=tmp_path / "no_models",
                 fid_stats=str(tiny["files"].fid_stats), captions=captions_for(4))
    assert "--model_variant=tiny" in e.value.fix
    _assert_clean(out)
    out = tmp_path / "out_stats"
    out.mkdir()
    with pytest.raises(MissingDataError, match="statistics not found") as e:
        run_eval(good, out, tiny, variant="reference", captions=captions_for(4))
    assert "download_data" in e.value.fix
    _assert_clean(out)
