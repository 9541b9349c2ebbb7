"""BERT tiny variant end to end: real LoadGen, real ONNX Runtime (and torch) engines, no mocks.

The tiny set is 200 synthetic SQuAD-format questions on 40 contexts (6 of them 2-3 windows long,
so doc_stride and max-context matter), 245 features of 69-384 tokens; each question's first answer
is the fp32 torch reference's own best span, so a faithful pipeline scores F1 100.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import harness_runs, metadata_under, offline_samples, official_root, run_main, tensorrt_accuracy_run

BASE = ("--benchmarks=bert", "--model_variant=tiny")
FEATURES = 245
QUESTIONS = 200


def _scratch(env) -> Path:
    return Path(env["MLPERF_SCRATCH_PATH"])


@pytest.fixture(scope="module")
def perf_runs(tiny_bert, tmp_path_factory) -> dict[str, dict]:
    return harness_runs(tiny_bert, tmp_path_factory.mktemp("bert_perf"), BASE, ("Offline", offline_samples(FEATURES)),
                        ("Server", ("--min_duration=1500", "--min_query_count=12")),
                        ("SingleStream", ("--min_duration=1000", "--min_query_count=60")))


@pytest.fixture(scope="module")
def accuracy_runs(tiny_bert, tmp_path_factory) -> dict[str, dict]:
    out = harness_runs(tiny_bert, tmp_path_factory.mktemp("bert_acc"), BASE, ("Offline,SingleStream", ()),
                       mode="AccuracyOnly")
    padded = tmp_path_factory.mktemp("bert_acc_padded")
    r = run_main("--action=run_harness", *BASE, "--scenarios=Offline", "--test_mode=AccuracyOnly",
                 "--bert_seqlen_batching=padded", f"--log_dir={padded}", env=tiny_bert)
    assert r.returncode == 0, r.stdout + r.stderr
    [out["padded"]] = metadata_under(padded)
    return out


@pytest.mark.parametrize("scenario", ["Offline", "Server", "SingleStream"])
def test_bert_performance_runs(perf_runs, scenario):
    m = perf_runs[scenario]
    assert m["status"] == "ok", m["error"]
    if scenario != "Server":      # Server on a shared 2-core machine: the latency bound may be missed
        assert m["result_validity"] == "VALID", m["invalid_reasons"]
    assert m["metric_value"] > 0 and m["loadgen_errors"] == []
    assert m["benchmark"] == "bert" and m["loadgen_model"] == "bert"
    assert not list(Path(m["log_dir"]).parent.glob("*.partial"))
    if scenario == "Server":      # LoadGen's mlperf.conf: bert.Server.target_latency = 130 ms
        assert _detail(m)["effective_target_latency_ns"] == 130_000_000


def _detail(m: dict) -> dict:
    kv = {}
    for line in (Path(m["log_dir"]) / "mlperf_log_detail.txt").read_text().splitlines():
        if line.startswith(":::MLLOG"):
            e = json.loads(line[len(":::MLLOG"):])
            kv[e["key"]] = e["value"]
    return kv


def test_bert_seqlen_fields_are_config_keys(perf_runs):
    m = perf_runs["Offline"]
    assert m["settings"]["bert_seqlen_batching"] == "bucketed" and m["settings"]["bert_bucket_step"] == 64
    assert m["sources"]["bert_seqlen_batching"].startswith("configs/bert/Offline/config.json")
    assert m["settings"]["gpu_batch_size"] == 16
    assert Path(m["engines"]["bert"]).name == "bert-b16-fp32.onnx"


@pytest.mark.parametrize("scenario", ["Offline", "SingleStream", "padded"])
def test_bert_accuracy_runs(accuracy_runs, scenario):
    from code.common.results.accuracy_text import values

    m = accuracy_runs[scenario]
    assert m["status"] == "ok", m["error"]
    acc = m["accuracy"]["metrics"]
    assert acc["features"] == FEATURES and acc["questions"] == QUESTIONS, acc
    assert acc["F1"] == 100.0 and acc["exact_match"] == 100.0, acc
    text = (Path(m["log_dir"]) / "accuracy.txt").read_text()
    # the submission checker's F1 pattern (submission_checker/constants.py ACC_PATTERN["F1"])
    hit = re.match(r"^{[\"\']exact_match[\"\']\:\s*[\d\.]+,\s*[\"\']f1[\"\']\:\s*([\d\.]+)}", text.splitlines()[0])
    assert hit and float(hit.group(1)) == acc["F1"]
    assert values(text, ["F1"])["F1"] == acc["F1"]


def _log_logits(m: dict) -> dict[int, np.ndarray]:
    out = {}
    for e in json.loads((Path(m["log_dir"]) / "mlperf_log_accuracy.json").read_text()):
        out[e["qsl_idx"]] = np.frombuffer(bytes.fromhex(e["data"]), np.float32).reshape(384, 2)
    return out


def test_bert_outputs_are_the_reference_layout(accuracy_runs, tiny_bert):
    """(384, 2) float32 per feature; bucketed: real tokens' logits match the padded run, -10000 past
    the true length; padded: the engine's logits everywhere (as the reference emits them)."""
    z = np.load(_scratch(tiny_bert) / "preprocessed_data" / "squad" / "tiny" / "features.npz")
    b, p = _log_logits(accuracy_runs["Offline"]), _log_logits(accuracy_runs["padded"])
    assert sorted(b) == sorted(p) == list(range(FEATURES))
    lens = z["seq_len"]
    assert len(set(lens.tolist())) > 20 and lens.min() < 128 and lens.max() == 384
    for i in range(FEATURES):
        n = int(lens[i])
        np.testing.assert_allclose(b[i][:n], p[i][:n], atol=2e-5)
        assert (b[i][n:] == -10000.0).all()
        assert (p[i][n:] > -1000).all()


