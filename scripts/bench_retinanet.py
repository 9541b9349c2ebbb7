"""Harness overhead for RetinaNet on ONNX Runtime (CPU): harness Offline vs a raw loop over the same
engine. Prints figures; asserts nothing.

  (a) raw samples/s: a tight loop over the engine file the harness uses, same spec and threads, one
      image per call (the MLPerf graph takes one image), including the harness's own per-image
      output step (detection_rows), over the loaded performance samples
  (b) harness Offline samples/s through LoadGen (expected QPS set to (a), min_duration --seconds)
  (c) b/a (goal >= 0.97)

The tiny variant by default (the real 800x800 model needs the MLPerf ONNX and OpenImages; pass
--reference when they are in MLPERF_SCRATCH_PATH). Runs in a private scratch under --root, under
--round=v6.0 (RetinaNet left the round LoadGen 6.0.17 carries). Alternates a and b (--repeats harness runs, each between two raw loops) and
reports each b against the mean of its neighbouring a's, and the median of those ratios.

usage: python scripts/bench_retinanet.py [--seconds 20] [--repeats 3] [--reference] [--postprocess model|host]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import REPO, alternate, harness_run, offline_settings, prepare_tiny, report  # noqa: E402


def settings_for(extra: list[str], tiny: bool):
    return offline_settings("retinanet", ["--round=v6.0", *extra], tiny)


def raw_loop(settings, seconds: float) -> float:
    from code.common.backends import get_backend
    from code.retinanet.harness import RetinaNetBenchmark, RetinaNetProcessor

    b = RetinaNetBenchmark(settings)
    engine = get_backend(settings.backend).load(b.generate_engines()["retinanet"], b.engine_spec())
    qsl = b.make_qsl()
    qsl.load(range(qsl.performance_count))
    from code.retinanet import model

    post = model.HostPostprocess(b.size) if b.postprocess == "host" else None
    proc = RetinaNetProcessor(engine, qsl, 1, b.size, post)
    proc.warmup()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        proc.process([n % qsl.performance_count])
        n += 1
    return n / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each measurement")
    ap.add_argument("--reference", action="store_true", help="the real model and data instead of the tiny variant")
    ap.add_argument("--repeats", type=int, default=3, help="harness runs, each between two raw loops")
    ap.add_argument("--postprocess", default="model", choices=("model", "host"))
    ap.add_argument("--root", default=str(REPO / "build" / "bench_retinanet"))
    a = ap.parse_args()
    tiny = not a.reference
    if tiny:
        prepare_tiny(Path(a.root), "retinanet")
    base = [f"--min_duration={int(a.seconds * 1000)}", "--min_query_count=1", f"--retinanet_postprocess={a.postprocess}"]
    s = settings_for(base, tiny)
    fig = {"model": "tiny RetinaNet (256x256)" if tiny else "MLPerf RetinaNet (800x800)",
           "postprocess": a.postprocess, "threads": s.cpu_threads or len(os.sched_getaffinity(0)),
           **alternate(lambda: raw_loop(s, a.seconds),
                       lambda qps, i: harness_run(settings_for(base + [f"--offline_expected_qps={qps:.2f}"], tiny),
                                                  Path(a.root) / "logs" / f"offline-{i}"), a.repeats)}
    report(fig, Path(a.root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
