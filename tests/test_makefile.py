"""The make targets users know exist and call Python modules under code/ or scripts/."""
from __future__ import annotations

import subprocess

import pytest

from tests.conftest import REPO

TARGETS = ["prebuild", "build", "info", "download_model", "download_data", "preprocess_data", "calibrate", "generate_engines",
           "run_harness", "run", "run_audit_harness", "run_audit_test01", "run_audit_test04", "update_results",
           "truncate_results", "check_submission", "export_submission", "demo", "test", "clean", "add_system", "doctor"]


@pytest.mark.parametrize("target", TARGETS)
def test_make_target_is_defined(target):
    r = subprocess.run(["make", "-n", target, "RUN_ARGS=--benchmarks=resnet50", "VENV=/nonexistent-venv"], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    if target not in ("clean", "prebuild", "run"):
        assert "python" in r.stdout or "/python" in r.stdout or "$(PY)" in r.stdout, r.stdout


def test_ci_entry_point_runs_make_test():
    text = (REPO / ".ci" / "run").read_text()
    assert "make test" in text and "set -e" in text


def test_make_benchmarks_space_list_and_round():
    """NVIDIA's BENCHMARKS="resnet50 sdxl" becomes one --benchmarks list; ROUND= reaches every step."""
    r = subprocess.run(["make", "-n", "download_data", "BENCHMARKS=resnet50 sdxl", "ROUND=v5.0",
                        "VENV=/nonexistent-venv"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0 and "--benchmarks=resnet50,sdxl" in r.stdout, r.stdout + r.stderr
    for target, flag in (("run_harness", "--round=v5.0"), ("check_submission", "--round=v5.0"),
                         ("update_results", "--round=v5.0")):
        r = subprocess.run(["make", "-n", target, "ROUND=v5.0", "VENV=/nonexistent-venv"], cwd=REPO,
                           capture_output=True, text=True)
        assert flag in r.stdout, r.stdout


def test_make_demo_benchmarks_picks_what_it_runs():
    r = subprocess.run(["make", "-n", "demo", "BENCHMARKS=retinanet 3d-unet", "VENV=/nonexistent-venv"], cwd=REPO,
                       capture_output=True, text=True)
    assert "scripts/demo.py --benchmarks=retinanet,3d-unet" in r.stdout, r.stdout
    r = subprocess.run(["make", "-n", "demo", "VENV=/nonexistent-venv"], cwd=REPO, capture_output=True, text=True,
                       env={k: v for k, v in __import__("os").environ.items() if k != "BENCHMARKS"})
    assert "scripts/demo.py --benchmarks=resnet50,sdxl,llama2_70b" in r.stdout, r.stdout


def test_demo_groups_llms_apart_and_runs_retired_benchmarks_under_their_round():
    import importlib.util

    spec = importlib.util.spec_from_file_location("demo", REPO / "scripts" / "demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    assert demo.groups("resnet50,retinanet,3d-unet,llama2_70b", llm=False) == {
        (): ["resnet50", "unet3d"], ("--round=v6.0",): ["retinanet"]}
    assert demo.groups("resnet50,retinanet,3d-unet,llama2_70b", llm=True) == {(): ["llama2_70b"]}
    assert demo.groups("bert,dlrm-v2,3d-unet", llm=False, scenarios="Offline,SingleStream") == {
        ("--scenarios=Offline,SingleStream",): ["bert", "unet3d"], ("--round=v5.1", "--scenarios=Offline"): ["dlrm_v2"]}
