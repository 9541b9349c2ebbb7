"""Mixtral-8x7B and Llama3.1-8B end to end through the CLI and LoadGen on their tiny variants
(transformers backend): fidelity against plain ``model.generate`` at batch 1 (every token, every
sub-metric), MBXP stop sequences and the EOS-free outputs of Mixtral, and Llama3.1-8B's edge twin.
Their Server runs (VALID, TTFT/TPOT p99 under the bounds, the mixture of experts under load) and TEST06 on
Offline and Server are asserted on the runs of their submission trees, the suite's only runs of those kinds
(tests/test_submission_official.py::test_submission_llm_runs_valid_with_ttft_tpot_and_test06)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_main
from tests.test_llm_harness import generate_reference, one, tokens_of

MIXTRAL = ("--benchmarks=mixtral_8x7b", "--model_variant=tiny", "--round=v6.0")
LLAMA31 = ("--benchmarks=llama3.1-8b", "--model_variant=tiny")


def four_digits(got: dict, want: dict, keys) -> None:
    for k in keys:
        assert f"{float(got[k]):.4g}" == f"{float(want[k]):.4g}", (k, got[k], want[k])


@pytest.fixture(scope="module")
def mixtral(tiny_mixtral, tmp_path_factory):
    """An AccuracyOnly run at batch 1."""
    root = tmp_path_factory.mktemp("mixtral_runs")
    run_main("--action=run_harness", *MIXTRAL, "--scenarios=Offline", "--test_mode=AccuracyOnly", "--gpu_batch_size=1",
             f"--log_dir={root / 'acc'}", env=tiny_mixtral, check=True)
    return {"root": root, "env": tiny_mixtral, "acc": one(root / "acc")}


def test_mixtral_batch1_is_token_identical_to_generate_with_every_submetric(mixtral):
    ref = generate_reference(mixtral["env"], "mixtral_8x7b")
    m = mixtral["acc"]
    got = tokens_of(m["log_dir"])
    assert len(got) == len(ref) == 60 and all(got[i] == ref[i] for i in range(60))
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
    assert len(stopped) >= 4, "the tiny MBXP stop sequence should end several samples"
    text = (Path(m["log_dir"]) / "accuracy.txt").read_text()
    assert text.startswith("{'rouge1': ") and "'gsm8k': " in text and "'mbxp': " in text
    assert "# GSM8K: " in text and "# MBXP: scored " in text and "containment: " in text


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
    assert len(got) == len(ref) == 40 and all(got[i] == ref[i] for i in range(40))
    acc = m["accuracy"]
    assert acc["passed"], acc["text"]
    four_digits(acc["metrics"], acc["generate_metrics"], ("rouge1", "rouge2", "rougeL", "rougeLsum", "gen_len", "gen_num"))
    assert m["loadgen_model"] == "llama3_1-8b" and m["scenario"] == "Offline"
    assert "'rougeLsum': " in (Path(m["log_dir"]) / "accuracy.txt").read_text()


def test_llama31_edge_twin_single_stream_and_offline(llama31):
    """SingleStream is the edge twin: the edge LoadGen model, the 20-sample edge subset, its own log folder;
    --category=edge moves Offline there too."""
    env, root = llama31["env"], llama31["root"]
    run_main("--action=run_harness", *LLAMA31, "--scenarios=SingleStream", "--min_query_count=24", "--min_duration=500",
             f"--log_dir={root / 'ss'}", env=env, check=True)
    ss = one(root / "ss")
    assert ss["loadgen_model"] == "llama3_1-8b-edge" and ss["log_name"] == "llama3_1_8b-edge", ss["loadgen_model"]
    assert ss["valid"] or any("early stopping" in w for w in ss["invalid_reasons"]), ss["invalid_reasons"]
    assert ss["tokens"]["result_field"] == "result_90.00_percentile_latency_ns"
    from code.common.benchmarks import implementation
    from code.main import plan

    _, [s] = plan(["--action=run_harness", *LLAMA31, "--scenarios=Offline", "--category=edge"])
    assert s.loadgen_model == "llama3_1-8b-edge" and s.round_entry().name == "llama3.1-8b-edge"
    bench = implementation(s.spec)(s)
    assert len(bench.prompts()) == 20 and len(bench.generate_reference()) == 20
    _, [d] = plan(["--action=run_harness", *LLAMA31, "--scenarios=Offline"])
    assert d.loadgen_model == "llama3_1-8b" and len(implementation(d.spec)(d).prompts()) == 40


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


# --- the official evaluators on the same logs (MLPERF_INFERENCE_DIR) --------------------------------------
# Both sides split sentences with the same punkt_tab: NLTK_DATA points the official script at the folder our
# scorer loaded (the tiny variant's, trained locally), so it runs NLTK's real loading path. mxeval is the
# plain stand-in of tests/test_reference_mixtral.py (independent of our runner); evaluate is rouge-score.


def test_official_mixtral_evaluator_agrees_on_the_same_log(mixtral, tmp_path):
    """evaluate-accuracy.py on the AccuracyOnly run's own log: every figure to 4 significant digits (MBXP
    with the official denominator on both sides)."""
    from tests.conftest import official_root
    from tests.test_reference_mixtral import SHIM_MXEVAL
    from tests.test_reference_rouge import four_digits as sig4, official_env, parse_result_dict, run_official

    root = official_root("language", "mixtral-8x7b")
    scratch = Path(mixtral["env"]["MLPERF_SCRATCH_PATH"])
    (tmp_path / "shim" / "mxeval").mkdir(parents=True)
    (tmp_path / "shim" / "mxeval" / "__init__.py").write_text("")
    (tmp_path / "shim" / "mxeval" / "execution.py").write_text(SHIM_MXEVAL)
    env = official_env(tmp_path, scratch / "nltk_data" / "tiny", root)
    m = mixtral["acc"]
    out = run_official([str(root / "evaluate-accuracy.py"),
                        "--checkpoint-path", str(scratch / "models" / "mixtral_8x7b" / "tiny" / "checkpoint"),
                        "--mlperf-accuracy-file", str(Path(m["log_dir"]) / "mlperf_log_accuracy.json"),
                        "--dataset-file", str(scratch / "data" / "mixtral_8x7b" / "tiny"
                                              / "09292024_mixtral_15k_mintoken2_v1.pkl"),
                        "--dtype", "int32", "--n_workers", "2"], tmp_path, env)
    theirs, ours = parse_result_dict(out), m["accuracy"]["metrics"]
    keys = ("rouge1", "rouge2", "rougeL", "rougeLsum", "gsm8k", "mbxp", "gen_len", "gen_num", "gen_tok_len",
            "tokens_per_sample")
    print("FIGURE mixtral_8x7b run log, official: " + ", ".join(f"{k} {sig4(theirs[k])}" for k in keys)
          + " | ours: " + ", ".join(f"{k} {sig4(ours[k])}" for k in keys))
    for k in keys:
        assert sig4(theirs[k]) == sig4(ours[k]), (k, theirs[k], ours[k])


def test_official_llama31_evaluator_agrees_on_the_same_log(llama31, tmp_path):
    """evaluation.py on the AccuracyOnly run's own log: ROUGE, gen_len, gen_num to 4 significant digits."""
    from tests.conftest import official_root
    from tests.test_reference_rouge import four_digits as sig4, official_env, parse_result_dict, run_official

    root = official_root("language", "llama3.1-8b")
    scratch = Path(llama31["env"]["MLPERF_SCRATCH_PATH"])
    env = official_env(tmp_path, scratch / "nltk_data" / "tiny", root)
    m = llama31["acc"]
    out = run_official([str(root / "evaluation.py"),
                        "--mlperf-accuracy-file", str(Path(m["log_dir"]) / "mlperf_log_accuracy.json"),
                        "--dataset-file", str(scratch / "data" / "llama3_1_8b" / "tiny" / "cnn_eval.json"),
                        "--model-name", str(scratch / "models" / "llama3_1_8b" / "tiny" / "checkpoint"),
                        "--dtype", "int32", "--total-sample-count", "40"], tmp_path, env)
    theirs, ours = parse_result_dict(out), m["accuracy"]["metrics"]
    keys = ("rouge1", "rouge2", "rougeL", "rougeLsum", "gen_len", "gen_num")
    print("FIGURE llama3_1_8b run log, official: " + ", ".join(f"{k} {sig4(theirs[k])}" for k in keys)
          + " | ours: " + ", ".join(f"{k} {sig4(ours[k])}" for k in keys))
    for k in keys:
        assert sig4(theirs[k]) == sig4(ours[k]), (k, theirs[k], ours[k])
