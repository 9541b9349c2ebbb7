"""Harness overhead for DLRM-v3 (eager torch HSTU): harness Offline vs a raw loop over the same engine.
Prints figures; asserts nothing.

  (a) raw samples/s: a tight loop over the engine the harness loads (the pytorch backend's eager HSTU, same spec,
      threads and batch size: the Offline config's gpu_batch_size), through HSTUProcessor.process (padding the
      requests, the answer rows) over the loaded performance samples
  (b) harness Offline samples/s through LoadGen (expected QPS set just above (a), min_duration --seconds)
  (c) b/a (goal >= 0.97)

The tiny variant by default (the real model needs the ~1 TB checkpoint and the sampled streaming set in
MLPERF_SCRATCH_PATH: --reference). Runs in a private scratch under --root. Alternates a and b (--repeats harness
runs, each between two raw loops) and reports each b against the mean of its neighbouring a's, and the median of
those ratios.

usage: python scripts/bench_dlrm_v3.py [--seconds 10] [--repeats 5] [--reference]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import REPO, offline_settings, offline_vs_raw, prepare_tiny, report  # noqa: E402


def raw_loop(settings, seconds: float) -> float:
    from code.common.backends import get_backend
    from code.dlrm_v3.harness import ENGINE, DLRMv3Benchmark, HSTUProcessor

    b = DLRMv3Benchmark(settings)
    spec = b.engine_spec()
    engine = get_backend(settings.backend).load(b.generate_engines()[ENGINE], spec)
    qsl = b.make_qsl()
    qsl.load(range(qsl.performance_count))
    proc = HSTUProcessor(engine, qsl, spec.batch_size, b.config().action_weights, full=False)
    proc.thread_init()
    proc.warmup()
    n, t0, bs = 0, time.perf_counter(), spec.batch_size
    while time.perf_counter() - t0 < seconds:
        proc.process([(n + k) % qsl.performance_count for k in range(bs)])
        n += bs
    return n / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each measurement")
    ap.add_argument("--reference", action="store_true", help="the real model and data instead of the tiny variant")
    ap.add_argument("--repeats", type=int, default=5, help="harness runs, each between two raw loops")
    ap.add_argument("--root", default=str(REPO / "build" / "bench_dlrm_v3"))
    a = ap.parse_args()
    tiny = not a.reference
    if tiny:
        prepare_tiny(Path(a.root), "dlrm_v3")
    s = offline_settings("dlrm_v3", [f"--min_duration={int(a.seconds * 1000)}", "--min_query_count=1"], tiny)
    fig = {"model": "tiny HSTU (2 STU layers, dim 16)" if tiny else "DLRM-v3 HSTU (5 STU layers, dim 512)",
           "batch_size": s.batch_size(), "threads": s.cpu_threads or len(os.sched_getaffinity(0)),
           **offline_vs_raw(lambda extra: offline_settings("dlrm_v3", extra, tiny), [],
                            lambda: raw_loop(s, a.seconds), a.seconds, a.repeats, Path(a.root))}
    report(fig, Path(a.root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
