"""Multi-instance CPU: tiny ResNet50 Offline (sized by sample count) with one ONNX Runtime instance
using every core, against one instance per core with and without pinning (--cpu_pin_cores).
Prints samples/s for each; asserts nothing.

usage: python scripts/bench_instances.py [--samples 8192] [--repeat 3] [--model full|tiny]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=8192)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each layout, interleaved; the median is shown")
    ap.add_argument("--model", choices=("tiny", "full"), default="tiny")
    ap.add_argument("--root", default=str(REPO / "build" / "bench_instances"))
    a = ap.parse_args()
    from bench_harness import prepare

    root = Path(a.root)
    env = {**os.environ, **prepare(root, a.model == "tiny")}
    cores = len(os.sched_getaffinity(0))
    layouts = {f"1 instance x {cores} threads": ["--gpu_inference_streams=1"],
               f"{cores} instances x 1 thread": [f"--gpu_inference_streams={cores}", "--cpu_threads=1"],
               f"{cores} instances x 1 thread, pinned": [f"--gpu_inference_streams={cores}", "--cpu_pin_cores"]}
    base = ["--action=run_harness", "--benchmarks=resnet50", "--scenarios=Offline", "--min_duration=1",
            f"--min_query_count={a.samples}", "--offline_expected_qps=1", "--overwrite"]
    if a.model == "tiny":
        base.append("--model_variant=tiny")
    rates: dict[str, list[float]] = {k: [] for k in layouts}
    for i in range(a.repeat):
        for name, extra in layouts.items():
            d = root / "logs" / f"{i}-{len(rates[name])}-{extra[0].split('=')[1]}-{len(extra)}"
            r = subprocess.run([sys.executable, "-m", "code.main", *base, *extra, f"--log_dir={d}"], cwd=REPO, env=env,
                               capture_output=True, text=True)
            if r.returncode:
                print(r.stdout[-2000:], r.stderr[-2000:])
                return r.returncode
            [m] = [json.loads(p.read_text()) for p in d.rglob("metadata.json")]
            rates[name].append(m["metric_value"])
    fig = {}
    for name, rs in rates.items():
        med = sorted(rs)[len(rs) // 2]
        fig[name] = {"median_samples_per_s": round(med, 1), "runs": [round(x, 1) for x in rs]}
        print(f"{name:34s} {med:9.1f} samples/s  (runs: {', '.join(f'{x:.0f}' for x in rs)})")
    (root / "figures.json").write_text(json.dumps(fig, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
