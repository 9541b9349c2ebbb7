"""Compliance audits end to end on the tiny ResNet50: the real CLI, runner, LoadGen and ONNX Runtime.

Runs use a private build/ (own build/logs, so the audit's reference runs are exactly these).
Performance runs are short (512 samples); the audit's performance verdict is a ±10% comparison of two
timed runs on a shared CPU. A timed comparison outside it is the one failure assert_audit_passed accepts
(as a warning), so an audit is not run again (as in tests/test_compliance_sdxl.py): a rerun of the
reference and the audit cost 10-20 s and changed nothing the tests assert.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_audit_passed, offline_samples, run_main, verify_corrupted_test01

# Sized by sample count (tests.conftest.offline_samples), never by an expected rate.
SHORT = offline_samples(512)
BASE = ("--benchmarks=resnet50", "--model_variant=tiny", "--scenarios=Offline")


@pytest.fixture(scope="module")
def env(tiny_resnet, tmp_path_factory):
    e = dict(tiny_resnet, MLPERF_BUILD_DIR=str(tmp_path_factory.mktemp("audit") / "build"))
    for mode in ("PerformanceOnly", "AccuracyOnly"):
        r = run_main("--action=run_harness", *BASE, f"--test_mode={mode}", *SHORT, env=e)
        assert r.returncode == 0, r.stdout + r.stderr
    return e


def _audit_dir(env, test):
    return next((Path(env["MLPERF_BUILD_DIR"]) / "compliance_logs" / test).glob("*/resnet50/Offline"))


def _audit(env, test, *extra):
    r = run_main("--action=run_audit_harness", f"--audit_test={test}", *BASE, *SHORT, *extra, env=env)
    d = next((Path(env["MLPERF_BUILD_DIR"]) / "compliance_logs" / test).glob("*/resnet50/Offline"))
    return r, d, json.loads((d / "verification.json").read_text())


def test_compliance_resnet50_offline_test01_pass(env):
    r, d, rec = _audit(env, "TEST01")
    outright = assert_audit_passed(rec)
    assert r.returncode == (0 if outright else 4), r.stdout + r.stderr
    assert rec["accuracy"]["passed"] and rec["accuracy"]["num_perf_log_data_mismatch"] == 0
    assert rec["accuracy"]["num_perf_log_entries"] > 0
    assert "TEST PASS" in (d / "verify_accuracy.txt").read_text()
    assert ("TEST PASS" in (d / "verify_performance.txt").read_text()) == outright
    md = json.loads((d / "metadata.json").read_text())
    assert md["audit_test"] == "TEST01" and md["status"] == "ok"
    assert md["effective"]["effective_accuracy_log_rng_seed"] == 720381539243781796
    assert md["effective"]["effective_accuracy_log_sampling_target"] == 4096
    assert not (d / "audit.config").exists()
    assert f"[audit] TEST01: TEST {'PASS' if outright else 'FAIL'}" in r.stdout


def test_compliance_resnet50_offline_test04_pass(env):
    r, d, rec = _audit(env, "TEST04")
    assert r.returncode == (0 if assert_audit_passed(rec) else 4), r.stdout + r.stderr
    md = json.loads((d / "metadata.json").read_text())
    assert md["effective"]["effective_performance_issue_same"] is True
    assert md["effective"]["effective_performance_issue_same_index"] == 3


def test_compliance_resnet50_offline_test04_cached_responses_fail(env):
    r, d, rec = _audit(env, "TEST04", "--use_cached_responses")
    assert r.returncode == 4, r.stdout + r.stderr
    assert not rec["passed"]
    assert "TEST FAIL" in (d / "verify_performance.txt").read_text()
    assert "error: TEST04 failed for resnet50 Offline" in r.stdout + r.stderr


def test_compliance_resnet50_offline_test01_corrupted_entry_fails(env, tmp_path, monkeypatch):
    """One corrupted result in the accuracy-mode log: the byte comparison fails (TEST FAIL); the
    non-deterministic fallback then scores both subsets with the benchmark's own accuracy code."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if not list((Path(env["MLPERF_BUILD_DIR"]) / "compliance_logs" / "TEST01").glob("*/resnet50/Offline")):
        _audit(env, "TEST01")
    rec, _ = verify_corrupted_test01(_audit_dir(env, "TEST01"), "resnet50", BASE, tmp_path)
    assert not rec["errors"], rec["errors"]          # the official script (if configured) agrees


def test_compliance_resnet50_test06_not_applicable(env):
    r = run_main("--action=run_audit_harness", "--audit_test=TEST06", *BASE, *SHORT, env=env)
    assert r.returncode == 2
    assert "TEST06 is not applicable to resnet" in r.stderr
