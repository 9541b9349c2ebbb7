"""Ray executor overhead, side by side in one run (issue 16). Prints figures; asserts nothing.

Tiny ResNet50 Offline through LoadGen, alternating local and ray (a private one-node Ray cluster
started per run, one actor with the same engine threads as the local worker), repeated:

  (a) null backend samples/s: the harness's own ceiling; with Ray every batch is one actor call and
      its answer, so this is the head's completion path (per call and per sample costs below)
  (b) tiny ResNet50 samples/s
  (c) ray / local for each
  (d) the head's completion capacity per batch size (null backend on Ray at --batches), from which
      docs/ray.md's scaling model takes its per-call and per-sample costs

usage: python scripts/bench_ray.py [--repeats 3] [--null-samples 200000] [--samples 4096] [--batches 8,64]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_harness import harness, prepare, settings_for  # noqa: E402  (scripts/ is on the path)


def offline(root: Path, tag: str, executor: str, samples: int, batch: int, null: bool) -> float:
    extra = [f"--executor={executor}", f"--gpu_batch_size={batch}", "--min_duration=1",
             f"--min_query_count={samples}", "--offline_expected_qps=1"]
    if executor == "ray":
        extra.append("--ray_actor_cpus=2")      # the local worker's two engine threads, on one actor
    m = harness(settings_for("Offline", extra, tiny=True), root / "logs" / tag, null=null)
    if m["status"] != "ok":
        raise SystemExit(f"{tag}: {m['error']}")
    return float(m["metric_value"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--null-samples", type=int, default=200_000)
    ap.add_argument("--ray-null-samples", type=int, default=40_000)
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--batches", default="8,64")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_ray_"))
    prepare(root, tiny=True)
    figures: dict[str, list[float]] = {}
    for r in range(args.repeats):
        for executor in ("local", "ray"):
            for what, null, n in (("null", True, args.null_samples if executor == "local" else args.ray_null_samples),
                                  ("resnet50", False, args.samples)):
                v = offline(root, f"{what}-{executor}-{r}", executor, n, args.batch, null)
                figures.setdefault(f"{what} {executor}", []).append(v)
                print(f"  run {r}: {what:8s} {executor:5s} batch {args.batch}: {v:10.1f} samples/s", flush=True)
    print(f"\nTiny ResNet50 Offline, batch {args.batch}, {args.repeats} alternating repeats (medians; all runs):")
    med = {k: statistics.median(v) for k, v in figures.items()}
    for k, v in figures.items():
        print(f"  {k:16s} {med[k]:10.1f} samples/s   ({', '.join(f'{x:.1f}' for x in v)})")
    for what in ("null", "resnet50"):
        print(f"  {what:8s} ray / local = {med[what + ' ray'] / med[what + ' local']:.3f}")
    print("\nHead completion path on Ray (null backend, one actor):")
    for b in (int(x) for x in args.batches.split(",")):
        v = offline(root, f"null-ray-b{b}", "ray", max(args.ray_null_samples, 500 * b), b, True)
        print(f"  batch {b:4d}: {v:10.1f} samples/s = {v / b:8.1f} actor calls/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
