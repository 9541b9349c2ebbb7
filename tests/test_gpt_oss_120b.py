"""GPT-OSS-120B end to end through the CLI and LoadGen on its tiny variant (a GptOssForCausalLM: sliding and full
attention layers in turn, attention sinks, 4 experts top-2; transformers backend): token identity with plain
``model.generate`` at batch 1, exact match scored as the reference's eval_mlperf_accuracy.py scores the same log
(run from the shared official tree), an Offline run over the performance set, Server and Interactive under their
own bounds and LoadGen names; the round entries; the real model and data paths against a local mirror.

Sized for a 2-core machine: one module fixture (an AccuracyOnly run at batch 1 and one Offline run), one Server
and one short Interactive run sized from the Offline rate."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import audit_config_values, official_root, offline_samples, run_main, run_official, server_rate
from tests.test_llm_harness import generate_reference, one, tokens_of

GO = ("--benchmarks=gpt-oss-120b", "--model_variant=tiny")
N = 24                                      # GptOss120BBenchmark.tiny_samples


@pytest.fixture(scope="module")
def go(tiny_gpt_oss, tmp_path_factory):
    """An AccuracyOnly run at batch 1 (the accuracy set) and an Offline performance run (the performance set; its
    rate sizes the Server runs)."""
    root = tmp_path_factory.mktemp("gpt_oss_runs")
    run_main("--action=run_harness", *GO, "--scenarios=Offline", "--test_mode=AccuracyOnly", "--gpu_batch_size=1",
             f"--log_dir={root / 'acc'}", env=tiny_gpt_oss, check=True)
    run_main("--action=run_harness", *GO, "--scenarios=Offline", *offline_samples(48), f"--log_dir={root / 'perf'}",
             env=tiny_gpt_oss, check=True)
    return {"root": root, "env": tiny_gpt_oss, "acc": one(root / "acc"), "perf": one(root / "perf")}


def test_gpt_oss_offline_accuracy_batch1_is_generate_and_scored_with_harmony_weights(go):
    ref = generate_reference(go["env"], "gpt_oss_120b")
    m = go["acc"]
    got = tokens_of(m["log_dir"])
    assert len(got) == len(ref) == N and all(got[i] == ref[i] for i in range(N))
    acc = m["accuracy"]
    assert acc["passed"], acc["text"]
    assert acc["metrics"]["exact_match"] == acc["generate_metrics"]["exact_match"]
    assert 20 < acc["metrics"]["exact_match"] < 90            # answers found and judged, right and wrong
    assert acc["metrics"]["num-samples"] == N and acc["metrics"]["tokens_per_sample"] > 2
    text = (Path(m["log_dir"]) / "accuracy.txt").read_text()
    assert text.startswith("{'exact_match': ") and "# aime: " in text and "# gpqa: " in text
    # the harmony markers are in the text scored: plain generate's answers hold final-channel headers, and the
    # score over the text without them (what skip_special_tokens=True would give) differs
    from code.common.llm import exact_match
    from code.common.llm.tiny import load_tokenizer
    from code.gpt_oss_120b import dataset

    tok = load_tokenizer(Path(go["env"]["MLPERF_SCRATCH_PATH"]) / "models" / "gpt_oss_120b" / "tiny" / "checkpoint")
    refs = json.loads((Path(go["env"]["MLPERF_SCRATCH_PATH"]) / "preprocessed_data" / "gpt_oss_120b" / "tiny"
                       / "references.json").read_text())
    keep = tok.batch_decode(ref, skip_special_tokens=False)
    dropped = tok.batch_decode(ref, skip_special_tokens=True)
    assert sum("<|channel|>final<|message|>" in t for t in keep) >= 8
    assert any(exact_match.extract(d, a, "harmony") != exact_match.extract(d, b, "harmony")
               for d, a, b in zip(refs["dataset"], keep, dropped))
    drop = exact_match.score(refs["dataset"], dropped, refs["targets"], "harmony", repeats=dataset.REPEATS)
    assert drop["exact_match"] != acc["metrics"]["exact_match"]
    # the weights: AIME25 answers count 1/8, GPQA-Diamond 1/5 (an unweighted mean differs)
    flat = exact_match.score(refs["dataset"], keep, refs["targets"], "harmony")["exact_match"]
    assert flat != acc["metrics"]["exact_match"]
    perf = go["perf"]
    assert perf["valid"], perf["invalid_reasons"]
    assert perf["loadgen_model"] == "gpt-oss-120b" and perf["tokens"]["result_field"] == "result_tokens_per_second"


def test_gpt_oss_official_eval_mlperf_accuracy_scores_the_same_log(go, tmp_path):
    """language/gpt-oss-120b/eval_mlperf_accuracy.py (with its eval_accuracy.py) on the run's own log, the tiny
    accuracy Parquet and the tiny checkpoint's tokenizer: its exact_match (printed with 3 decimals) is ours."""
    script = official_root("language", "gpt-oss-120b", "eval_mlperf_accuracy.py")
    scratch = Path(go["env"]["MLPERF_SCRATCH_PATH"])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        out = run_official([str(script), "--mlperf-log", str(Path(go["acc"]["log_dir"]) / "mlperf_log_accuracy.json"),
                            "--reference-data", str(scratch / "data" / "gpt_oss_120b" / "tiny" / "acc"
                                                    / "acc_eval_ref.parquet"),
                            "--tokenizer", str(scratch / "models" / "gpt_oss_120b" / "tiny" / "checkpoint"),
                            "--output-file", str(tmp_path / "results.json")], tmp_path, env)
    except AssertionError as e:
        if "ModuleNotFoundError" in str(e):
            pytest.skip(f"the official script's imports are missing here: {str(e).splitlines()[-1]}")
        raise
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("'exact_match':")][-1]
    theirs = float(line.split(":", 1)[1])
    summary = json.loads((tmp_path / "results.json").read_text())["summary"]
    ours = go["acc"]["accuracy"]["metrics"]
    print(f"FIGURE gpt_oss_120b tiny log, official: exact_match {theirs} ({summary['total_samples']} samples, "
          f"{summary['per_dataset']}) | ours: {ours}")
    assert round(ours["exact_match"], 3) == theirs
    assert summary["total_samples"] == ours["num-samples"] == N
    assert summary["dataset_repeats"] == {"aime25": 8, "gpqa_diamond": 5, "livecodebench_v6": 3}


