"""The test suite's zygote (code/common/harness/zygote.py): a forked child behaves as a fresh interpreter would
(arguments, folder, environment, niceness, exit code, output), the zygote refuses a client whose import-time
environment differs (the caller then starts a fresh interpreter), and a child dies with its client."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from code.common.harness import zygote

PROBE = "tests.zygote_probe"


@pytest.fixture(scope="module")
def sock(tmp_path_factory):
    import tempfile

    d = tempfile.mkdtemp(prefix="mz-test-")
    path = os.path.join(d, "socket")
    env = {k: v for k, v in os.environ.items() if k != "MLPERF_ZYGOTE"}
    proc = zygote.launch(path, env=env, log=os.path.join(d, "log"), preload=("json",))
    assert zygote.wait_ready(path, proc, timeout=60), Path(d, "log").read_text()
    yield path, env, Path(d, "log")
    proc.terminate()
    proc.wait(timeout=10)


def _client(path: str, env: dict, *args: str, nice: int = 0) -> subprocess.CompletedProcess:
    """A process that asks the zygote for ``python -m tests.zygote_probe args`` and prints how it ran."""
    code = ("import os, sys; from code.common.harness import zygote; "
            f"os.nice({nice}); "
            "c = zygote.start(sys.argv[1], sys.argv[2:], os.environ['PROBE_CWD'], dict(os.environ)); "
            "print('FRESH' if c is None else f'FORKED {c.pid}', flush=True); "
            "sys.exit(3 if c is None else c.wait())")
    return subprocess.run([sys.executable, "-c", code, PROBE, *args], cwd=Path(__file__).parents[1],
                          env={**env, "MLPERF_ZYGOTE": path}, capture_output=True, text=True, timeout=60)


def test_forked_child_runs_as_a_fresh_interpreter_would(sock, tmp_path):
    path, env, _ = sock
    r = _client(path, {**env, "PROBE_CWD": str(tmp_path), "PROBE_VALUE": "x1"}, "a", "b c", "--rc=7", nice=3)
    assert r.returncode == 7, r.stderr
    assert r.stdout.startswith("FORKED"), r.stdout
    out = dict(line.split("=", 1) for line in r.stdout.splitlines()[1:])
    assert out["argv"] == repr(["a", "b c", "--rc=7"])
    assert out["cwd"] == str(tmp_path)
    assert out["value"] == "x1" and out["zygote"] == "None"       # the client's variables; its own children start fresh
    assert out["sigpipe"] == "True"                             # ignored, as an interpreter starts
    # the client's niceness (this process's + 3), as exec would inherit
    assert out["nice"] == str(os.getpriority(os.PRIO_PROCESS, 0) + 3)
    assert "to stderr" in r.stderr
    # two children draw different random numbers (a fresh interpreter seeds anew), as two fresh ones would
    r2 = _client(path, {**env, "PROBE_CWD": str(tmp_path), "PROBE_VALUE": "x1"})
    out2 = dict(line.split("=", 1) for line in r2.stdout.splitlines()[1:])
    assert out2["random"] != out["random"] and out2["np_random"] != out["np_random"]


def test_uncaught_exception_exits_1_with_traceback(sock, tmp_path):
    path, env, _ = sock
    r = _client(path, {**env, "PROBE_CWD": str(tmp_path)}, "--raise")
    assert r.returncode == 1 and r.stdout.startswith("FORKED")
    assert "Traceback" in r.stderr and "RuntimeError: probe" in r.stderr


def test_import_time_variable_differs_means_fresh_interpreter(sock, tmp_path):
    path, env, log = sock
    r = _client(path, {**env, "PROBE_CWD": str(tmp_path), "HF_HOME": str(tmp_path / "hf")})
    assert r.returncode == 3 and r.stdout.startswith("FRESH")
    assert "import-time variables differ: HF_HOME" in log.read_text()
    assert zygote.start(PROBE, [], tmp_path, {**env, "MLPERF_ZYGOTE": str(tmp_path / "absent")}) is None


def test_child_dies_with_its_client(sock, tmp_path):
    path, env, log = sock
    code = ("import os, sys, time; from code.common.harness import zygote; "
            "c = zygote.start(sys.argv[1], ['--sleep=120'], os.environ['PROBE_CWD'], dict(os.environ)); "
            "print(c.pid, flush=True); time.sleep(120)")
    p = subprocess.Popen([sys.executable, "-c", code, PROBE], cwd=Path(__file__).parents[1], text=True,
                         env={**env, "MLPERF_ZYGOTE": path, "PROBE_CWD": str(tmp_path)}, stdout=subprocess.PIPE)
    child = int(p.stdout.readline())
    os.kill(child, 0)                     # running
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"child {child} outlived its client; zygote log: {log.read_text()}")
