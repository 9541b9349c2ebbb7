"""Stopping a run: SIGTERM cleans up like Ctrl-C, the child dies with its parent, stale staging is removed."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from code.common.fileio import clean_stale_partials, partial_prefix
from tests.conftest import REPO, offline_samples


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_partials_of_dead_owners_are_removed(tmp_path):
    from code.common.fileio import _host, sweep_stale_partials

    dead = _dead_pid()
    stale_dir = tmp_path / f".performance.pid{dead}-{_host()}.x1y2.partial"
    stale_file = tmp_path / f".engine.onnx.pid{dead}-{_host()}.abc.onnx.partial"
    other_host = tmp_path / f".performance.pid{dead}-some-other-box.x1y2.partial"   # maybe alive there
    mine = tmp_path / f"{partial_prefix(tmp_path / 'accuracy')}q9.partial"
    for d in (stale_dir, mine, other_host):
        d.mkdir()
    stale_file.write_text("half")
    (tmp_path / "performance").mkdir()           # a finished run is never touched
    removed = clean_stale_partials(tmp_path)
    assert sorted(removed) == sorted([stale_dir, stale_file])
    assert mine.exists() and other_host.exists() and (tmp_path / "performance").exists()
    deep = tmp_path / "logs" / "2026.01.01-00.00.00-abcd" / "sys" / "resnet50" / "Offline"
    deep.mkdir(parents=True)
    (deep / f".performance.pid{dead}-{_host()}.zz.partial").mkdir()
    assert sweep_stale_partials(tmp_path / "logs") == [deep / f".performance.pid{dead}-{_host()}.zz.partial"]


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start_long_run(env: dict, log_dir: Path) -> tuple[subprocess.Popen, int]:
    """A tiny ResNet50 Offline run that would take 10 minutes; returns (parent, harness child pid)."""
    e = dict(os.environ, **env, PYTHONUNBUFFERED="1")
    e.pop("MLPERF_ZYGOTE", None)       # the child must be this run's own, found by its command line
    p = subprocess.Popen([sys.executable, "-m", "code.main", "--action=run_harness", "--benchmarks=resnet50",
                          "--scenarios=Offline", "--model_variant=tiny", "--min_duration=600000",
                          f"--log_dir={log_dir}"], cwd=REPO, env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 300
    while time.time() < deadline:
        kids = [k for k in _children(p.pid) if "code.common.harness.child" in Path(f"/proc/{k}/cmdline").read_text()]
        if kids and list(log_dir.rglob("*.partial")):
            return p, kids[0]
        assert p.poll() is None, p.stdout.read()
        time.sleep(0.2)
    p.kill()
    pytest.fail("the harness child never started")


@pytest.mark.timeout(600)
def test_runner_sigterm_stops_child_and_removes_staging(tiny_resnet, tmp_path):
    log_dir = tmp_path / "logs"
    p, child = _start_long_run(tiny_resnet, log_dir)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 130, out
    assert "interrupted" in out and "Traceback" not in out
    deadline = time.time() + 15
    while _alive(child) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(child)
    assert not list(log_dir.rglob("*.partial")) and not list(log_dir.rglob("metadata.json"))
    # nor the empty <system>/<benchmark>/<scenario> folders it made; the --log_dir named stays
    assert log_dir.is_dir() and not list(log_dir.iterdir()), sorted(log_dir.rglob("*"))


@pytest.mark.timeout(600)
def test_runner_child_dies_with_a_killed_parent_and_next_run_cleans(tiny_resnet, tmp_path):
    log_dir = tmp_path / "logs"
    p, child = _start_long_run(tiny_resnet, log_dir)
    p.kill()
    p.communicate(timeout=60)
    deadline = time.time() + 15
    while _alive(child) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "the harness child outlived its SIGKILLed parent"
    left = list(log_dir.rglob("*.partial"))
    assert left                                     # nothing could clean up after SIGKILL...
    from code.common.fileio import clean_stale_partials as clean

    assert sorted(clean(left[0].parent)) == sorted(left)   # ...until the next run in that folder


def test_runner_never_replaces_an_earlier_run_without_overwrite(tiny_resnet, tmp_path):
    from code.common.errors import HarnessError
    from code.common.harness.runner import run_one, timestamp
    from code.common.settings import RunControl
    from code.main import plan
    from tests.conftest import run_main

    assert len({timestamp() for _ in range(20)}) == 20          # same second, distinct run folders
    _, [s] = plan(["--action=run_harness", "--benchmarks=resnet50", "--scenarios=Offline", "--model_variant=tiny",
                   *offline_samples(512)])
    d = tmp_path / "run"
    first = run_one(s, RunControl(null_processor=True), d, {})
    with pytest.raises(HarnessError, match="already holds") as e:
        run_one(s, RunControl(null_processor=True), d, {})
    assert "--overwrite" in e.value.fix and (d / "metadata.json").read_text().count(first["finished"])
    second = run_one(s, RunControl(null_processor=True, overwrite=True), d, {})
    assert second["finished"] >= first["finished"] and not list(tmp_path.glob(".*partial"))
    mask = os.umask(0)
    os.umask(mask)                                   # results follow the umask, like any file (not 0600/0700)
    assert d.stat().st_mode & 0o777 == 0o777 & ~mask
    assert (d / "metadata.json").stat().st_mode & 0o777 == 0o666 & ~mask
    # the CLI refuses before doing any work
    logs = tmp_path / "logs"
    (logs / f"{s.system_name}/resnet50/Offline/performance").mkdir(parents=True)
    r = run_main("--action=run_harness", "--benchmarks=resnet50", "--scenarios=Offline", "--model_variant=tiny",
                 f"--log_dir={logs}", env=tiny_resnet)
    assert r.returncode == 2 and "already holds" in r.stderr and "[run]" not in r.stdout, r.stdout + r.stderr


def test_runner_names_the_signal_that_ended_the_child():
    from code.common.harness.runner import child_exit_reason

    assert "SIGKILL" in child_exit_reason(-9) and "out-of-memory" in child_exit_reason(-9)
    assert "SIGBUS" in child_exit_reason(-7) and "changed" in child_exit_reason(-7)
    assert child_exit_reason(3) == "harness child exited with code 3"


@pytest.mark.timeout(600)
def test_runner_child_killed_is_recorded_with_its_signal(tiny_resnet, tmp_path):
    """SIGKILL to the child alone (what the OOM killer does): the parent records why and exits 4."""
    import json

    log_dir = tmp_path / "logs"
    p, child = _start_long_run(tiny_resnet, log_dir)
    os.kill(child, signal.SIGKILL)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 4 and "SIGKILL" in out and "Traceback" not in out, out
    [meta] = [json.loads(m.read_text()) for m in log_dir.rglob("metadata.json")]
    assert meta["status"] == "error" and "SIGKILL" in meta["error"]
    assert not list(log_dir.rglob("*.partial"))


def test_make_run_accepts_run_harness_flags():
    """`make run` = generate_engines + run_harness with one RUN_ARGS: flags of either step are accepted."""
    from code.common.errors import HarnessError
    from code.main import plan

    args = ["--benchmarks=sdxl", "--scenarios=Server", "--test_mode=AccuracyOnly", "--fast", "--model_variant=tiny"]
    cli, [s] = plan(["--action=run", *args])
    assert cli["test_mode"] == "AccuracyOnly" and s.fast
    with pytest.raises(HarnessError, match="does not apply to --action=generate_engines"):
        plan(["--action=generate_engines", *args])
    with pytest.raises(HarnessError, match="does not apply"):
        plan(["--action=run", "--benchmarks=resnet50", "--audit_test=TEST01"])   # applies to no step of run
    r = subprocess.run(["make", "-n", "run", f"RUN_ARGS={' '.join(args)}", "VENV=/nonexistent-venv"], cwd=REPO,
                       capture_output=True, text=True)
    assert "--action=run " in r.stdout and "--test_mode=AccuracyOnly" in r.stdout, r.stdout
