"""``make report``: the selected runs as a page a person reads.

Reads each run's metadata.json (LoadGen's detail-log figures are in it), its sample timeline
(``code.common.harness.timeline``) and, for SDXL accuracy runs, its compliance images; writes into
``build/report`` (or ``--report_dir``), staged and swapped in whole:

- ``index.html``: the summary table (system, benchmark, scenario, mode, metric, validity, accuracy as
  % of the reference and of the target) and per run: latency histogram, percentile curve (SUT side
  with LoadGen's percentiles), throughput over time, TTFT/TPOT distributions for LLMs, SDXL's
  compliance images with their captions;
- ``summary.json``: the rows as data; ``summary.md``: the table in Markdown;
- ``img/``: the pictures, named by what they are drawn from (``picture_key``): a new report over the same
  folder links the pictures of unchanged runs instead of drawing them again.

A large report draws its pictures in worker processes (one per usable core) under one progress bar;
scripts/bench_report.py measures it over generated runs.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np

from code.common import paths, progress, scenarios
from code.common.harness import timeline
from code.common.errors import HarnessError
from code.common.fileio import claim_dir, staged_dir, write_json, write_text
from code.common.report import page, plots, rows as rows_mod
from code.common.results.selection import Run, scan

FIRST_RUN = 'make run_harness RUN_ARGS="--benchmarks=resnet50 --model_variant=tiny --fast" first'


def default_roots() -> list[Path]:
    from code.common.results.records import latest_logs

    latest = latest_logs()
    if latest is None:
        raise HarnessError("no runs to report: build/logs/LATEST names no invocation",
                           f'{FIRST_RUN}, or name runs: make report RUN_ARGS="--report_logs=build/logs"')
    return [latest]


def select(cli: dict) -> tuple[list[Run], list[Path]]:
    roots = [Path(p) for p in cli.get("report_logs") or ()] or default_roots()
    for r in roots:
        if not r.is_dir():
            raise HarnessError(f"--report_logs: {r} is not a folder",
                               'name run folders or folders holding them: make report RUN_ARGS="--report_logs=build/logs"')
    runs, problems = scan(roots)
    for p in problems:
        print(f"warning: skipped {p}", file=sys.stderr)
    wanted_b = _benchmarks(cli.get("benchmarks") or ())
    wanted_s = {s.lower() for s in cli.get("scenarios") or ()}
    runs = [r for r in runs if (not wanted_b or r.meta.get("benchmark") in wanted_b)
            and (not wanted_s or "all" in wanted_s or str(r.meta.get("scenario", "")).lower() in wanted_s)]
    if not runs:
        raise HarnessError(f"no runs under {', '.join(map(str, roots))}"
                           + (" for the benchmarks / scenarios asked for" if wanted_b or wanted_s else ""),
                           f"{FIRST_RUN}, or point --report_logs at folders holding metadata.json files")
    runs.sort(key=lambda r: (str(r.meta.get("system_name")), str(r.meta.get("benchmark")),
                             str(r.meta.get("scenario")), str(r.meta.get("test_mode")), r.when))
    return runs, roots


def _benchmarks(names) -> set[str]:
    from code.common import benchmarks as B

    if not names or "all" in names:
        return set()
    return {B.resolve(n).name for n in names}     # aliases (resnet, stable-diffusion-xl) and a did-you-mean


def _pct(a: np.ndarray, p: float) -> float:
    return round(float(np.percentile(a, p)), 4)


PICTURES_VERSION = 1           # bump when a picture's drawing changes: the cache of earlier reports is then ignored
POOL_FROM = 8                  # runs with pictures from which they are drawn in worker processes


def picture_key(run: Run) -> str:
    """What a run's pictures are drawn from: its folder, its record and its timeline (path, size, mtime), and the
    drawing code's version. Pictures of an earlier report with this key in their names are reused as they are."""
    parts = [PICTURES_VERSION, str(run.dir.resolve())]
    for f in ("metadata.json", timeline.FILE):
        try:
            st = (run.dir / f).stat()
            parts += [st.st_size, st.st_mtime_ns]
        except OSError:
            parts.append(None)
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def pictures(run: Run, r: dict, img: Path, reuse: Path | None = None) -> tuple[list[dict], dict, str | None]:
    """Draw the run's pictures into ``img`` (or link them from ``reuse``, an earlier report's img/, when it holds
    them under this run's picture_key): (the pictures, the SUT-side figures for the row, a problem or None).
    Runs in a worker process when the report is large (``build``)."""
    if r["mode"] == "Accuracy":
        return [], {}, None
    try:
        tl = timeline.load(run.dir)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        return [], {}, f"{run.dir / timeline.FILE}: unreadable sample timeline ({type(e).__name__}), drawn without it"
    if tl is None or tl["issue_s"].size == 0:
        return [], {}, None
    key = picture_key(run)
    title = f"{r['submission_name'] or r['benchmark']} {r['scenario']} ({r['system']})"
    lat = (tl["done_s"] - tl["issue_s"]) * 1e3
    add = {"sut_latency_ms": {"samples": int(lat.size), "mean": round(float(lat.mean()), 4),
                              **{f"p{p:g}": _pct(lat, p) for p in (50, 90, 99)}, "max": round(float(lat.max()), 4)}}

    def draw(kind: str, title_: str, fn, *args, **kw) -> tuple[str, str, str | None]:
        out = img / f"{key}-{kind}.png"
        old = reuse / out.name if reuse is not None else None
        if old is not None and old.is_file():
            try:
                os.link(old, out)
            except OSError:
                shutil.copy2(old, out)
            return kind, title_, out.name
        return kind, title_, fn(*args, out, title, **kw)

    eff = run.meta.get("effective") or {}
    bound_ns = eff.get("effective_target_latency_ns") if scenarios.get(r["scenario"]).runs_as_server else None
    out = [draw("latency-hist", "Latency histogram", plots.latency_histogram, lat),
           draw("latency-pct", "Latency by percentile", plots.percentile_curve, lat, r["loadgen_percentiles_ms"],
                bound_ms=bound_ns / 1e6 if bound_ns else None)]
    if "tokens" in tl:
        tokens = tl["tokens"]
        ttft = (tl["first_s"] - tl["issue_s"]) * 1e3
        many = tokens > 1
        tpot = (tl["done_s"][many] - tl["first_s"][many]) / (tokens[many] - 1) * 1e3
        add["sut_token_latency_ms"] = {"ttft_p50": _pct(ttft, 50), "ttft_p99": _pct(ttft, 99),
                                       "tpot_p50": _pct(tpot, 50) if tpot.size else 0.0,
                                       "tpot_p99": _pct(tpot, 99) if tpot.size else 0.0}
        tok = r.get("tokens") or {}

        def ms(k):
            return tok[k] / 1e6 if tok.get(k) else None
        out += [draw("tokens", "TTFT and TPOT distributions", plots.token_latencies, ttft, tpot,
                     ttft_bound_ms=ms("ttft_limit_ns"), tpot_bound_ms=ms("tpot_limit_ns")),
                draw("throughput", "Tokens per second over the run", plots.throughput, tl["done_s"],
                     unit="tokens/s", weights=tokens.astype(float))]
    else:
        out.append(draw("throughput", "Samples per second over the run", plots.throughput, tl["done_s"]))
    trace = (run.meta.get("power") or {}).get("trace")
    if trace:
        out.append(draw("power", "Informative power over the run (NVML, RAPL)", plots.power_over_time, trace))
    return [{"kind": k, "title": t, "file": f} for k, t, f in out if f], add, None


