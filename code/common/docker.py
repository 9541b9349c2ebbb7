"""``make prebuild DOCKER=1``: build the harness image and start a container in it.

The image (docker/Dockerfile on GPU machines: a pinned NGC TensorRT base; docker/Dockerfile.cpu
elsewhere) installs the same pins as the native ``.venv``. The container mounts the repository at
/work and ``$MLPERF_SCRATCH_PATH`` at /scratch, and gets every GPU (``--gpus all``) when Docker has the
NVIDIA runtime. ``DRY_RUN=1`` prints the docker commands instead of running them (what the tests
check: no Docker engine runs on the development machines). Native runs need none of this.

  python -m code.common.docker      (env: DRY_RUN, MLPERF_SCRATCH_PATH, DOCKER_IMAGE, DOCKER_CMD)
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

from code.common import paths
from code.common.errors import HarnessError

IMAGE = "mlperf-harness"
FIX_DOCKER = "install Docker (docs.docker.com/engine/install) and the NVIDIA Container Toolkit, or run natively: make prebuild"


def nvidia_runtime() -> bool | None:
    """Whether ``docker info`` lists the nvidia runtime; None when Docker does not answer."""
    if shutil.which("docker") is None:
        return None
    try:
        out = subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    try:
        return "nvidia" in json.loads(out.stdout or "{}")
    except ValueError:
        return "nvidia" in out.stdout


def commands(*, gpu: bool, image: str, scratch: str, cmd: str = "bash") -> list[list[str]]:
    """[docker build ..., docker run ...] for this repository."""
    repo = str(paths.REPO_ROOT)
    dockerfile = "docker/Dockerfile" if gpu else "docker/Dockerfile.cpu"
    build = ["docker", "build", "-f", f"{repo}/{dockerfile}", "-t", image, repo]
    run = ["docker", "run", "--rm", "-it", *(["--gpus", "all"] if gpu else []), "--shm-size=16g",
           "-v", f"{repo}:/work", "-v", f"{scratch}:/scratch", "-e", "MLPERF_SCRATCH_PATH=/scratch", "-w", "/work",
           image, *shlex.split(cmd)]
    return [build, run]


def main() -> int:
    from code.common.systems import detect

    dry = os.environ.get("DRY_RUN", "") not in ("", "0")
    runtime = nvidia_runtime()
    if runtime is None and not dry:
        raise HarnessError("docker is not installed or its daemon does not answer (`docker info` failed)", FIX_DOCKER)
    has_gpus = bool(detect().gpus)
    if has_gpus and runtime is False:
        raise HarnessError("this machine has NVIDIA GPUs but Docker has no nvidia runtime",
                           "install the NVIDIA Container Toolkit (nvidia-ctk runtime configure --runtime=docker), "
                           "then restart docker")
    gpu = has_gpus and runtime is not False
    scratch = str(paths.scratch_path().resolve())
    cmds = commands(gpu=gpu, image=os.environ.get("DOCKER_IMAGE") or IMAGE, scratch=scratch,
                    cmd=os.environ.get("DOCKER_CMD") or "bash")
    if dry:
        note = " (nvidia runtime not checked: no docker here)" if runtime is None and gpu else ""
        print(f"[prebuild] DRY_RUN: {'GPU' if gpu else 'CPU'} image{note}; would run:")
        for c in cmds:
            print(shlex.join(c))
        return 0
    os.makedirs(scratch, exist_ok=True)
    for c in cmds:
        print(f"[prebuild] {shlex.join(c)}", flush=True)
        rc = subprocess.call(c)
        if rc != 0:
            raise HarnessError(f"`{shlex.join(c[:3])} ...` failed with exit code {rc}",
                               "read docker's output above; a failed build keeps no image (fix and rerun make prebuild "
                               "DOCKER=1)", 4)
    return 0


if __name__ == "__main__":
    from code.common.cli import guarded

    sys.exit(guarded(main))
