"""Soak benchmark: tiny ResNet50 Server for 10 minutes at 90% of its highest VALID QPS, with the
harness's memory sampled every 10 s. Prints figures; asserts nothing.

The latency bound is --latency-ms (default 100 ms, not mlperf.conf's 15 ms): the tiny model's own
batch-1 p99 on a shared 2-core VM is 8-20 ms (measured with a bare ONNX Runtime loop), so no target
is VALID at 15 ms there, while what a soak checks (memory and validity over time) needs a VALID
operating point.

1. A sweep of short Server probes (double the target until INVALID, then bisect) finds the highest
   VALID target QPS on this machine, now (each probe at least 2000 queries, for early stopping).
2. One run at 90% of it for --minutes through the real CLI (`python -m code.main`), while the RSS
   of the harness child (LoadGen, the SUT, ONNX Runtime) and of the parent is read from /proc
   every --every seconds.
3. Figures: the sweep, the run's validity and metric, RSS of the first and the last minute (mean),
   their ratio, and the peak.

usage: python scripts/soak_server.py [--minutes 10] [--every 10] [--probe-seconds 10]
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
sys.path.insert(0, str(REPO / "scripts"))

from bench_harness import harness, prepare, settings_for, sweep  # noqa: E402


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def child_of(pid: int) -> int | None:
    """The harness child (python -m code.common.harness.child) under ``pid``."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    for k in kids:
        try:
            if "code.common.harness.child" in Path(f"/proc/{k}/cmdline").read_text():
                return int(k)
        except OSError:
            continue
    return None


def find_max_valid(root: Path, seconds: float, bound: list[str]) -> tuple[float, list]:
    probes = []

    def probe(qps: float) -> bool:
        # 2000 queries: Server early stopping needs ~840 with none over the bound, more with a few
        s = settings_for("Server", [f"--min_duration={int(seconds * 1000)}", "--min_query_count=2000",
                                    f"--server_target_qps={qps:.1f}", *bound], tiny=True)
        m = harness(s, root / "logs" / f"probe-{qps:.1f}")
        ok = m["result_validity"] == "VALID"
        probes.append((round(qps, 1), m["result_validity"]))
        print(f"  probe {qps:8.1f} QPS: {m['result_validity']}", flush=True)
        return ok

    return sweep(probe, 100.0), probes


def soak(root: Path, qps: float, minutes: float, every: float, bound: list[str]) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log_dir = root / "logs" / "soak"
    cmd = [sys.executable, "-m", "code.main", "--action=run_harness", "--benchmarks=resnet50", "--model_variant=tiny",
           "--scenarios=Server", f"--server_target_qps={qps:.1f}", f"--min_duration={int(minutes * 60000)}",
           "--min_query_count=1", f"--log_dir={log_dir}", "--overwrite", "--force", *bound]
    t0 = time.time()
    p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    samples = []                         # (seconds since start, child RSS MB, parent RSS MB)
    child = None
    next_t = t0
    while p.poll() is None:
        now = time.time()
        if now >= next_t:
            child = child or child_of(p.pid)
            c = rss_mb(child) if child else None
            if c is not None:
                samples.append((round(now - t0, 1), round(c, 1), round(rss_mb(p.pid) or 0, 1)))
                print(f"  t={now - t0:6.0f}s child RSS {c:7.1f} MB", flush=True)
            next_t += every
        time.sleep(0.5)
    out = p.stdout.read()
    [meta] = [json.loads(m.read_text()) for m in log_dir.rglob("metadata.json")]
    first = [c for t, c, _ in samples if samples and t <= samples[0][0] + 60]
    last = [c for t, c, _ in samples if samples and t >= samples[-1][0] - 60]
    return {"exit_code": p.returncode, "wall_s": round(time.time() - t0, 1), "result_validity": meta["result_validity"],
            "metric_value": meta["metric_value"], "target_qps": round(qps, 1),
            "rss_first_minute_mb": round(sum(first) / len(first), 1) if first else None,
            "rss_last_minute_mb": round(sum(last) / len(last), 1) if last else None,
            "rss_peak_mb": max((c for _, c, _ in samples), default=None),
            "rss_last_over_first": round((sum(last) / len(last)) / (sum(first) / len(first)), 3) if first and last else None,
            "rss_samples": samples, "tail": out[-400:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--every", type=float, default=10.0, help="seconds between RSS samples")
    ap.add_argument("--probe-seconds", type=float, default=10.0)
    ap.add_argument("--latency-ms", type=float, default=100.0, help="Server latency bound of the probes and the soak")
    ap.add_argument("--root", default=str(REPO / "build" / "soak_server"))
    a = ap.parse_args()
    root = Path(a.root)
    prepare(root, tiny=True)
    bound = [f"--server_target_latency_ns={int(a.latency_ms * 1e6)}"]
    best, probes = find_max_valid(root, a.probe_seconds, bound)
    print(f"highest VALID Server QPS at a {a.latency_ms:g} ms bound: {best:.1f}; soaking at 90%: {0.9 * best:.1f} "
          f"for {a.minutes:g} min", flush=True)
    fig = {"latency_bound_ms": a.latency_ms, "max_valid_qps": round(best, 1), "probes": probes,
           **soak(root, 0.9 * best, a.minutes, a.every, bound)}
    for k, v in fig.items():
        if k not in ("rss_samples", "tail"):
            print(f"{k:24s} {v}")
    (root / "figures.json").write_text(json.dumps(fig, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
