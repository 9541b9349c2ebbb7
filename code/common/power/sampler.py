"""Informative power of one run: sources read in a background thread while LoadGen runs, summed over LoadGen's
own power window (``power_begin`` .. ``power_end`` in mlperf_log_detail.txt, UTC) into metadata.json ``power``.

Not a submission measurement (that is ``code.common.power.ptd``): NVML reads the GPU boards only, RAPL the CPU
packages only; neither sees the power supplies, fans, memory or disks a wall meter sees.
"""
from __future__ import annotations

import datetime as dt
import re
import threading
import time
from pathlib import Path
from typing import Callable

INTERVAL_S = 0.1
TRACE_POINTS = 240            # the trace kept in metadata.json for the report's picture (downsampled)
_WINDOW = re.compile(r'"key"\s*:\s*"(power_begin|power_end)"\s*,\s*"value"\s*:\s*"([^"]+)"')


class Sampler:
    """``with Sampler(sources):`` reads every source each ``interval_s`` (and once at each end)."""

    def __init__(self, sources: list, interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.time):
        self.sources, self.interval_s, self.clock = sources, interval_s, clock
        self.rows: list[tuple[float, list[float]]] = []       # (wall time, cumulative joules per source)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _read(self) -> None:
        try:
            self.rows.append((self.clock(), [s.read() for s in self.sources]))
        except Exception as e:     # a source gone mid-run: the run goes on, the record says so
            if len(self.errors) < 3:
                self.errors.append(f"{type(e).__name__}: {e}")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._read()

    def __enter__(self) -> "Sampler":
        if self.sources:
            self._read()
            self._thread = threading.Thread(target=self._loop, name="power-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._read()


def stamp_seconds(value: str) -> float:
    """POSIX seconds of a LoadGen / PTDaemon timestamp ("12-06-2026 21:04:05.123", UTC)."""
    return dt.datetime.strptime(value, "%m-%d-%Y %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc).timestamp()


def detail_window(detail: str | Path) -> tuple[float, float] | None:
    """LoadGen's power window (power_begin, power_end; POSIX seconds) of a detail log; None when it has none."""
    found = {}
    for key, value in _WINDOW.findall(Path(detail).read_text(errors="replace")):
        found.setdefault(key, stamp_seconds(value))
    if "power_begin" in found and "power_end" in found:
        return found["power_begin"], found["power_end"]
    return None


def loadgen_window(log_dir: str | Path) -> tuple[float, float] | None:
    """The power window of the run in ``log_dir``; None when LoadGen logged none (or no detail log)."""
    try:
        return detail_window(Path(log_dir) / "mlperf_log_detail.txt")
    except OSError:
        return None


def _energy_at(rows: list, t: float, i: int) -> float:
    """Cumulative joules of source i at time t, interpolated between readings (clamped at the ends)."""
    if t <= rows[0][0]:
        return rows[0][1][i]
    for (t0, e0), (t1, e1) in zip(rows, rows[1:]):
        if t <= t1:
            return e0[i] + (e1[i] - e0[i]) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)
    return rows[-1][1][i]


def summarize(sampler: Sampler, window: tuple[float, float] | None, samples: int | None) -> dict:
    """metadata.json ``power``: energy and average watts per source and in all over the window, joules per
    completed sample, and a downsampled watts-over-time trace (seconds from the window's start)."""
    rows = sampler.rows
    names = [s.name for s in sampler.sources]
    rec: dict = {"available": True, "sources": {s.name: s.describe for s in sampler.sources},
                 "informative": "NVML board / RAPL package readings, not a wall-meter measurement"}
    if sampler.errors:
        rec["errors"] = sampler.errors
    if len(rows) < 2:
        return {**rec, "available": False, "reason": "fewer than two power readings during the run"}
    begin, end = window if window else (rows[0][0], rows[-1][0])
    begin, end = max(begin, rows[0][0]), min(end, rows[-1][0])
    rec["window"] = "loadgen power_begin..power_end" if window else "StartTest (LoadGen logged no power window)"
    span = max(end - begin, 1e-9)
    energy = {n: _energy_at(rows, end, i) - _energy_at(rows, begin, i) for i, n in enumerate(names)}
    energy["total"] = sum(energy.values())
    rec.update({"window_s": round(span, 4), "readings": sum(1 for t, _ in rows if begin <= t <= end),
                "energy_j": {k: round(v, 4) for k, v in energy.items()},
                "avg_watts": {k: round(v / span, 3) for k, v in energy.items()}})
    if samples:
        rec["energy_per_sample_j"] = {k: round(v / samples, 6) for k, v in energy.items()}
    # watts between consecutive readings, inside the window
    t_s, watts = [], {n: [] for n in names}
    for (t0, e0), (t1, e1) in zip(rows, rows[1:]):
        if t1 <= begin or t0 >= end or t1 <= t0:
            continue
        t_s.append(round((t0 + t1) / 2 - begin, 3))
        for i, n in enumerate(names):
            watts[n].append(round((e1[i] - e0[i]) / (t1 - t0), 2))
    step = max(1, -(-len(t_s) // TRACE_POINTS))
    rec["trace"] = {"t_s": t_s[::step], **{f"{n}_w": w[::step] for n, w in watts.items()}}
    return rec


def text(power: dict | None) -> str:
    """The result table's power cell: "312.4 W (gpu 280.1, cpu 32.3), 1.92 J/sample" or "-"."""
    if not power or not power.get("available"):
        return "-"
    avg = power.get("avg_watts") or {}
    parts = ", ".join(f"{k} {v:.1f}" for k, v in avg.items() if k != "total")
    out = f"{avg.get('total', 0):.1f} W ({parts})"
    eps = (power.get("energy_per_sample_j") or {}).get("total")
    if eps is not None:
        out += f", {eps:.4g} J/sample"
    return out


def for_run(log=print) -> Sampler:
    """The sampler of one LoadGen run over the sources detected here; says in one line when there are none."""
    from code.common.power.sources import detect

    found, why = detect()
    s = Sampler(found)
    s.why_none = why
    if why:
        log(f"[power] {why}")
    return s


def record(s: Sampler, log_dir: str | Path, samples: int | None) -> dict:
    """metadata.json ``power`` of a run sampled by ``for_run``."""
    if not s.sources:
        return {"available": False, "reason": getattr(s, "why_none", None) or "no power source"}
    return summarize(s, loadgen_window(log_dir), samples)
