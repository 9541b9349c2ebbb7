"""Llama3.1-405B (issue 30) end to end on its tiny variant (transformers backend): token identity with plain
``model.generate`` at batch 1, the three per-row metrics scored as the reference's evaluate-accuracy.py scores the same
log (run from the shared official tree), the needle and QA rules against the script's own functions on seeded texts,
VALID Offline, Server and Interactive runs with TTFT/TPOT under the tiny bounds, TEST06 passing (ours and the official
run_verification.py), the round entries, and the real data path (a .uri that names the file itself) against a local
mirror."""
from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path

import pytest

from tests.conftest import audit_dir, official_root, offline_samples, run_main, server_rate, server_run, valid_or_short
from tests.test_llm_harness import generate_reference, one, tokens_of

L405 = ("--benchmarks=llama3.1-405b", "--model_variant=tiny", "--round=v6.0")


@pytest.fixture(scope="module")
def l405(tiny_llama405, tmp_path_factory):
    """An AccuracyOnly run at batch 1 and an Offline performance run (its rate sizes the Server and Interactive runs)."""
    root = tmp_path_factory.mktemp("llama405_runs")
    run_main("--action=run_harness", *L405, "--scenarios=Offline", "--test_mode=AccuracyOnly", "--gpu_batch_size=1",
             f"--log_dir={root / 'acc'}", env=tiny_llama405, check=True)
    run_main("--action=run_harness", *L405, "--scenarios=Offline", *offline_samples(60), f"--log_dir={root / 'perf'}",
             env=tiny_llama405, check=True)
    return {"root": root, "env": tiny_llama405, "acc": one(root / "acc"), "perf": one(root / "perf")}


def test_batch1_is_token_identical_to_generate_with_every_metric(l405):
    ref = generate_reference(l405["env"], "llama3_1_405b")
    m = l405["acc"]
    got = tokens_of(m["log_dir"])
    assert len(got) == len(ref) == 30 and all(got[i] == ref[i] for i in range(30))
    acc = m["accuracy"]
    assert acc["passed"], acc["text"]
    for k in ("rougeL", "exact_match", "tokens_per_sample", "gen_len", "gen_tok_len"):
        assert f"{acc['metrics'][k]:.6g}" == f"{acc['generate_metrics'][k]:.6g}", k
    assert acc["metrics"]["rougeL"] > 10 and 10 < acc["metrics"]["exact_match"] < 90      # both move with every token
    assert (Path(m["log_dir"]) / "accuracy.txt").read_text().startswith("{'rougeL': ")
    perf = l405["perf"]
    assert perf["valid"], perf["invalid_reasons"]
    assert perf["loadgen_model"] == "llama3_1-405b" and perf["tokens"]["result_field"] == "result_tokens_per_second"


def test_official_evaluate_accuracy_scores_the_same_log(l405, tmp_path):
    """evaluate-accuracy.py on the run's own log: rougeL, exact_match, gen_len, gen_num, gen_tok_len and
    tokens_per_sample to 4 significant digits (both sides split sentences with the same punkt_tab)."""
    from tests.test_reference_rouge import four_digits as sig4, official_env, run_official

    root = official_root("language", "llama3.1-405b")
    scratch = Path(l405["env"]["MLPERF_SCRATCH_PATH"])
    env = official_env(tmp_path, scratch / "nltk_data" / "tiny", root)
    out = run_official([str(root / "evaluate-accuracy.py"),
                        "--checkpoint-path", str(scratch / "models" / "llama3_1_405b" / "tiny" / "checkpoint"),
                        "--mlperf-accuracy-file", str(Path(l405["acc"]["log_dir"]) / "mlperf_log_accuracy.json"),
                        "--dataset-file", str(scratch / "data" / "llama3_1_405b" / "tiny"
                                              / "mlperf_llama3.1_405b_dataset_8313_processed_fp16_eval.pkl"),
                        "--dtype", "int32"], tmp_path, env)
    import ast
    import re

    line = [ln for ln in out.splitlines() if ln.startswith("{") and "tokens_per_sample" in ln][-1]
    theirs = ast.literal_eval(re.sub(r"np\.\w+\(([^)]*)\)", r"\1", line))
    ours = l405["acc"]["accuracy"]["metrics"]
    keys = ("rougeL", "exact_match", "gen_len", "gen_num", "gen_tok_len", "tokens_per_sample")
    print("FIGURE llama3_1_405b run log, official: " + ", ".join(f"{k} {sig4(theirs[k])}" for k in keys)
          + " | ours: " + ", ".join(f"{k} {sig4(ours[k])}" for k in keys))
    for k in keys:
        assert sig4(theirs[k]) == sig4(ours[k]), (k, theirs[k], ours[k])


