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


def missing(performance_dir: Path) -> list[str]:
    """The files a power result folder (``ptd.run``'s output, or a staged .../<scenario>/performance) lacks, relative
    to it: power/ with the server's and client's logs, ranging/ and run_1/ each with LoadGen's logs and spl.txt."""
    d = Path(performance_dir)
    return [f"{sub}/{n}" for sub, names in (("power", POWER_FILES), ("ranging", RANGING_FILES),
                                            ("run_1", RANGING_FILES)) for n in names if not (d / sub / n).is_file()]


def mark_run(run_dir: Path, role: str, session: str, performance_dir: Path) -> None:
    """Record ``power_run`` in a harness run's metadata.json (a run folder without one is left alone)."""
    p = Path(run_dir) / "metadata.json"
    try:
        meta = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    meta["power_run"] = {"role": role, "session": session, "performance_dir": str(performance_dir)}
    write_json(p, meta)


def attach(performance_dir: str | Path, logs: str | Path, log=print) -> dict[str, Path]:
    """Mark the harness runs a power result was made of, found under ``logs`` by the SHA-1 its client.json
    recorded for ranging/ and run_1/mlperf_log_detail.txt. For results of power-dev's own client (the one a
    submission must use): ``python power-dev/ptd_client_server/client.py ... -w "make run_harness RUN_ARGS='...'"
    -L build/logs/power -o <out>``, then ``python -m code.common.power.result --attach <out>/<session>
    --logs build/logs/power``, then make update_results."""
    import hashlib

    from code.common.errors import HarnessError

    perf = Path(performance_dir)
    try:
        client = json.loads((perf / "power" / "client.json").read_text(encoding="utf-8"))
        want = {client["results"][f"{folder}/mlperf_log_detail.txt"]: role
                for folder, role in (("ranging", "ranging"), ("run_1", "testing"))}
        session = client["session_name"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise HarnessError(f"{perf} is not a power result folder (power/client.json: {type(e).__name__})",
                           "point --attach at the folder holding power/, ranging/ and run_1/") from None
    found: dict[str, Path] = {}
    for meta in sorted(Path(logs).rglob("metadata.json")):
        detail = meta.parent / "mlperf_log_detail.txt"
        if detail.is_file():
            role = want.get(hashlib.sha1(detail.read_bytes()).hexdigest())
            if role:
                found[role] = meta.parent
    missing = [r for r in ("ranging", "testing") if r not in found]
    if missing:
        raise HarnessError(f"no harness run under {logs} has the {' and '.join(missing)} log of {perf}",
                           "give --logs the folder the power client's workload wrote its runs to (its -L)")
    for role, run_dir in found.items():
        mark_run(run_dir, role, session, perf.resolve())
        log(f"[power] {run_dir}: the {role} run of power session {session}")
    return found


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


def main(argv: list[str] | None = None) -> int:
    import argparse

    from code.common.errors import HarnessError

    p = argparse.ArgumentParser(description="Attach a power result (power-dev's client output) to its harness runs.")
    p.add_argument("--attach", required=True, help="the power result folder: power/, ranging/, run_1/")
    p.add_argument("--logs", default="build/logs", help="where the workload's harness runs are")
    a = p.parse_args(argv)
    try:
        attach(a.attach, a.logs)
    except HarnessError as e:
        print(e.render())
        return e.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
