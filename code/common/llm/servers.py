"""``make run_llm_server`` / ``make stop_llm_server``: the serving engines ``--backend=openai`` drives.

One server per model instance, as the system's config block places them (GPUs / tensor x pipeline parallel),
each with ``CUDA_VISIBLE_DEVICES`` set to its GPU group and its own port (``--llm_server_port`` + i):

| engine  | command                                            | token ids in the stream                       |
|---------|----------------------------------------------------|-----------------------------------------------|
| vllm    | ``vllm serve <checkpoint>``                        | yes (request field return_token_ids)          |
| sglang  | ``python -m sglang.launch_server``                 | not tried here: refused if its stream has none |
| trtllm  | ``trtllm-serve <checkpoint> --backend pytorch``    | not tried here: refused if its stream has none |
| harness | ``python -m code.common.llm.serve`` (transformers) | yes                                           |

``auto`` picks vLLM on GPU systems where it imports, else the harness's own server. Each server's output goes
to build/llm_server/<port>.log. The launcher waits for every ``/health``; a server that exits or does not
become healthy in ``--llm_server_start_s`` is one error line with the last line of its log, and every server
already started is stopped. The servers it started are written to build/llm_server/endpoints.json (staged), the
file ``--backend=openai`` reads when no ``--llm_endpoints`` are given; ``make stop_llm_server`` stops exactly
those processes (the pid and its command line must still match) and removes the file.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from code.common import paths
from code.common.errors import HarnessError
from code.common.fileio import write_json

ENGINES = ("auto", "harness", "vllm", "sglang", "trtllm")


def state_dir() -> Path:
    return paths.build_dir() / "llm_server"


def endpoints_file() -> Path:
    return state_dir() / "endpoints.json"


def start_command(benchmark: str, variant: str) -> str:
    tiny = " --model_variant=tiny" if variant == "tiny" else ""
    return f'make run_llm_server RUN_ARGS="--benchmarks={benchmark}{tiny}"'


def served_name(benchmark: str, variant: str) -> str:
    return f"{benchmark}-tiny" if variant == "tiny" else benchmark


# --- where the servers are -----------------------------------------------------------------------------

def endpoints(urls: tuple[str, ...], benchmark: str, variant: str) -> tuple[list[str], str]:
    """(server URLs, the model name they serve, "" to ask each server): ``--llm_endpoints`` when given, else the
    file ``make run_llm_server`` wrote for this benchmark."""
    if urls:
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        if bad:
            raise HarnessError(f"--llm_endpoints: {bad[0]} is not an http(s) URL",
                               "name servers as --llm_endpoints=http://host:port,http://host:port")
        return [u.rstrip("/") for u in urls], ""
    f = endpoints_file()
    fix = f"{start_command(benchmark, variant)}, or name running servers with --llm_endpoints=http://host:port,..."
    if not f.exists():
        raise HarnessError(f"--backend=openai: no LLM servers are running for {benchmark} ({f} does not exist)", fix)
    try:
        rec = json.loads(f.read_text())
        servers = [s["url"] for s in rec["servers"]]
    except (OSError, ValueError, KeyError, TypeError):
        raise HarnessError(f"{f} is not an endpoints file make run_llm_server wrote", f"delete it, then {fix}") from None
    if rec.get("benchmark") != benchmark or rec.get("variant") != variant:
        raise HarnessError(f"the LLM servers in {f} serve {rec.get('benchmark')} ({rec.get('variant')}), not "
                           f"{benchmark} ({variant})", f"make stop_llm_server, then {fix}")
    return servers, str(rec.get("served_model") or "")


# --- the commands ------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    env: dict
    port: int
    gpus: tuple[int, ...]


def pick_engine(engine: str, gpu: bool) -> str:
    if engine != "auto":
        return engine
    if gpu:
        from code.common.backends import backend_class

        if backend_class("vllm").available()[0]:
            return "vllm"
    return "harness"


def command(engine: str, spec, *, port: int, host: str, served: str, spec_file: Path | None = None,
            max_new_tokens: int = 1024) -> Launch:
    """The argv and environment of one server for one worker spec (code.common.llm.backends.WorkerSpec)."""
    gpus = tuple(spec.gpus)
    env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))} if gpus else {}
    dtype = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "auto"}.get(spec.precision, "auto")
    if engine == "vllm":
        argv = ["vllm", "serve", spec.model_dir, "--served-model-name", served, "--host", host, "--port", str(port),
                "--tensor-parallel-size", str(spec.tensor_parallel_size),
                "--pipeline-parallel-size", str(spec.pipeline_parallel_size),
                "--max-num-seqs", str(spec.max_batch_size), "--dtype", dtype,
                "--gpu-memory-utilization", str(spec.kv_cache_memory_fraction)]
        if spec.max_num_tokens:
            argv += ["--max-num-batched-tokens", str(spec.max_num_tokens)]
        if spec.precision == "fp8":
            argv += ["--quantization", "fp8"]
        if spec.expert_parallel_size > 1:
            argv += ["--enable-expert-parallel"]
        if spec.max_context:
            argv += ["--max-model-len", str(spec.max_context)]
    elif engine == "sglang":
        argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", spec.model_dir, "--served-model-name",
                served, "--host", host, "--port", str(port), "--tp-size", str(spec.tensor_parallel_size),
                "--pp-size", str(spec.pipeline_parallel_size), "--max-running-requests", str(spec.max_batch_size),
                "--mem-fraction-static", str(spec.kv_cache_memory_fraction), "--dtype", dtype]
        if spec.expert_parallel_size > 1:
            argv += ["--ep-size", str(spec.expert_parallel_size)]
        if spec.precision == "fp8":
            argv += ["--quantization", "fp8"]
    elif engine == "trtllm":
        argv = ["trtllm-serve", spec.model_dir, "--backend", "pytorch", "--host", host, "--port", str(port),
                "--tp_size", str(spec.tensor_parallel_size), "--pp_size", str(spec.pipeline_parallel_size),
                "--ep_size", str(spec.expert_parallel_size), "--max_batch_size", str(spec.max_batch_size),
                "--kv_cache_free_gpu_memory_fraction", str(spec.kv_cache_memory_fraction)]
        if spec.max_num_tokens:
            argv += ["--max_num_tokens", str(spec.max_num_tokens)]
    elif engine == "harness":
        if spec_file is None:
            raise ValueError("the harness's server needs its spec file")
        argv = [sys.executable, "-m", "code.common.llm.serve", "--spec", str(spec_file), "--host", host,
                "--port", str(port)]
    else:
        raise HarnessError(f"unknown LLM server engine {engine!r}", f"use --llm_server_engine={'|'.join(ENGINES)}")
    return Launch(tuple(argv), env, port, gpus)


def _missing(engine: str) -> str | None:
    exe = {"vllm": "vllm", "trtllm": "trtllm-serve"}.get(engine)
    if exe and not shutil.which(exe):
        return f"{exe} is not on PATH"
    if engine == "sglang":
        import importlib.util

        if importlib.util.find_spec("sglang") is None:
            return "sglang is not installed"
    return None


# --- start and stop -----------------------------------------------------------------------------------------

def healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _last_line(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    err = [ln for ln in lines if "error" in ln.lower()]
    return (err or lines or [""])[-1].strip()[:200]


def _alive(pid: int, argv: list[str]) -> bool:
    """The process is there and is still the one started (its command line matches: pids are reused)."""
    try:
        got = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return False
    tail = list(argv)[1:]           # an entry-point script runs as "<python> <script> args...": match the args
    return bool(got) and got[len(got) - len(tail):] == tail if tail else bool(got)


def _kill(pid: int, argv: list[str], grace_s: float = 20.0) -> bool:
    if not _alive(pid, argv):
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
    except OSError:
        return False
    end = time.monotonic() + grace_s
    while time.monotonic() < end and _alive(pid, argv):
        time.sleep(0.2)
    if _alive(pid, argv):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    return True


def running() -> list[dict]:
    """The servers the endpoints file names that are still alive."""
    f = endpoints_file()
    try:
        rec = json.loads(f.read_text())
        return [s for s in rec.get("servers", []) if _alive(int(s["pid"]), s["command"])]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def start(launches: list[Launch], *, benchmark: str, variant: str, engine: str, served: str, host: str,
          start_s: float, log=print) -> dict:
    """Start every server, wait for all of them to be healthy, write the endpoints file; on any failure stop
    those already started and raise one error."""
    if running():
        raise HarnessError(f"LLM servers started earlier are still running ({endpoints_file()})",
                           "make stop_llm_server first")
    missing = _missing(engine)
    if missing:
        raise HarnessError(f"--llm_server_engine={engine}: {missing}",
                           "install it (make prebuild LLM_EXTRAS=vllm VENV=.venv-vllm for vLLM), or use "
                           "--llm_server_engine=harness")
    d = state_dir()
    d.mkdir(parents=True, exist_ok=True)
    procs: list[tuple[Launch, subprocess.Popen, Path]] = []

    def stop_all() -> None:
        for ln, p, _ in procs:
            _kill(p.pid, list(ln.argv), grace_s=5)
            p.wait(timeout=10)
    try:
        for ln in launches:
            url = f"http://{host}:{ln.port}"
            if healthy(url, timeout=0.5):
                raise HarnessError(f"port {ln.port} is taken: something already answers at {url}",
                                   "stop it, or pick other ports with --llm_server_port=<first port>")
            log_path = d / f"{ln.port}.log"
            with open(log_path, "wb") as out:
                p = subprocess.Popen(list(ln.argv), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, **ln.env}, cwd=paths.REPO_ROOT)
            procs.append((ln, p, log_path))
            log(f"[llm_server] started {' '.join(ln.argv[:4])} ... port {ln.port}"
                + (f", GPUs {','.join(map(str, ln.gpus))}" if ln.gpus else "") + f" (pid {p.pid}, log {log_path})")
        end = time.monotonic() + start_s
        waiting = list(procs)
        while waiting:
            for item in list(waiting):
                ln, p, log_path = item
                if p.poll() is not None:
                    raise HarnessError(f"the LLM server on port {ln.port} exited ({p.returncode}) while starting: "
                                       f"{_last_line(log_path)}", f"see {log_path}")
                if healthy(f"http://{host}:{ln.port}"):
                    waiting.remove(item)
            if waiting and time.monotonic() > end:
                ln, _, log_path = waiting[0]
                raise HarnessError(f"the LLM server on port {ln.port} was not healthy after {start_s:g} s: "
                                   f"{_last_line(log_path)}", f"see {log_path}; raise --llm_server_start_s for a "
                                   "large model")
            time.sleep(0.3)
    except BaseException:
        stop_all()
        raise
    rec = {"benchmark": benchmark, "variant": variant, "engine": engine, "served_model": served,
           "servers": [{"url": f"http://{host}:{ln.port}", "pid": p.pid, "command": list(ln.argv),
                        "gpus": list(ln.gpus), "log": str(log_path)} for ln, p, log_path in procs]}
    write_json(endpoints_file(), rec)
    return rec


def stop(log=print) -> int:
    """Stop the servers the endpoints file names (only while each pid still runs its recorded command)."""
    f = endpoints_file()
    if not f.exists():
        log(f"[llm_server] no servers to stop ({f} does not exist)")
        return 0
    try:
        rec = json.loads(f.read_text())
        servers = list(rec.get("servers", []))
    except (OSError, ValueError):
        servers = []
    for s in servers:
        try:
            stopped = _kill(int(s["pid"]), list(s["command"]))
        except (KeyError, TypeError, ValueError):
            stopped = False
        log(f"[llm_server] {s.get('url')}: {'stopped' if stopped else 'was not running'} (pid {s.get('pid')})")
    f.unlink()
    return 0
