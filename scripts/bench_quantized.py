"""int8 (make calibrate) against fp32 on ONNX Runtime (CPU), side by side in one run. Prints figures; asserts nothing.

  (a) tiny ResNet50: int8 top-1 agreement with the fp32 labels through LoadGen AccuracyOnly (1024 images),
      and Offline samples/s of int8 vs fp32, alternating fp32, int8, fp32, int8, ... (medians and ratio)
  (b) full-size ResNet50-v1.5 (torchvision architecture, random weights, 224x224, calibrated on 32 random
      JPEGs through the official-list path): Offline samples/s int8 vs fp32, alternating the same way
  (c) tiny SDXL with an int8 unet: AccuracyOnly of fp32 and int8 over --sdxl-samples captions; mean PSNR of
      the int8 images against the fp32 harness's, both runs' CLIP and FID (tiny scorers), and the
      compliance images each run saved

usage: python scripts/bench_quantized.py [--seconds 15] [--repeats 3] [--sdxl-samples 64] [--skip-full]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import REPO, harness_run, offline_settings, prepare_tiny, report  # noqa: E402


def calibrate(bench: str, tiny: bool) -> None:
    args = [sys.executable, "-m", "code.main", "--action=calibrate", f"--benchmarks={bench}", "--precision=int8"]
    subprocess.run(args + (["--model_variant=tiny"] if tiny else []), cwd=REPO, check=True, env={**os.environ})


def offline_pair(bench: str, tiny: bool, seconds: float, repeats: int, root: Path, qps: float) -> dict:
    """fp32, int8, fp32, int8, ... Offline runs, each sized a little above the previous run's rate."""
    rates: dict[str, list[float]] = {"fp32": [], "int8": []}
    for i in range(repeats):
        for p in ("fp32", "int8"):
            want = 1.1 * (rates[p][-1] if rates[p] else qps)
            s = offline_settings(bench, [f"--precision={p}", f"--min_duration={int(seconds * 1000)}",
                                         "--min_query_count=1", f"--offline_expected_qps={want:.3f}"], tiny)
            rates[p].append(harness_run(s, root / "logs" / f"{bench}-{p}-{i}")["metric_value"] or 0.0)
    med = {p: statistics.median(v) for p, v in rates.items()}
    return {"fp32_samples_per_s": [round(x, 2) for x in rates["fp32"]],
            "int8_samples_per_s": [round(x, 2) for x in rates["int8"]],
            "int8_over_fp32_median": round(med["int8"] / med["fp32"], 3)}


def full_size_resnet(root: Path) -> None:
    """scripts/bench_harness.py's full-size model (random weights) and data, plus a 32-image calibration
    list with random JPEGs where the official list's images would be."""
    from PIL import Image

    from bench_harness import prepare

    prepare(root, tiny=False)
    from code.common import paths
    from code.resnet50 import harness

    rng = np.random.default_rng(0)
    imgs = paths.data_dir("imagenet")
    imgs.mkdir(parents=True, exist_ok=True)
    names = [f"ILSVRC2012_val_{i + 1:08d}.JPEG" for i in range(32)]
    for n in names:
        Image.fromarray(rng.integers(0, 256, (256, 320, 3), dtype=np.uint8)).save(imgs / n)
    (paths.data_maps_dir() / "imagenet" / harness.CAL_LIST).write_text("".join(f"{n}\n" for n in names))


def images_of(log_dir: Path) -> dict[int, np.ndarray]:
    from code.sdxl.accuracy import iter_unique_images

    return dict(iter_unique_images(log_dir / "mlperf_log_accuracy.json", (128, 128)))


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def sdxl(root: Path, samples: int) -> dict:
    prepare_tiny(root, "sdxl")
    calibrate("sdxl", True)
    runs = {}
    for p in ("fp32", "int8"):
        s = offline_settings("sdxl", [f"--precision={p}", f"--sdxl_sample_count={samples}"], True)
        runs[p] = harness_run(s, root / "logs" / f"sdxl-{p}", "AccuracyOnly")
    a, b = (images_of(Path(runs[p]["log_dir"])) for p in ("fp32", "int8"))
    ps = [psnr(a[k], b[k]) for k in sorted(a)]
    out = {"sdxl_images": len(ps), "sdxl_int8_vs_fp32_psnr_mean_db": round(float(np.mean(ps)), 2),
           "sdxl_int8_vs_fp32_psnr_min_db": round(float(np.min(ps)), 2)}
    for p, m in runs.items():
        out[f"sdxl_{p}_accuracy"] = m["accuracy"]["metrics"]
        out[f"sdxl_{p}_compliance_images"] = len(list((Path(m["log_dir"]) / "images").glob("*.png")))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sdxl-samples", type=int, default=64)
    ap.add_argument("--skip-full", action="store_true")
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench_quantized-"))
    fig: dict = {}
    tiny = base / "resnet50-tiny"
    prepare_tiny(tiny, "resnet50")
    calibrate("resnet50", True)
    acc = harness_run(offline_settings("resnet50", ["--precision=int8"], True), tiny / "logs" / "acc", "AccuracyOnly")
    fig["a_tiny_resnet50_int8_top1_agreement_pct"] = acc["accuracy"]["metrics"]["acc"]
    fig.update({f"a_tiny_resnet50_{k}": v for k, v in offline_pair("resnet50", True, a.seconds, a.repeats, tiny,
                                                                   500.0).items()})
    if not a.skip_full:
        full = base / "resnet50-full"
        full_size_resnet(full)
        calibrate("resnet50", False)
        fig.update({f"b_full_resnet50_{k}": v for k, v in offline_pair("resnet50", False, a.seconds, a.repeats, full,
                                                                       20.0).items()})
    fig.update({f"c_{k}": v for k, v in sdxl(base / "sdxl", a.sdxl_samples).items()})
    report(fig, base)
    print(f"figures: {base / 'figures.json'}")
    print(json.dumps(fig))
    return 0


if __name__ == "__main__":
    sys.exit(main())
