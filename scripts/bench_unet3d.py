"""Harness overhead benchmark for 3D-UNet on ONNX Runtime (CPU). Prints figures; asserts nothing.

  (a) raw samples/s: a tight loop of the sliding-window segmentation (the Processor's own code path:
      code.unet3d.sliding_window.segment) over the same engine file, spec and QSL volumes, every case
      equally often (as LoadGen's equal-issue mode issues them), no LoadGen;
  (b) harness Offline samples/s through LoadGen (offline_expected_qps = a, min_duration = --seconds);
  (c) b/a (goal >= 0.97).
The two are measured --repeats times, alternating, in this one process tree (the machine may be shared:
compare the figures of one invocation, not across invocations); the best of each and the ratio of the
medians are printed too.

The tiny variant (default; 32^3 patches) is built in a private scratch. --real runs the real 128^3
model and KiTS19 set when they are in $MLPERF_SCRATCH_PATH (download_model / download_data /
preprocess_data first).

usage: python scripts/bench_unet3d.py [--seconds 10] [--repeats 4] [--patch-batch 8] [--real]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def prepare(root: Path, real: bool) -> None:
    if not real:
        os.environ.update({"MLPERF_BUILD_DIR": str(root / "build"), "MLPERF_SCRATCH_PATH": str(root / "scratch")})
        for action in ("download_model", "download_data", "preprocess_data"):
            subprocess.run([sys.executable, "-m", "code.main", f"--action={action}", "--benchmarks=unet3d",
                            "--model_variant=tiny"], cwd=REPO, check=True, env={**os.environ})


def settings_for(extra: list[str], real: bool):
    from code.main import plan

    args = ["--action=run_harness", "--benchmarks=unet3d", "--scenarios=Offline", "--force", *extra]
    if not real:
        args.append("--model_variant=tiny")
    return plan(args)[1][0]


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


def harness(settings, log_dir: Path) -> dict:
    from code.common.runner import run_one
    from code.common.settings import RunControl
    from code.unet3d.harness import UNet3DBenchmark

    return run_one(settings, RunControl(overwrite=True), log_dir, UNet3DBenchmark(settings).generate_engines())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each measurement")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--patch-batch", type=int, default=0, help="unet3d_patch_batch_size (0: the config's)")
    ap.add_argument("--real", action="store_true", help="the real model and KiTS19 set in $MLPERF_SCRATCH_PATH")
    ap.add_argument("--root", default=str(REPO / "build" / "bench_unet3d"))
    a = ap.parse_args()
    root = Path(a.root)
    prepare(root, a.real)
    extra = [f"--unet3d_patch_batch_size={a.patch_batch}"] if a.patch_batch else []
    dur = int(a.seconds * 1000)
    raws, harn, validity = [], [], []
    for rep in range(a.repeats):
        raw = raw_loop(settings_for(extra, a.real), a.seconds)
        s = settings_for([*extra, f"--min_duration={dur}", "--min_query_count=1", f"--offline_expected_qps={raw:.3f}"],
                         a.real)
        m = harness(s, root / "logs" / f"offline-{rep}")
        raws.append(raw)
        harn.append(m["metric_value"] or 0.0)
        validity.append(m["result_validity"])
        print(f"  repeat {rep}: raw {raw:.3f} samples/s, harness {harn[-1]:.3f} samples/s ({validity[-1]}), "
              f"ratio {harn[-1] / raw:.4f}", flush=True)
    s = settings_for(extra, a.real)
    fig = {
        "model": "real 3D-UNet (128^3)" if a.real else "tiny 3D-UNet (32^3 patches, filters 4/8/16)",
        "backend": s.backend, "patch_batch": s.unet3d_patch_batch_size,
        "threads": s.cpu_threads or len(os.sched_getaffinity(0)), "seconds": a.seconds,
        "a_raw_samples_per_s": [round(x, 3) for x in raws],
        "b_harness_offline_samples_per_s": [round(x, 3) for x in harn], "b_validity": validity,
        "c_ratio_b_over_a": [round(h / r, 4) for h, r in zip(harn, raws)],
        "c_median_pair_ratio": round(statistics.median(h / r for h, r in zip(harn, raws)), 4),
        "c_ratio_of_medians": round(statistics.median(harn) / statistics.median(raws), 4),
        "c_ratio_of_bests": round(max(harn) / max(raws), 4),
    }
    for k, v in fig.items():
        print(f"{k:36s} {v}")
    root.mkdir(parents=True, exist_ok=True)
    (root / "figures.json").write_text(json.dumps(fig, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