def _plain_torch_f1(scratch: Path):
    """Written apart from the harness: BertForQuestionAnswering on every feature at 384 tokens (32 per
    call), this package's post-processing and metrics."""
    import torch

    from code.bert import dataset, model, squad

    pre = scratch / "preprocessed_data" / "squad" / "tiny"
    examples, features = dataset.load_meta(pre, "x")
    z = np.load(pre / "features.npz")
    net = model.load_tiny_torch(scratch / "models" / "bert" / "tiny")
    logits = {}
    with torch.inference_mode():
        for i in range(0, len(features), 32):
            t = {k: torch.from_numpy(z[k][i:i + 32].astype(np.int64)) for k in ("input_ids", "input_mask", "segment_ids")}
            o = net(input_ids=t["input_ids"], attention_mask=t["input_mask"], token_type_ids=t["segment_ids"])
            for k in range(o.start_logits.shape[0]):
                logits[i + k] = (o.start_logits[k].tolist(), o.end_logits[k].tolist())
    return squad.evaluate(examples, squad.predict(examples, features, logits)), logits, z["seq_len"]


def test_bert_fidelity_harness_vs_plain_torch(accuracy_runs, tiny_bert):
    ref, logits, lens = _plain_torch_f1(_scratch(tiny_bert))
    got = accuracy_runs["Offline"]["accuracy"]["metrics"]
    logged = _log_logits(accuracy_runs["Offline"])
    diff = max(float(np.abs(logged[i][:n] - np.stack(logits[i], -1)[:n]).max()) for i, n in enumerate(lens.tolist()))
    print(f"[fidelity] bert: harness (ORT, bucketed, LoadGen AccuracyOnly) F1 {got['F1']:.6f} EM "
          f"{got['exact_match']:.6f}; plain torch F1 {ref['f1']:.6f} EM {ref['exact_match']:.6f}; "
          f"max |logit difference| on real tokens {diff:.2e}")
    assert diff < 1e-4
    assert f"{got['F1']:.4g}" == f"{ref['f1']:.4g}" and f"{got['exact_match']:.4g}" == f"{ref['exact_match']:.4g}"


