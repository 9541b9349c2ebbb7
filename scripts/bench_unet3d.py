"""Harness overhead benchmark for 3D-UNet on ONNX Runtime (CPU). Prints figures; asserts nothing.

  (a) raw samples/s: a tight loop of the sliding-window segmentation (the Processor's own code path:
      code.unet3d.sliding_window.segment) over the same engine file, spec and QSL volumes, every case
      equally often (as LoadGen's equal-issue mode issues them), no LoadGen;
  (b) harness Offline samples/s through LoadGen (offline_expected_qps = a, min_duration = --seconds);
  (c) b/a (goal >= 0.97).
Alternates a and b in this one process tree (--repeats harness runs, each between two raw loops: the
machine may be shared, so compare the figures of one invocation, not across invocations) and reports
each b against the mean of its neighbouring a's, and the median of those ratios (scripts/bench_common.py).

The tiny variant (default; 32^3 patches) is built in a private scratch. --real runs the real 128^3
model and KiTS19 set when they are in $MLPERF_SCRATCH_PATH (download_model / download_data /
preprocess_data first).

usage: python scripts/bench_unet3d.py [--seconds 10] [--repeats 3] [--patch-batch 8] [--real]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import REPO, offline_settings, offline_vs_raw, prepare_tiny, report  # noqa: E402


def settings_for(extra: list[str], real: bool):
    return offline_settings("unet3d", extra, not real)


def raw_loop(settings, seconds: float) -> float:
    """Samples/s of segment() over the same engine (loaded as the harness loads it) and volumes."""
    from code.common.backends import get_backend
    from code.unet3d import sliding_window
    from code.unet3d.harness import UNet3DBenchmark, UNet3DProcessor

    b = UNet3DBenchmark(settings)
    engine = get_backend(settings.backend).load(b.generate_engines()["unet3d"], b.engine_spec())
    qsl = b.make_qsl()
    proc = UNet3DProcessor(engine, qsl, b.roi, b.patch_batch)
    proc.warmup()
    vols = [qsl.volume(i) for i in range(qsl.total_count)]
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds or n % len(vols):
        sliding_window.segment(vols[n % len(vols)], proc.infer, b.roi, b.patch_batch)
        n += 1
    rate = n / (time.perf_counter() - t0)
    engine.close()
    return rate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each measurement")
    ap.add_argument("--repeats", type=int, default=3, help="harness runs, each between two raw loops")
    ap.add_argument("--patch-batch", type=int, default=0, help="unet3d_patch_batch_size (0: the config's)")
    ap.add_argument("--real", action="store_true", help="the real model and KiTS19 set in $MLPERF_SCRATCH_PATH")
    ap.add_argument("--root", default=str(REPO / "build" / "bench_unet3d"))
    a = ap.parse_args()
    root = Path(a.root)
    if not a.real:
        prepare_tiny(root, "unet3d")
    extra = [f"--unet3d_patch_batch_size={a.patch_batch}"] if a.patch_batch else []
    s = settings_for(extra, a.real)
    fig = {
        "model": "real 3D-UNet (128^3)" if a.real else "tiny 3D-UNet (32^3 patches, filters 4/8/16)",
        "backend": s.backend, "patch_batch": s.unet3d_patch_batch_size,
        "threads": s.cpu_threads or len(os.sched_getaffinity(0)), "seconds": a.seconds,
        **offline_vs_raw(lambda x: settings_for(x, a.real), extra, lambda: raw_loop(s, a.seconds), a.seconds,
                         a.repeats, root),
    }
    report(fig, root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
