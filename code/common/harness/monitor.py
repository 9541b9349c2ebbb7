"""The run's monitor thread in the harness child: progress (samples done of expected, rate, ETA)
and the watchdog.

Watchdog: when samples are outstanding (issued, not completed) and the SUT made no progress for ``limit_s``
(``sut.progress``: completed samples; for the LLM SUT also first tokens, engine steps and streamed chunks, since a
reasoning model's answer can stream for minutes before it completes), the run is stopped: the stall (how long,
the counts, what each worker was doing) goes into child_result.json as the run's error, and the child exits at
once (LoadGen has no abort; its threads would wait forever). The parent records it in metadata.json like any failed run; the
staging folder is removed by the parent only on its own failures, so the run's folder holds the
record, and no submission tree is touched.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable

STALL_EXIT = 5


def expected_samples(ts, scenario: str, test_mode: str, total_count: int) -> int:
    """About how many samples LoadGen will issue (for the progress bar only): the whole set in an accuracy
    run, else what the scenario says (scenarios.Scenario.expected_samples)."""
    from code.common import scenarios

    return total_count if test_mode == "AccuracyOnly" else scenarios.get(scenario).expected_samples(ts)


class Monitor:
    def __init__(self, sut, limit_s: float, expected: int, desc: str, on_stall: Callable[[dict], None]):
        self.sut, self.limit_s, self.expected, self.desc, self.on_stall = sut, limit_s, expected, desc, on_stall
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="run-monitor", daemon=True)

    def start(self) -> "Monitor":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        from code.common import progress

        bar = progress.bar(total=self.expected or None, desc=self.desc, unit="sample")
        last, t_last = self.sut.progress, time.monotonic()
        shown = 0
        try:
            while not self._done.wait(min(1.0, max(self.limit_s / 4, 0.05))):
                now, done, moved = time.monotonic(), self.sut.completed, self.sut.progress
                if done > shown:
                    bar.update(done - shown)
                    shown = done
                if moved != last:
                    last, t_last = moved, now
                elif self.limit_s and self.sut.issued > done and now - t_last >= self.limit_s:
                    bar.close()
                    self.on_stall({"seconds": round(now - t_last, 1), "limit_s": self.limit_s, "completed": done,
                                   "issued": self.sut.issued, "state": self.sut.state()})
                    return
        finally:
            bar.close()


def stall_exit(stage: Path, result: dict, stall: dict) -> None:
    """Record the stall as the run's error and end the child now (code STALL_EXIT)."""
    result["stall"] = stall
    abort_exit(stage, result,
               f"watchdog: no sample completed and no progress for {stall['seconds']:g} s (limit {stall['limit_s']:g} s) "
               f"with {stall['issued'] - stall['completed']} outstanding; {stall['state']}",
               "check the backend and device (a hang in the inference library?); if batches really take "
               "this long, raise --watchdog_s", tag="watchdog")


_AT_ABORT: list[Callable[[], None]] = []


def at_abort(fn: Callable[[], None]) -> None:
    """Run ``fn`` (at most 5 s) before ``abort_exit`` ends the process: what atexit would have done,
    e.g. stopping the private Ray cluster this child started."""
    _AT_ABORT.append(fn)


def abort_exit(stage: Path, result: dict, error: str, fix: str, exit_code: int = 4, tag: str = "run") -> None:
    """End the child now with ``error`` as the run's result (LoadGen has no abort; its threads would
    wait forever): child_result.json is written, the ``at_abort`` hooks run, then the process exits with
    STALL_EXIT."""
    from code.common.fileio import write_json

    result["error"], result["error_fix"], result["error_exit_code"] = error, fix, exit_code
    print(f"[{tag}] {error}", flush=True)
    try:
        write_json(stage / "child_result.json", result)
    finally:
        for fn in _AT_ABORT:
            t = threading.Thread(target=fn, daemon=True)
            t.start()
            t.join(timeout=5)
        os._exit(STALL_EXIT)