DRIVER = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("official_eval", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
json.dump([getattr(mod, m)(label, pred)["exact_match"] for m, label, pred in json.load(open(sys.argv[2]))],
          open(sys.argv[3], "w"))
"""


def test_needle_and_qa_rules_equal_the_official_functions(tmp_path):
    """niah_em and qa_em of code.llama3_1_405b.accuracy against the script's own niah_em / qa_em on seeded texts:
    UUIDs whole, altered, missing, extra, in other orders; answers with and without "Answer: ", alternatives."""
    from code.llama3_1_405b import accuracy
    from tests.conftest import run_official

    rng = random.Random(20261205)
    ids = ["0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "deadbeef-0000-1111-2222-333344445555",
           "12345678-aaaa-bbbb-cccc-1234567890ab"]
    def alter(u):
        i = rng.randrange(len(u))
        return u[:i] + rng.choice("xyz019") + u[i + 1:]
    cases = []
    for _ in range(150):
        label = " ".join(rng.sample(ids, rng.randint(1, 3)))
        pred = " ".join(rng.choice([u, alter(u), "no uuid here"]) for u in rng.sample(ids, rng.randint(0, 3)))
        cases.append(["niah_em", label, pred])
    words = ["Paris", "paris", "New York", "newyork", "42", "the answer", "Blue|Red", "red"]
    for _ in range(150):
        label = "|".join(rng.sample(words, rng.randint(1, 3)))
        pred = rng.choice(["", "Answer: ", "I think. Answer: ", "Answer: x Answer: "]) + rng.choice(words + ["  New  york "])
        cases.append(["qa_em", label, pred])
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    (tmp_path / "driver.py").write_text(DRIVER)
    script = official_root("language", "llama3.1-405b", "evaluate-accuracy.py")
    run_official([tmp_path / "driver.py", script, tmp_path / "cases.json", tmp_path / "out.json"], cwd=tmp_path)
    official = json.loads((tmp_path / "out.json").read_text())
    ours = [getattr(accuracy, m)(label, pred) for m, label, pred in cases]
    diff = [(c, o, t) for c, o, t in zip(cases, official, ours) if o != t]
    assert not diff, f"{len(diff)} of {len(cases)} differ, e.g. {diff[:3]}"
    assert len({round(x) for x in ours[:150]}) > 3 and {0.0, 100.0} <= set(ours[150:])


# 662 queries: LoadGen's early stopping proves a p99 (TTFT and TPOT each, Server and Interactive alike) from 459
# queries when none is over its bound (20 run + "would need to run at least 439 more") and from 662 when one is: at
# 480 one TPOT over 60 ms in a full three-worker suite made the Interactive run INVALID ("480 queries are too few ...
# it needs 182 more"); mlperf.conf's sample_concatenate_permutation rounds 662 up to 690, a multiple of the 30
# samples. Tiny 405B is the cheapest of the three tiny LLMs per query (Offline 45 samples/s on one core, DeepSeek-R1
# 23): 690 queries at 20-24 QPS last 29-35 s. The rates, shares of the Offline rate just measured, on one loaded core: Server at 50% (16.25 QPS)
# held 180/400 ms TTFT and 42/100 ms TPOT (p99); Interactive at 40% (7.9 QPS) 55/300 and 16/60 ms, at 50% (16.25 QPS)
# it missed 300 ms (323 ms).
SERVER_RATE, INTERACTIVE_RATE = (0.5, 24), (0.4, 20)       # (share of the Offline rate, cap in QPS)
VALID_QUERIES = ("--performance_sample_count=30", "--min_query_count=662", "--min_duration=1000")


def token_figures(name: str, m: dict, qps: float) -> str:
    t, res = m["tokens"], m.get("results") or {}
    return (f"FIGURE tiny {name} at {qps} QPS: {m['result_validity']}, {res.get('result_query_count')} queries, "
            f"{res.get('result_completed_samples_per_sec')} completed/s, "
            f"TTFT p99 {t['ttft_p99_ns'] / 1e6:.1f}/{t['ttft_limit_ns'] / 1e6:.0f} ms, "
            f"TPOT p99 {t['tpot_p99_ns'] / 1e6:.2f}/{t['tpot_limit_ns'] / 1e6:.0f} ms")


def test_server_valid_and_test06(l405, tmp_path):
    env, root = l405["env"], l405["root"]
    # half this machine's Offline rate, at most 24 QPS (server_run halves it once if the load broke a bound)
    m, qps, _ = server_run(("--action=run_harness", *L405, "--scenarios=Server", *VALID_QUERIES), root / "server", env,
                           server_rate(l405["perf"], SERVER_RATE[0], cap=SERVER_RATE[1]))
    t = m["tokens"]
    print(token_figures("Llama3.1-405B Server", m, qps))
    assert valid_or_short(m), m["invalid_reasons"]
    assert m["loadgen_model"] == "llama3_1-405b" and t["result_field"] == "result_completed_tokens_per_second"
    assert t["ttft_p99_ns"] < t["ttft_limit_ns"] == 400_000_000 and t["tpot_p99_ns"] < t["tpot_limit_ns"] == 100_000_000
    # TEST06 (v6.0's compliance test) judges tokens, not latency: its 100 queries (the audit.config's) at 80% of the
    # Offline rate, uncapped
    r = run_main("--action=run_audit_harness", "--audit_test=TEST06", *L405, "--scenarios=Server",
                 f"--server_target_qps={server_rate(l405['perf'], 0.8)}", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    d = audit_dir(env, "TEST06", "llama3_1_405b", "Server")
    lines = ["First token check pass: True", "EOS check pass: True", "Sample length check pass: True",
             "TEST06 verification complete"]
    assert (d / "verify_accuracy.txt").read_text().splitlines() == lines
    rec = json.loads((d / "verification.json").read_text())
    print(f"FIGURE tiny Llama3.1-405B TEST06 over {rec['accuracy']['samples']} logged samples: {rec['accuracy']['verdict']}"
          f" (official: {((rec.get('official') or {}).get('accuracy') or {}).get('text', 'not run').splitlines()[-1]})")
    assert rec["passed"] and rec["accuracy"]["samples"] >= 30 and rec["accuracy"]["eos_token_id"] is not None
    if os.environ.get("MLPERF_INFERENCE_DIR"):        # make test: compliance/TEST06/run_verification.py ran on the log
        official = rec["official"]
        assert official["script"].endswith("compliance/TEST06/run_verification.py") and official["returncode"] == 0
        assert official["accuracy"]["text"].splitlines() == lines and not rec["errors"], official
    # a planted fault in a copy of the same log (no new run): one sample's first token corrupted, another's
    # token_count one too many; the official script, and ours, must reject both
    planted_test06_fault(d, tmp_path, rec["accuracy"]["eos_token_id"])


def planted_test06_fault(audit: Path, tmp_path: Path, eos: int) -> None:
    from code.common.compliance import official as off, verify
    from tests.conftest import flip_first_byte

    log = json.loads((audit / "mlperf_log_accuracy.json").read_text())
    assert len(log) >= 2 and all("token_data" in e and "token_count" in e for e in log)
    log[0]["token_data"] = flip_first_byte(log[0]["token_data"])
    log[1]["token_count"] = int(log[1]["token_count"]) + 1
    (tmp_path / "mlperf_log_accuracy.json").write_text(json.dumps(log))
    bad = ["First token check pass: False", "EOS check pass: True", "Sample length check pass: False",
           "TEST06 verification failed"]
    ours = verify.test06(tmp_path / "mlperf_log_accuracy.json", "Server", eos)
    assert not ours.passed and ours.text.splitlines() == bad, ours.text
    assert ours.figures["reasons"] == ["1 sample(s) whose first token differs from the first token of their output",
                                       "1 sample(s) whose token_count differs from their output length"]
    if off.inference_dir() is not None:          # the tree the audit's own official run used
        theirs = off.run_test06(off.inference_dir(), audit_dir=tmp_path, scenario="Server", eos_token_id=eos)
        assert theirs["accuracy"]["text"].splitlines() == bad and not theirs["accuracy"]["passed"], theirs
    print(f"FIGURE tiny Llama3.1-405B TEST06 planted first token + token_count: ours {ours.text.splitlines()[-1]}"
          + (f", official {theirs['accuracy']['text'].splitlines()[-1]}" if off.inference_dir() else ""))


def test_interactive_valid_and_round_entries(l405):
    from code.common.rounds import ROUNDS

    # Interactive's tighter bounds (300 ms / 60 ms) at a lower rate: VALID, with the retry at half the rate where a
    # busy machine broke a bound (LoadGen's own advice) rather than a looser assertion
    i, qps, _ = server_run(("--action=run_harness", *L405, "--scenarios=Interactive", *VALID_QUERIES),
                           l405["root"] / "interactive", l405["env"],
                           server_rate(l405["perf"], INTERACTIVE_RATE[0], cap=INTERACTIVE_RATE[1]))
    t = i["tokens"]
    print(token_figures("Llama3.1-405B Interactive", i, qps))
    assert i["loadgen_model"] == "llama3_1-405b-interactive"
    assert "llama3_1-405b-interactive.Server.target_qps" in i["user_conf"]
    assert t["ttft_limit_ns"] == 300_000_000 and t["tpot_limit_ns"] == 60_000_000
    assert i["valid"], i["invalid_reasons"]
    assert t["ttft_p99_ns"] < t["ttft_limit_ns"] and t["tpot_p99_ns"] < t["tpot_limit_ns"]
    s = (Path(i["log_dir"]) / "mlperf_log_summary.txt").read_text()
    assert "Early stopping satisfied: Yes" in s and s.count("Early Stopping Result:\n * Run successful.") == 2, s
    v50, v51, v60 = (ROUNDS[v].benchmarks["llama3.1-405b"] for v in ("v5.0", "v5.1", "v6.0"))
    assert v50.required_scenarios("datacenter") == ("Server", "Offline") and v50.compliance_tests == ()
    assert v60.required_scenarios("datacenter") == ("Offline",) and v60.optional("datacenter") == ("Interactive", "Server")
    assert v51 == v60 and v60.compliance_tests == ("TEST06",) and "llama3.1-405b" not in ROUNDS["v6.1"].benchmarks
    assert v60.accuracy_min == {"ROUGEL": 21.6666 * 0.99, "exact_match": 90.1335 * 0.99, "TOKENS_PER_SAMPLE": 684.68 * 0.9}


def md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


def test_real_data_from_r2_where_the_uri_names_the_file(mirror, tmp_path, monkeypatch):
    import pandas as pd

    from code.common.errors import HarnessError
    from code.llama3_1_405b import download as d405

    rows = [{"tok_input": [1, 2, 3], "gt_output": "x", "metric": m} for m in ("rouge", "niah_em", "qa_em")]
    pd.DataFrame(rows).to_pickle(tmp_path / "v.pkl")
    good = (tmp_path / "v.pkl").read_bytes()
    url = f"{d405.DATA_BASE}/{d405.DATASET_PKL}"
    mirror.add_r2(d405.DATASET_URI, url, {d405.DATASET_PKL: good})     # the .uri holds the file's own URL,
    mirror.routes["/" + url.split("://", 1)[1]] = good                  # where the file is
    monkeypatch.setattr(d405, "DATASET_MD5", md5(good))
    monkeypatch.setattr(d405, "SAMPLES", 3)
    dest = tmp_path / "data"
    assert d405.download_data(dest, log=lambda *a: None).read_bytes() == good
    assert json.loads((dest / "download.json").read_text())["files"][d405.DATASET_PKL]["source"] == "mlcommons-r2"
    rows[1]["metric"] = "bleu"
    pd.DataFrame(rows).to_pickle(tmp_path / "bad.pkl")
    bad = (tmp_path / "bad.pkl").read_bytes()
    monkeypatch.setattr(d405, "DATASET_MD5", md5(bad))
    with pytest.raises(HarnessError, match="row 1: metric 'bleu' is none of"):
        d405.download_data(tmp_path / "local", data_dir=str(tmp_path / "bad.pkl"), log=lambda *a: None)
    assert not (tmp_path / "local" / d405.DATASET_PKL).exists()
    pins = d405.members_md5()
    assert len(pins) == 203 and pins["config.json"] == "df8b2e9d39c144f11a071344f439399a"
    assert not any(p.startswith("original/") for p in pins)


def test_members_r2_copy_verified_against_the_pinned_list(tmp_path, monkeypatch):
    """A folder the official script filled from the members' bucket: its files checked against the pins, a file
    that differs refused in one line with the command that resumes."""
    from code.common.errors import HarnessError
    from code.llama3_1_405b import download as d405
    from tests.test_llm_downloads_moe_llama31 import hf_folder

    dest = tmp_path / "model"
    files = hf_folder(dest, "llama")
    pins = {p: md5(b) for p, b in files.items()}
    (dest / d405.MEMBERS_LIST).write_text("".join(f"{m}  {p}\n" for p, m in pins.items()))
    monkeypatch.setattr(d405, "members_md5", lambda: pins)
    d405.download_model(dest, log=lambda *a: None)
    assert json.loads((dest / d405.COMPLETE).read_text())["source"] == "mlcommons-r2 (members)"
    (dest / d405.COMPLETE).unlink()
    (dest / "config.json").write_text('{"model_type": "llama", "x": 1}')
    with pytest.raises(HarnessError) as e:
        d405.download_model(dest, log=lambda *a: None)
    assert "config.json" in e.value.cause and "md5" in e.value.cause and "mlc-r2-downloader" in e.value.fix