def test_gpt_oss_server_and_interactive_bounds_and_names(go):
    env, root = go["env"], go["root"]
    qps = server_rate(go["perf"], 0.25, cap=6)               # a quarter of this machine's Offline rate just measured
    run_main("--action=run_harness", *GO, "--scenarios=Server", f"--server_target_qps={qps}",
             "--min_query_count=40", "--min_duration=1000", f"--log_dir={root / 'server'}", env=env, check=True,
             latency=True)
    m = one(root / "server")
    t = m["tokens"]
    assert m["loadgen_model"] == "gpt-oss-120b" and t["result_field"] == "result_completed_tokens_per_second"
    assert t["ttft_limit_ns"] == 600_000_000 and t["tpot_limit_ns"] == 100_000_000
    assert t["ttft_mean_ns"] < t["ttft_limit_ns"] and t["tpot_p99_ns"] < t["tpot_limit_ns"], t
    # 40 queries make the p99 the slowest one, which a busy 2-core machine can push past the tiny TTFT bound
    # (seen here: 760 ms, mean 60 ms): valid, short of early stopping, or over a bound with the advice to lower the
    # load; nothing else
    assert m["valid"] or all("early stopping" in w or ("ms bound" in w and "Lower the load" in w)
                             for w in m["invalid_reasons"]), m["invalid_reasons"]
    print(f"tiny GPT-OSS Server at {qps} QPS: TTFT p99 {t['ttft_p99_ns'] / 1e6:.1f} ms, "
          f"TPOT p99 {t['tpot_p99_ns'] / 1e6:.2f} ms")
    # Interactive: its name, bounds and a short run (16 queries, rounded up to the 24 samples). A VALID one needs 480
    # (LoadGen's p99 early stopping, rounded up to the samples): over 2 min at this rate, so the one asserted VALID is
    # tiny Llama3.1-405B's (tests/test_llama3_1_405b.py), the fastest per query of the three
    run_main("--action=run_harness", *GO, "--scenarios=Interactive", f"--server_target_qps={round(qps / 2, 2)}",
             "--min_query_count=16", "--min_duration=500", f"--log_dir={root / 'interactive'}", env=env, check=True,
             latency=True)
    i = one(root / "interactive")
    assert i["loadgen_model"] == "gpt-oss-120b-interactive"
    assert "gpt-oss-120b-interactive.Server.target_qps" in i["user_conf"]
    assert i["tokens"]["ttft_limit_ns"] == 400_000_000 and i["tokens"]["tpot_limit_ns"] == 60_000_000
    assert i["valid"] or all("early stopping" in w or (("400 ms bound" in w or "60 ms bound" in w)
                                                         and "Lower the load" in w)
                             for w in i["invalid_reasons"]), i["invalid_reasons"]
    assert i["tokens"]["ttft_mean_ns"] < 400_000_000


