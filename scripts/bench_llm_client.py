"""Client ceiling: the highest Server QPS our HTTP SUT (`--backend=openai` behind LoadGen) keeps VALID against an
instant server, the MLCommons endpoints echo server, beside the same figure for the MLCommons endpoints client
(`inference-endpoint benchmark online`, Poisson) on the same server, in the same run, rung by rung, alternating.

Both send the tiny Llama2 prompts' text to /v1/chat/completions and read the echoed text streamed word by word;
ours counts tokens by encoding it (`--llm_api=chat --llm_token_ids=retokenize`), as the endpoints client does.
A rung holds for ours when LoadGen calls the run VALID (completed rate, TTFT p99 <= 2 s, TPOT p99 <= 200 ms:
Llama2-70B's Server limits; at least 460 queries, what LoadGen's early stopping needs at p99). It holds for the endpoints client when every sample completed, none failed, its
reported QPS is at least 90% of the target, and its TTFT / TPOT p99 are within the same limits.
The ladder climbs by --step from --start until both fail (or --max). Prints figures; asserts nothing.

usage: python scripts/bench_llm_client.py [--start 25] [--step 1.41] [--max 6400] [--seconds 5] [--workers 1]
needs: build/endpoints_venv (scripts/endpoints_venv.sh)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from scripts.bench_llm_http import LLAMA, main_, record  # noqa: E402

EP = REPO / "build" / "endpoints_venv" / "bin"
TTFT_S, TPOT_S = 2.0, 0.2


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_echo() -> tuple[subprocess.Popen, str]:
    port = free_port()
    p = subprocess.Popen([str(EP / "python"), "-m", "inference_endpoint.testing.echo_server", "--port", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=2)
            return p, url
        except urllib.error.HTTPError:
            return p, url                       # it answers (404: it has no /v1/models)
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline or p.poll() is not None:
                raise SystemExit("the endpoints echo server did not start")
            time.sleep(0.3)


def percentile(summary: dict, name: str, q: str = "99") -> float | None:
    """A latency percentile in seconds from the endpoints client's result_summary.json (ns values)."""
    block = summary.get(name) or {}
    pct = block.get("percentiles") or {}
    for k in (q, f"p{q}", f"{q}.0", float(q)):
        if k in pct:
            return float(pct[k]) / 1e9
    return None


def ours(env: dict, url: str, qps: float, seconds: float, work: Path) -> dict:
    d = work / f"ours-{qps:g}"
    main_(env, "--action=run_harness", *LLAMA, "--backend=openai", f"--llm_endpoints={url}",
          "--llm_served_model=echo", "--llm_api=chat", "--llm_token_ids=retokenize", "--scenarios=Server",
          "--gpu_batch_size=4096", f"--server_target_qps={qps:g}", f"--min_duration={int(seconds * 1000)}",
          f"--min_query_count={max(460, int(qps * seconds))}", "--performance_sample_count=240", "--force", f"--log_dir={d}")
    m = record(d)
    t = m.get("tokens") or {}
    return {"ok": m["result_validity"] == "VALID", "qps": m["metric_value"], "validity": m["result_validity"],
            "ttft_p99_s": (t.get("ttft_p99_ns") or 0) / 1e9, "tpot_p99_s": (t.get("tpot_p99_ns") or 0) / 1e9}


