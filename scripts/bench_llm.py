"""LLM serving benchmark on a tiny LLM (the Llama2-70B stand-in by default; ``--benchmark`` picks
Mixtral-8x7B's mixture of experts or Llama3.1-8B), transformers backend, CPU. Prints figures;
asserts nothing.

  (a) null generation (tokens without compute), Offline: the harness's own ceiling in tokens/s and
      first-token events/s through LoadGen
  (b) the tiny model Offline: tokens/s with in-flight and with static batching (same batch size)
  (c) the highest VALID Server QPS with in-flight and with static batching, side by side (the same
      search for each: double until INVALID, then bisect; each probe >= 460 queries so the p99
      TTFT/TPOT early-stopping estimates can pass), and the ratio (goal >= 1.5x for in-flight)
  (d) TTFT / TPOT p99 at each mode's highest VALID QPS

usage: python scripts/bench_llm.py [--benchmark llama2_70b|mixtral_8x7b|llama3_1_8b] [--batch 16]
                                  [--queries 460] [--skip-server]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BENCHMARKS = {"llama2_70b": ("--benchmarks=llama2_70b", "--model_variant=tiny"),
              "mixtral_8x7b": ("--benchmarks=mixtral_8x7b", "--model_variant=tiny", "--round=v6.0"),
              "llama3_1_8b": ("--benchmarks=llama3_1_8b", "--model_variant=tiny")}
LLAMA = BENCHMARKS["llama2_70b"]           # main() rebinds it to --benchmark's arguments


def main_cli(env: dict, *args: str) -> dict | None:
    """Run ``python -m code.main`` with a private log folder; return the run's metadata (None on error)."""
    log = Path(tempfile.mkdtemp(prefix="bench-llm-", dir=env["MLPERF_BUILD_DIR"]))
    r = subprocess.run([sys.executable, "-m", "code.main", *args, f"--log_dir={log}"], cwd=REPO, env=env,
                       capture_output=True, text=True)
    metas = list(log.rglob("metadata.json"))
    if not metas:
        print(r.stdout[-2000:], r.stderr[-2000:])
        return None
    return json.loads(metas[0].read_text())


def prepare(env: dict) -> None:
    for action in ("download_model", "download_data", "preprocess_data"):
        subprocess.run([sys.executable, "-m", "code.main", f"--action={action}", *LLAMA], cwd=REPO, env=env,
                       check=True, capture_output=True)


def offline(env: dict, n: int, *extra: str) -> dict:
    return main_cli(env, "--action=run_harness", *LLAMA, "--scenarios=Offline", "--min_duration=1",
                    f"--min_query_count={n}", "--offline_expected_qps=1", *extra)


def server_probe(env: dict, mode: str, bs: int, queries: int, log: list):
    def probe(qps: float) -> bool:
        m = main_cli(env, "--action=run_harness", *LLAMA, "--scenarios=Server", f"--llm_batching={mode}",
                     f"--gpu_batch_size={bs}", f"--server_target_qps={qps:.3f}", "--performance_sample_count=64",
                     f"--min_query_count={queries}", "--min_duration=1000", "--force")
        ok = bool(m and m["valid"])
        t = (m or {}).get("tokens") or {}
        log.append((mode, qps, ok, t.get("ttft_p99_ns"), t.get("tpot_p99_ns")))
        print(f"  {mode:8s} {qps:8.2f} QPS: {'VALID' if ok else 'INVALID'}"
              + (f"  TTFT p99 {t['ttft_p99_ns'] / 1e6:.1f} ms, TPOT p99 {t['tpot_p99_ns'] / 1e6:.2f} ms"
                 if t.get("ttft_p99_ns") else ""), flush=True)
        return ok
    return probe


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--queries", type=int, default=460)
    ap.add_argument("--skip-server", action="store_true")
    ap.add_argument("--benchmark", choices=sorted(BENCHMARKS), default="llama2_70b")
    a = ap.parse_args()
    global LLAMA
    LLAMA = BENCHMARKS[a.benchmark]
    root = Path(tempfile.mkdtemp(prefix="bench-llm-"))
    env = {**os.environ, "MLPERF_BUILD_DIR": str(root / "build"), "MLPERF_SCRATCH_PATH": str(root / "scratch"),
           "PYTHONUNBUFFERED": "1"}
    Path(env["MLPERF_BUILD_DIR"]).mkdir(parents=True)
    prepare(env)

    os.environ.update(env)                  # the null run goes in process (RunControl.null_processor is no flag)
    from code.common.harness.runner import run_one
    from code.common.settings import RunControl
    from code.main import plan

    _, [s] = plan(["--action=run_harness", *LLAMA, "--scenarios=Offline", "--min_duration=1", "--min_query_count=50000",
                   "--offline_expected_qps=1", "--gpu_batch_size=512"])
    m = run_one(s, RunControl(null_processor=True), Path(tempfile.mkdtemp(dir=env["MLPERF_BUILD_DIR"])) / "null", {})
    r = m["results"]
    print(f"(a) null generation, Offline, batch 512: {r['result_tokens_per_second']:,.0f} tokens/s, "
          f"{r['result_samples_per_second']:,.0f} first-token events/s (one per sample; max_new_tokens each)")

    rates = {}
    for mode in ("inflight", "static"):
        m = offline(env, 480 if a.benchmark == "llama2_70b" else 360, f"--llm_batching={mode}",
                    f"--gpu_batch_size={a.batch}")
        rates[mode] = m
        g = m["generation"]["workers"][0]
        print(f"(b) tiny {a.benchmark} Offline {mode:8s} batch {a.batch}: {m['tokens']['tokens_per_second']:.1f} tokens/s, "
              f"{m['metric_value']:.1f} samples/s, mean rows per step {g['mean_rows_per_step']}, "
              f"rows idle in finished slots {g['idle_row_steps']} of {g['row_steps']}")
    if a.skip_server:
        return
    from code.common.tuning import search

    best, log = {}, []
    for mode in ("inflight", "static"):
        start = 0.25 * rates["inflight"]["metric_value"]
        best[mode] = search(server_probe(env, mode, a.batch, a.queries, log), start, precision=0.05, max_probes=9)
    ratio = best["inflight"] / best["static"] if best["static"] else float("inf")
    print(f"(c) highest VALID Server QPS, batch {a.batch}: in-flight {best['inflight']:.2f}, static "
          f"{best['static']:.2f}: {ratio:.2f}x")
    for mode in ("inflight", "static"):
        at = [x for x in log if x[0] == mode and x[2] and abs(x[1] - best[mode]) < 1e-6]
        if at:
            print(f"(d) {mode} at {best[mode]:.2f} QPS: TTFT p99 {at[0][3] / 1e6:.1f} ms, TPOT p99 {at[0][4] / 1e6:.2f} ms")


if __name__ == "__main__":
    main()
