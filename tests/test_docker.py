"""make prebuild DOCKER=1: the docker commands (DRY_RUN=1; no Docker engine runs here)."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import REPO

H100 = {"name": "NVIDIA H100 80GB HBM3", "pci_id": "0x233010DE"}


def _prebuild(env_extra: dict, *make_args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **env_extra}
    return subprocess.run(["make", "prebuild", "DOCKER=1", *make_args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("gpus", [[], [H100]], ids=["cpu", "gpu"])
def test_prebuild_docker_dry_run(gpus, tmp_path):
    r = _prebuild({"MLPERF_FAKE_SYSTEM": json.dumps({"gpus": gpus}), "MLPERF_SCRATCH_PATH": str(tmp_path)}, "DRY_RUN=1")
    assert r.returncode == 0, r.stdout + r.stderr
    build, run = [ln for ln in r.stdout.splitlines() if ln.startswith("docker ")]
    want = "docker/Dockerfile" if gpus else "docker/Dockerfile.cpu"
    assert build.startswith("docker build -f ") and build.split()[3].endswith(want), build
    assert f"-v {REPO}:/work" in run and f"-v {tmp_path}:/scratch" in run and "MLPERF_SCRATCH_PATH=/scratch" in run
    assert ("--gpus all" in run) == bool(gpus), run
    assert not (REPO / ".venv-docker").exists()


def test_dockerfiles_pin_their_base_and_install_the_pins():
    for name in ("Dockerfile", "Dockerfile.cpu"):
        text = (REPO / "docker" / name).read_text()
        base = next(ln for ln in text.splitlines() if ln.startswith("ARG BASE="))
        assert ":" in base and not base.endswith(":latest"), base
        assert "VENV=/opt/venv" in text and "requirements.txt" in text
    assert "nvcr.io/nvidia/" in (REPO / "docker" / "Dockerfile").read_text()


def test_prebuild_docker_without_docker_is_one_line(tmp_path):
    from code.common.docker import nvidia_runtime

    if nvidia_runtime() is not None:
        pytest.skip("a Docker daemon answers here: the real build would run")
    r = _prebuild({"MLPERF_SCRATCH_PATH": str(tmp_path)})
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "error: docker is not installed" in r.stderr and "fix: " in r.stderr, r.stderr
