"""How long `make report` takes over many runs: sequential drawing (one process, as before), the worker pool,
and a second report over the same runs (pictures of unchanged runs linked from the first).

Makes two real tiny ResNet50 runs (Offline and Server, through the CLI) in a temporary build folder, copies
them into --runs run folders (each copy a distinct run: its own path), then builds the report
three ways in this one process, side by side. Prints figures; asserts nothing.

usage: python scripts/bench_report.py [--runs 1000] [--sequential_runs 100] [--keep DIR]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def make_runs(work: Path, n: int) -> Path:
    env = dict(os.environ, MLPERF_BUILD_DIR=str(work / "build"),
               MLPERF_SCRATCH_PATH=os.environ.get("MLPERF_SCRATCH_PATH", str(work / "scratch")), MLPERF_PROGRESS="0")
    seed = work / "seed"

    def main(*args: str) -> None:
        subprocess.run([sys.executable, "-m", "code.main", *args], cwd=REPO, env=env, check=True,
                       stdout=subprocess.DEVNULL)
    for action in ("download_model", "download_data", "preprocess_data"):
        main(f"--action={action}", "--benchmarks=resnet50", "--model_variant=tiny")
    tiny = ("--benchmarks=resnet50", "--model_variant=tiny", f"--log_dir={seed}")
    main("--action=run_harness", *tiny, "--scenarios=Offline", "--offline_expected_qps=1", "--min_duration=1",
         "--min_query_count=512")
    main("--action=run_harness", *tiny, "--scenarios=Server", "--min_duration=1000", "--min_query_count=64")
    seeds = [p.parent for p in seed.rglob("metadata.json")]
    logs = work / "logs"
    for i in range(n):
        src = seeds[i % len(seeds)]
        dst = logs / f"run-{i:05d}" / src.relative_to(seed)
        shutil.copytree(src, dst)
    return logs


def timed(runs, roots, out: Path, **kw) -> float:
    from code.common import report

    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    report.build(runs, roots, out, **kw)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--sequential_runs", type=int, default=100, help="runs drawn one process (the old way)")
    ap.add_argument("--keep", type=Path, help="work folder to keep (default: a temporary one, removed)")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="bench_report-"))
    try:
        logs = make_runs(work, a.runs)
        from code.common.report import select

        os.environ["MLPERF_PROGRESS"] = "0"
        runs, roots = select({"report_logs": [str(logs)]})
        cores = len(os.sched_getaffinity(0))
        seq = timed(runs[:a.sequential_runs], roots, work / "rep-seq", workers=1)
        pool = timed(runs, roots, work / "rep-pool")
        again = timed(runs, roots, work / "rep-again", reuse=work / "rep-pool" / "img")
        per_seq, per_pool, per_again = seq / min(a.sequential_runs, len(runs)), pool / len(runs), again / len(runs)
        print(f"runs: {len(runs)} (tiny ResNet50 Offline + Server copies), usable cores: {cores}")
        print(f"sequential (one process, as before): {min(a.sequential_runs, len(runs))} runs in {seq:.1f} s = "
              f"{per_seq * 1e3:.0f} ms/run -> {per_seq * 1000 / 60:.1f} min per 1,000 runs")
        print(f"worker pool ({min(cores, 8)} processes):       {len(runs)} runs in {pool:.1f} s = {per_pool * 1e3:.0f} ms/run "
              f"-> {per_pool * 1000 / 60:.1f} min per 1,000 runs ({per_seq / per_pool:.2f}x)")
        print(f"again, unchanged runs linked:       {len(runs)} runs in {again:.1f} s = {per_again * 1e3:.0f} ms/run "
              f"-> {per_again * 1000 / 60:.2f} min per 1,000 runs ({per_seq / per_again:.1f}x)")
    finally:
        if a.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
