"""DLRM-v2 compliance on the tiny variant: the audits the round table names (TEST01, sampling target
4096) pass an honest SUT, and TEST01 fails on a planted corrupted result. Real CLI, runner, LoadGen,
ONNX Runtime; --round=v5.1 (DLRM-v2 is not in v6.x)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_test01_passed, audit_dir, offline_audit_env, offline_samples, run_audit, verify_corrupted_test01

SHORT = offline_samples(256)   # ~1 s of work: a 0.25 s run made the timed comparison a coin toss
BASE = ("--benchmarks=dlrm_v2", "--model_variant=tiny", "--scenarios=Offline", "--round=v5.1")


@pytest.fixture(scope="module")
def env(tiny_dlrm, tmp_path_factory):
    return offline_audit_env(tiny_dlrm, tmp_path_factory, "dlrm_v2", BASE, SHORT)


def _audit_dir(env, test):
    return audit_dir(env, test, "dlrm_v2")


def _audit(env, test):
    # one try: assert_test01_passed accepts a failed timed comparison alone; a retry changed only that warning
    return run_audit(env, test, "dlrm_v2", BASE, SHORT, attempts=1)


def test_compliance_dlrm_round_table_audits():
    from code.common import rounds

    for v in ("v5.0", "v5.1"):
        for name in ("dlrm-v2-99", "dlrm-v2-99.9"):
            e = rounds.current(v).benchmarks[name]
            assert e.compliance_tests == ("TEST01",) and e.test01_sampling_target == 4096
    for v in ("v6.0", "v6.1"):
        assert "dlrm-v2-99" not in rounds.current(v).benchmarks


def test_compliance_dlrm_offline_test01_pass(env):
    r, d, rec = _audit(env, "TEST01")
    assert_test01_passed(r, d, rec, 4096)


def test_compliance_dlrm_offline_test01_corrupted_entry_fails(env, tmp_path, monkeypatch):
    """One item's click probability changed in the accuracy-mode log: the byte comparison fails; the
    fallback scores both subsets with our AUC code."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if not list((Path(env["MLPERF_BUILD_DIR"]) / "compliance_logs" / "TEST01").glob("*/dlrm_v2/Offline")):
        _audit(env, "TEST01")
    rec, work = verify_corrupted_test01(_audit_dir(env, "TEST01"), "dlrm_v2", BASE, tmp_path, version="v5.1")
    assert "AUC=" in (work / "accuracy" / "baseline_accuracy.txt").read_text()
    assert not rec["errors"], rec["errors"]
