"""TEST01/TEST04 verification on real LoadGen logs from a trivial SUT (tests/loadgen_synthetic.py).

Each LoadGen test runs in its own child process. With $MLPERF_INFERENCE_DIR naming a checkout of
mlcommons/inference, the official run_verification.py scripts are run too and must agree.
"""
import json
from pathlib import Path

import pytest

from code.common.compliance import audit, verify
from code.common.compliance import audit_config as ac
from code.common import rounds
from tests import loadgen_synthetic as synthetic
from tests.conftest import official_root

RND = rounds.V6_1
RB = RND.entry("resnet50")
# Work per sample dominates (sleep), so the audit and submission runs have comparable speed.
OFFLINE = dict(scenario="Offline", latency_ms=2, expected_qps=1000, min_duration_ms=400)
SS = dict(scenario="SingleStream", latency_ms=2, min_duration_ms=400, min_query_count=64)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("compliance")
    t01 = ac.audit_config("TEST01", RND, RB, "Offline", {"accuracy_log_sampling_target": 256})
    t04 = ac.audit_config("TEST04", RND, RB, "Offline")
    t04ss = ac.audit_config("TEST04", RND, RB, "SingleStream")
    synthetic.run(d / "perf", **OFFLINE)
    synthetic.run(d / "perf_ss", **SS)
    synthetic.run(d / "acc", mode="AccuracyOnly")
    synthetic.run(d / "acc_corrupt", mode="AccuracyOnly", corrupt=(3, 5, 7, 11, 13, 17, 19, 23))
    synthetic.run(d / "test01", audit_config=t01, **OFFLINE)
    synthetic.run(d / "test04", audit_config=t04, **OFFLINE)
    # the cached SUT answers in microseconds: tell LoadGen so it pre-generates enough queries
    synthetic.run(d / "test04_cached", audit_config=t04ss, cached=True,
                  user_conf_extra="resnet50.SingleStream.target_latency = 0.01\n", **SS)
    return d


def test_compliance_resnet50_offline_test01_logs_audit_settings(runs):
    md = json.loads((runs / "test01" / "metadata.json").read_text())
    assert md["effective"]["effective_accuracy_log_rng_seed"] == RND.audit_accuracy_log_rng_seed
    assert md["effective"]["effective_accuracy_log_sampling_target"] == 256
    entries = json.loads((runs / "test01" / "mlperf_log_accuracy.json").read_text())
    assert entries, "TEST01 run logged no accuracy entries"


def test_compliance_resnet50_offline_test01_pass(runs, tmp_path):
    a = tmp_path / "a"
    import shutil
    shutil.copytree(runs / "test01", a)
    rec = audit.verify_audit_dir("TEST01", a, perf_ref=runs / "perf", acc_ref=runs / "acc", rb=RB)
    assert rec["accuracy"]["passed"] and rec["accuracy"]["num_perf_log_data_mismatch"] == 0
    assert rec["performance"]["passed"], (a / "verify_performance.txt").read_text()
    assert rec["passed"] and rec["accepted"] and not rec["errors"], rec
    text = (a / "verify_accuracy.txt").read_text()
    assert text.startswith("Verifying accuracy. This might take a while...\n") and "\nTEST PASS\n" in text
    assert "Reference score = " in (a / "verify_performance.txt").read_text()


def test_compliance_resnet50_offline_test01_corrupted_entry_fails(runs, tmp_path):
    a = tmp_path / "a"
    import shutil
    shutil.copytree(runs / "test01", a)
    rec = audit.verify_audit_dir("TEST01", a, perf_ref=runs / "perf", acc_ref=runs / "acc_corrupt", rb=RB)
    assert not rec["accuracy"]["passed"] and rec["accuracy"]["num_perf_log_data_mismatch"] > 0
    assert rec["fallback"]["applied"] and not rec["fallback"]["passed"]     # no scorer: cannot excuse it
    assert not rec["passed"] and not rec["accepted"]
    assert "TEST FAIL" in (a / "verify_accuracy.txt").read_text()
    assert not verify.verdict_line_passed((a / "verify_accuracy.txt").read_text())


def test_compliance_resnet50_offline_test01_fallback_scores_within_delta(runs, tmp_path):
    """A non-deterministic mismatch is excused when both subsets score within the round's delta."""
    a = tmp_path / "a"
    import shutil
    shutil.copytree(runs / "test01", a)

    def scorer(log_path, out_dir):
        n = len(json.loads(Path(log_path).read_text()))
        return {"text": f"accuracy={75.0 + (0.1 if n % 2 else 0.0):.3f}%, good=1, total={n}\n"}

    rec = audit.verify_audit_dir("TEST01", a, perf_ref=runs / "perf", acc_ref=runs / "acc_corrupt", rb=RB,
                                 scorer=scorer)
    assert not rec["accuracy"]["passed"] and rec["fallback"]["passed"], rec["fallback"]
    assert not rec["passed"] and rec["accepted"]        # TEST01 failed; the checker would accept the proof
    assert (a / "accuracy" / "baseline_accuracy.txt").read_text().startswith("accuracy=")
    assert (a / "accuracy" / "compliance_accuracy.txt").is_file()


