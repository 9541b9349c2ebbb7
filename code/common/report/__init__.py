"""``make report``: the selected runs as a page a person reads.

Reads each run's metadata.json (LoadGen's detail-log figures are in it), its sample timeline
(``code.common.harness.timeline``) and, for SDXL accuracy runs, its compliance images; writes into
``build/report`` (or ``--report_dir``), staged and swapped in whole:

- ``index.html``: the summary table (system, benchmark, scenario, mode, metric, validity, accuracy as
  % of the reference and of the target) and per run: latency histogram, percentile curve (SUT side
  with LoadGen's percentiles), throughput over time, TTFT/TPOT distributions for LLMs, SDXL's
  compliance images with their captions;
- ``summary.json``: the rows as data; ``summary.md``: the table in Markdown;
- ``img/``: the pictures.
"""
from __future__ import annotations

import datetime as dt
import shutil
import sys
from pathlib import Path

import numpy as np

from code.common import paths, scenarios
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


def pictures(run: Run, r: dict, img: Path) -> list[dict]:
    """Draw the run's pictures into ``img``; add the SUT-side latency figures to the row."""
    tl = timeline.load(run.dir) if r["mode"] != "Accuracy" else None
    if tl is None or tl["issue_s"].size == 0:
        return []
    title = f"{r['submission_name'] or r['benchmark']} {r['scenario']} ({r['system']})"
    lat = (tl["done_s"] - tl["issue_s"]) * 1e3
    r["sut_latency_ms"] = {"samples": int(lat.size), "mean": round(float(lat.mean()), 4),
                           **{f"p{p:g}": _pct(lat, p) for p in (50, 90, 99)}, "max": round(float(lat.max()), 4)}
    eff = run.meta.get("effective") or {}
    bound_ns = eff.get("effective_target_latency_ns") if scenarios.get(r["scenario"]).runs_as_server else None
    out = [("latency-hist", "Latency histogram", plots.latency_histogram(lat, img / f"{r['id']}-latency-hist.png", title)),
           ("latency-pct", "Latency by percentile", plots.percentile_curve(
               lat, r["loadgen_percentiles_ms"], img / f"{r['id']}-latency-pct.png", title,
               bound_ms=bound_ns / 1e6 if bound_ns else None))]
    if "tokens" in tl:
        tokens = tl["tokens"]
        ttft = (tl["first_s"] - tl["issue_s"]) * 1e3
        many = tokens > 1
        tpot = (tl["done_s"][many] - tl["first_s"][many]) / (tokens[many] - 1) * 1e3
        r["sut_token_latency_ms"] = {"ttft_p50": _pct(ttft, 50), "ttft_p99": _pct(ttft, 99),
                                     "tpot_p50": _pct(tpot, 50) if tpot.size else 0.0,
                                     "tpot_p99": _pct(tpot, 99) if tpot.size else 0.0}
        tok = r.get("tokens") or {}

        def ms(key):
            return tok[key] / 1e6 if tok.get(key) else None
        out += [("tokens", "TTFT and TPOT distributions", plots.token_latencies(
                    ttft, tpot, img / f"{r['id']}-ttft-tpot.png", title, ms("ttft_limit_ns"), ms("tpot_limit_ns"))),
                ("throughput", "Tokens per second over the run", plots.throughput(
                    tl["done_s"], img / f"{r['id']}-throughput.png", title, "tokens/s", tokens.astype(float)))]
    else:
        out.append(("throughput", "Samples per second over the run",
                    plots.throughput(tl["done_s"], img / f"{r['id']}-throughput.png", title)))
    return [{"kind": k, "title": t, "file": f} for k, t, f in out if f]


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


def build(runs: list[Run], roots: list[Path], out: Path) -> dict:
    """Write the report into ``out`` (a fresh folder); returns summary.json's content."""
    img = out / "img"
    img.mkdir(parents=True)
    table = []
    for i, run in enumerate(runs, 1):
        r = rows_mod.row(run)
        r["id"] = f"run{i:02d}"
        r["pictures"] = pictures(run, r, img)
        r["images"] = images(run, r, img)
        table.append(r)
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
    import json

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
    with staged_dir(final) as tmp:
        summary = build(runs, roots, tmp)
    n_pics = sum(len(r["pictures"]) + len(r["images"]) for r in summary["runs"])
    print(page.markdown(summary["runs"]), end="")
    print(f"\nwrote {final / 'index.html'} ({len(runs)} run(s), {n_pics} picture(s)); "
          f"data: {final / 'summary.json'}, table: {final / 'summary.md'}")
    return 0
