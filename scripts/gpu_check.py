"""`make gpu_check`: one prepared script that proves the GPU paths in minutes, whenever a GPU is at hand.

Steps, most valuable figures first, each in its own process group with its own time limit (stopped
cleanly at the limit; what it measured before that is kept), all inside --budget_s:

  1 env        `make doctor` and `make info` on this machine: detection, KnownSystems match, config blocks
  2 resnet50   full-size ResNet50-v1.5 (random weights): raw engine loop, harness Offline and SingleStream
               through LoadGen on the pytorch backend (CUDA, fp16), and ONNX Runtime's CUDA provider
  3 sdxl       full-size SDXL (random weights, fp16, 20 steps, 1024x1024): raw diffusers, harness Offline
  4 llm        an 8B-parameter Llama shape (random fp16 weights) through the transformers backend in-process
               (Offline tokens/s; Server TTFT/TPOT p99 at a low QPS), the harness's own OpenAI server + the
               HTTP SUT, and vLLM (`--backend=vllm`, its server) when it is installed
  5 models     BERT-Large, RetinaNet (800x800), 3D-UNet (128^3) and DLRM-v2 (tables capped) full-size
               shapes through the pytorch backend's engines: raw samples/s for a few seconds each
  6 multigpu   with more than one GPU visible: where the harness puts workers and LLM instances

Without a GPU it is a CPU dry-run: the same steps at tiny sizes (the tiny variants), which prove the script,
not the GPU; the table says so at the top. Output: build/gpu_check/gpu_check.json and gpu_check.md (figure,
value, the single-GPU anchor beside it: NVIDIA's published 8-GPU H200 results divided by 8) and steps.log
(each step's log tail).

usage: python scripts/gpu_check.py [--budget_s 480] [--out build/gpu_check] [--steps env,resnet50,...]
                                   [--dry_run] [--work DIR]
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]     # bench_harness beside it, also when forked as scripts.gpu_check

# NVIDIA's published 8x H200 results divided by 8 (issue 29): the single-GPU anchors beside our figures.
ANCHORS = {"resnet50_offline": (95000.0, "samples/s", "NVIDIA 8xH200 / 8 (TensorRT int8)"),
           "sdxl_offline": (2.4, "samples/s", "NVIDIA 8xH200 / 8 (TensorRT fp8)"),
           "llama2_70b_offline": (4400.0, "tokens/s", "NVIDIA 8xH200 / 8, Llama2-70B (TensorRT-LLM fp8): a 70B "
                                  "model, so an 8B one should run several times faster")}


@dataclasses.dataclass(frozen=True)
class Step:
    name: str
    title: str
    limit_s: int          # on a GPU
    dry_limit_s: int      # the CPU dry-run


STEPS = (Step("env", "make doctor / make info", 45, 120),
         Step("resnet50", "ResNet50 full-size, pytorch CUDA fp16 and ORT CUDA", 90, 240),
         Step("sdxl", "SDXL full-size, 20 steps, 1024x1024, fp16", 110, 240),
         Step("llm", "Llama 8B shape, fp16: in-process, HTTP server, vLLM", 240, 300),
         Step("models", "BERT, RetinaNet, 3D-UNet, DLRM-v2 full-size shapes, pytorch backend", 70, 240),
         Step("multigpu", "placement over several GPUs", 15, 60))


# ================================================================================ the parent: runs the steps

def gpu_facts() -> dict:
    """What torch sees (in a child, ``--_gpu_facts``: a broken CUDA install must not take the parent down)."""
    try:
        r = python("scripts.gpu_check", ["--_gpu_facts"], timeout=120)
        return json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {"gpus": 0, "error": r.stderr[-300:]}
    except (subprocess.TimeoutExpired, IndexError, ValueError) as e:
        return {"gpus": 0, "error": str(e)}


def print_gpu_facts() -> int:
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "gpus": n, "devices": [
        {"name": torch.cuda.get_device_name(i), "memory_gib": round(torch.cuda.get_device_properties(i).total_memory
                                                                    / 2**30, 1)} for i in range(n)]}))
    return 0


def run_step(step: Step, limit: float, mode: str, work: Path) -> dict:
    """One step in its own process group; at its limit SIGTERM to the group, SIGKILL 10 s later."""
    res_file, log_file = work / f"{step.name}.json", work / f"{step.name}.log"
    res_file.unlink(missing_ok=True)
    t0 = time.time()
    with open(log_file, "w") as log:
        args = ["--_step", step.name, "--_mode", mode, "--work", str(work)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        p = forked("scripts.gpu_check", args, env, log, log) or \
            subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *args], cwd=REPO, stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True, env=env)
        stopped = False
        try:
            p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            stopped = True
            for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, sig)
                try:
                    p.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    pass
        with contextlib.suppress(ProcessLookupError):      # servers or workers it left behind
            os.killpg(p.pid, signal.SIGKILL)
    shutil.rmtree(Path("/dev/shm") / f"gpu_check_{step.name}", ignore_errors=True)
    rec = json.loads(res_file.read_text()) if res_file.exists() else {"figures": [], "notes": []}
    rec.update(name=step.name, title=step.title, seconds=round(time.time() - t0, 1), limit_s=round(limit))
    if stopped:
        rec["status"] = "stopped"
        rec["notes"].append(f"stopped at its limit ({limit:.0f} s); figures measured before that are kept")
    elif p.returncode != 0 and rec.get("status") not in ("skip", "fail"):
        rec["status"] = "fail"
        tail = [ln for ln in log_file.read_text(errors="replace").splitlines() if ln.strip()][-3:]
        rec["notes"].append(f"exit {p.returncode}: " + " | ".join(t.strip()[:200] for t in tail))
    rec.setdefault("status", "ok")
    return rec


def fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def markdown(report: dict) -> str:
    lines = [f"# gpu_check ({report['mode']})", ""]
    if report["mode"] == "dry-run":
        lines += ["**No GPU was found: this is the CPU dry-run (the same steps at tiny sizes). Its figures prove "
                  "the script, not a GPU.**", ""]
    g = report["gpu"]
    lines += [f"GPUs: {', '.join(d['name'] + ' (' + str(d['memory_gib']) + ' GiB)' for d in g.get('devices', [])) or 'none'}; "
              f"torch {g.get('torch')} (CUDA {g.get('cuda')}); budget {report['budget_s']} s, used "
              f"{report['seconds']:.0f} s; commit {report['commit']}", "",
              "| step | status | figure | value | unit | anchor (1 GPU) |", "| --- | --- | --- | --- | --- | --- |"]
    for s in report["steps"]:
        figs = s["figures"] or [{"figure": "-", "value": "", "unit": ""}]
        for i, f in enumerate(figs):
            anchor = f.get("anchor")
            a = f"{fmt(anchor[0])} {anchor[1]} ({anchor[2]})" if anchor else ""
            head = (f"{s['name']}", f"{s['status']} ({s['seconds']:.0f}/{s['limit_s']} s)") if i == 0 else ("", "")
            lines.append(f"| {head[0]} | {head[1]} | {f['figure']} | {fmt(f['value'])} | {f.get('unit', '')} | {a} |")
    lines += ["", "Notes:"]
    for s in report["steps"]:
        for n in s["notes"]:
            lines.append(f"- {s['name']}: {n}")
    return "\n".join(lines) + "\n"


def commit() -> str:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget_s", type=float, default=480.0, help="wall-clock budget for all steps together")
    ap.add_argument("--out", default=str(REPO / "build" / "gpu_check"), help="where gpu_check.json/.md go")
    ap.add_argument("--work", default=None, help="models, data and run logs (default <out>/work)")
    ap.add_argument("--steps", default=",".join(s.name for s in STEPS), help="comma list of steps to run")
    ap.add_argument("--dry_run", action="store_true", help="the CPU dry-run even when a GPU is visible")
    ap.add_argument("--tiny_scratch", default=None, help="dry-run: a scratch folder (MLPERF_SCRATCH_PATH) where the "
                    "tiny resnet50, sdxl and llama3_1_8b are built already (the test suite's); used read-only")
    ap.add_argument("--step_limit_s", type=float, default=0, help="cap every step's own time limit (0: theirs)")
    ap.add_argument("--_step", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_gpu_facts", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--_mode", default="full", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a._gpu_facts:
        return print_gpu_facts()
    if a._step:
        return child(a._step, a._mode, Path(a.work))
    names = [s.strip() for s in a.steps.split(",") if s.strip()]
    unknown = [n for n in names if n not in {s.name for s in STEPS}]
    if unknown:
        import difflib

        near = [m for u in unknown for m in difflib.get_close_matches(u, [s.name for s in STEPS], 1)]
        print(f"error: unknown step(s) {', '.join(unknown)}{' (did you mean ' + ', '.join(near) + '?)' if near else ''}"
              f"; the steps are {', '.join(s.name for s in STEPS)}", file=sys.stderr)
        return 2
    out = Path(a.out).resolve()
    work = Path(a.work).resolve() if a.work else out / "work"
    work.mkdir(parents=True, exist_ok=True)
    if a.tiny_scratch:
        os.environ["GPU_CHECK_TINY_SCRATCH"] = str(Path(a.tiny_scratch).resolve())
    t0 = time.time()
    gpu = gpu_facts()
    mode = "full" if gpu.get("gpus", 0) > 0 and not a.dry_run else "dry-run"
    print(f"[gpu_check] {'GPU: ' + ', '.join(d['name'] for d in gpu['devices']) if mode == 'full' else 'no GPU found (or --dry_run): CPU dry-run at tiny sizes'}"
          f"; budget {a.budget_s:.0f} s", flush=True)
    steps = []
    for step in (s for s in STEPS if s.name in names):
        left = a.budget_s - (time.time() - t0)
        if left < 10:
            steps.append({"name": step.name, "title": step.title, "status": "not run", "seconds": 0.0, "limit_s": 0,
                          "figures": [], "notes": ["the budget was spent before this step"]})
            continue
        limit = step.limit_s if mode == "full" else step.dry_limit_s
        rec = run_step(step, min(limit, a.step_limit_s or limit, left), mode, work)
        steps.append(rec)
        first = rec["figures"][0] if rec["figures"] else None
        print(f"[gpu_check] {step.name}: {rec['status']} in {rec['seconds']:.0f} s"
              + (f"; {first['figure']} = {fmt(first['value'])} {first.get('unit', '')}" if first else "")
              + (f"; {rec['notes'][-1]}" if rec["notes"] and rec["status"] != "ok" else ""), flush=True)
    report = {"mode": mode, "gpu": gpu, "budget_s": a.budget_s, "seconds": round(time.time() - t0, 1),
              "commit": commit(), "steps": steps, "host": os.uname().nodename}
    from code.common.fileio import write_json, write_text

    write_json(out / "gpu_check.json", report)
    md = markdown(report)
    write_text(out / "gpu_check.md", md)
    logs = []
    for s in steps:
        f = work / f"{s['name']}.log"
        if f.exists():
            logs.append(f"===== {s['name']} =====\n" + "\n".join(f.read_text(errors="replace").splitlines()[-150:]))
    write_text(out / "steps.log", "\n".join(logs) + "\n")
    print(md)
    print(f"[gpu_check] {out / 'gpu_check.md'}, {out / 'gpu_check.json'}, {out / 'steps.log'}")
    return 0 if all(s["status"] in ("ok", "skip") for s in steps) else 1


# ================================================================================ the child: one step

class Result:
    """A step's figures, written to <work>/<step>.json after every one (a step stopped at its limit keeps them)."""

    def __init__(self, path: Path):
        self.path, self.figures, self.notes, self.status = path, [], [], None

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"figures": self.figures, "notes": self.notes,
                                   **({"status": self.status} if self.status else {})}, indent=1, default=str))
        tmp.replace(self.path)

    def add(self, figure: str, value, unit: str = "", anchor: str | None = None) -> None:
        f = {"figure": figure, "value": round(value, 4) if isinstance(value, float) else value, "unit": unit}
        if anchor:
            f["anchor"] = ANCHORS[anchor]
        self.figures.append(f)
        print(f"[figure] {figure} = {f['value']} {unit}", flush=True)
        self.save()

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"[note] {text}", flush=True)
        self.save()

    def skip(self, why: str) -> None:
        self.status = "skip"
        self.note(why)


