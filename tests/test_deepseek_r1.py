"""DeepSeek-R1 (issue 30) end to end through the CLI and LoadGen on its tiny variant (a DeepseekV3ForCausalLM with
multi-head latent attention and routed experts, transformers backend): token identity with plain
``model.generate`` at batch 1, exact match scored as the reference's eval_accuracy.py scores the same log (run from
the shared official tree), a VALID Server run with TTFT/TPOT under the tiny bounds, Interactive under its own
LoadGen model name, TEST06 passing and failing on a planted first token; the round entries; the real data path
against a local mirror."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import official_root, offline_samples, run_main, server_rate, server_run, valid_or_short
from tests.test_llm_harness import generate_reference, one, tokens_of

DS = ("--benchmarks=deepseek-r1", "--model_variant=tiny")


@pytest.fixture(scope="module")
def ds(tiny_deepseek, tmp_path_factory):
    """An AccuracyOnly run at batch 1 and an Offline performance run (its rate sizes the Server runs)."""
    root = tmp_path_factory.mktemp("deepseek_runs")
    run_main("--action=run_harness", *DS, "--scenarios=Offline", "--test_mode=AccuracyOnly", "--gpu_batch_size=1",
             f"--log_dir={root / 'acc'}", env=tiny_deepseek, check=True)
    run_main("--action=run_harness", *DS, "--scenarios=Offline", *offline_samples(60), f"--log_dir={root / 'perf'}",
             env=tiny_deepseek, check=True)
    return {"root": root, "env": tiny_deepseek, "acc": one(root / "acc"), "perf": one(root / "perf")}


def test_batch1_is_token_identical_to_generate_and_exact_match_passes(ds):
    ref = generate_reference(ds["env"], "deepseek_r1")
    m = ds["acc"]
    got = tokens_of(m["log_dir"])
    assert len(got) == len(ref) == 30 and all(got[i] == ref[i] for i in range(30))
    acc = m["accuracy"]
    assert acc["passed"], acc["text"]
    assert acc["metrics"]["exact_match"] == acc["generate_metrics"]["exact_match"]
    assert 20 < acc["metrics"]["exact_match"] < 80          # answers found and judged, right and wrong
    assert acc["metrics"]["num-samples"] == 30 and acc["metrics"]["tokens_per_sample"] > 2
    text = (Path(m["log_dir"]) / "accuracy.txt").read_text()
    assert text.startswith("{'exact_match': ") and "# aime: " in text and "sentence splitting" not in text
    perf = ds["perf"]
    assert perf["valid"], perf["invalid_reasons"]
    assert perf["loadgen_model"] == "deepseek-r1" and perf["tokens"]["result_field"] == "result_tokens_per_second"


def test_official_eval_accuracy_scores_the_same_log(ds, tmp_path):
    """language/deepseek-r1/eval_accuracy.py on the run's own log, its tokenizer path ("deepseek-ai/DeepSeek-R1",
    fixed in the script) a link to the tiny checkpoint: exact_match, tokens_per_sample and num-samples agree."""
    from tests.test_reference_rouge import four_digits as sig4, run_official

    script = official_root("language", "deepseek-r1", "eval_accuracy.py")
    scratch = Path(ds["env"]["MLPERF_SCRATCH_PATH"])
    run = tmp_path / "run"
    (run / "deepseek-ai").mkdir(parents=True)
    (run / "deepseek-ai" / "DeepSeek-R1").symlink_to(scratch / "models" / "deepseek_r1" / "tiny" / "checkpoint")
    import os

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    out = run_official([str(script), "--input-file", str(Path(ds["acc"]["log_dir"]) / "mlperf_log_accuracy.json"),
                        "--dataset-file", str(scratch / "data" / "deepseek_r1" / "tiny"
                                              / "mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl"),
                        "--output-file", str(tmp_path / "evaluated.pkl")], tmp_path, env)
    import ast

    theirs = ast.literal_eval([ln for ln in out.splitlines() if ln.startswith("{'exact_match'")][-1])
    ours = ds["acc"]["accuracy"]["metrics"]
    print(f"FIGURE deepseek_r1 tiny log, official: {theirs} | ours: {ours}")
    for k in ("exact_match", "tokens_per_sample", "num-samples"):
        assert sig4(theirs[k]) == sig4(ours[k]), (k, theirs[k], ours[k])


def test_server_valid_interactive_named_and_test06(ds):
    env, root = ds["env"], ds["root"]
    # 30% of this machine's Offline rate, at most 8 QPS (server_run halves it once if the load broke a bound)
    m, qps, r = server_run(("--action=run_harness", *DS, "--scenarios=Server", "--performance_sample_count=30",
                            "--min_query_count=460", "--min_duration=1000"), root / "server", env,
                           server_rate(ds["perf"], 0.3, cap=8))
    t = m["tokens"]
    assert valid_or_short(m), m["invalid_reasons"]
    assert t["ttft_p99_ns"] < t["ttft_limit_ns"] == 400_000_000 and t["tpot_p99_ns"] < t["tpot_limit_ns"] == 100_000_000
    assert t["result_field"] == "result_completed_tokens_per_second"
    print(f"tiny DeepSeek-R1 Server at {qps} QPS: TTFT p99 {t['ttft_p99_ns'] / 1e6:.1f} ms, "
          f"TPOT p99 {t['tpot_p99_ns'] / 1e6:.2f} ms")
    # Interactive at half the Server rate, at most 5 QPS: its 30 queries (the 30 samples once; mlperf.conf's
    # sample_concatenate_permutation rounds a count up to a multiple of them: 32 ran 60) then last 6 s or more, so the
    # drain of the last one does not read as a backlog (at 13.3 QPS: "behind schedule", 11.62 of 11.96 samples/s
    # completed). A VALID Interactive run needs 480 (LoadGen's p99 early stopping): 96 s at 5 QPS here, so the one
    # asserted VALID is tiny Llama3.1-405B's (tests/test_llama3_1_405b.py), the fastest per query of the three.
    run_main("--action=run_harness", *DS, "--scenarios=Interactive", f"--server_target_qps={round(min(qps / 2, 5), 2)}",
             "--performance_sample_count=30", "--min_query_count=30", "--min_duration=500",
             f"--log_dir={root / 'interactive'}", env=env, check=True, latency=True)
    i = one(root / "interactive")
    assert i["loadgen_model"] == "deepseek-r1-interactive" and "deepseek-r1-interactive.Server.target_qps" in i["user_conf"]
    assert i["tokens"]["ttft_limit_ns"] == 300_000_000 and i["tokens"]["tpot_limit_ns"] == 60_000_000
    # 30 queries make the p99 their slowest one: on a busy 2-core machine one query queued behind a decoding batch
    # can pass the 300 ms TTFT bound (336-358 ms in CI). Valid, or INVALID only for the load: short of early
    # stopping, behind schedule, or over the Interactive bounds (not Server's 400/100 ms) with the advice to lower it
    assert i["valid"] or all("early stopping" in w or w.startswith("behind schedule")
                             or (("300 ms bound" in w or "60 ms bound" in w) and "Lower the load" in w)
                             for w in i["invalid_reasons"]), i["invalid_reasons"]
    # TEST06 judges tokens, not latency: its 100 queries at the uncapped rate (13 s each at 8 QPS)
    args = ("--action=run_audit_harness", "--audit_test=TEST06", *DS, "--scenarios=Server",
            f"--server_target_qps={server_rate(ds['perf'], 0.3)}")
    r = run_main(*args, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    verify = next((Path(env["MLPERF_BUILD_DIR"]) / "compliance_logs" / "TEST06").rglob("deepseek*/Server/verify_accuracy.txt"))
    assert verify.read_text().splitlines() == ["First token check pass: True", "EOS check pass: True",
                                               "Sample length check pass: True", "TEST06 verification complete"]
    bad = run_main(*args, "--plant_first_token", "--llm_sample_count=8", env=env)
    assert bad.returncode == 4 and "Traceback" not in bad.stderr
    assert "First token check pass: False" in verify.read_text()


def test_round_entries_and_scenarios():
    from code.common.rounds import ROUNDS
    from code.main import plan

    v51, v60, v61 = (ROUNDS[v].benchmarks["deepseek-r1"] for v in ("v5.1", "v6.0", "v6.1"))
    assert v51.required_scenarios("datacenter") == ("Server", "Offline") and v51.optional("datacenter") == ()
    assert v51.required_scenarios("datacenter,edge") == ("SingleStream", "Server", "Offline")
    assert v61.required_scenarios("datacenter") == ("Offline",) and v61.optional("datacenter") == ("Interactive", "Server")
    assert v60 == v61 and v61.required_scenarios("edge") is None
    assert v61.accuracy_min == {"exact_match": 0.99 * 81.3582, "TOKENS_PER_SAMPLE": 0.9 * 3886.2274}
    assert v61.accuracy_max == {"TOKENS_PER_SAMPLE": 1.1 * 3886.2274} and v61.compliance_tests == ("TEST06",)
    with pytest.raises(Exception, match="not part of MLPerf Inference v5.0"):
        ROUNDS["v5.0"].entry("deepseek_r1")
    _, [s] = plan(["--action=info", "--benchmarks=deepseek-r1", "--scenarios=Offline", "--system_name=H200-SXM-141GBx8"])
    assert s.values["tensor_parallel_size"] == 8 and s.precision == "fp8"
    from code.common.benchmarks import implementation

    p = implementation(s.spec)(s).memory_plan()
    assert p is not None and p.fits, p.describe()


def md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


def test_real_data_from_r2_checked_then_a_bad_pickle_refused(mirror, tmp_path, monkeypatch):
    """The 4,388-row pickle's path through MLCommons R2 (the local mirror): md5-checked, content-checked, reused;
    a pickle with a row of an unknown sub-dataset is refused by content in one line, and nothing is left."""
    import pandas as pd

    from code.common.errors import HarnessError
    from code.deepseek_r1 import download as dsd

    rows = [{"dataset": d, "question": "q", "text_input": f"question {i}", "ground_truth": "A"}
            for i, d in enumerate(("gpqa_diamond", "mmlu_pro", "math500", "aime2024", "livecodebench"))]
    pd.DataFrame(rows).to_pickle(tmp_path / "v.pkl")
    good = (tmp_path / "v.pkl").read_bytes()
    mirror.add_r2(dsd.DATA_URI, dsd.DATA_BASE, {dsd.DATASET_PKL: good})
    monkeypatch.setattr(dsd, "DATASET_MD5", md5(good))
    monkeypatch.setattr(dsd, "SAMPLES", 5)
    dest = tmp_path / "data"
    out = dsd.download_data(dest, log=lambda *a: None)
    assert out.read_bytes() == good
    rec = json.loads((dest / "download.json").read_text())
    assert rec["files"][dsd.DATASET_PKL] == {"md5": md5(good), "source": "mlcommons-r2"}
    n = len(mirror.hits)
    dsd.download_data(dest, log=lambda *a: None)
    assert len(mirror.hits) == n                                   # present and md5-valid: reused
    rows[2]["dataset"] = "hellaswag"
    pd.DataFrame(rows).to_pickle(tmp_path / "bad.pkl")
    bad = (tmp_path / "bad.pkl").read_bytes()
    monkeypatch.setattr(dsd, "DATASET_MD5", md5(bad))
    with pytest.raises(HarnessError, match="row 2: dataset 'hellaswag' is none of"):
        dsd.download_data(tmp_path / "local", data_dir=str(tmp_path / "bad.pkl"), log=lambda *a: None)
    assert not (tmp_path / "local" / dsd.DATASET_PKL).exists()
    assert len(dsd.checkpoint_md5()) == 174 and dsd.checkpoint_md5()["config.json"] == "0c764135b735bcc9b196ec4353aadb8c"


def test_llm_server_commands_of_the_h200_block(tiny_deepseek, monkeypatch):
    """make run_llm_server on an 8xH200 (faked): one instance over all eight GPUs, tensor parallel 8 with the
    experts spread over them, fp8, in each serving engine's own words."""
    from code.common.benchmarks import implementation
    from code.common.llm import servers
    from code.main import plan

    gpu = {"name": "NVIDIA H200", "pci_id": "0x233510DE", "memory_mb": 143771}
    monkeypatch.setenv("MLPERF_FAKE_SYSTEM", json.dumps({"gpus": [gpu] * 8}))
    s = plan(["--action=run_llm_server", *DS])[1][0]    # one per scenario
    assert s.system_id == "H200-SXM-141GBx8"
    b = implementation(s.spec)(s)
    [spec] = b.worker_specs(str(b.checkpoint), local=True)
    assert spec.gpus == tuple(range(8)) and spec.tensor_parallel_size == 8 and spec.expert_parallel_size == 8
    argv = {e: " ".join(servers.command(e, spec, port=8000, host="127.0.0.1", served="deepseek-r1").argv)
            for e in ("vllm", "sglang", "trtllm")}
    assert "--tensor-parallel-size 8" in argv["vllm"] and "--enable-expert-parallel" in argv["vllm"]
    assert "--quantization fp8" in argv["vllm"] and "--max-num-seqs 512" in argv["vllm"]
    assert "--tp-size 8" in argv["sglang"] and "--ep-size 8" in argv["sglang"]
    assert "--tp_size 8" in argv["trtllm"] and "--ep_size 8" in argv["trtllm"]


def test_real_checkpoint_from_r2_every_pinned_file_verified_then_reused(mirror, tmp_path, monkeypatch):
    from code.deepseek_r1 import download as dsd
    from tests.test_llm_downloads_moe_llama31 import hf_folder

    files = hf_folder(None, "deepseek_v3")
    base = "https://inference.mlcommons-storage.org/deepseek_r1/models/DeepSeek-R1"
    mirror.add_r2(dsd.CHECKPOINT_URI, base, {**files, "figures/benchmark.jpg": b"unpinned"})
    monkeypatch.setattr(dsd, "checkpoint_md5", lambda: {p: md5(b) for p, b in files.items()})
    dest = tmp_path / "model"
    dsd.download_model(dest, log=lambda *a: None)
    assert all((dest / p).read_bytes() == b for p, b in files.items()) and not (dest / "figures").exists()
    rec = json.loads((dest / dsd.COMPLETE).read_text())
    assert rec["source"] == "mlcommons-r2" and rec["model_type"] == "deepseek_v3" and rec["files"] == len(files)
    n = len(mirror.hits)
    dsd.download_model(dest, log=lambda *a: None)                 # complete: nothing fetched
    assert len(mirror.hits) == n
