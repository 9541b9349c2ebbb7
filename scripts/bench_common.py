"""What the per-benchmark harness-overhead scripts (scripts/bench_<benchmark>.py) share: a private tiny
build, RunSettings for an Offline run, one harness run through LoadGen, and the alternation

    raw, harness, raw, harness, ..., raw

where each harness run is compared with the mean of the raw loops just before and after it (so both
see the same drift of a shared machine's load), and the figures printed and written to figures.json.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def prepare_tiny(root: Path, bench: str) -> None:
    """download_model, download_data and preprocess_data of ``bench``'s tiny variant under ``root``
    (MLPERF_BUILD_DIR / MLPERF_SCRATCH_PATH are set for this process and its children)."""
    os.environ.update({"MLPERF_BUILD_DIR": str(root / "build"), "MLPERF_SCRATCH_PATH": str(root / "scratch")})
    for action in ("download_model", "download_data", "preprocess_data"):
        subprocess.run([sys.executable, "-m", "code.main", f"--action={action}", f"--benchmarks={bench}",
                        "--model_variant=tiny"], cwd=REPO, check=True, env={**os.environ})


def offline_settings(bench: str, extra: list[str], tiny: bool, scenario: str = "Offline"):
    """The RunSettings ``make run_harness`` would use (``--force``: any expected QPS is accepted)."""
    from code.main import plan

    args = ["--action=run_harness", f"--benchmarks={bench}", f"--scenarios={scenario}", "--force", *extra]
    if tiny:
        args.append("--model_variant=tiny")
    return plan(args)[1][0]


def harness_run(settings, log_dir: Path, mode: str = "PerformanceOnly") -> dict:
    """One LoadGen run of ``settings`` through the runner (engines built or reused first); its metadata."""
    from code.common.benchmarks import implementation
    from code.common.harness.runner import run_one
    from code.common.settings import RunControl

    engines = implementation(settings.spec)(settings).generate_engines()
    return run_one(settings, RunControl(overwrite=True, test_mode=mode), log_dir, engines)


def alternate(raw: Callable[[], float], harness: Callable[[float, int], dict], repeats: int) -> dict:
    """raw() -> samples/s of the raw loop; harness(expected_qps, i) -> a run's metadata. Returns the
    figures: each run's samples/s, validity and its ratio to the neighbouring raw loops' mean."""
    raws, runs = [raw()], []
    for i in range(repeats):
        runs.append(harness(1.1 * raws[-1], i))          # a little above the raw rate: never ends early
        raws.append(raw())
    got = [m["metric_value"] or 0.0 for m in runs]
    ratios = [g / ((raws[i] + raws[i + 1]) / 2) for i, g in enumerate(got)]
    return {"a_raw_samples_per_s": [round(x, 3) for x in raws],
            "b_harness_offline_samples_per_s": [round(x, 3) for x in got],
            "b_validity": [m["result_validity"] for m in runs],
            "c_ratio_b_over_neighbouring_a": [round(x, 4) for x in ratios],
            "c_ratio_median": round(statistics.median(ratios), 4)}


def offline_vs_raw(settings_for: Callable[[list[str]], object], extra: list[str], raw: Callable[[], float],
                   seconds: float, repeats: int, root: Path) -> dict:
    """``alternate`` for the usual pair: raw() against harness Offline runs of ``settings_for(extra + a
    min_duration of ``seconds``, min_query_count 1 and an expected QPS just above the last raw rate)``."""
    dur = int(seconds * 1000)
    return alternate(raw, lambda qps, i: harness_run(
        settings_for([*extra, f"--min_duration={dur}", "--min_query_count=1", f"--offline_expected_qps={qps:.3f}"]),
        root / "logs" / f"offline-{i}"), repeats)


def report(fig: dict, root: Path) -> None:
    for k, v in fig.items():
        print(f"{k:36s} {v}")
    root.mkdir(parents=True, exist_ok=True)
    (root / "figures.json").write_text(json.dumps(fig, indent=2))


def on_worker_thread(fn: Callable, *args, **kw):
    """``fn(*args, **kw)`` on a thread of its own, as the harness's workers run, and its result (torch's intra-op
    pool behaves differently on the main thread: 2-threaded batches of tiny R-GAT ran 10x slower there)."""
    import threading

    out: list = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            out.append(fn(*args, **kw))
        except BaseException as e:                    # re-raised on the caller's thread
            errors.append(e)
    t = threading.Thread(target=work, name="raw-worker")
    t.start()
    t.join()
    if errors:
        raise errors[0]
    return out[0]


def processor_rate(proc, count: int, seconds: float, whole_cycles: bool = False) -> float:
    """samples/s of ``proc.process`` on this thread (after its thread_init and warmup): batches of its batch size
    cycling over the first ``count`` QSL indices, for ``seconds`` (a raw loop without LoadGen); with
    ``whole_cycles``, on until every index has been processed equally often."""
    import time

    proc.thread_init()
    proc.warmup()
    n, t0, bs = 0, time.perf_counter(), proc.batch_size
    while time.perf_counter() - t0 < seconds or (whole_cycles and n % count):
        proc.process([(n + k) % count for k in range(bs)])
        n += bs
    return n / (time.perf_counter() - t0)


def offline_bench_main(doc: str, bench: str, label: Callable[[bool], str], raw_loop: Callable[[object, float], float],
                       seconds: float = 10.0, repeats: int = 3) -> int:
    """The command line of a scripts/bench_<bench>.py: --seconds, --repeats, --reference, --root; a private tiny build
    unless --reference; ``raw_loop(settings, seconds)`` against harness Offline runs (offline_vs_raw); the figures
    reported (``label(tiny)`` names the model)."""
    import argparse

    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=seconds, help="length of each measurement")
    ap.add_argument("--reference", action="store_true", help="the real model and data instead of the tiny variant")
    ap.add_argument("--repeats", type=int, default=repeats, help="harness runs, each between two raw loops")
    ap.add_argument("--root", default=str(REPO / "build" / f"bench_{bench}"))
    a = ap.parse_args()
    tiny = not a.reference
    if tiny:
        prepare_tiny(Path(a.root), bench)
    s = offline_settings(bench, [f"--min_duration={int(a.seconds * 1000)}", "--min_query_count=1"], tiny)
    fig = {"model": label(tiny), "batch_size": s.batch_size(), "threads": s.cpu_threads or len(os.sched_getaffinity(0)),
           **offline_vs_raw(lambda extra: offline_settings(bench, extra, tiny), [], lambda: raw_loop(s, a.seconds),
                            a.seconds, a.repeats, Path(a.root))}
    report(fig, Path(a.root))
    return 0