def forked(module: str, args: list[str], env: dict, out, err):
    """``python -m module args`` forked by the zygote ``MLPERF_ZYGOTE`` names (code/common/harness/zygote.py: torch,
    transformers and diffusers imported once; the test suite's, which runs the dry-run), its stdout and stderr into
    the files ``out`` and ``err``; a ``zygote.Child``, or None where no zygote serves it (a user's make gpu_check
    never sets the variable): then the caller starts a fresh interpreter, as always."""
    if not env.get("MLPERF_ZYGOTE"):
        return None
    from code.common.harness import zygote

    with open(os.devnull) as stdin:
        return zygote.start(module, args, REPO, env, fds=(stdin.fileno(), out.fileno(), err.fileno()), keep_zygote=True)


def python(module: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    """``python -m module args`` in the repository, its output captured (forked by a zygote where one serves)."""
    cmd, env = [sys.executable, "-m", module, *args], dict(os.environ)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = forked(module, args, env, out, err)
        if child is not None:
            try:
                rc = child.wait(timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                raise subprocess.TimeoutExpired(cmd, timeout) from None
            out.seek(0), err.seek(0)
            r = subprocess.CompletedProcess(cmd, rc, out.read().decode(errors="replace"),
                                            err.read().decode(errors="replace"))
        else:
            r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)
    return r


def cli(*args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
    """``python -m code.main`` as a user runs it; a failure raises with the command's one-line error."""
    r = python("code.main", list(args), timeout)
    print(f"$ code.main {' '.join(args)}  -> {r.returncode}\n{r.stdout[-4000:]}{r.stderr[-4000:]}", flush=True)
    if check and r.returncode != 0:
        err = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")] or r.stderr.strip().splitlines()[-1:]
        raise RuntimeError(f"code.main {args[0]} failed ({r.returncode}): {(err or ['?'])[0][:300]}")
    return r


def harness(log_dir: Path, *args: str, timeout: float = 900) -> dict:
    """One ``run_harness`` (PerformanceOnly) into a fresh ``log_dir``; its metadata.json."""
    shutil.rmtree(log_dir, ignore_errors=True)
    cli("--action=run_harness", "--test_mode=PerformanceOnly", f"--log_dir={log_dir}", *args, timeout=timeout)
    meta = json.loads(next(Path(log_dir).rglob("metadata.json")).read_text())
    if meta.get("status") != "ok":
        raise RuntimeError(f"harness run failed: {meta.get('error')}")
    return meta


def private_root(work: Path, name: str, need_gib: float = 0) -> Path:
    """A private build/scratch for a step (MLPERF_BUILD_DIR, MLPERF_SCRATCH_PATH, MLPERF_DATA_MAPS_DIR). ``need_gib``:
    gigabytes of random weights written and read back once, so in /dev/shm when it has that much room and twice
    that in free memory (no disk round trip); the step removes it at its end (``cleanup``)."""
    root = work / name
    shm = Path("/dev/shm")
    if need_gib and shm.is_dir() and shutil.disk_usage(shm).free > need_gib * 2**30 and \
            os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") > 2 * need_gib * 2**30:
        root = shm / f"gpu_check_{name}"
    os.environ.update({"MLPERF_BUILD_DIR": str(root / "build"), "MLPERF_SCRATCH_PATH": str(root / "scratch"),
                       "MLPERF_DATA_MAPS_DIR": str(root / "data_maps")})
    return root


def tiny_actions(bench: str) -> None:
    """The tiny variant's model and data, unless --tiny_scratch named a folder where they are built already."""
    if os.environ.get("GPU_CHECK_TINY_SCRATCH"):
        os.environ["MLPERF_SCRATCH_PATH"] = os.environ["GPU_CHECK_TINY_SCRATCH"]
        return
    for action in ("download_model", "download_data", "preprocess_data"):
        cli(f"--action={action}", f"--benchmarks={bench}", "--model_variant=tiny")


def timed_loop(fn, seconds: float, warmup: int = 3) -> tuple[int, list[float]]:
    """Call fn() (which synchronises) for ``seconds``; (calls, per-call seconds)."""
    for _ in range(warmup):
        fn()
    lat, t_end = [], time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t = time.perf_counter()
        fn()
        lat.append(time.perf_counter() - t)
    return len(lat), lat


def p90_ms(lat: list[float]) -> float:
    return float(np.percentile(lat, 90) * 1e3)


def missing(*modules: str) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


# --- step 1 ------------------------------------------------------------------------------------------

def step_env(r: Result, full: bool, work: Path) -> None:
    private_root(work, "env")
    doc = cli("--action=doctor", check=False, timeout=120)
    summary = [ln for ln in doc.stdout.splitlines() if ln.startswith("doctor:")]
    r.add("doctor", summary[-1].removeprefix("doctor: ") if summary else f"exit {doc.returncode}")
    for ln in doc.stdout.splitlines():
        if ln.startswith(("FAIL", "warn")):
            r.note(f"doctor {ln.strip()[:220]}")
    info = cli("--action=info", "--benchmarks=resnet50,sdxl,llama3_1_8b,bert", "--scenarios=Offline", timeout=180)
    m = re.search(r"system name (\S+?);", info.stdout)
    r.add("system matched (KnownSystems)", m.group(1) if m else "none")
    for section in re.split(r"\n(?=== )", info.stdout):
        head = re.match(r"== (\S+) Offline", section)
        backend = re.search(r"^\s+backend\s+= '(\w+)'", section, re.M)
        prec = re.search(r"^\s+precision\s+= '?([\w:,]+)'?", section, re.M)
        if head and backend:
            r.add(f"{head.group(1)} Offline config block", f"backend {backend.group(1)}, precision "
                  f"{prec.group(1) if prec else 'default'}")
    have = {m: importlib.util.find_spec(m) is not None for m in
            ("mlperf_loadgen", "onnxruntime", "diffusers", "onnx2torch", "transformers", "vllm", "tensorrt", "pynvml")}
    r.add("packages", ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in have.items()))
    if have["onnxruntime"]:
        import onnxruntime as ort

        r.add("onnxruntime providers", ", ".join(ort.get_available_providers()))


# --- step 2 ------------------------------------------------------------------------------------------

def step_resnet50(r: Result, full: bool, work: Path) -> None:
    private_root(work, "resnet50")
    from code.common import paths
    from code.resnet50 import model

    if full:
        from bench_harness import random_full_set

        random_full_set(2048)
        variant, prec, secs = [], "--precision=fp16", 3.0
    else:
        tiny_actions("resnet50")
        variant, prec, secs = ["--model_variant=tiny"], "--precision=fp32", 0.5
    common = ["--benchmarks=resnet50", "--backend=pytorch", prec, "--force", *variant]
    if missing("onnx2torch"):
        r.note("the pytorch backend converts ResNet50's ONNX with onnx2torch, which is not installed "
               "(pip install onnx2torch==1.5.15)")
    raw_qps, raw_p90, b1_p90, bs = raw_resnet50(common, secs)
    r.add(f"pytorch raw engine loop, batch {bs}", raw_qps, "samples/s")
    r.add("pytorch raw engine loop, batch 1, p90", b1_p90, "ms")
    logs = work / "resnet50" / "logs"
    # sized by sample count (about ``secs`` of the raw rate), never by rate: VALID however fast the run goes
    off = harness(logs / "offline", "--scenarios=Offline", *common, "--min_duration=1",
                  f"--min_query_count={max(64, int(raw_qps * secs))}", "--offline_expected_qps=1")
    r.add("harness Offline (pytorch), LoadGen", float(off["metric_value"]), "samples/s", "resnet50_offline" if full else None)
    r.add("harness Offline / raw loop", float(off["metric_value"]) / raw_qps, "x")
    r.add("harness Offline validity", off["result_validity"])
    ss = harness(logs / "singlestream", "--scenarios=SingleStream", *common, f"--min_duration={int(secs * 1000)}",
                 "--min_query_count=64", f"--single_stream_expected_latency_ns={int(b1_p90 * 1e6)}")
    r.add("harness SingleStream p90 (pytorch)", float(ss["metric_value"]) / 1e6, "ms")
    r.add("harness SingleStream p90 minus raw batch-1 p90", float(ss["metric_value"]) / 1e6 - b1_p90, "ms")
    r.add("harness SingleStream validity", ss["result_validity"])
    # ONNX Runtime's CUDA provider: a raw loop on the same ONNX (fp32; the harness's ORT engines are optimised for
    # the CPU provider at build time, so only the provider itself is proven here)
    import onnxruntime as ort

    provs = ort.get_available_providers()
    if "CUDAExecutionProvider" not in provs:
        r.note(f"ONNX Runtime CUDA: skipped, onnxruntime {ort.__version__} here has {', '.join(provs)} "
               "(pip install onnxruntime-gpu for CUDAExecutionProvider)")
        return
    onnx_path = paths.models_dir("resnet50", "tiny" if not full else None) / model.ONNX_NAME
    sess = ort.InferenceSession(str(onnx_path), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    crop = model.REAL_CROP if full else model.TINY_CROP
    x = np.random.default_rng(0).standard_normal((bs, 3, crop, crop)).astype(np.float32)
    n, lat = timed_loop(lambda: sess.run(None, {model.INPUT: x}), secs)
    r.add(f"ORT CUDA provider raw loop (fp32), batch {bs}", n * bs / sum(lat), "samples/s")


def raw_resnet50(common: list[str], seconds: float) -> tuple[float, float, float, int]:
    """The harness's own engine (same file, spec and batch size as its Offline run) in a tight loop
    (scripts/bench_harness.py's raw loop): (samples/s, p90 batch ms, batch-1 p90 ms, batch size)."""
    from bench_harness import raw_loop
    from code.main import plan

    offline, single = (plan(["--action=run_harness", f"--scenarios={sc}", *common])[1][0]
                       for sc in ("Offline", "SingleStream"))
    (qps, p90), (_, b1_p90) = raw_loop(offline, seconds), raw_loop(single, seconds)
    return qps, p90, b1_p90, offline.batch_size()


# --- step 3 ------------------------------------------------------------------------------------------

def step_sdxl(r: Result, full: bool, work: Path) -> None:
    if missing("diffusers"):
        r.skip("diffusers is not installed (pip install diffusers==0.42.1)")
        return
    import torch

    private_root(work, "sdxl", 20 if full else 0)
    from code.common import paths
    from code.common.fileio import staged_dir, write_json
    from code.sdxl import dataset, model
    from code.sdxl.constants import GUIDANCE_SCALE, NEGATIVE_PROMPT, NUM_STEPS, latent_side
    from code.sdxl.download import COMPLETE

    n, batch = (6, 2) if full else (2, 1)
    variant = "reference" if full else "tiny"
    dtype, device = (torch.float16, "cuda") if full else (torch.float32, "cpu")
    t0 = time.time()
    if full:
        pipe = model.build_pipeline("sdxl", seed=0, dtype=dtype, device=device)
        pipe_dir = paths.models_dir("sdxl") / "pipeline"
        if not (pipe_dir / COMPLETE).exists():
            with staged_dir(pipe_dir) as tmp:
                pipe.save_pretrained(tmp, safe_serialization=True)
                write_json(tmp / COMPLETE, {"repo": "random weights (scripts/gpu_check.py, sdxl, seed 0)", "variant": None})
        raw = paths.data_dir("sdxl")
        raw.mkdir(parents=True, exist_ok=True)
        rows = dataset.synthetic_captions(n, seed=0)
        dataset.write_captions(raw / "captions_source.tsv", rows)
        np.save(raw / "latents.npy", dataset.make_latent(latent_side("reference")))
        (raw / "sample_ids.txt").write_text("".join(f"{i}\n" for i in range(n)))
        cli("--action=preprocess_data", "--benchmarks=sdxl")
        captions = [x["caption"] for x in rows]
        r.add("unet parameters", model.count_params(pipe.unet) / 1e9, "billion")
    else:
        tiny_actions("sdxl")
        pipe = model.load_pipeline(paths.models_dir("sdxl", "tiny") / "pipeline")
        rows = dataset.read_captions(paths.data_dir("sdxl", "tiny") / "captions_source.tsv")
        captions = [x["caption"] for x in rows[:n]]
    r.add("pipeline built, saved and data prepared", time.time() - t0, "s")
    pipe.set_progress_bar_config(disable=True)
    side = pipe.unet.config.sample_size * pipe.vae_scale_factor
    latent = torch.from_numpy(dataset.make_latent(latent_side(variant))).to(device, dtype)

    def raw_batch(caps):
        with torch.inference_mode():
            pipe(prompt=list(caps), negative_prompt=[NEGATIVE_PROMPT] * len(caps), num_inference_steps=NUM_STEPS,
                 guidance_scale=GUIDANCE_SCALE, latents=latent.repeat(len(caps), 1, 1, 1), height=side, width=side,
                 output_type="pt")
        if full:
            torch.cuda.synchronize()

    raw_batch(captions[:batch])                       # warm-up
    t = time.perf_counter()
    for s in range(0, n, batch):
        raw_batch(captions[s:s + batch])
    raw_qps = n / (time.perf_counter() - t)
    r.add(f"raw diffusers pipeline ({'fp16 CUDA' if full else 'CPU'}), {NUM_STEPS} steps, {side}x{side}, batch {batch}",
          raw_qps, "samples/s")
    del pipe
    if full:
        torch.cuda.empty_cache()
    args = ["--benchmarks=sdxl", "--scenarios=Offline", f"--model_variant={variant}", "--backend=pytorch",
            "--force", f"--gpu_batch_size=clip1:{batch},clip2:{batch},unet:{batch},vae:{batch}",
            f"--min_query_count={n}", "--min_duration=1", "--offline_expected_qps=1"]
    if full:
        args += ["--precision=fp16", "--sdxl_vae_precision=fp32"]
    meta = harness(work / "sdxl" / "logs" / "offline", *args)
    r.add("harness Offline (pytorch), LoadGen", float(meta["metric_value"]), "samples/s", "sdxl_offline" if full else None)
    r.add("harness Offline / raw diffusers", float(meta["metric_value"]) / raw_qps, "x")
    r.add("harness Offline validity", meta["result_validity"])


# --- step 4 ------------------------------------------------------------------------------------------

LLAMA_8B = {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192, "rope_theta": 500000.0}


def build_llama_8b(bench, prompts: int, seed: int = 0) -> None:
    """Llama3.1-8B's shape with random fp16 weights (initialised on the GPU), the tiny tokenizer beside it (ids
    fit: 512 < 128256), and synthetic data in the reference's format: prompts of CNN-DailyMail's length spread."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from code.common.fileio import staged_dir, write_text
    from code.common.llm import tiny

    ckpt = bench.checkpoint
    if not (ckpt / "config.json").exists():
        torch.manual_seed(seed)
        cfg = LlamaConfig(**LLAMA_8B, bos_token_id=tiny.BOS, eos_token_id=tiny.EOS, pad_token_id=tiny.EOS,
                          tie_word_embeddings=False, torch_dtype="float16")
        with torch.device("cuda"):
            net = LlamaForCausalLM(cfg).to(torch.float16)
        with staged_dir(ckpt) as tmp:
            net.save_pretrained(tmp, safe_serialization=True)
            for f in bench.tiny_tokenizer_dir().iterdir():
                shutil.copy(f, tmp / f.name)
        del net
        torch.cuda.empty_cache()
    from code.llama3_1_8b import dataset

    rng = np.random.default_rng(seed)
    records = [{"input": "synthetic", "tok_input": [tiny.BOS] + rng.integers(3, 512, int(rng.integers(400, 1400))).tolist(),
                "output": "synthetic highlights."} for _ in range(prompts)]
    write_text(bench.raw_dir / dataset.DATACENTER_JSON, json.dumps(records))


def llm_figures(r: Result, label: str, meta: dict, anchor: str | None = None) -> None:
    tok = meta.get("tokens") or {}
    if meta["scenario"] == "Offline":
        r.add(f"{label} Offline", float(tok.get("tokens_per_second") or 0), "tokens/s", anchor)
    else:
        r.add(f"{label} Server TTFT p99", float(tok.get("ttft_p99_ns") or 0) / 1e6, "ms")
        r.add(f"{label} Server TPOT p99", float(tok.get("tpot_p99_ns") or 0) / 1e6, "ms")
        r.add(f"{label} Server tokens/s", float(tok.get("tokens_per_second") or 0), "tokens/s")
    r.add(f"{label} {meta['scenario']} validity", meta["result_validity"])
    if meta["result_validity"] != "VALID" and meta.get("invalid_reasons"):
        r.note(f"{label} {meta['scenario']}: {meta['invalid_reasons'][0].split('. ')[0][:200]} (a short check; "
               "validity needs a full-length run)")


def raw_generate(full: bool, samples: int) -> float:
    """Plain ``model.generate`` on the same checkpoint and prompts, all in one left-padded batch, every sample
    run to the benchmark's max_new_tokens: the raw engine beside the harness (tokens/s)."""
    import torch
    from transformers import AutoModelForCausalLM

    from code.common.benchmarks import implementation
    from code.main import plan

    settings = plan(["--action=run_harness", "--benchmarks=llama3_1_8b", "--scenarios=Offline", "--force",
                     *([] if full else ["--model_variant=tiny"])])[1][0]
    bench = implementation(settings.spec)(settings)
    prompts = bench.prompts()[:samples]
    new = bench.generation().max_new_tokens
    device, dtype = ("cuda", torch.float16) if full else ("cpu", torch.float32)
    model = AutoModelForCausalLM.from_pretrained(str(bench.checkpoint), dtype=dtype).to(device).eval()
    width = max(len(p) for p in prompts)
    ids = torch.zeros((len(prompts), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.as_tensor(np.asarray(p, dtype=np.int64))
        mask[i, width - len(p):] = 1
    ids, mask = ids.to(device), mask.to(device)

    def run(n: int):
        with torch.inference_mode():
            model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=n, min_new_tokens=n,
                           pad_token_id=0, eos_token_id=None)
        if full:
            torch.cuda.synchronize()
    run(2)                                          # warm-up
    t = time.perf_counter()
    run(new)
    tps = len(prompts) * new / (time.perf_counter() - t)
    # where the time goes (the first H200 run read 385 tokens/s, ~150 ms a decode step for an 8B model): the
    # attention kernel in use, one prefill of the whole batch, one decode step over that cache
    with torch.inference_mode():
        sync = torch.cuda.synchronize if full else (lambda: None)
        sync()
        t = time.perf_counter()
        out = model(input_ids=ids, attention_mask=mask, use_cache=True)
        sync()
        prefill = time.perf_counter() - t
        nxt = out.logits[:, -1:].argmax(-1)
        mask2 = torch.cat([mask, torch.ones_like(nxt)], 1)
        t = time.perf_counter()
        model(input_ids=nxt, attention_mask=mask2, past_key_values=out.past_key_values, use_cache=True)
        sync()
        decode = time.perf_counter() - t
    return tps, {"attention": getattr(model.config, "_attn_implementation", "?"), "prefill_ms": prefill * 1e3,
                 "decode_step_ms": decode * 1e3, "dtype": str(next(model.parameters()).dtype),
                 "device": str(next(model.parameters()).device)}


def step_llm(r: Result, full: bool, work: Path) -> None:
    private_root(work, "llm", 40 if full else 0)
    from code.main import plan
    from code.common.benchmarks import implementation

    samples, qps, server_n = (64, 2.0, 16) if full else (8, 2.0, 6)
    if full:
        settings = plan(["--action=preprocess_data", "--benchmarks=llama3_1_8b"])[1][0]
        t0 = time.time()
        build_llama_8b(implementation(settings.spec)(settings), samples)
        cli("--action=preprocess_data", "--benchmarks=llama3_1_8b")
        r.add("8B random checkpoint built and data prepared", time.time() - t0, "s")
        variant = []
    else:
        tiny_actions("llama3_1_8b")
        variant = ["--model_variant=tiny"]
    model = ["--benchmarks=llama3_1_8b", *variant, *(["--precision=fp16"] if full else [])]
    common = [*model, "--force", f"--llm_sample_count={samples}"]
    logs = work / "llm" / "logs"
    off = ["--scenarios=Offline", "--min_duration=1", f"--min_query_count={samples}", "--offline_expected_qps=1"]
    srv = ["--scenarios=Server", "--min_duration=1000", f"--min_query_count={server_n}", f"--server_target_qps={qps}"]
    inproc = ["--backend=transformers"]
    meta = harness(logs / "offline", *common, *inproc, *off)
    llm_figures(r, "in-process transformers", meta, "llama2_70b_offline" if full else None)
    gen = meta.get("generation") or {}
    w = (gen.get("workers") or [{}])[0]
    tps = float((meta.get("tokens") or {}).get("tokens_per_second") or 0)
    if w.get("steps") and tps:
        r.add("in-process scheduler: steps, joins, mean rows per step",
              f"{w['steps']}, {w['joins']}, {w.get('mean_rows_per_step')}")
        r.add("in-process wall per scheduler step", gen["tokens"] / tps / w["steps"] * 1e3, "ms")
    raw, why = raw_generate(full, samples)
    r.add(f"raw model.generate, one padded batch of {samples}", raw, "tokens/s")
    r.add("raw: attention, dtype, device", f"{why['attention']}, {why['dtype']}, {why['device']}")
    r.add(f"raw: one prefill of the {samples} prompts", why["prefill_ms"], "ms")
    r.add("raw: one decode step at that batch", why["decode_step_ms"], "ms")
    if raw:
        r.add("in-process harness Offline / raw model.generate", tps / raw, "x")
    llm_figures(r, "in-process transformers", harness(logs / "server", *common, *inproc, *srv))
    # the harness's own OpenAI-compatible server + the HTTP SUT
    port = 18000 + os.getpid() % 1000
    cli("--action=run_llm_server", *model, "--llm_server_engine=harness", f"--llm_server_port={port}", timeout=600)
    try:
        llm_figures(r, "HTTP (harness server)", harness(logs / "http_offline", *common, "--backend=openai", *off))
    finally:
        cli("--action=stop_llm_server", *model, check=False, timeout=120)
    if missing("vllm"):
        r.note("vLLM: skipped, not installed in this Python (make prebuild LLM_EXTRAS=vllm VENV=.venv-vllm, then "
               "run gpu_check with that venv's python)")
        return
    llm_figures(r, "vLLM in-process", harness(logs / "vllm_offline", *common, "--backend=vllm", *off))
    cli("--action=run_llm_server", *model, "--llm_server_engine=vllm", f"--llm_server_port={port + 1}", timeout=900)
    try:
        llm_figures(r, "HTTP (vllm serve)", harness(logs / "vllm_http_offline", *common, "--backend=openai", *off))
    finally:
        cli("--action=stop_llm_server", *model, check=False, timeout=120)


# --- step 5 ------------------------------------------------------------------------------------------

def step_models(r: Result, full: bool, work: Path) -> None:
    """Each model's full-size architecture with random weights, written in the format its real download has, then
    loaded by the benchmark's own eager factory through the pytorch backend (the engine the harness runs)."""
    import torch

    from code.common.backends import EngineSpec, get_backend

    root = private_root(work, "models", 10 if full else 0) / "models"
    backend = get_backend("pytorch")
    secs, prec = (3.0, "fp16") if full else (0.25, "fp32")
    rng = np.random.default_rng(0)
    for name, make, batch in _model_builders(full):
        t0 = time.time()
        try:
            d = root / name
            d.mkdir(parents=True, exist_ok=True)
            factory, feeds_for, extra = make(d)
            manifest = d / "engine.pt2.json"
            manifest.write_text(json.dumps({"format": "eager", "factory": factory, "source": str(d)}))
            for b in dict.fromkeys((batch, 1)):
                spec = EngineSpec(name=name, batch_size=b, precision=prec, extra={"variant": "reference", **extra})
                engine = backend.load(str(manifest), spec)
                feeds = feeds_for(b, rng)
                n, lat = timed_loop(lambda: engine.infer(feeds), secs, warmup=2)
                if b == batch:
                    r.add(f"{name} raw engine loop, batch {b}, {prec}", n * b / sum(lat), "samples/s")
                else:
                    r.add(f"{name} raw engine loop, batch 1, p90", p90_ms(lat), "ms")
                engine.close()
                del engine
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001 - one model's failure is a line of the table, not the end of the step
            r.note(f"{name}: failed after {time.time() - t0:.0f} s: {type(e).__name__}: {str(e)[:240]}")


def _model_builders(full: bool):
    import torch

    def bert(d: Path):
        from code.bert import model as m

        cfg = m.REAL_CONFIG if full else m.TINY_CONFIG
        if full:
            torch.save(m._qa(cfg).state_dict(), d / m.TORCH_NAME)
        else:
            (d / m.VOCAB_NAME).write_text("".join(f"w{i}\n" for i in range(128)))
            torch.save(m._qa(cfg, 128).state_dict(), d / m.TINY_WEIGHTS)
        seq, vocab = (384, 30522) if full else (64, 128)

        def feeds(b, rng):
            return {"input_ids": rng.integers(0, vocab, (b, seq)).astype(np.int32),
                    "input_mask": np.ones((b, seq), np.int32), "segment_ids": np.zeros((b, seq), np.int32)}
        return "code.bert.model:eager_factory", feeds, {"variant": "reference" if full else "tiny"}

    def retinanet(d: Path):
        from code.retinanet import model as m

        if full:
            from torchvision.models import resnext50_32x4d
            from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
            from torchvision.ops.feature_pyramid_network import LastLevelP6P7

            bb = _resnet_fpn_extractor(resnext50_32x4d(), 5, returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(256, 256))
            torch.save({"model": m._retinanet(bb, m.REAL_SIZE).state_dict()}, d / m.PTH_NAME)
        else:
            torch.save(m.tiny_torch_model().state_dict(), d / m.TINY_WEIGHTS)
        size = m.REAL_SIZE if full else m.TINY_SIZE

        def feeds(b, rng):
            return {m.INPUT: rng.random((b, 3, size, size), dtype=np.float32)}
        return "code.retinanet.model:eager_factory", feeds, {"variant": "reference" if full else "tiny"}

    def unet3d(d: Path):
        from code.unet3d import model as m

        if full:       # the reference's TorchScript format; traced (its skip list does not script) at 64^3 on the
            dev = "cuda" if torch.cuda.is_available() else "cpu"      # GPU, where it runs any size and batch
            with torch.no_grad():
                net = m.UNet3D(m.REAL_FILTERS).eval().to(dev)
                torch.jit.trace(net, torch.randn(1, 1, 64, 64, 64, device=dev)).save(str(d / m.TORCH_NAME))
        else:
            torch.save(m.tiny_torch_model().state_dict(), d / m.TINY_WEIGHTS)
        roi = m.REAL_ROI if full else m.TINY_ROI

        def feeds(b, rng):
            return {m.INPUT: rng.standard_normal((b, 1, roi, roi, roi), dtype=np.float32)}
        return "code.unet3d.model:eager_factory", feeds, {}

    def dlrm(d: Path):
        from code.dlrm_v2 import model as m

        cap = 200_000 if full else 1000
        cfg = m.REAL if full else m.tiny_config()
        cfg = dataclasses.replace(cfg, num_embeddings=tuple(min(n, cap) for n in cfg.num_embeddings))
        m.write_config(d, cfg)
        torch.save(m.reference_state(m.build(cfg, seed=0)), d / m.TINY_WEIGHTS)
        hot = cfg.hot_offsets[-1]
        rows = np.repeat(np.asarray(cfg.num_embeddings), cfg.multi_hot)

        def feeds(b, rng):
            return {"dense": rng.random((b, cfg.num_dense), dtype=np.float32),
                    "sparse": (rng.integers(0, 2**31 - 1, (b, hot)) % rows).astype(np.int32)}
        return "code.dlrm_v2.model:eager_factory", feeds, {}

    return (("bert", bert, 256 if full else 4), ("retinanet", retinanet, 8 if full else 1),
            ("unet3d", unet3d, 4 if full else 1), ("dlrm_v2", dlrm, 2048 if full else 16))


# --- step 6 ------------------------------------------------------------------------------------------

FAKE_4XH200 = json.dumps({"gpus": [{"name": "NVIDIA H200", "pci_id": "0x233510DE", "memory_mb": 143771}] * 4})


def step_multigpu(r: Result, full: bool, work: Path) -> None:
    """Where the harness puts its workers over the GPUs it detects: ResNet50's engine workers (round-robin over
    the GPUs) and the LLM instances (tensor-parallel groups: Llama2-70B; one per GPU: Llama3.1-8B). On a machine
    of one GPU it skips; the dry-run computes it for a faked 4xH200 system (MLPERF_FAKE_SYSTEM)."""
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if full and n < 2:
        r.skip(f"{n} GPU(s) visible: placement over several GPUs needs two or more")
        return
    if not full:
        os.environ["MLPERF_FAKE_SYSTEM"] = FAKE_4XH200
        r.note("dry-run: placement computed for a faked 4xH200 system")
    private_root(work, "multigpu")
    from code.common.benchmarks import implementation
    from code.main import plan

    for bench, scenario in (("resnet50", "Offline"), ("resnet50", "Server"), ("llama2_70b", "Offline"),
                            ("llama3_1_8b", "Server")):
        settings = plan(["--action=info", f"--benchmarks={bench}", f"--scenarios={scenario}"])[1][0]
        b = implementation(settings.spec)(settings)
        if settings.spec.generates_tokens:
            # the checkpoint is not needed to place instances: its config's few fields are given
            b.model_config = lambda: {"eos_token_id": 2, "max_position_embeddings": 8192}
            groups = [tuple(w.gpus) for w in b.worker_specs("/checkpoint-not-loaded")]
            r.add(f"{bench} {scenario}: LLM instances (GPUs each)", f"{len(groups)}: {groups}")
        else:
            devs = [spec.device_id for spec, _ in b.worker_specs()]
            r.add(f"{bench} {scenario}: engine workers (GPU each)", f"{len(devs)}: {devs}")


STEP_FUNCS = {"env": step_env, "resnet50": step_resnet50, "sdxl": step_sdxl, "llm": step_llm, "models": step_models,
              "multigpu": step_multigpu}


def child(name: str, mode: str, work: Path) -> int:
    def stop(signum, frame):            # at the step's limit: unwind, so that servers are stopped and files removed
        raise SystemExit(f"stopped by signal {signum}")
    if os.getpgid(0) != os.getpid():    # forked by a zygote (run_step): its own process group, as a fresh one has
        os.setsid()
    signal.signal(signal.SIGTERM, stop)
    r = Result(work / f"{name}.json")
    r.save()
    from code.common.backends.base import shared_cpu

    if mode != "full" and shared_cpu():     # others share these cores (the test suite): the in-process loops get
        import torch                        # one intra-op thread, as the harness's engines do there (a second one

        torch.set_num_threads(1)            # spin-waits for a core someone else holds: 20x the CPU for a tiny SDXL)
    try:
        try:
            STEP_FUNCS[name](r, mode == "full", work)
        finally:
            shm = Path("/dev/shm") / f"gpu_check_{name}"
            if shm.is_dir():                    # gigabytes of memory: not kept past the step
                shutil.rmtree(shm, ignore_errors=True)
    except Exception as e:  # noqa: BLE001 - the table says what broke; the log has the traceback
        import traceback

        traceback.print_exc()
        r.note(f"failed: {type(e).__name__}: {str(e)[:300]}")
        r.status = "fail"
        r.save()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