def theirs(url: str, data: Path, qps: float, seconds: float, workers: int, tokenizer: Path, work: Path) -> dict:
    d = work / f"theirs-{qps:g}"
    n = max(460, int(qps * seconds))
    r = subprocess.run([str(EP / "inference-endpoint"), "benchmark", "online", "--model", "echo", "--endpoints", url,
                        "--dataset", str(data), "--api-type", "openai", "--tokenizer", str(tokenizer),
                        "--load-pattern", "poisson", "--target-qps", f"{qps:g}", "--streaming", "on",
                        "--num-samples", str(n), "--duration", "0", "--workers", str(workers),
                        "--report-dir", str(d)], capture_output=True, text=True)
    f = d / "performance" / "result_summary.json"
    if r.returncode != 0 or not f.exists():
        return {"ok": False, "qps": 0.0, "validity": f"exit {r.returncode}: {(r.stderr or r.stdout)[-200:]!r}",
                "ttft_p99_s": None, "tpot_p99_s": None}
    s = json.loads(f.read_text())
    got = float(s.get("qps") or 0.0)
    ttft, tpot = percentile(s, "ttft"), percentile(s, "tpot")
    done, failed = s.get("n_samples_completed", 0), s.get("n_samples_failed", 0)
    ok = (failed == 0 and done >= n and got >= 0.9 * qps and ttft is not None and ttft <= TTFT_S
          and (tpot is None or tpot <= TPOT_S))
    return {"ok": ok, "qps": got, "validity": f"{done}/{n} completed, {failed} failed", "ttft_p99_s": ttft,
            "tpot_p99_s": tpot}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--start", type=float, default=25.0)
    ap.add_argument("--max", type=float, default=6400.0)
    ap.add_argument("--step", type=float, default=1.41, help="each rung's QPS over the last one's")
    ap.add_argument("--seconds", type=float, default=5.0, help="each rung's length (LoadGen min_duration)")
    ap.add_argument("--workers", type=int, default=1, help="the endpoints client's worker processes")
    a = ap.parse_args()
    if not (EP / "inference-endpoint").exists():
        raise SystemExit("no endpoints client: run scripts/endpoints_venv.sh")
    work = Path(tempfile.mkdtemp(prefix="bench_llm_client-"))
    env = dict(os.environ, MLPERF_BUILD_DIR=str(work / "build"), MLPERF_PROGRESS="0",
               MLPERF_SCRATCH_PATH=os.environ.get("MLPERF_SCRATCH_PATH", str(work / "scratch")))
    for action in ("download_model", "download_data", "preprocess_data"):
        main_(env, f"--action={action}", *LLAMA)
    scratch = Path(env["MLPERF_SCRATCH_PATH"])
    tokenizer = scratch / "models" / "llama2_70b" / "tiny" / "checkpoint"
    from tokenizers import Tokenizer

    from code.common.llm.harness import load_prompts

    tok = Tokenizer.from_file(str(tokenizer / "tokenizer.json"))
    prompts = load_prompts(scratch / "preprocessed_data" / "llama2_70b" / "tiny" / "prompts.npz")
    data = work / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": tok.decode(p.tolist())}) + "\n" for p in prompts))
    echo, url = start_echo()
    rows: list[tuple[float, dict, dict]] = []
    try:
        qps, held = a.start, {"ours": True, "theirs": True}
        while qps <= a.max and any(held.values()):
            o = ours(env, url, qps, a.seconds, work) if held["ours"] else None
            t = theirs(url, data, qps, a.seconds, a.workers, tokenizer, work) if held["theirs"] else None
            rows.append((qps, o, t))
            for k, v in (("ours", o), ("theirs", t)):
                if v is not None and not v["ok"]:
                    held[k] = False
            print(f"  {qps:8g} QPS  ours: {fmt(o)}  |  endpoints client: {fmt(t)}", flush=True)
            qps = round(qps * a.step, 1)
    finally:
        echo.terminate()
        echo.wait(timeout=30)
    best = {k: max((q for q, o, t in rows if (o if k == "ours" else t) and (o if k == "ours" else t)["ok"]),
                   default=0.0) for k in ("ours", "theirs")}
    cores = len(os.sched_getaffinity(0))
    print(f"client ceiling against the endpoints echo server ({cores} usable cores, {a.seconds:g} s rungs, "
          f"tiny Llama2 prompts echoed word by word, endpoints client workers={a.workers}):")
    print(f"  ours (LoadGen Server, VALID):                         {best['ours']:g} QPS")
    print(f"  MLCommons endpoints client (Poisson, >=90% achieved): {best['theirs']:g} QPS")
    if best["theirs"]:
        print(f"  ours / theirs: {best['ours'] / best['theirs']:.2f}")
    return 0


def fmt(r: dict | None) -> str:
    if r is None:
        return "(stopped)"
    lat = "" if r["ttft_p99_s"] is None else f" ttft p99 {1000 * r['ttft_p99_s']:.0f} ms"
    if r.get("tpot_p99_s") is not None:
        lat += f" tpot p99 {1000 * r['tpot_p99_s']:.1f} ms"
    return f"{'held' if r['ok'] else 'FAIL'} {r['qps']:.1f} QPS{lat} ({r['validity']})"


if __name__ == "__main__":
    sys.exit(main())
