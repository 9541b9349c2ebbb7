"""Harness overhead benchmark for Whisper (transformers, CPU or GPU). Prints figures; asserts nothing.

  (a) raw samples/s: a tight loop of the harness's own Processor (WhisperProcessor.process: Decoder.decode, the
      same model folder, precision, device and batch size), on a worker thread set up as the SUT's (thread_init:
      pinning, torch threads), batches cut from the QSL's features in order, every sample equally often; no LoadGen;
  (b) harness Offline samples/s through LoadGen (offline_expected_qps = a, min_duration = --seconds);
  (c) b/a (goal >= 0.97).
Alternates a and b in this one process tree (--repeats harness runs, each between two raw loops: the machine may
be shared, so compare the figures of one invocation, not across invocations) and reports each b against the mean
of its neighbouring a's, and the median of those ratios (scripts/bench_common.py). Tokens/s of each harness run
(whisper's result field) is printed beside.

The tiny variant (default) is built in a private scratch. --real runs whisper-large-v3 and the repacked LibriSpeech
set when they are in $MLPERF_SCRATCH_PATH (download_model / download_data / preprocess_data first).

usage: python scripts/bench_whisper.py [--seconds 10] [--repeats 3] [--batch 8] [--real]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import (REPO, alternate, harness_run, offline_settings, on_worker_thread, prepare_tiny,  # noqa: E402
                          processor_rate, report)


def settings_for(extra: list[str], real: bool):
    return offline_settings("whisper", extra, not real)


def raw_loop(settings, seconds: float) -> float:
    """Samples/s of the harness's own Processor (WhisperProcessor: Decoder.decode) over the set's features, in
    gpu_batch_size batches, on a worker thread set up as the SUT sets up its workers (thread_init: core pinning
    and torch threads), no LoadGen."""
    from code.whisper.harness import WhisperBenchmark

    b = WhisperBenchmark(settings)
    qsl = b.make_qsl()
    qsl.load(range(qsl.total_count))
    [proc] = b.make_processors(qsl, b.generate_engines())
    return on_worker_thread(processor_rate, proc, qsl.total_count, seconds, whole_cycles=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each measurement")
    ap.add_argument("--repeats", type=int, default=3, help="harness runs, each between two raw loops")
    ap.add_argument("--batch", type=int, default=0, help="gpu_batch_size (0: the config's)")
    ap.add_argument("--real", action="store_true", help="whisper-large-v3 and LibriSpeech in $MLPERF_SCRATCH_PATH")
    ap.add_argument("--root", default=str(REPO / "build" / "bench_whisper"))
    a = ap.parse_args()
    root = Path(a.root)
    if not a.real:
        prepare_tiny(root, "whisper")
    extra = [f"--gpu_batch_size={a.batch}"] if a.batch else []
    s = settings_for(extra, a.real)
    dur = int(a.seconds * 1000)
    tokens: list[float] = []

    def harness(qps: float, i: int) -> dict:
        m = harness_run(settings_for([*extra, f"--min_duration={dur}", "--min_query_count=1",
                                      f"--offline_expected_qps={qps:.3f}"], a.real), root / "logs" / f"offline-{i}")
        tokens.append((m.get("tokens") or {}).get("tokens_per_second") or 0.0)
        return m
    fig = {"model": "whisper-large-v3" if a.real else "tiny Whisper (2+2 layers, d_model 64, 128 mel bins)",
           "device": "gpu" if s.system.accelerator == "gpu" else "cpu", "precision": s.precision,
           "batch": s.batch_size(), "seconds": a.seconds,
           **alternate(lambda: raw_loop(s, a.seconds), harness, a.repeats)}
    fig["b_harness_offline_tokens_per_s"] = tokens
    report(fig, root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
