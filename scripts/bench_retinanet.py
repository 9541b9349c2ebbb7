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
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def prepare(root: Path, tiny: bool) -> None:
    if not tiny:
        return
    env = {"MLPERF_BUILD_DIR": str(root / "build"), "MLPERF_SCRATCH_PATH": str(root / "scratch")}
    os.environ.update(env)
    for action in ("download_model", "download_data", "preprocess_data"):
        subprocess.run([sys.executable, "-m", "code.main", f"--action={action}", "--benchmarks=retinanet",
                        "--model_variant=tiny"], cwd=REPO, check=True, env={**os.environ})


def settings_for(extra: list[str], tiny: bool):
    from code.main import plan

    args = ["--action=run_harness", "--benchmarks=retinanet", "--scenarios=Offline", "--round=v6.0", "--force", *extra]
    if tiny:
        args.append("--model_variant=tiny")
    return plan(args)[1][0]


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


def harness(settings, log_dir: Path) -> dict:
    from code.common.runner import run_one
    from code.common.settings import RunControl
    from code.retinanet.harness import RetinaNetBenchmark

    return run_one(settings, RunControl(overwrite=True), log_dir, RetinaNetBenchmark(settings).generate_engines())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each measurement")
    ap.add_argument("--reference", action="store_true", help="the real model and data instead of the tiny variant")
    ap.add_argument("--repeats", type=int, default=3, help="harness runs, each between two raw loops")
    ap.add_argument("--postprocess", default="model", choices=("model", "host"))
    ap.add_argument("--root", default=str(REPO / "build" / "bench_retinanet"))
    a = ap.parse_args()
    tiny = not a.reference
    prepare(Path(a.root), tiny)
    base = [f"--min_duration={int(a.seconds * 1000)}", "--min_query_count=1", f"--retinanet_postprocess={a.postprocess}"]
    s = settings_for(base, tiny)
    raws, runs = [raw_loop(s, a.seconds)], []
    for r in range(a.repeats):          # harness, raw, harness, raw, ...: both see the same load drift
        s = settings_for(base + [f"--offline_expected_qps={1.1 * raws[-1]:.2f}"], tiny)   # a little above: never ends early
        runs.append(harness(s, Path(a.root) / "logs" / f"offline-{r}"))
        raws.append(raw_loop(s, a.seconds))
    import statistics

    got = [m["metric_value"] or 0 for m in runs]
    # each harness run against the mean of the raw loops just before and after it
    ratios = [g / ((raws[i] + raws[i + 1]) / 2) for i, g in enumerate(got)]
    fig = {"model": "tiny RetinaNet (256x256)" if tiny else "MLPerf RetinaNet (800x800)",
           "postprocess": a.postprocess, "threads": s.cpu_threads or len(os.sched_getaffinity(0)),
           "a_raw_samples_per_s": [round(x, 2) for x in raws],
           "b_harness_offline_samples_per_s": [round(x, 2) for x in got],
           "b_validity": [m["result_validity"] for m in runs],
           "c_ratio_b_over_neighbouring_a": [round(x, 4) for x in ratios],
           "c_ratio_median": round(statistics.median(ratios), 4)}
    for k, v in fig.items():
        print(f"{k:34s} {v}")
    Path(a.root).mkdir(parents=True, exist_ok=True)
    (Path(a.root) / "figures.json").write_text(json.dumps(fig, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
