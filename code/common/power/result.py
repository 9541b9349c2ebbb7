"""A power run's place in the run records and the submission tree.

The client (``ptd.run``) marks the two harness runs it wrapped in their metadata.json: ``power_run`` =
``{"role": "ranging"|"testing", "session", "performance_dir"}``. Staging (make update_results) never stages a
ranging run, prefers a testing run, and beside its run_1/ lays ranging/, power/ and run_1/spl.txt out of the
power result folder; export copies them to the official tree (the checker's POWER_DIR_PATH and its
ranging/ and run_1/ beside it).
"""
from __future__ import annotations

import json
from pathlib import Path

from code.common.fileio import write_json

RANGING_FILES = ("mlperf_log_detail.txt", "mlperf_log_summary.txt", "spl.txt")
POWER_FILES = ("client.json", "client.log", "ptd_logs.txt", "server.json", "server.log")


def mark_run(run_dir: Path, role: str, session: str, performance_dir: Path) -> None:
    """Record ``power_run`` in a harness run's metadata.json (a run folder without one is left alone)."""
    p = Path(run_dir) / "metadata.json"
    try:
        meta = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    meta["power_run"] = {"role": role, "session": session, "performance_dir": str(performance_dir)}
    write_json(p, meta)


def _copy(src: Path, dst: Path, names) -> None:
    from code.common.submission.tree import link_or_copy

    for n in names:
        if (src / n).is_file():
            link_or_copy(src / n, dst / n)


def stage(meta: dict, perf_dst: Path) -> None:
    """Lay a testing run's power result beside its staged run_1/ (``perf_dst``: .../<scenario>/performance)."""
    pr = meta.get("power_run") or {}
    if pr.get("role") != "testing":
        return
    src = Path(pr.get("performance_dir") or "")
    if not (src / "power" / "client.json").is_file():
        from code.common.errors import HarnessError

        raise HarnessError(f"the power result {src} of run {meta.get('log_dir')} is gone",
                           "restore it, or remove power_run from that run's metadata.json to stage it without power")
    _copy(src / "ranging", perf_dst / "ranging", RANGING_FILES)
    _copy(src / "power", perf_dst / "power", POWER_FILES)
    _copy(src / "run_1", perf_dst / "run_1", ("spl.txt",))


def export(perf_src: Path, perf_dst: Path) -> None:
    """Copy a staged power result to the exported tree (nothing when the scenario has none)."""
    if not (perf_src / "power").is_dir():
        return
    _copy(perf_src / "ranging", perf_dst / "ranging", RANGING_FILES)
    _copy(perf_src / "power", perf_dst / "power", POWER_FILES)
    _copy(perf_src / "run_1", perf_dst / "run_1", ("spl.txt",))
