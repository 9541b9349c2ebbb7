"""Harness overhead for R-GAT on the eager torch engine: harness Offline vs a raw loop over the same engine.
Prints figures; asserts nothing.

  (a) raw samples/s: a tight loop over the engine the harness loads (same spec, threads and batch size: the Offline
      config's gpu_batch_size), each batch sampled, gathered and classified as RGATProcessor.process does, over the
      performance samples in order
  (b) harness Offline samples/s through LoadGen (expected QPS set just above (a), min_duration --seconds)
  (c) b/a (goal >= 0.97)

The tiny variant by default (the real one needs RGAT.pt and IGBH full: --reference when they are in
MLPERF_SCRATCH_PATH). Runs in a private scratch under --root. Alternates a and b (--repeats harness runs, each between
two raw loops) and reports each b against the mean of its neighbouring a's, and the median of those ratios.

Measured here (2026-12-06, tiny, batch 64, one intra-op thread, 2-core VM shared with other sessions at load 4-7):
--seconds 5 --repeats 5: ratio median 0.9675 (per run 0.61-1.10); --repeats 7: median 0.939 (0.95, 0.95, 0.94, 0.97
where the raw rate held at ~2.6k samples/s; 0.51-0.77 where it swung). Harness ~2.5k samples/s, all runs VALID.

usage: [MLPERF_SHARED_CPU=1] python scripts/bench_rgat.py [--seconds 10] [--repeats 3] [--reference]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import offline_bench_main, on_worker_thread, processor_rate  # noqa: E402


def raw_loop(settings, seconds: float) -> float:
    """The harness's own processor over the engine it loads, on a worker thread (bench_common.on_worker_thread)."""
    from code.common.backends import get_backend
    from code.rgat.harness import RGATBenchmark, RGATProcessor

    b = RGATBenchmark(settings)
    spec = b.engine_spec()
    engine = get_backend(settings.backend).load(b.generate_engines()["rgat"], spec)
    qsl = b.make_qsl()
    return on_worker_thread(processor_rate, RGATProcessor(engine, qsl, spec.batch_size), qsl.performance_count,
                            seconds)


if __name__ == "__main__":
    sys.exit(offline_bench_main(__doc__, "rgat", lambda tiny: "tiny R-GAT (3 layers, hidden 32)" if tiny else
                                "R-GAT (IGBH full)", raw_loop, seconds=10.0, repeats=3))