def test_gpt_oss_round_entries_and_gpu_blocks():
    from code.common.benchmarks import implementation
    from code.common.rounds import ROUNDS
    from code.main import plan

    v60, v61 = (ROUNDS[v].benchmarks["gpt-oss-120b"] for v in ("v6.0", "v6.1"))
    assert v60 == v61 and v61.benchmark == "gpt_oss_120b" and v61.loadgen_model == "gpt-oss-120b"
    assert v61.required_scenarios("datacenter") == ("Offline",) and v61.optional("datacenter") == ("Interactive", "Server")
    assert v61.required_scenarios("edge") is None
    assert v61.accuracy_min == {"exact_match": 83.13 * 0.99} and round(83.13 * 0.99, 2) == 82.30
    assert v61.accuracy_max == {"TOKENS_PER_SAMPLE": 1.1 * 9999}
    assert (v61.dataset_size, v61.performance_sample_count, v61.accuracy_samples) == (6396, 6396, 4395)
    assert v61.compliance_tests == ("TEST07", "TEST09") and "gpt-oss-120b" in ROUNDS["v6.1"].endpoints_models
    for old in ("v5.0", "v5.1"):
        with pytest.raises(Exception, match=f"not part of MLPerf Inference {old}"):
            ROUNDS[old].entry("gpt_oss_120b")
    for system, tp in (("H200-SXM-141GBx1", 1), ("H200-SXM-141GBx8", 1), ("B200-SXM-180GBx8", 1),
                       ("H100-SXM-80GBx1", 1)):
        for scen in ("Offline", "Server", "Interactive"):
            _, [s] = plan(["--action=info", "--benchmarks=gpt-oss", f"--scenarios={scen}", f"--system_name={system}"])
            assert s.precision == "fp4" and s.values["tensor_parallel_size"] == tp, (system, scen)
            p = implementation(s.spec)(s).memory_plan()
            assert p is not None and p.fits, (system, scen, p.describe())


def test_gpt_oss_livecodebench_answers_are_judged_or_the_missing_tests_named(monkeypatch, tmp_path):
    """LiveCodeBench answers run against their question's tests (code.common.llm.livecodebench, release_v6); with
    the test data absent, one line naming the download command."""
    import json

    from code.common.benchmarks import implementation
    from code.common.errors import MissingDataError
    from code.common.llm import livecodebench
    from code.main import plan

    _, [s] = plan(["--action=info", *GO, "--scenarios=Offline"])
    b = implementation(s.spec)(s)
    monkeypatch.setattr(type(b), "references", lambda self: {"dataset": ["aime25", "livecodebench_v6"]})
    monkeypatch.setattr(livecodebench, "folder_of", lambda raw: tmp_path / "lcb")
    program = "```python\nprint(sum(map(int, input().split())))\n```"
    with pytest.raises(MissingDataError) as e:
        b.score([0, 1], [[1, 2], [3]], ["Answer: 3", program], ["3", "syn_sum"])
    assert "LiveCodeBench test data not found" in e.value.cause and "\n" not in e.value.cause
    assert e.value.fix.startswith("make download_data")
    (tmp_path / "lcb").mkdir()
    for name in livecodebench.RELEASE_FILES["release_v6"]:
        (tmp_path / "lcb" / name).write_text("".join(json.dumps(r) + "\n" for r in livecodebench.synthetic_rows())
                                             if name == "test.jsonl" else "")
    assert b.score([0, 1], [[1, 2], [3]], ["Answer: 3", program], ["3", "syn_sum"])["exact_match"] == 100.0
    assert b.score([0, 1], [[1, 2], [3]], ["Answer: 3", program.replace("sum", "max")],
                   ["3", "syn_sum"])["exact_match"] == pytest.approx(100 * (1 / 8) / (1 / 8 + 1 / 3))
    monkeypatch.setattr(type(b), "references", lambda self: {"dataset": ["aime25", "gpqa_diamond", "gpqa_diamond"]})
    r = b.score([0, 1, 2], [[1], [1], [1]], ["\\boxed{3}", "<|channel|>final<|message|>B", "C"], ["3", "B", "A"])
    # (1/8 + 1/5) / (1/8 + 2/5) = 61.9...%, not 2 of 3
    assert r["exact_match"] == pytest.approx(100 * (1 / 8 + 1 / 5) / (1 / 8 + 2 / 5))


