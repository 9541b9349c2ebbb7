"""`--fast` sizes itself: tiny ResNet50 Offline `--fast` with a config expected QPS 10x too high and
10x too low for this machine. Prints, for each, the LoadGen time (the one query's samples over
the measured rate), the wall time, what the warm-up measured and what it set. Asserts nothing.

The goal (issue 9): both finish between 50 and 90 s of LoadGen time.

usage: python scripts/bench_fast.py [--root build/bench_fast]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "code.main", *args], cwd=REPO, env=env, capture_output=True,
                          text=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(REPO / "build" / "bench_fast"))
    a = ap.parse_args()
    root = Path(a.root)
    env = {**os.environ, "MLPERF_BUILD_DIR": str(root / "build"), "MLPERF_SCRATCH_PATH": str(root / "scratch")}
    base = ("--benchmarks=resnet50", "--model_variant=tiny")
    for action in ("download_model", "download_data", "preprocess_data"):
        r = run(env, f"--action={action}", *base)
        if r.returncode:
            print(r.stderr)
            return r.returncode
    # this machine's rate now: 2048 samples, sized by count
    r = run(env, "--action=run_harness", *base, "--scenarios=Offline", "--min_duration=1", "--min_query_count=2048",
            "--offline_expected_qps=1", f"--log_dir={root / 'logs' / 'rate'}", "--overwrite")
    [meta] = [json.loads(p.read_text()) for p in (root / "logs" / "rate").rglob("metadata.json")]
    rate = meta["metric_value"]
    print(f"measured rate: {rate:.1f} samples/s (2048 samples)")
    figures = {"measured_rate": round(rate, 1)}
    for label, factor in (("10x too high", 10.0), ("10x too low", 0.1)):
        cfg = root / f"configs-{factor:g}"
        shutil.rmtree(cfg, ignore_errors=True)
        shutil.copytree(REPO / "configs", cfg)
        f = cfg / "resnet50" / "Offline" / "config.json"
        j = json.loads(f.read_text())
        j["default"]["model_variant"]["tiny"]["offline_expected_qps"] = round(rate * factor, 1)
        f.write_text(json.dumps(j, indent=1))
        log_dir = root / "logs" / f"fast-{factor:g}"
        t0 = time.time()
        r = run({**env, "MLPERF_CONFIGS_DIR": str(cfg)}, "--action=run_harness", *base, "--scenarios=Offline",
                "--fast", f"--log_dir={log_dir}", "--overwrite")
        wall = time.time() - t0
        [m] = [json.loads(p.read_text()) for p in log_dir.rglob("metadata.json")]
        samples = m["effective"].get("effective_samples_per_query") or 0
        lg_s = samples / m["metric_value"] if m["metric_value"] else None
        fig = {"config_expected_qps": round(rate * factor, 1), "validity": m["result_validity"],
               "loadgen_seconds": round(lg_s, 1) if lg_s else None, "wall_seconds": round(wall, 1),
               "samples": samples, "rate": m["metric_value"], "fast_sizing": m.get("fast_sizing")}
        figures[label] = fig
        print(f"{label:14s} config {fig['config_expected_qps']:>9} QPS -> {fig['validity']}, LoadGen "
              f"{fig['loadgen_seconds']} s, wall {fig['wall_seconds']} s; warm-up {m.get('fast_sizing')}")
    (root / "figures.json").write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
