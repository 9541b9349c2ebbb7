"""The make targets users know exist and call Python modules under code/ or scripts/."""
from __future__ import annotations

import subprocess

import pytest

from tests.conftest import REPO

TARGETS = ["prebuild", "build", "info", "download_model", "download_data", "preprocess_data", "generate_engines",
           "run_harness", "run", "run_audit_harness", "run_audit_test01", "run_audit_test04", "update_results",
           "truncate_results", "check_submission", "export_submission", "demo", "test", "clean"]


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
    for target, flag in (("run_harness", "--round=v5.0"), ("check_submission", "--version=v5.0")):
        r = subprocess.run(["make", "-n", target, "ROUND=v5.0", "VENV=/nonexistent-venv"], cwd=REPO,
                           capture_output=True, text=True)
        assert flag in r.stdout, r.stdout
