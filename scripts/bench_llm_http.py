"""The cost of serving over HTTP: the tiny Llama2 through `--backend=openai` (the harness's own server, started by
`make run_llm_server` with the same batching) beside the in-process transformers backend, in one run, alternating.

Offline: tokens/s over the same sample count. Server: TTFT and TPOT p99 at the same QPS (a share of the measured
Offline rate). Prints figures and the ratios; asserts nothing.

usage: python scripts/bench_llm_http.py [--samples 240] [--batch 16] [--repeats 2] [--server_share 0.3]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LLAMA = ("--benchmarks=llama2_70b", "--model_variant=tiny")


def main_(env: dict, *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "code.main", *args], cwd=REPO, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"code.main {' '.join(args)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r


def record(log_dir: Path) -> dict:
    [md] = glob.glob(str(log_dir / "**" / "metadata.json"), recursive=True)
    return json.loads(Path(md).read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=240)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--server_share", type=float, default=0.3, help="Server QPS as a share of the Offline rate")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_llm_http-"))
    env = dict(os.environ, MLPERF_BUILD_DIR=str(work / "build"), MLPERF_PROGRESS="0",
               MLPERF_SCRATCH_PATH=os.environ.get("MLPERF_SCRATCH_PATH", str(work / "scratch")))
    for action in ("download_model", "download_data", "preprocess_data"):
        main_(env, f"--action={action}", *LLAMA)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    main_(env, "--action=run_llm_server", *LLAMA, f"--gpu_batch_size={a.batch}", f"--llm_server_port={port}")
    ways = {"in-process": ("--backend=transformers",), "HTTP": ("--backend=openai",)}
    off = {w: [] for w in ways}
    try:
        n = 0
        for _ in range(a.repeats):
            for w, flags in ways.items():
                d = work / f"off-{n}"
                n += 1
                main_(env, "--action=run_harness", *LLAMA, *flags, "--scenarios=Offline", f"--gpu_batch_size={a.batch}",
                      "--min_duration=1", f"--min_query_count={a.samples}", "--offline_expected_qps=1", f"--log_dir={d}")
                m = record(d)
                off[w].append((m["tokens"]["tokens_per_second"], m["metric_value"]))
        rate = min(v[1] for v in off["in-process"])
        qps = round(a.server_share * rate, 2)
        srv = {}
        for w, flags in ways.items():
            d = work / f"srv-{w}"
            main_(env, "--action=run_harness", *LLAMA, *flags, "--scenarios=Server", f"--gpu_batch_size={a.batch}",
                  f"--server_target_qps={qps}", "--min_duration=1000", "--min_query_count=460",
                  "--performance_sample_count=64", f"--log_dir={d}")
            srv[w] = record(d)
    finally:
        main_(env, "--action=stop_llm_server")
    best = {w: max(t for t, _ in v) for w, v in off.items()}
    print(f"tiny Llama2, Offline {a.samples} samples, batch {a.batch}, best of {a.repeats} (alternating):")
    for w in ways:
        print(f"  {w:10s} {best[w]:9.1f} tokens/s   (runs: {', '.join(f'{t:.1f}' for t, _ in off[w])})")
    print(f"  HTTP / in-process: {best['HTTP'] / best['in-process']:.3f} "
          f"(overhead {100 * (1 - best['HTTP'] / best['in-process']):.1f}%)")
    print(f"Server at {qps} QPS ({a.server_share:.0%} of the in-process Offline rate), 460 queries:")
    for w in ways:
        t = srv[w]["tokens"]
        print(f"  {w:10s} TTFT p99 {t['ttft_p99_ns'] / 1e6:7.2f} ms   TPOT p99 {t['tpot_p99_ns'] / 1e6:6.2f} ms   "
              f"{srv[w]['result_validity']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
