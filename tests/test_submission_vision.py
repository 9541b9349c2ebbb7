"""RetinaNet and 3D-UNet through staging, truncation, export and the official submission checker.

The tiny variants run every v5.1 edge scenario (RetinaNet SingleStream/MultiStream/Offline, 3D-UNet
SingleStream/Offline) in both modes plus TEST01, through the real CLI; the tree is staged, truncated,
exported and checked (about six minutes here). Only what a short tiny CPU run cannot avoid may be reported: run length and
sample counts (a tiny run is short and covers a few hundred samples of 24,781 / 43), and the system
description fields a person fills in. The module runs where the official checker can (MLPERF_INFERENCE_DIR names a checkout of mlcommons/inference).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.conftest import offline_samples, run_main

pytestmark = pytest.mark.skipif(not os.environ.get("MLPERF_INFERENCE_DIR"),
                                reason="MLPERF_INFERENCE_DIR not set (the official checker runs from that checkout)")

ROUND = "v5.1"
RUNS = {"retinanet": "SingleStream,MultiStream,Offline", "3d-unet": "SingleStream,Offline"}
# per scenario: the fewest queries whose early-stopping estimate LoadGen accepts (SingleStream p90 needs
# ~64, MultiStream p99 662); Offline sized by sample count
SHORT = {"SingleStream": ("--min_duration=1000", "--min_query_count=100"),
         "MultiStream": ("--min_duration=1000", "--min_query_count=662"),
         "Offline": offline_samples(64)}
# what a tiny CPU run cannot avoid, as our pre-flight and the official checker word it
UNAVOIDABLE = (r"min_duration", r"min_query_count", r"samples?_per_query", r"accuracy run covered \d+ samples",
               r"model_variant=tiny", r"performance_sample_count", r"Test duration", r"TO FILL",
               r"min duration", r"sample count", r"accuracy_sample_count", r"qsl_rng|sample_index_rng|schedule_rng")


@pytest.fixture(scope="module")
def tree(tiny_retinanet, tiny_unet3d, tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("vision_submission")
    env = dict(tiny_retinanet, MLPERF_BUILD_DIR=str(base / "build"), MLPERF_STAGING_ROOT=str(base / "stage"))
    for bench, scens in RUNS.items():
        for scen in scens.split(","):
            common = (f"--benchmarks={bench}", "--model_variant=tiny", f"--round={ROUND}", f"--scenarios={scen}")
            run_main("--action=run_harness", *common, "--test_mode=AccuracyOnly", env=env, check=True)
            run_main("--action=run_harness", *common, *SHORT[scen], env=env, check=True)
            r = run_main("--action=run_audit_harness", "--audit_test=TEST01", *common, *SHORT[scen], env=env)
            assert r.returncode in (0, 4), r.stdout + r.stderr   # 4: a timed comparison on a shared CPU
    for mod in ("stage", "truncate", "export"):
        args = ["-m", f"code.common.submission.{mod}"] + ([f"--version={ROUND}"] if mod != "truncate" else [])
        import subprocess
        import sys

        r = subprocess.run([sys.executable, *args], cwd=Path(__file__).resolve().parents[1],
                           env={**os.environ, **env}, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, (mod, r.stdout, r.stderr)
    return {"env": env, "submission": base / "build" / "submission", "stage": base / "stage"}


def _avoidable(lines: list[str]) -> list[str]:
    return [ln for ln in lines if not any(re.search(p, ln) for p in UNAVOIDABLE)]


def test_vision_submission_staged_layout(tree):
    sys_dirs = list((tree["stage"] / "results").iterdir())
    assert len(sys_dirs) == 1
    res = sys_dirs[0]
    assert sorted(p.name for p in (res / "retinanet").iterdir()) == ["MultiStream", "Offline", "SingleStream"]
    assert sorted(p.name for p in res.iterdir()) == ["3d-unet-99", "retinanet"]
    for bench, scens in (("retinanet", RUNS["retinanet"]), ("3d-unet-99", RUNS["3d-unet"])):
        for scen in scens.split(","):
            d = res / bench / scen
            assert (d / "performance" / "run_1" / "mlperf_log_detail.txt").is_file()
            assert (d / "accuracy" / "accuracy.txt").is_file()
    acc = (res / "3d-unet-99" / "Offline" / "accuracy" / "accuracy.txt").read_text()
    assert re.search(r"Accuracy:\s*mean\s*=\s*[\d.]+", acc)
    assert re.search(r"mAP=[\d.]+%", (res / "retinanet" / "Offline" / "accuracy" / "accuracy.txt").read_text())


def test_vision_submission_preflight_reports_only_unavoidable(tree):
    from code.common.submission import check

    errs = [ln for ln in check.check(tree["submission"], version=ROUND).lines() if ln.startswith("ERROR")]
    assert errs, "a tiny short run must not pass as a submission"
    assert _avoidable(errs) == [], errs


def test_vision_submission_official_checker_reports_only_unavoidable(tree):
    from code.common.submission import check

    rc, lines = check.run_official_checker(tree["submission"], "OpenHarness", ROUND,
                                           Path(os.environ["MLPERF_INFERENCE_DIR"]))
    errors = [ln for ln in lines if "ERROR" in ln and "SUMMARY" not in ln]
    print("\n".join(lines))
    assert not [ln for ln in lines if "Traceback" in ln], lines
    assert _avoidable(errors) == [], errors
    (Path(tree["submission"]).parent / "official_checker.json").write_text(json.dumps({"rc": rc, "lines": lines}))
