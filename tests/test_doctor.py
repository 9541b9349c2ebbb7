"""`make doctor`: one line per check (ok / warn / FAIL with the fix), exit 1 only when a check FAILs.
One test per FAIL case the issue names (missing model, unwritable scratch, no LoadGen), the GPU checks
on injected hardware, and docker; every output is free of tracebacks."""
from __future__ import annotations

import importlib.util
import re

import pytest

from tests.conftest import run_main

H100 = {"name": "NVIDIA H100 80GB HBM3", "pci_id": "0x233010DE"}
L4 = {"name": "NVIDIA L4", "pci_id": "0x27B810DE"}
LINE = re.compile(r"^(ok   \S.*?: .+|(warn|FAIL) \S.*?: .+  fix: .+|doctor: \d+ ok, \d+ warn, \d+ FAIL)$")


def _doctor(*args: str, env: dict | None = None) -> tuple[int, str]:
    """Run doctor; check the shape of every line and the summary; return (exit code, stdout)."""
    r = run_main("--action=doctor", *args, env=env, timeout=300)
    out = r.stdout
    print(out + r.stderr)                     # `pytest -s` shows what doctor said
    assert "Traceback" not in out + r.stderr
    lines = out.strip().splitlines()
    assert lines and all(LINE.match(x) for x in lines), out
    fails = sum(x.startswith("FAIL ") for x in lines)
    assert lines[-1].endswith(f", {fails} FAIL"), out
    assert r.returncode == (1 if fails else 0), (r.returncode, out, r.stderr)
    return r.returncode, out


def _fail_line(out: str, check: str) -> str:
    found = [x for x in out.splitlines() if x.startswith(f"FAIL {check}")]
    assert found, f"no FAIL line for {check}:\n{out}"
    return found[0]


def test_this_machine_ready_for_tiny_resnet50(tiny_resnet):
    rc, out = _doctor("--benchmarks=resnet50", "--model_variant=tiny", env=tiny_resnet)
    assert rc == 0 and "\nFAIL " not in "\n" + out
    for check in ("Python", "LoadGen", "ORT", "torch", "hardware", "NVML", "TensorRT", "scratch",
                  "resnet50 (tiny) model", "resnet50 (tiny) data"):
        assert re.search(rf"^(ok  |warn) {re.escape(check)}: ", out, re.M), (check, out)
    assert re.search(r"^ok   LoadGen: mlcommons-loadgen \d", out, re.M), out
    assert "CPUExecutionProvider" in out
    assert re.search(r"^doctor: \d+ ok, \d+ warn, 0 FAIL$", out, re.M), out


def test_no_benchmarks_needs_no_hardware_config(harness_env):
    """Without --benchmarks: the machine-wide checks only; no GPU here is not a FAIL."""
    rc, out = _doctor(env=harness_env)
    assert "model:" not in out and re.search(r"^ok   scratch: .* writable, [\d,]+ GB free", out, re.M)
    if "no GPU" in out:
        assert rc == 0
        for check in ("NVML", "TensorRT"):
            assert re.search(rf"^ok   {check}: .*not needed without a GPU", out, re.M), out


def test_fail_missing_model(harness_env, tmp_path):
    env = dict(harness_env, MLPERF_SCRATCH_PATH=str(tmp_path / "empty_scratch"))
    rc, out = _doctor("--benchmarks=resnet50", "--model_variant=tiny", env=env)
    line = _fail_line(out, "resnet50 (tiny) model")
    assert rc == 1 and "resnet50_v1.onnx" in line and "model not found" in line
    assert line.endswith("fix: make download_model BENCHMARKS=resnet50 MODEL_VARIANT=tiny"), line
    assert "make download_data BENCHMARKS=resnet50 MODEL_VARIANT=tiny" in _fail_line(out, "resnet50 (tiny) data")
    assert re.search(r"^ok   scratch: .*about 1 GB needed", out, re.M), out


def test_fail_unwritable_scratch(harness_env, tmp_path):
    """A scratch path under a regular file cannot be created, even by root (chmod would not stop root)."""
    (tmp_path / "afile").write_text("not a folder")
    env = dict(harness_env, MLPERF_SCRATCH_PATH=str(tmp_path / "afile" / "scratch"))
    rc, out = _doctor("--benchmarks=resnet50", "--model_variant=tiny", env=env)
    line = _fail_line(out, "scratch")
    assert rc == 1 and "afile/scratch is not writable" in line and "fix: export MLPERF_SCRATCH_PATH=" in line, line


def test_fail_no_loadgen(harness_env, tmp_path):
    """A mlperf_loadgen on PYTHONPATH that raises shadows the installed one (PYTHONPATH precedes site-packages)."""
    (tmp_path / "mlperf_loadgen.py").write_text('raise ImportError("simulated: no LoadGen")\n')
    rc, out = _doctor(env=dict(harness_env, PYTHONPATH=str(tmp_path)))
    line = _fail_line(out, "LoadGen")
    assert rc == 1 and "simulated: no LoadGen" in line and line.endswith("fix: make prebuild"), line


def test_fail_mixed_gpu_models(harness_env):
    import json

    rc, out = _doctor(env=dict(harness_env, MLPERF_FAKE_SYSTEM=json.dumps({"gpus": [H100, L4]})))
    line = _fail_line(out, "hardware")
    assert rc == 1 and "mixed GPU models" in line and "NVIDIA H100 80GB HBM3" in line and "NVIDIA L4" in line
    assert "CUDA_VISIBLE_DEVICES=0 or CUDA_VISIBLE_DEVICES=1" in line, line


@pytest.mark.skipif(importlib.util.find_spec("tensorrt") is not None, reason="TensorRT is installed here")
def test_fail_gpu_without_tensorrt(harness_env):
    import json

    env = dict(harness_env, MLPERF_FAKE_SYSTEM=json.dumps({"gpus": [H100]}))
    rc, out = _doctor("--benchmarks=resnet50", "--model_variant=tiny", env=env)
    assert re.search(r"^ok   hardware: 1x NVIDIA H100 80GB HBM3 .*H100-SXM-80GBx1 \(Hopper\)", out, re.M), out
    line = _fail_line(out, "TensorRT")
    assert rc == 1 and "does not import" in line and line.endswith("fix: make prebuild GPU_EXTRAS=1"), line


def test_fail_docker_missing(harness_env, tmp_path):
    """--docker with no docker on PATH: a FAIL naming it; without --docker, no docker line at all."""
    env = dict(harness_env, PATH=str(tmp_path))
    rc, out = _doctor("--docker", env=env)
    line = _fail_line(out, "docker")
    assert rc == 1 and "docker is not on PATH" in line and "install Docker" in line, line
    _, out = _doctor(env=env)
    assert "docker" not in out


def test_fail_unreachable_ray_cluster(harness_env):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]            # nothing listens there once closed
    rc, out = _doctor("--benchmarks=resnet50", "--model_variant=tiny", "--executor=ray",
                      f"--ray_address=127.0.0.1:{port}", env=harness_env)
    line = _fail_line(out, "Ray")
    assert rc == 1 and f"127.0.0.1:{port} is unreachable" in line and "fix: start it: ray start --head" in line
