"""3D-UNet compliance on the tiny variant: the audits the round table names (TEST01, sampling target 64)
pass an honest SUT, and TEST01 fails on a planted corrupted result. Real CLI, runner, LoadGen, ORT."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_test01_passed, audit_dir, offline_audit_env, offline_samples, run_audit, verify_corrupted_test01

SHORT = offline_samples(24)
BASE = ("--benchmarks=3d-unet", "--model_variant=tiny", "--scenarios=Offline")


@pytest.fixture(scope="module")
def env(tiny_unet3d, tmp_path_factory):
    return offline_audit_env(tiny_unet3d, tmp_path_factory, "unet3d", BASE, SHORT)


def _audit_dir(env, test):
    return audit_dir(env, test, "unet3d")


def _audit(env, test):
    # one try: assert_test01_passed accepts a failed timed comparison alone; a retry changed only that warning
    return run_audit(env, test, "unet3d", BASE, SHORT, attempts=1)


def test_compliance_unet3d_round_table_audits():
    from code.common import rounds

    for v in ("v5.0", "v5.1", "v6.0", "v6.1"):
        for name in ("3d-unet-99", "3d-unet-99.9"):
            e = rounds.current(v).benchmarks[name]
            assert e.compliance_tests == ("TEST01",) and e.test01_sampling_target == 64


def test_compliance_unet3d_offline_test01_pass(env):
    r, d, rec = _audit(env, "TEST01")
    assert_test01_passed(r, d, rec, 64)


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

