"""Run the test suite on a starved CPU and say how long it took: the suite must pass on a machine
several times slower than this one, or busy with another job (issue 8, item 15).

  --load N     N busy-loop processes beside the suite (stress-ng --cpu N when installed, else
               Python spinners), so the suite gets a fraction of the cores
  --one-core   the suite pinned to one core (taskset -c 0)

Both may be combined. The suite runs as `make test` runs it (its pytest-xdist workers, the official
tools' folder, the failure log), so the figure is the one CI's budget is about. Prints the pytest
summary line and the wall time; exits with make's code.

usage: python scripts/test_under_load.py [--load 2] [--one-core] [-- PYTEST_ARGS...]
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SPIN = "import signal, sys\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\nwhile True:\n    pass\n"


def start_load(n: int) -> list[subprocess.Popen]:
    """Busy processes that die with this script (a parent-death signal), even if it is killed."""
    from code.common.harness.runner import death_signal_hook

    if n <= 0:
        return []
    if shutil.which("stress-ng"):
        return [subprocess.Popen(["stress-ng", "--cpu", str(n), "--quiet"], start_new_session=True,
                                 preexec_fn=death_signal_hook())]
    return [subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True, preexec_fn=death_signal_hook())
            for _ in range(n)]


def stop_load(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--load", type=int, default=0, help="busy-loop processes beside the suite")
    ap.add_argument("--one-core", action="store_true", help="pin the suite to CPU 0 (taskset -c 0)")
    ap.add_argument("pytest_args", nargs="*")
    a = ap.parse_args()
    cmd = ["make", "--no-print-directory", "test", f"PYTEST_ARGS={' '.join(a.pytest_args)}"]
    if a.one_core:
        if not shutil.which("taskset"):
            print("error: taskset not found\n  fix: apt-get install util-linux", file=sys.stderr)
            return 2
        cmd = ["taskset", "-c", "0", *cmd]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))    # run the finally below: stop the load
    load = start_load(a.load)
    tool = "stress-ng" if load and shutil.which("stress-ng") else "python spinners" if load else "none"
    t0 = time.time()
    try:
        r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    finally:
        stop_load(load)
    wall = time.time() - t0
    tail = [ln for ln in r.stdout.strip().splitlines() if ln.strip()]
    Path(REPO / "build").mkdir(exist_ok=True)
    (REPO / "build" / "test_under_load.log").write_text(r.stdout + r.stderr)
    print(f"load: {a.load} busy processes ({tool}); one core: {a.one_core}")
    print(f"pytest: {tail[-1] if tail else '(no output)'}")
    print(f"wall: {wall:.0f} s ({wall / 60:.1f} min); exit code {r.returncode}; full log build/test_under_load.log")
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