def test_bert_tiny_ground_truth_is_not_vacuous(tiny_bert):
    """Every question has two answers (the torch reference's span first, the planted one second), and
    logits that carry no information score far below 100."""
    from code.bert import dataset, squad

    scratch = _scratch(tiny_bert)
    data = json.loads((scratch / "data" / "squad" / "tiny" / "dev-v1.1.json").read_text())
    qas = [qa for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]]
    assert len(qas) == QUESTIONS and all(len(qa["answers"]) == 2 for qa in qas)
    pre = scratch / "preprocessed_data" / "squad" / "tiny"
    examples, features = dataset.load_meta(pre, "x")
    z = np.load(pre / "features.npz")
    assert z["input_ids"].shape == (FEATURES, 384)
    assert sum(1 for f in features if f.doc_span_index > 0) >= 10   # multi-window contexts
    fake = {i: ([0.0] * 384, [0.0] * 384) for i in range(len(features))}
    assert squad.evaluate(examples, squad.predict(examples, features, fake))["f1"] < 50


def test_bert_singlestream_and_offline_agree(accuracy_runs):
    a, b = _log_logits(accuracy_runs["Offline"]), _log_logits(accuracy_runs["SingleStream"])
    assert all(np.allclose(a[i], b[i], atol=2e-5) for i in a)


def test_bert_pytorch_backend(tiny_bert, tmp_path):
    """--backend=pytorch runs the same weights eagerly (BertForQuestionAnswering): F1 100."""
    r = run_main("--action=run_harness", *BASE, "--scenarios=Offline", "--backend=pytorch", "--test_mode=AccuracyOnly",
                 f"--log_dir={tmp_path}", env=tiny_bert)
    assert r.returncode == 0, r.stdout + r.stderr
    [m] = metadata_under(tmp_path)
    assert m["backend"] == "pytorch" and m["system_name"].endswith("_PyT")
    assert m["accuracy"]["metrics"]["F1"] == 100.0


def test_bert_tensorrt_backend(tiny_bert, tmp_path):
    m = tensorrt_accuracy_run(tiny_bert, BASE, tmp_path)
    assert set(m["engines"]) == {f"bert-s{L}" for L in (64, 128, 192, 256, 320, 384)}
    assert m["accuracy"]["metrics"]["F1"] >= 99.0


# --- tokenisation and features -----------------------------------------------------------------------

