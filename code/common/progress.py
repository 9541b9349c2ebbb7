"""Progress bars for long steps (downloads, preprocessing, engine builds, runs), with tqdm, on stderr.

On only when stderr is a terminal and not under CI (``CI`` set) or ``MLPERF_PROGRESS=0``: logs and
pipes get the plain one-line messages only. stdout is never written to.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Iterator


def enabled() -> bool:
    return sys.stderr.isatty() and not os.environ.get("CI") and os.environ.get("MLPERF_PROGRESS", "1") != "0"


def bar(total: float | None = None, desc: str = "", unit: str = "it", unit_scale: bool = False):
    """A tqdm bar on stderr (a disabled one, which ignores every call, when progress is off)."""
    import shutil

    from tqdm import tqdm

    size = shutil.get_terminal_size((100, 24))    # a pty with no size set reports 0x0: tqdm would print nothing
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale, disable=not enabled(), file=sys.stderr,
                leave=False, ncols=size.columns, nrows=size.lines, mininterval=0.5)


@contextlib.contextmanager
def waiting(desc: str) -> Iterator[None]:
    """An elapsed-time line for one blocking call that reports no progress of its own (an engine build)."""
    if not enabled():
        yield
        return
    stop = threading.Event()
    b = bar(desc=desc, unit="s")
    t0 = time.monotonic()

    def tick() -> None:
        while not stop.wait(0.5):
            b.set_postfix_str(f"{time.monotonic() - t0:.0f}s elapsed", refresh=True)

    t = threading.Thread(target=tick, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        b.close()
