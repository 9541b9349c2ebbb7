"""Harness overhead benchmark for Wan 2.2 T2V (diffusers WanPipeline, CPU or GPU). Prints figures; asserts nothing.

  (a) raw samples/s: a tight loop of plain WanPipeline calls on the same pipeline folder, precision and device the
      harness loads (code.wan.model.load_pipeline), with the reference's arguments (run_mlperf.py
      Model.issue_queries: one prompt a call, negative prompt, 20 steps, guidance 4.0 / 3.0, a torch.Generator
      re-seeded with 42), frames converted to uint8 as the harness answers them; prompts in order; no LoadGen, no
      harness code on the call path;
  (b) harness Offline samples/s through LoadGen (offline_expected_qps = a, min_duration = --seconds);
  (c) b/a (goal >= 0.97).
Alternates a and b in this one process tree (--repeats harness runs, each between two raw loops; a shared machine
drifts, so compare figures of one invocation) and reports each b against the mean of its neighbouring a's, and the
median of those ratios (scripts/bench_common.py). The raw loop runs on a thread with the harness worker's torch
thread count (the config's cpu_threads).

The tiny variant (default) is built in a private scratch. --real runs Wan2.2-T2V-A14B when it and the prompts are in
$MLPERF_SCRATCH_PATH (download_model / download_data / preprocess_data first).

usage: python scripts/bench_wan.py [--seconds 10] [--repeats 3] [--real]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import REPO, offline_settings, offline_vs_raw, on_worker_thread, prepare_tiny, report  # noqa: E402


def raw_loop(settings, seconds: float) -> float:
    """Videos/s of plain WanPipeline calls (the reference's call, one prompt each), on one thread set up as the
    harness's worker (torch threads = the config's cpu_threads)."""
    import torch

    from code.wan import constants as C
    from code.wan.harness import WanBenchmark, to_uint8
    from code.wan.model import load_pipeline

    b = WanBenchmark(settings)
    prompts = b.data().prompts
    folder = b.generate_engines()["pipeline"]
    pipe = load_pipeline(folder, settings.precision, b.device(0))
    h, w, f = C.geometry(settings.model_variant)
    tokens = C.TINY_MAX_TOKENS if b.tiny else C.REFERENCE_MAX_TOKENS
    dev = pipe._execution_device

    def call(prompt: str):
        return to_uint8(pipe(prompt=prompt, negative_prompt=C.NEGATIVE_PROMPT, height=h, width=w, num_frames=f,
                             guidance_scale=C.GUIDANCE_SCALE, guidance_scale_2=C.GUIDANCE_SCALE_2,
                             num_inference_steps=C.NUM_STEPS, generator=torch.Generator(device=dev).manual_seed(C.SEED),
                             max_sequence_length=tokens).frames[0])

    def work() -> float:
        if b.intra_op_threads() and dev.type == "cpu":
            torch.set_num_threads(b.intra_op_threads())
        with torch.inference_mode():
            call(prompts[0])
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                call(prompts[n % len(prompts)])
                n += 1
        return n / (time.perf_counter() - t0)
    return on_worker_thread(work)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each measurement")
    ap.add_argument("--repeats", type=int, default=3, help="harness runs, each between two raw loops")
    ap.add_argument("--real", action="store_true", help="Wan2.2-T2V-A14B and the prompts in $MLPERF_SCRATCH_PATH")
    ap.add_argument("--root", default=str(REPO / "build" / "bench_wan"))
    a = ap.parse_args()
    root = Path(a.root).resolve()         # the runner's children work in other folders
    if not a.real:
        prepare_tiny(root, "wan")

    def settings_for(extra: list[str]):
        return offline_settings("wan", extra, not a.real)
    s = settings_for([])
    fig = {"model": "Wan2.2-T2V-A14B" if a.real else "tiny Wan 2.2 (2 x WanTransformer3DModel 2 layers, 128x128x5)",
           "device": "gpu" if s.system.accelerator == "gpu" else "cpu", "precision": s.precision,
           "batch": s.batch_size(), "seconds": a.seconds,
           **offline_vs_raw(settings_for, [], lambda: raw_loop(s, a.seconds), a.seconds, a.repeats, root)}
    report(fig, root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
