"""RetinaNet compliance on the tiny variant: the round table's audits for retinanet (TEST01 only)
pass, TEST01 fails on a planted corrupted entry, TEST04 is refused as not applicable."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_test01_passed, offline_samples, run_main, verify_corrupted_test01

SHORT = offline_samples(96)
BASE = ("--benchmarks=retinanet", "--model_variant=tiny", "--scenarios=Offline", "--round=v6.0")


@pytest.fixture(scope="module")
def env(tiny_retinanet, tmp_path_factory):
    e = dict(tiny_retinanet, MLPERF_BUILD_DIR=str(tmp_path_factory.mktemp("retinanet_audit") / "build"))
    for mode in ("PerformanceOnly", "AccuracyOnly"):
        r = run_main("--action=run_harness", *BASE, f"--test_mode={mode}", *SHORT, env=e)
        assert r.returncode == 0, r.stdout + r.stderr
    return e


def _audit_dir(env):
    return next((Path(env["MLPERF_BUILD_DIR"]) / "compliance_logs" / "TEST01").glob("*/retinanet/Offline"))


def test_retinanet_round_table_audits():
    from code.common import rounds

    e = rounds.current("v6.0").entry("retinanet")
    assert e.compliance_tests == ("TEST01",) and e.test01_sampling_target == 256
    assert e.accuracy_min["mAP"] == pytest.approx(37.55 * 0.99)


def test_retinanet_offline_test01_pass(env):
    r = run_main("--action=run_audit_harness", "--audit_test=TEST01", *BASE, *SHORT, env=env)
    d = _audit_dir(env)
    rec = json.loads((d / "verification.json").read_text())
    assert_test01_passed(r, d, rec, 256)


def test_retinanet_offline_test01_corrupted_entry_fails(env, tmp_path, monkeypatch):
    """The ymin of one image's first box changed in the accuracy-mode log: TEST FAIL, then the mAP fallback."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if not list((Path(env["MLPERF_BUILD_DIR"]) / "compliance_logs" / "TEST01").glob("*/retinanet/Offline")):
        run_main("--action=run_audit_harness", "--audit_test=TEST01", *BASE, *SHORT, env=env)
    verify_corrupted_test01(_audit_dir(env), "retinanet", BASE, tmp_path, version="v6.0",
                            pick=lambda e: len(e["data"]) >= 56,
                            corrupt=lambda h: h[:8] + ("00000000" if h[8:16] != "00000000" else "0000803f") + h[16:])


def test_retinanet_test04_not_applicable(env):
    r = run_main("--action=run_audit_harness", "--audit_test=TEST04", *BASE, *SHORT, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "TEST04" in r.stderr and "retinanet" in r.stderr and "Traceback" not in r.stderr