def md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


def _parquet(path: Path, rows: list[dict]) -> bytes:
    import pandas as pd

    pd.DataFrame(rows).to_parquet(path)
    return path.read_bytes()


def test_gpt_oss_real_data_from_r2_checked_then_a_bad_set_refused(mirror, tmp_path, monkeypatch):
    """Both Parquet sets through MLCommons R2 (the local mirror): md5-checked, content-checked, reused; a set with a
    row of an unknown sub-dataset is refused by content in one line, and nothing is left."""
    from code.common.errors import HarnessError
    from code.gpt_oss_120b import download as god

    rows = [{"dataset": d, "ground_truth": "A", "input_tokens": [200006, 17360, i]}
            for i, d in enumerate(("aime25", "gpqa_diamond", "livecodebench_v6"))]
    acc = _parquet(tmp_path / "a.parquet", rows)
    perf = _parquet(tmp_path / "p.parquet", [{k: v for k, v in r.items() if k != "ground_truth"} for r in rows[:2]])
    comp = _parquet(tmp_path / "c.parquet", [rows[1], {**rows[1], "ground_truth": "B"}])
    mirror.add_r2(god.DATA_URI, god.DATA_BASE, {god.ACCURACY_FILE: acc, god.PERFORMANCE_FILE: perf,
                                                god.COMPLIANCE_GPQA_FILE: comp})
    monkeypatch.setattr(god, "ACCURACY_MD5", md5(acc))
    monkeypatch.setattr(god, "PERFORMANCE_MD5", md5(perf))
    monkeypatch.setattr(god, "COMPLIANCE_MD5", md5(comp))
    monkeypatch.setattr(god, "ACCURACY_SAMPLES", 3)
    monkeypatch.setattr(god, "PERFORMANCE_SAMPLES", 2)
    monkeypatch.setattr(god, "COMPLIANCE_SAMPLES", 2)
    dest = tmp_path / "data"
    out = god.download_data(dest, log=lambda *a: None)
    assert out == dest / "acc" / "acc_eval_ref.parquet" and out.read_bytes() == acc
    assert (dest / "perf" / "perf_eval_ref.parquet").read_bytes() == perf
    assert (dest / "acc" / "acc_eval_compliance_gpqa.parquet").read_bytes() == comp      # TEST07's set
    with pytest.raises(HarnessError, match="TEST07's set holds only GPQA questions, not 'aime25'"):
        _parquet(tmp_path / "c2.parquet", rows[:2])
        god.check_compliance_set(tmp_path / "c2.parquet", "fix")
    rec = json.loads((dest / "download.json").read_text())
    assert rec["files"][god.ACCURACY_FILE] == {"md5": md5(acc), "source": "mlcommons-r2"}
    n = len(mirror.hits)
    god.download_data(dest, log=lambda *a: None)
    assert len(mirror.hits) == n                                   # present and md5-valid: reused
    rows[1]["dataset"] = "hellaswag"
    bad = _parquet(tmp_path / "bad.parquet", rows)
    (tmp_path / "local" / "acc").mkdir(parents=True)
    (tmp_path / "local" / "acc" / "acc_eval_ref.parquet").write_bytes(bad)
    monkeypatch.setattr(god, "ACCURACY_MD5", md5(bad))
    with pytest.raises(HarnessError, match="row 1: dataset 'hellaswag' is none of"):
        god.download_data(tmp_path / "out", data_dir=str(tmp_path / "local"), log=lambda *a: None)
    assert not (tmp_path / "out" / god.ACCURACY_FILE).exists()
    pins = god.checkpoint_md5()
    assert len(pins) == 25 and pins["gpt-oss-120b/config.json"] == "a2a84db519d82f14fb309b4e25c32776"
    assert not any("/original/" in p or "/metal/" in p for p in pins)