def test_bert_features_hand_checked(tmp_path):
    """A hand-checked sample: whitespace words, WordPiece splits, [CLS] q [SEP] doc [SEP], padding,
    windows every doc_stride tokens with their max-context flags, and get_final_text's projection."""
    from code.bert import dataset, squad

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "what", "is", "the", "cat", "sat", "on", "mat", "##s",
             ",", ".", "a", "dog", "##gy", "?"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = dataset.tokenizer(tmp_path / "vocab.txt")
    ctx = "The cats sat on\u202fthe mat, a doggy."
    data = {"version": "1.1", "data": [{"paragraphs": [{"context": ctx, "qas": [
        {"id": "q1", "question": "What is the Cat?", "answers": [{"text": "doggy", "answer_start": 27}]}]}]}]}
    [ex] = squad.read_examples(data)
    assert ex.doc_tokens == ["The", "cats", "sat", "on", "the", "mat,", "a", "doggy."]
    [f] = squad.convert([ex], tok)
    assert f.tokens == ["[CLS]", "what", "is", "the", "cat", "?", "[SEP]", "the", "cat", "##s", "sat", "on", "the", "mat",
                        ",", "a", "dog", "##gy", ".", "[SEP]"]
    assert f.doc_offset == 7 and f.seq_len == 20
    assert f.token_to_orig == [0, 1, 1, 2, 3, 4, 5, 5, 6, 7, 7, 7]
    assert f.input_ids[:7] == [2, 5, 6, 7, 8, 18, 3] and f.input_ids[20:] == [0] * (384 - 20)
    assert f.segment_ids[:7] == [0] * 7 and f.segment_ids[7:20] == [1] * 13 and f.segment_ids[20:] == [0] * 364
    assert squad.get_final_text("doggy", "doggy.") == "doggy"
    assert squad.get_final_text("mat", "mat,") == "mat"
    # prediction: start "dog" (16), end "##gy" (17) -> the original word without its period
    start = [0.0] * 384
    end = [0.0] * 384
    start[16], end[17] = 5.0, 5.0
    assert squad.predict([ex], [f], {0: (start, end)}) == {"q1": "doggy"}
    assert squad.evaluate([ex], {"q1": "the Doggy!"}) == {"exact_match": 100.0, "f1": 100.0}
    # windows: a 100-word document at max_seq 64 and stride 16
    long = squad.Example("q2", "what", ["cat"] * 100, ["cat"], 1)
    fs = squad.convert([long], tok, max_seq=64, stride=16)
    room = 64 - 1 - 3
    assert [len(x.token_to_orig) for x in fs] == [room, room, room, 100 - 48]
    assert [x.token_to_orig[0] for x in fs] == [0, 16, 32, 48]
    # token 20: left/right context 20/39 in window 0, 4/55 in window 1 -> window 0 holds its max context
    assert fs[0].max_context[20] and not fs[1].max_context[4]
    assert fs[1].max_context[40 - 16] and not fs[0].max_context[40]   # 24/35 in window 1 beats 40/19


