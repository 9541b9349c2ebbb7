"""3D-UNet compliance on the tiny variant: the audits the round table names (TEST01, sampling target 64)
pass an honest SUT, and TEST01 fails on a planted corrupted result. Real CLI, runner, LoadGen, ORT."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import assert_audit_passed, offline_samples, run_main, verify_corrupted_test01

SHORT = offline_samples(24)
BASE = ("--benchmarks=3d-unet", "--model_variant=tiny", "--scenarios=Offline")


@pytest.fixture(scope="module")
def env(tiny_unet3d, tmp_path_factory):
    e = dict(tiny_unet3d, MLPERF_BUILD_DIR=str(tmp_path_factory.mktemp("u3d_audit") / "build"))
    for mode in ("PerformanceOnly", "AccuracyOnly"):
        r = run_main("--action=run_harness", *BASE, f"--test_mode={mode}", *SHORT, env=e)
        assert r.returncode == 0, r.stdout + r.stderr
    return e


def _audit_dir(env, test):
    return next((Path(env["MLPERF_BUILD_DIR"]) / "compliance_logs" / test).glob("*/unet3d/Offline"))


def _audit(env, test):
    for attempt in range(3):
        if attempt:        # the ±10% timed comparison on a shared CPU: a fresh reference run, then retry
            for perf in (Path(env["MLPERF_BUILD_DIR"]) / "logs").glob("*/*/unet3d/Offline/performance"):
                shutil.rmtree(perf)
            run_main("--action=run_harness", *BASE, "--test_mode=PerformanceOnly", *SHORT, env=env, check=True)
        r = run_main("--action=run_audit_harness", f"--audit_test={test}", *BASE, *SHORT, env=env)
        rec = json.loads((_audit_dir(env, test) / "verification.json").read_text())
        if rec.get("accepted") or rec.get("accuracy", {}).get("passed") is False:
            break
    return r, _audit_dir(env, test), rec


def test_compliance_unet3d_round_table_audits():
    from code.common import rounds

    for v in ("v5.0", "v5.1", "v6.0", "v6.1"):
        for name in ("3d-unet-99", "3d-unet-99.9"):
            e = rounds.current(v).benchmarks[name]
            assert e.compliance_tests == ("TEST01",) and e.test01_sampling_target == 64


def test_compliance_unet3d_offline_test01_pass(env):
    r, d, rec = _audit(env, "TEST01")
    outright = assert_audit_passed(rec)
    assert r.returncode == (0 if outright else 4), r.stdout + r.stderr
    assert rec["accuracy"]["passed"] and rec["accuracy"]["num_perf_log_data_mismatch"] == 0
    assert rec["accuracy"]["num_perf_log_entries"] > 0
    assert "TEST PASS" in (d / "verify_accuracy.txt").read_text()
    md = json.loads((d / "metadata.json").read_text())
    assert md["audit_test"] == "TEST01" and md["status"] == "ok"
    assert md["effective"]["effective_accuracy_log_sampling_target"] == 64
    assert not (d / "audit.config").exists()


def test_compliance_unet3d_offline_test01_corrupted_entry_fails(env, tmp_path, monkeypatch):
    """One voxel of one case changed in the accuracy-mode log: the byte comparison fails; the
    fallback scores both subsets with our DICE code."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if not list((Path(env["MLPERF_BUILD_DIR"]) / "compliance_logs" / "TEST01").glob("*/unet3d/Offline")):
        _audit(env, "TEST01")
    rec, work = verify_corrupted_test01(_audit_dir(env, "TEST01"), "unet3d", BASE, tmp_path)
    assert "Accuracy: mean" in (work / "accuracy" / "baseline_accuracy.txt").read_text()
    assert not rec["errors"], rec["errors"]

