"""The file system fails under a run: a full disk, a read-only folder, a file where a folder belongs,
a damaged model or engine (issue 8, items 6, 7 and 10). Each is one line naming the path, with the
fix, exit 3, and nothing half-written left behind."""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_main
from tests.test_cli_errors import _assert_user_error


@contextlib.contextmanager
def _tmpfs(path: Path, size: str, *opts: str):
    """A small tmpfs at ``path`` (a full disk in a few KB, or read-only); skips where mount is refused."""
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join((f"size={size}", *opts)), "tmpfs", str(path)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"needs root and mount to make a small file system here: {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(mount: Path, leave: int = 0) -> None:
    """Fill ``mount`` up to ``leave`` free bytes."""
    free = shutil.disk_usage(mount).free - leave
    with open(mount / "filler", "wb") as f:
        try:
            f.write(b"\0" * max(0, free))
        except OSError:
            pass


def _partials(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".partial") or p.name.endswith(".download")]


def _private(tiny_resnet, tmp_path) -> dict:
    return {**tiny_resnet, "MLPERF_BUILD_DIR": str(tmp_path / "build")}


ENGINES = ("--action=generate_engines", "--benchmarks=resnet50", "--model_variant=tiny", "--scenarios=Offline")
RUN = ("--action=run_harness", "--benchmarks=resnet50", "--model_variant=tiny", "--scenarios=Offline",
       "--min_duration=100", "--min_query_count=1")


def test_disk_full_while_building_engines(tiny_resnet, tmp_path):
    with _tmpfs(tmp_path / "build", "256k") as build:
        _fill(build, leave=64 << 10)                   # the tiny engine needs more than what is left
        r = run_main(*ENGINES, env={**tiny_resnet, "MLPERF_BUILD_DIR": str(build)})
        _assert_user_error(r, 3, f"no space left on {build}", "MLPERF_BUILD_DIR")
        assert not _partials(build), _partials(build)


def test_disk_full_while_building_the_tiny_model(harness_env, tmp_path):
    """torch.save on a full scratch disk fails with its own words ("unexpected pos"), and deleting the partial
    file frees the space: the no-space error must come from the moment of the failure, naming the scratch disk."""
    with _tmpfs(tmp_path / "scratch", "128k") as scratch:
        r = run_main("--action=download_model", "--benchmarks=resnet50", "--model_variant=tiny",
                     env={**harness_env, "MLPERF_SCRATCH_PATH": str(scratch)})
        _assert_user_error(r, 3, f"no space left on {scratch}", "MLPERF_SCRATCH_PATH")
        assert not _partials(scratch), _partials(scratch)


@pytest.mark.parametrize("leave", [0, 24 << 10])
def test_disk_full_while_writing_logs(tiny_resnet, tmp_path, leave):
    """No room at all (the parent's first write fails), or room for the parent's files but not for
    LoadGen's logs and the child's result: the same one line, and no staging folder left."""
    env = _private(tiny_resnet, tmp_path)
    assert run_main(*ENGINES, env=env).returncode == 0
    with _tmpfs(tmp_path / "logs", "512k") as logs:
        _fill(logs, leave=leave)
        r = run_main(*RUN, "--test_mode=AccuracyOnly", f"--log_dir={logs}", env=env)
        _assert_user_error(r, 3, f"no space left on {logs}")
        assert not _partials(logs), _partials(logs)
        assert not list(logs.rglob("metadata.json"))


def test_read_only_log_folder_and_scratch(tiny_resnet, tmp_path):
    env = _private(tiny_resnet, tmp_path)
    assert run_main(*ENGINES, env=env).returncode == 0
    with _tmpfs(tmp_path / "ro", "64k", "ro") as ro:
        r = run_main(*RUN, f"--log_dir={ro / 'logs'}", env=env)
        _assert_user_error(r, 3, "read-only file system", str(ro / "logs"), "--log_dir")
        r = run_main("--action=download_model", "--benchmarks=resnet50", "--model_variant=tiny",
                     env={**env, "MLPERF_SCRATCH_PATH": str(ro / "scratch")})
        _assert_user_error(r, 3, "read-only file system", "MLPERF_SCRATCH_PATH")


def test_scratch_path_that_is_a_file(tmp_path):
    f = tmp_path / "scratch"
    f.write_text("not a folder")
    r = run_main("--action=download_model", "--benchmarks=resnet50", "--model_variant=tiny",
                 env={"MLPERF_BUILD_DIR": str(tmp_path / "b"), "MLPERF_SCRATCH_PATH": str(f)})
    _assert_user_error(r, 3, f"{f} is a file where a folder is needed", "MLPERF_SCRATCH_PATH")


def test_truncated_onnx_model_is_named_with_its_fix(tiny_resnet, tmp_path):
    src = Path(tiny_resnet["MLPERF_SCRATCH_PATH"]) / "models" / "resnet50" / "tiny"
    scratch = tmp_path / "scratch"
    shutil.copytree(src, scratch / "models" / "resnet50" / "tiny")
    onnx_file = scratch / "models" / "resnet50" / "tiny" / "resnet50_v1.onnx"
    onnx_file.write_bytes(onnx_file.read_bytes()[: onnx_file.stat().st_size // 3])
    r = run_main(*ENGINES, env={"MLPERF_BUILD_DIR": str(tmp_path / "b"), "MLPERF_SCRATCH_PATH": str(scratch)})
    _assert_user_error(r, 3, f"{onnx_file}: not a valid ONNX model",
                       "make download_model BENCHMARKS=resnet50 MODEL_VARIANT=tiny")
    assert not _partials(tmp_path / "b")


def test_damaged_engine_is_rebuilt_and_force_rebuild(tiny_resnet, tmp_path):
    """The engine's size and sha256 are recorded: a truncated engine, or one changed in place at the
    same size, is rebuilt; an intact one is reused; --force_rebuild builds regardless."""
    env = _private(tiny_resnet, tmp_path)
    first = run_main(*ENGINES, env=env)
    assert first.returncode == 0 and "[engine] build" in first.stdout, first.stdout + first.stderr
    [engine] = (tmp_path / "build" / "engines").rglob("resnet50-b*.onnx")
    assert "[engine] reuse" in run_main(*ENGINES, env=env).stdout
    data = bytearray(engine.read_bytes())
    data[-8:] = bytes(8)                                # same size, other content (and a new mtime)
    engine.write_bytes(bytes(data))
    r = run_main(*ENGINES, env=env)
    assert "[engine] build" in r.stdout and "sha256 differs" in r.stdout, r.stdout
    engine.write_bytes(engine.read_bytes()[:100])
    r = run_main(*ENGINES, env=env)
    assert "[engine] build" in r.stdout and "size" in r.stdout, r.stdout
    os.utime(engine)                                     # touched, not changed: the hash says intact
    assert "[engine] reuse" in run_main(*ENGINES, env=env).stdout
    r = run_main(*ENGINES, "--force_rebuild", env=env)
    assert r.returncode == 0 and "--force_rebuild" in r.stdout and "[engine] build" in r.stdout, r.stdout
    assert "[engine] reuse" in run_main(*ENGINES, env=env).stdout