def test_gpt_oss_real_checkpoint_from_r2_hf_files_only_verified_then_reused(mirror, tmp_path, monkeypatch):
    from code.gpt_oss_120b import download as god
    from tests.test_llm_downloads_moe_llama31 import hf_folder

    files = {f"gpt-oss-120b/{p}": b for p, b in hf_folder(None, "gpt_oss").items()}
    base = "https://inference.mlcommons-storage.org/gpt-oss_model"
    mirror.add_r2(god.CHECKPOINT_URI, base, {**files, "gpt-oss-120b/original/model--00001-of-00007.safetensors": b"o",
                                             "LICENSE.txt": b"license"})
    monkeypatch.setattr(god, "checkpoint_md5", lambda: {p: md5(b) for p, b in files.items()})
    dest = tmp_path / "model"
    hf = god.download_model(dest, log=lambda *a: None)
    assert hf == dest / "gpt-oss-120b" and (hf / "config.json").is_file()
    assert all((dest / p).read_bytes() == b for p, b in files.items()) and not (hf / "original").exists()
    rec = json.loads((dest / god.COMPLETE).read_text())
    assert rec["source"] == "mlcommons-r2" and rec["model_type"] == "gpt_oss" and rec["files"] == len(files)
    n = len(mirror.hits)
    god.download_model(dest, log=lambda *a: None)                 # complete: nothing fetched
    assert len(mirror.hits) == n


def test_gpt_oss_data_dir_without_the_sets_is_one_line(tmp_path):
    r = run_main("--action=download_data", "--benchmarks=gpt-oss-120b", f"--data_dir={tmp_path}",
                 env={"MLPERF_SCRATCH_PATH": str(tmp_path / "scratch")})
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[0] == f"error: acc/acc_eval_ref.parquet not found in {tmp_path}", lines
    assert "metadata/gpt-oss-data.uri" in lines[1] and len(lines) == 2


@pytest.mark.parametrize("test", ["TEST07", "TEST09"])
def test_gpt_oss_audit_config_is_the_official_file(test):
    """Our TEST07/TEST09 audit.config for the real gpt-oss-120b holds every key and value of the official
    compliance/<test>/gpt-oss-120b/audit.config (the checker reads only their verify files: these values are the test)."""
    from code.common import rounds
    from code.common.compliance.audit_config import audit_config

    official = audit_config_values(official_root("compliance", test, "gpt-oss-120b", "audit.config").read_text(), False)
    rnd = rounds.ROUNDS["v6.1"]
    ours = audit_config_values(audit_config(test, rnd, rnd.benchmarks["gpt-oss-120b"], "Offline"), False)
    assert {k: float(v) for k, v in ours.items()} == {k: float(v) for k, v in official.items()}, (ours, official)