def test_bert_official_accuracy_squad_agrees_on_a_noisy_run_log(accuracy_runs, tiny_bert, tmp_path):
    """accuracy-squad.py (+ evaluate_v1.1.py), run from the read-only official tree with our tiny vocab.txt
    (--vocab_file) and the tiny dev-v1.1.json, against our F1/EM on the padded run's log with seeded
    noise on every logit, the padding positions included (F1 far from 100, and padding in the top-20
    candidates, so the post-processing is really compared; the harness's own logs score 100 on both,
    test_bert_accuracy_runs and test_reference_bert). The tokenization module it imports is
    code.bert.official's stand-in (see tests/test_reference_bert.py)."""
    from code.bert.official import reference_pythonpath

    root = official_root("language", "bert")
    scratch = _scratch(tiny_bert)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(reference_pythonpath(root, tmp_path)), PYTHONDONTWRITEBYTECODE="1")
    from code.bert import dataset
    from code.bert.accuracy import score

    rng = np.random.default_rng(7)
    entries = json.loads((Path(accuracy_runs["padded"]["log_dir"]) / "mlperf_log_accuracy.json").read_text())
    for e in entries:
        x = np.frombuffer(bytes.fromhex(e["data"]), np.float32).copy()
        x += rng.normal(0, 3.0, x.size).astype(np.float32)
        e["data"] = x.tobytes().hex().upper()
    log = tmp_path / "noisy" / "mlperf_log_accuracy.json"
    log.parent.mkdir()
    log.write_text(json.dumps(entries))
    ex, fe = dataset.load_meta(scratch / "preprocessed_data" / "squad" / "tiny", "x")
    ours = score(log, ex, fe, log.parent / "accuracy.txt", 0.0, tiny=True)["metrics"]
    assert 5 < ours["F1"] < 95, ours
    r = subprocess.run([sys.executable, str(root / "accuracy-squad.py"),
                        "--vocab_file", str(scratch / "models/bert/tiny/vocab.txt"),
                        "--val_data", str(scratch / "data/squad/tiny/dev-v1.1.json"),
                        "--log_file", str(log),
                        "--out_file", str(tmp_path / "predictions.json"),
                        "--features_cache_file", str(tmp_path / "eval_features.pickle")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    line = next(x for x in r.stdout.splitlines()[::-1] if x.startswith("{"))
    official = json.loads(line)
    print(f"FIGURE bert scoring (noisy padded run log, tiny set) accuracy-squad.py F1 {official['f1']:.6f} EM "
          f"{official['exact_match']:.6f}; ours F1 {ours['F1']:.6f} EM {ours['exact_match']:.6f}")
    assert f"{official['f1']:.4g}" == f"{ours['F1']:.4g}" and f"{official['exact_match']:.4g}" == f"{ours['exact_match']:.4g}"
    assert abs(official["f1"] - ours["F1"]) < 1e-5 and abs(official["exact_match"] - ours["exact_match"]) < 1e-5


def test_bert_bucketed_processor_sub_batches():
    """Sorted by length, one engine call per bucket (<= batch size each), padded only to the bucket;
    outputs back in issue order, -10000 past each feature's length; padded mode: one call at 384."""
    from code.bert.harness import BertProcessor, buckets

    assert buckets(64) == (64, 128, 192, 256, 320, 384) and buckets(100) == (100, 200, 300, 384)
    assert buckets(384) == (384,)

    class QSL:
        seq_len = np.array([384, 10, 70, 64, 200, 65, 129], np.int32)
        input_ids = np.tile(np.arange(384, dtype=np.int32), (7, 1)) + np.arange(7, dtype=np.int32)[:, None] * 1000
        input_mask = input_ids * 0 + 1
        segment_ids = input_ids * 0

    calls = []

    class Engine:
        def infer(self, feeds):
            ids = feeds["input_ids"]
            calls.append(ids.shape)
            return {"output_start_logits": ids.astype(np.float32), "output_end_logits": -ids.astype(np.float32)}

    eng = Engine()
    p = BertProcessor({L: eng for L in buckets(64)}, QSL(), 2, "bucketed")
    order = [4, 1, 0, 2, 5, 3, 6]
    outs = p.process(order)
    assert sorted(calls) == sorted([(2, 64), (2, 128), (1, 192), (1, 256), (1, 384)]), calls
    for i, o in zip(order, outs):
        n = int(QSL.seq_len[i])
        assert o.shape == (384, 2) and o.dtype == np.float32
        assert (o[:n, 0] == np.arange(n) + i * 1000).all() and (o[:n, 1] == -(np.arange(n) + i * 1000)).all()
        assert (o[n:] == -10000.0).all()
    calls.clear()
    outs = BertProcessor({384: eng}, QSL(), 8, "padded").process(order)
    assert calls == [(7, 384)] and all((o[:, 0] == np.arange(384) + i * 1000).all() for i, o in zip(order, outs))


def test_bert_tensorrt_bucket_profiles(tiny_bert, monkeypatch):
    """What TensorRT would be asked to build (no TensorRT needed): one engine per bucket, each with a
    profile of batch 1..gpu_batch_size at exactly its bucket length, from the tiny ONNX's dynamic axes;
    the MLPerf export's static 384 gives one bucket."""
    from code.bert import model
    from code.bert.harness import BertBenchmark
    from code.common.backends.tensorrt import _profile_shapes
    from code.main import plan

    for k, v in tiny_bert.items():
        monkeypatch.setenv(k, v)
    _, settings = plan(["--action=run_harness", *BASE, "--scenarios=Offline", "--backend=tensorrt"])
    b = BertBenchmark(settings[0])
    assert b._engine_lengths() == (64, 128, 192, 256, 320, 384)
    spec = b.engine_spec(seq=128)
    assert spec.name == "bert-s128" and spec.input_shapes == {n: (-1, 128) for n in model.INPUTS}
    assert _profile_shapes(spec, "input_ids", (-1, -1), 16) == ((1, 128), (16, 128), (16, 128))
    monkeypatch.setattr(model, "onnx_seq_dim", lambda p: 384)
    assert b._engine_lengths() == (384,)