def test_compliance_resnet50_offline_test04_pass(runs, tmp_path):
    a = tmp_path / "a"
    import shutil
    shutil.copytree(runs / "test04", a)
    rec = audit.verify_audit_dir("TEST04", a, perf_ref=runs / "perf", acc_ref=None, rb=RB)
    assert rec["passed"], (a / "verify_performance.txt").read_text()
    text = (a / "verify_performance.txt").read_text()
    assert text.startswith("Verifying performance.\nreference score = ") and text.endswith("TEST PASS\n")


def test_compliance_resnet50_singlestream_test04_cached_responses_fail(runs, tmp_path):
    a = tmp_path / "a"
    import shutil
    shutil.copytree(runs / "test04_cached", a)
    rec = audit.verify_audit_dir("TEST04", a, perf_ref=runs / "perf_ss", acc_ref=None, rb=RB)
    assert not rec["passed"]
    text = (a / "verify_performance.txt").read_text()
    assert "TEST FAIL: Test score invalid" in text, text
    assert rec["performance"]["test_score"] > rec["performance"]["reference_score"] * 1.2


def test_compliance_test01_performance_invalid_reference_fails(runs, tmp_path):
    bad = tmp_path / "perf_bad"
    import shutil
    shutil.copytree(runs / "perf", bad)
    p = bad / "mlperf_log_detail.txt"
    p.write_text(p.read_text().replace('"key": "result_validity", "value": "VALID"',
                                       '"key": "result_validity", "value": "INVALID"'))
    v = verify.test01_performance(p, runs / "test01" / "mlperf_log_detail.txt")
    assert not v.passed and v.text.startswith("Verifying performance.\nTEST FAIL: Invalid results in ")


def test_compliance_official_scripts_agree(runs, tmp_path):
    import shutil
    official_root("compliance")
    for test, acc_ref, src, perf in (("TEST01", runs / "acc", "test01", "perf"),
                                      ("TEST01", runs / "acc_corrupt", "test01", "perf"),
                                      ("TEST04", None, "test04", "perf"),
                                      ("TEST04", None, "test04_cached", "perf_ss")):
        a = tmp_path / f"{test}-{src}-{acc_ref.name if acc_ref else 'none'}"
        shutil.copytree(runs / src, a)
        rec = audit.verify_audit_dir(test, a, perf_ref=runs / perf, acc_ref=acc_ref, rb=RB)
        assert "official" in rec
        assert not rec["errors"], rec["errors"]


def test_interactive_audit_config_applies_as_loadgen_server(tmp_path):
    """An Interactive audit's keys reach LoadGen, which runs it as its Server scenario under the model's
    "-interactive" name: a TEST07 shortened for a 12-sample set (what make submission SMOKE=1 passes) issues and logs
    all 12. Written as "*.Interactive.key" / "gpt-oss-120b.Interactive.key" they were never applied: the v6.1 smoke's
    GPT-OSS Interactive TEST07 logged no samples (sampling target 0) and asked for 662 queries."""
    rb = RND.entry("gpt_oss_120b")
    text = ac.audit_config("TEST07", RND, rb, "Interactive", {"min_query_count": 12, "accuracy_log_sampling_target": 12})
    assert "*.Server.min_query_count = 12" in text and "gpt-oss-120b-interactive.Server.min_query_count = 12" in text
    assert ".Interactive." not in text
    # the synthetic SUT reports no tokens, which LoadGen needs (and segfaults without) where mlperf.conf has
    # use_token_latencies: off for it; the harness's LLM SUTs report them
    md = synthetic.run(tmp_path / "t07", scenario="Server", model="gpt-oss-120b-interactive", total=12, perf_count=12,
                       min_query_count=662, min_duration_ms=0, expected_qps=200, audit_config=text,
                       user_conf_extra="gpt-oss-120b-interactive.Server.use_token_latencies = 0\n")
    assert md["effective"]["effective_accuracy_log_sampling_target"] == 12
    entries = json.loads((tmp_path / "t07" / "mlperf_log_accuracy.json").read_text())
    assert sorted(e["qsl_idx"] for e in entries) == list(range(12))