def test_gpt_oss_test07_test09_pass_catch_truncation_staged_and_checked(go, tmp_path):
    """TEST07 (exact match of a performance-mode run over the GPQA compliance set, every sample logged) and TEST09
    (mean output length over the whole performance set) on the tiny model: each passes, and each fails on a planted
    fault (answers cut at 3 tokens: --plant_output_limit), our verdict and the official run_verification.py's alike;
    the tiny audit.config carries the tiny set's sizes and thresholds measured on plain generate. Then the module's
    runs and the passing audits are staged, truncated and exported for v6.1, and the official checker reads the
    TEST07/TEST09 files where it expects them and finds nothing wrong with them."""
    build = tmp_path / "build"
    (build / "logs").mkdir(parents=True)
    for name in ("acc", "perf", "server"):              # the module's runs (the Server test ran before this one)
        if (go["root"] / name).is_dir():
            shutil.copytree(go["root"] / name, build / "logs" / name)     # staging's scan follows no links
    env = dict(go["env"], MLPERF_BUILD_DIR=str(build), MLPERF_STAGING_ROOT=str(tmp_path / "stage"))
    official = bool(os.environ.get("MLPERF_INFERENCE_DIR"))
    verdict = {"TEST07": ("accuracy", "verify_accuracy.txt"), "TEST09": ("output_len", "verify_output_len.txt")}
    for test, (kind, name) in verdict.items():
        d = build / "compliance_logs" / test
        args = ("--action=run_audit_harness", f"--audit_test={test}", *GO, "--scenarios=Offline")
        bad = run_main(*args, "--plant_output_limit=3", env=env)
        assert bad.returncode == 4 and "Traceback" not in bad.stderr, bad.stdout + bad.stderr
        [vj] = list(d.rglob("verification.json"))
        rec = json.loads(vj.read_text())
        assert not rec["passed"] and rec[kind]["reasons"], rec
        assert "TEST FAIL" in (vj.parent / name).read_text()
        if official:                                    # the official script ran on the same log and agreed
            assert rec["official"][kind]["passed"] is False and rec["errors"] == [], rec
        run_main(*args, env=env, check=True)
        rec = json.loads(vj.read_text())
        assert rec["passed"] and rec["errors"] == [], rec
        if official:
            assert rec["official"][kind]["passed"] is True, rec["official"]["output"]
        cfg = audit_config_values(rec["audit_config"], False)
        meta = json.loads((vj.parent / "metadata.json").read_text())
        assert meta["audit_official_config"] is False and meta["valid"] is not None
        a = rec[kind]
        if test == "TEST07":
            assert a["samples"] == int(cfg["min_query_count"]) == 12 and a["score"] >= float(cfg["test07_accuracy_threshold"])
            print(f"FIGURE tiny TEST07: exact_match {a['score']:.4g} over {a['samples']} GPQA samples, threshold "
                  f"{a['threshold']} (99% of plain generate's); official verdict: {rec.get('official', {}).get(kind, {}).get('passed')}")
        else:
            assert a["samples"] == int(cfg["min_query_count"]) == N
            assert float(cfg["test09_min_output_tokens"]) <= a["mean_output_tokens"] <= float(cfg["test09_max_output_tokens"])
            print(f"FIGURE tiny TEST09: mean output {a['mean_output_tokens']:.2f} tokens, allowed [{a['min']}, {a['max']}]")
    for action in ("update_results", "truncate_results", "export_submission"):
        r = run_main(f"--action={action}", *([] if action == "truncate_results" else ["--round=v6.1"]), env=env)
        assert r.returncode == 0, (action, r.stdout, r.stderr)
    staged = list((tmp_path / "stage").rglob("gpt-oss-120b/Offline"))
    assert staged, list((tmp_path / "stage").rglob("*"))
    sub = build / "submission"
    [t7] = list(sub.rglob("gpt-oss-120b/Offline/TEST07"))
    [t9] = list(sub.rglob("gpt-oss-120b/Offline/TEST09"))
    assert "TEST PASS" in (t7 / "verify_accuracy.txt").read_text()
    assert "TEST PASS" in (t9 / "verify_output_len.txt").read_text()
    assert (t7 / "accuracy" / "mlperf_log_accuracy.json").is_file() and (t9 / "accuracy" / "mlperf_log_accuracy.json").is_file()
    from code.common.submission import check

    pre = [ln for ln in check.check(sub, version="v6.1").lines() if ln.startswith("ERROR") and re.search("TEST0[79]", ln)]
    assert pre == [], pre
    if not official:
        return
    rc, lines = check.run_official_checker(sub, "OpenHarness", "v6.1", official_root())
    print("\n".join(lines))
    errors = [ln for ln in lines if "ERROR" in ln and "SUMMARY" not in ln]
    assert not [ln for ln in lines if "Traceback" in ln], lines
    assert any("Test duration less than 600s" in ln for ln in errors), errors      # it did read the runs
    # what a tiny CPU run cannot avoid: its length and sample counts, the tiny model's accuracy, and the Server run
    # (40 queries here; LoadGen's early stopping wants ~460, too long for the suite) not VALID, so not staged; the
    # checker reads the compliance folders only of a result whose performance and accuracy checks passed
    unavoidable = (r"Test duration less than", r"minimum samples per query", r"accuracy not met",
                   r"does not cover all dataset", r"missing \['\(one of\) Interactive or Server'\]",
                   r"Some (performance|accuracy) checks Checks failed", r"NoResults ")
    assert [ln for ln in errors if not any(re.search(p, ln) for p in unavoidable)] == [], errors
