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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import offline_bench_main, on_worker_thread, processor_rate  # noqa: E402


def raw_loop(settings, seconds: float) -> float:
    from code.common.backends import get_backend
    from code.dlrm_v3.harness import ENGINE, DLRMv3Benchmark, HSTUProcessor

    b = DLRMv3Benchmark(settings)
    spec = b.engine_spec()
    engine = get_backend(settings.backend).load(b.generate_engines()[ENGINE], spec)
    qsl = b.make_qsl()
    qsl.load(range(qsl.performance_count))
    proc = HSTUProcessor(engine, qsl, spec.batch_size, b.config().action_weights, full=False)
    return on_worker_thread(processor_rate, proc, qsl.performance_count, seconds)   # as the harness's workers run


if __name__ == "__main__":
    sys.exit(offline_bench_main(__doc__, "dlrm_v3", lambda tiny: "tiny HSTU (2 STU layers, dim 16)" if tiny else
                                "DLRM-v3 HSTU (5 STU layers, dim 512)", raw_loop, seconds=10.0, repeats=5))
