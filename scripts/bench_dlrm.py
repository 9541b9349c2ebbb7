"""Harness overhead benchmark for DLRM-v2 (CPU). Prints figures; asserts nothing.

  (a) raw samples/s: a tight loop of the Processor's own code path (DLRMProcessor.process: the items of
      gpu_batch_size user queries concatenated, torch EmbeddingBag lookups, one engine call, the
      (probability, label) responses) over the same engine file, spec and loaded QSL queries, on a
      worker thread as the SUT runs it, every query equally often (as LoadGen's equal-issue mode
      issues them), no LoadGen;
  (b) harness Offline samples/s through LoadGen (offline_expected_qps = a, min_duration = --seconds);
  (c) b/a (goal >= 0.97).
One sample = one aggregated user query (100-700 items). Alternates a and b in this one process tree
(--repeats harness runs, each between two raw loops: the machine may be shared, so compare the figures
of one invocation, not across invocations) and reports each b against the mean of its neighbouring a's,
and the median of those ratios (scripts/bench_common.py).

The tiny variant (default) is built in a private scratch. --real runs the real model and day-23 set
when they are in $MLPERF_SCRATCH_PATH. DLRM-v2 is a v5.x benchmark: runs pass --round=v5.1.

usage: python scripts/bench_dlrm.py [--seconds 10] [--repeats 3] [--backend onnxruntime|pytorch] [--batch N] [--real]
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import REPO, offline_settings, offline_vs_raw, prepare_tiny, report  # noqa: E402


def settings_for(extra: list[str], real: bool):
    return offline_settings("dlrm_v2", ["--round=v5.1", *extra], not real)


def raw_loop(settings, seconds: float) -> float:
    """Samples/s of DLRMProcessor.process over the same engine (loaded as the harness loads it), on a
    worker thread (torch's intra-op pool is per calling thread, as in the SUT)."""
    from code.dlrm_v2.harness import DLRMBenchmark

    b = DLRMBenchmark(settings)
    engines = b.generate_engines()
    qsl = b.make_qsl()
    n_q = qsl.performance_count
    qsl.load(range(n_q))
    proc = b.make_processors(qsl, engines)[0]
    out: dict[str, float] = {}

    def loop() -> None:
        proc.thread_init()
        proc.warmup()
        bs = proc.batch_size
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds or n % n_q:
            proc.process([(n + j) % n_q for j in range(bs)])
            n += bs
        out["rate"] = n / (time.perf_counter() - t0)

    t = threading.Thread(target=loop)
    t.start()
    t.join()
    proc.engine.close()
    return out["rate"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each measurement")
    ap.add_argument("--repeats", type=int, default=3, help="harness runs, each between two raw loops")
    ap.add_argument("--backend", default="", help="onnxruntime (CPU default) or pytorch")
    ap.add_argument("--batch", type=int, default=0, help="gpu_batch_size in user queries (0: the config's)")
    ap.add_argument("--real", action="store_true", help="the real model and day-23 set in $MLPERF_SCRATCH_PATH")
    ap.add_argument("--root", default=str(REPO / "build" / "bench_dlrm"))
    a = ap.parse_args()
    root = Path(a.root).resolve()      # the harness child runs elsewhere: an absolute log folder
    if not a.real:
        prepare_tiny(root, "dlrm_v2")
    extra = ([f"--backend={a.backend}"] if a.backend else []) + ([f"--gpu_batch_size={a.batch}"] if a.batch else [])
    s = settings_for(extra, a.real)
    fig = {
        "model": "real DLRM-DCNv2" if a.real else "tiny DLRM-DCNv2 (26 tables of 64-3614 rows, dim 16)",
        "backend": s.backend, "gpu_batch_size_queries": s.batch_size(),
        "threads": s.cpu_threads or len(os.sched_getaffinity(0)), "seconds": a.seconds,
        **offline_vs_raw(lambda x: settings_for(x, a.real), extra, lambda: raw_loop(s, a.seconds), a.seconds,
                         a.repeats, root),
    }
    report(fig, root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
