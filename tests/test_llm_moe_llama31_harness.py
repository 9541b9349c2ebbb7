"""Mixtral-8x7B and Llama3.1-8B end to end through the CLI and LoadGen on their tiny variants
(transformers backend): fidelity against plain ``model.generate`` at batch 1 (every token, every
sub-metric), MBXP stop sequences and the EOS-free outputs of Mixtral, Server on the mixture of
experts, TEST06 for both, and Llama3.1-8B's edge twin. Rates are measured here first, never assumed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import offline_samples, run_main
from tests.test_llm_harness import generate_reference, one, tokens_of

MIXTRAL = ("--benchmarks=mixtral_8x7b", "--model_variant=tiny", "--round=v6.0")
LLAMA31 = ("--benchmarks=llama3.1-8b", "--model_variant=tiny")


def four_digits(got: dict, want: dict, keys) -> None:
    for k in keys:
        assert f"{float(got[k]):.4g}" == f"{float(want[k]):.4g}", (k, got[k], want[k])


@pytest.fixture(scope="module")
def mixtral(tiny_mixtral, tmp_path_factory):
    """An AccuracyOnly run at batch 1 and an Offline performance run sized by count (its samples/s sizes
    the Server run)."""
    root = tmp_path_factory.mktemp("mixtral_runs")
    run_main("--action=run_harness", *MIXTRAL, "--scenarios=Offline", "--test_mode=AccuracyOnly", "--gpu_batch_size=1",
             f"--log_dir={root / 'acc'}", env=tiny_mixtral, check=True)
    run_main("--action=run_harness", *MIXTRAL, "--scenarios=Offline", *offline_samples(90), f"--log_dir={root / 'perf'}",
             env=tiny_mixtral, check=True)
    return {"root": root, "env": tiny_mixtral, "acc": one(root / "acc"), "perf": one(root / "perf")}


def test_mixtral_batch1_is_token_identical_to_generate_with_every_submetric(mixtral):
    ref = generate_reference(mixtral["env"], "mixtral_8x7b")
    m = mixtral["acc"]
    got = tokens_of(m["log_dir"])
    assert len(got) == len(ref) == 90 and all(got[i] == ref[i] for i in range(90))
    acc = m["accuracy"]
    assert acc["passed"], acc["text"]
    four_digits(acc["metrics"], acc["generate_metrics"], ("rouge1", "rouge2", "rougeL", "rougeLsum", "gsm8k", "mbxp",
                                                          "tokens_per_sample", "gen_len", "gen_tok_len"))
    assert acc["metrics"]["gsm8k"] > 0 and acc["metrics"]["rouge1"] > 10    # both move with every token
    # the reference's shapes: outputs carry no EOS; MBXP samples end after their stop sequence
    refs = json.loads((Path(mixtral["env"]["MLPERF_SCRATCH_PATH"]) / "preprocessed_data" / "mixtral_8x7b" / "tiny"
                       / "references.json").read_text())
    assert not any(t[-1] == 2 for t in got.values())
    stopped = [i for i, k in enumerate(refs["dataset"]) if k == "MBXP" and got[i][-2:] == refs["stops"][i]]
    assert len(stopped) >= 5, "the tiny MBXP stop sequence should end several samples"
    text = (Path(m["log_dir"]) / "accuracy.txt").read_text()
    assert text.startswith("{'rouge1': ") and "'gsm8k': " in text and "'mbxp': " in text
    assert "# GSM8K: " in text and "# MBXP: scored " in text and "containment: " in text


def test_mixtral_server_valid_with_ttft_tpot(mixtral):
    qps = round(0.3 * mixtral["perf"]["metric_value"], 2)      # 30% of this machine's Offline rate
    root = mixtral["root"] / "server"
    r = run_main("--action=run_harness", *MIXTRAL, "--scenarios=Server", f"--server_target_qps={qps}",
                 "--min_query_count=460", "--min_duration=1000", f"--log_dir={root}", env=mixtral["env"], check=True)
    m = one(root)
    t = m["tokens"]
    assert m["valid"], m["invalid_reasons"]
    assert m["loadgen_model"] == "mixtral-8x7b" and t["result_field"] == "result_completed_tokens_per_second"
    assert t["ttft_p99_ns"] < t["ttft_limit_ns"] == 400_000_000 and t["tpot_p99_ns"] < t["tpot_limit_ns"] == 100_000_000
    assert "TTFT p99" in r.stdout
    print(f"tiny Mixtral Server at {qps} QPS: TTFT p99 {t['ttft_p99_ns'] / 1e6:.1f} ms, "
          f"TPOT p99 {t['tpot_p99_ns'] / 1e6:.2f} ms, {t['tokens_per_second']:.0f} tokens/s")


def _test06(env, args) -> list[str]:
    r = run_main("--action=run_audit_harness", "--audit_test=TEST06", *args, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    audit = Path(env["MLPERF_BUILD_DIR"]) / "compliance_logs" / "TEST06"
    bench = args[0].split("=")[1].replace(".", "_").replace("-", "_")
    verify = next(audit.rglob(f"{bench}*/{args[-1].split('=')[1]}/verify_accuracy.txt"))
    return verify.read_text().splitlines()


def test_mixtral_test06_passes(mixtral):
    qps = round(0.3 * mixtral["perf"]["metric_value"], 2)
    lines = _test06(mixtral["env"], (*MIXTRAL, f"--server_target_qps={qps}", "--scenarios=Server"))
    assert lines == ["First token check pass: True", "EOS check pass: True", "Sample length check pass: True",
                     "TEST06 verification complete"]


@pytest.fixture(scope="module")
def llama31(tiny_llama31, tmp_path_factory):
    root = tmp_path_factory.mktemp("llama31_runs")
    run_main("--action=run_harness", *LLAMA31, "--scenarios=Offline", "--test_mode=AccuracyOnly", "--gpu_batch_size=1",
             f"--log_dir={root / 'acc'}", env=tiny_llama31, check=True)
    return {"root": root, "env": tiny_llama31, "acc": one(root / "acc")}


def test_llama31_batch1_is_token_identical_to_generate(llama31):
    ref = generate_reference(llama31["env"], "llama3_1_8b")
    m = llama31["acc"]
    got = tokens_of(m["log_dir"])
    assert len(got) == len(ref) == 60 and all(got[i] == ref[i] for i in range(60))
    acc = m["accuracy"]
    assert acc["passed"], acc["text"]
    four_digits(acc["metrics"], acc["generate_metrics"], ("rouge1", "rouge2", "rougeL", "rougeLsum", "gen_len", "gen_num"))
    assert m["loadgen_model"] == "llama3_1-8b" and m["scenario"] == "Offline"
    assert "'rougeLsum': " in (Path(m["log_dir"]) / "accuracy.txt").read_text()


def test_llama31_edge_twin_single_stream_and_offline(llama31):
    """SingleStream is the edge twin: the edge LoadGen model, the 30-sample edge subset, its own log folder;
    --category=edge moves Offline there too."""
    env, root = llama31["env"], llama31["root"]
    run_main("--action=run_harness", *LLAMA31, "--scenarios=SingleStream", "--min_query_count=24", "--min_duration=500",
             f"--log_dir={root / 'ss'}", env=env, check=True)
    ss = one(root / "ss")
    assert ss["loadgen_model"] == "llama3_1-8b-edge" and ss["log_name"] == "llama3_1_8b-edge", ss["loadgen_model"]
    assert ss["valid"] or any("early stopping" in w for w in ss["invalid_reasons"]), ss["invalid_reasons"]
    assert ss["tokens"]["result_field"] == "result_90.00_percentile_latency_ns"
    run_main("--action=run_harness", *LLAMA31, "--scenarios=Offline", "--category=edge", "--test_mode=AccuracyOnly",
             f"--log_dir={root / 'edge_acc'}", env=env, check=True)
    ea = one(root / "edge_acc")
    assert ea["loadgen_model"] == "llama3_1-8b-edge" and ea["accuracy"]["samples"] == 30 and ea["accuracy"]["passed"]


def test_llama31_test06_passes(llama31):
    lines = _test06(llama31["env"], (*LLAMA31, "--scenarios=Offline"))
    assert lines == ["First token check pass: Skipped", "EOS check pass: True", "Sample length check pass: True",
                     "TEST06 verification complete"]


def test_llama31_interactive_loads_its_model_name(llama31):
    from code.main import plan

    _, [s] = plan(["--action=info", *LLAMA31, "--scenarios=Interactive"])
    assert s.loadgen_model == "llama3_1-8b-interactive" and s.round_entry().name == "llama3.1-8b"
    _, [e] = plan(["--action=info", *LLAMA31, "--scenarios=SingleStream"])
    assert e.round_entry().name == "llama3.1-8b-edge" and e.edge_twin


def test_mixtral_expert_parallel_must_divide_tensor_parallel(tiny_mixtral):
    r = run_main("--action=generate_engines", *MIXTRAL, "--scenarios=Offline", "--tensor_parallel_size=1",
                 "--expert_parallel_size=2", env=tiny_mixtral)
    out = r.stdout + r.stderr
    assert r.returncode not in (0, 1) and "Traceback" not in out
    assert "expert_parallel_size 2 does not divide tensor_parallel_size 1" in out