def _pictures_job(job: tuple) -> tuple[list[dict], dict, str | None]:
    return pictures(*job)


def images(run: Run, r: dict, img: Path) -> list[dict]:
    """SDXL accuracy runs: the compliance images (images/<qsl_idx>.png) with their captions."""
    folder = run.dir / "images"
    if not folder.is_dir():
        return []
    captions = {}
    if (folder / "captions.txt").exists():
        for line in (folder / "captions.txt").read_text(encoding="utf-8").splitlines():
            idx, _, cap = line.partition("  ")
            captions[idx.strip()] = cap.strip()
    out = []
    for png in sorted(folder.glob("*.png"), key=lambda p: (len(p.stem), p.stem)):
        name = f"{r['id']}-sdxl-{png.stem}.png"
        shutil.copy2(png, img / name)
        out.append({"qsl_idx": png.stem, "caption": captions.get(png.stem, ""), "file": name})
    return out


def build(runs: list[Run], roots: list[Path], out: Path, reuse: Path | None = None, workers: int | None = None) -> dict:
    """Write the report into ``out`` (a fresh folder); returns summary.json's content. ``reuse``: an earlier
    report's img/ whose pictures of unchanged runs are linked, not drawn again. The pictures are drawn in up to
    ``workers`` processes (default: one per usable core) when POOL_FROM or more runs have them; one progress
    bar counts the runs."""
    img = out / "img"
    img.mkdir(parents=True)
    table = []
    for i, run in enumerate(runs, 1):
        r = rows_mod.row(run)
        r["id"] = f"run{i:02d}"
        table.append(r)
    jobs = [(run, r, img, reuse) for run, r in zip(runs, table)]
    drawn = sum(r["mode"] != "Accuracy" for r in table)
    workers = workers or min(len(os.sched_getaffinity(0)), 8)
    with progress.bar(total=len(jobs), desc="report", unit="run") as bar:
        if workers > 1 and drawn >= POOL_FROM:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
                results = []
                for res in pool.map(_pictures_job, jobs, chunksize=max(1, len(jobs) // (workers * 8))):
                    results.append(res)
                    bar.update()
        else:
            results = []
            for job in jobs:
                results.append(pictures(*job))
                bar.update()
    for (run, r, _, _), (pics, add, problem) in zip(jobs, results):
        if problem:
            print(f"warning: {problem}", file=sys.stderr)
        r.update(add)
        r["pictures"] = pics
        r["images"] = images(run, r, img)
    info = {"generated": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
            "sources": [str(p) for p in roots]}
    summary = {"schema": 1, **info, "runs": table}
    write_json(out / "summary.json", summary)
    write_text(out / "summary.md", page.markdown(table))
    write_text(out / "index.html", page.page(table, info))
    return summary


def is_report(folder: Path) -> bool:
    """Did make report write ``folder``? Its summary.json says so (a report replaces its own folder whole,
    pictures of runs no longer selected included)."""
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and "schema" in summary and "runs" in summary


def report(cli: dict) -> int:
    final = Path(cli.get("report_dir") or paths.build_dir() / "report")
    claim_dir(final, is_report, "--report_dir", f'name an empty or new folder: make report RUN_ARGS="--report_dir='
              f'{final / "report"}"')
    runs, roots = select(cli)
    reuse = final / "img" if is_report(final) and (final / "img").is_dir() else None
    with staged_dir(final) as tmp:
        summary = build(runs, roots, tmp, reuse=reuse)
    n_pics = sum(len(r["pictures"]) + len(r["images"]) for r in summary["runs"])
    print(page.markdown(summary["runs"]), end="")
    print(f"\nwrote {final / 'index.html'} ({len(runs)} run(s), {n_pics} picture(s)); "
          f"data: {final / 'summary.json'}, table: {final / 'summary.md'}")
    return 0
