"""BERT compliance on the tiny variant: the audit the round table names (TEST01, sampling target
4096) passes an honest SUT, and TEST01 fails on a planted corrupted result. Real CLI, runner,
LoadGen, ORT."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_test01_passed, audit_dir, offline_audit_env, offline_samples, run_audit, verify_corrupted_test01

SHORT = offline_samples(245)
BASE = ("--benchmarks=bert", "--model_variant=tiny", "--scenarios=Offline")


@pytest.fixture(scope="module")
def env(tiny_bert, tmp_path_factory):
    return offline_audit_env(tiny_bert, tmp_path_factory, "bert", BASE, SHORT)


def _audit_dir(env, test):
    return audit_dir(env, test, "bert")


def _audit(env, test):
    # one try: assert_test01_passed accepts a failed timed comparison alone; a retry changed only that warning
    return run_audit(env, test, "bert", BASE, SHORT, attempts=1)


def test_compliance_bert_round_table_audits():
    from code.common import rounds

    for v in ("v5.0", "v5.1", "v6.0", "v6.1"):
        for name in ("bert-99", "bert-99.9"):
            e = rounds.current(v).benchmarks[name]
            assert e.benchmark == "bert" and e.compliance_tests == ("TEST01",) and e.test01_sampling_target == 4096
    assert abs(rounds.current("v6.1").benchmarks["bert-99"].accuracy_min["F1"] - 90.874 * 0.99) < 1e-9
    assert abs(rounds.current("v6.1").benchmarks["bert-99.9"].accuracy_min["F1"] - 90.874 * 0.999) < 1e-9


def test_compliance_bert_offline_test01_pass(env):
    r, d, rec = _audit(env, "TEST01")
    assert_test01_passed(r, d, rec, 4096)


def test_compliance_bert_offline_test01_corrupted_entry_fails(env, tmp_path, monkeypatch):
    """One logit of one feature changed in the accuracy-mode log: the byte comparison fails; the
    fallback scores both subsets with our F1 code."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if not list((Path(env["MLPERF_BUILD_DIR"]) / "compliance_logs" / "TEST01").glob("*/bert/Offline")):
        _audit(env, "TEST01")
    rec, work = verify_corrupted_test01(_audit_dir(env, "TEST01"), "bert", BASE, tmp_path)
    assert '"f1"' in (work / "accuracy" / "baseline_accuracy.txt").read_text()
    assert not rec["errors"], rec["errors"]
