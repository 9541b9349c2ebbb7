"""``make doctor``: is this machine ready to run the selected benchmarks? One line per check.

Lines: ``ok   <check>: <detail>``, ``warn <check>: <detail>  fix: <command>``, ``FAIL ...  fix: ...``
(stdout), then ``doctor: N ok, N warn, N FAIL``; exit 1 when any check FAILs, else 0. Each check turns
its own exceptions into a FAIL line (never a traceback). Hardware comes only from systems.detect()
(honours MLPERF_FAKE_SYSTEM) when doctor runs; without a GPU, TensorRT/CUDA/NVML are ``ok`` (not needed).
"""
from __future__ import annotations

import dataclasses
import functools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from code.common import paths
from code.common.errors import HarnessError

if TYPE_CHECKING:
    from code.common.benchmark import BenchmarkSpec

PREBUILD = "make prebuild"
GPU_PREBUILD = "make prebuild GPU_EXTRAS=1"
SCRATCH_FIX = "export MLPERF_SCRATCH_PATH=<a writable folder with free space> (or chmod/chown the folder)"
# GB a tiny variant's models and data take (the reference variant's: its spec's scratch_gb). Only what is
# still missing counts against the free space.
TINY_GB = 1
# Compute capability of each architecture and the oldest TensorRT that builds engines for it.
COMPUTE = {"Ampere": (8, 0), "Ada": (8, 9), "Hopper": (9, 0), "Blackwell": (10, 0)}
MIN_TRT = {"Ampere": (8, 0), "Ada": (8, 6), "Hopper": (8, 6), "Blackwell": (10, 8)}


@dataclasses.dataclass(frozen=True)
class Check:
    status: str          # "ok" | "warn" | "FAIL"
    name: str            # what was checked: "LoadGen", "resnet50 model"
    detail: str          # one line: what was found
    fix: str = ""        # the command that fixes a warn/FAIL

    def line(self) -> str:
        out = f"{self.status:4s} {self.name}: {self.detail}"
        return out + (f"  fix: {self.fix}" if self.fix and self.status != "ok" else "")


# ok(name, detail), warn(name, detail, fix), fail(name, detail, fix)
ok, warn, fail = (functools.partial(Check, status) for status in ("ok", "warn", "FAIL"))


@dataclasses.dataclass
class Context:
    """What the checks share: the flags, the resolved settings, and the detected hardware."""
    cli: dict[str, Any]
    settings: list
    info: Any = None          # SystemInfo, or None when detection itself failed
    match: Any = None         # SystemMatch, or None when the hardware matches no known system

    @property
    def gpus(self) -> tuple:
        return tuple(self.info.gpus) if self.info is not None else ()

    @property
    def injected(self) -> str:
        return " (injected by MLPERF_FAKE_SYSTEM)" if self.info is not None and self.info.source == "injected" else ""


def guarded(name: str, fn: Callable[..., Any], *args) -> list[Check]:
    """fn(*args) as a list of Checks; any exception becomes one FAIL line naming its cause."""
    try:
        r = fn(*args)
        return list(r) if isinstance(r, (list, tuple)) else [r]
    except HarnessError as e:
        return [fail(name, e.cause, e.fix or "see the message")]
    except Exception as e:  # noqa: BLE001 - doctor never prints a traceback
        return [fail(name, f"the check itself failed: {type(e).__name__}: {e}", "rerun `make doctor`; report it if it repeats")]


# --- software --------------------------------------------------------------------------------------
def check_python(ctx: Context) -> list[Check]:
    v = sys.version_info
    out = [ok("Python", f"{v.major}.{v.minor}.{v.micro} ({sys.executable})") if v >= (3, 10) else
           fail("Python", f"{v.major}.{v.minor} is older than 3.10", "rm -rf .venv && make venv PYTHON_SYS=python3.11")]
    prefix = Path(sys.prefix).resolve()                  # .venv, or another VENV= of the Makefile (.venv-vllm)
    in_repo = sys.prefix != sys.base_prefix and prefix.is_relative_to(paths.REPO_ROOT.resolve())
    return out + [ok("venv", f"running in {prefix}") if in_repo else
                  warn("venv", f"running in {prefix}, not a virtual environment of this repository", "make venv")]


def check_loadgen(ctx: Context) -> Check:
    try:
        import mlperf_loadgen
    except Exception as e:  # noqa: BLE001 - ImportError, or a broken build raising anything
        return fail("LoadGen", f"mlperf_loadgen does not import ({type(e).__name__}: {e})", PREBUILD)
    from importlib import metadata

    try:
        return ok("LoadGen", f"mlcommons-loadgen {metadata.version('mlcommons-loadgen')}")
    except metadata.PackageNotFoundError:   # imports, but not installed as a distribution (a source build)
        return ok("LoadGen", f"mlperf_loadgen from {getattr(mlperf_loadgen, '__file__', '?')}")


def check_onnxruntime(ctx: Context) -> Check:
    try:
        import onnxruntime as ort
    except Exception as e:  # noqa: BLE001
        return fail("ORT", f"onnxruntime does not import ({type(e).__name__}: {e})", PREBUILD)
    return ok("ORT", f"onnxruntime {ort.__version__}, providers {', '.join(ort.get_available_providers())}")


def check_ray(ctx: Context) -> Check:
    """Ray for --executor=ray: a FAIL only when a selected run asks for it (or its cluster is unreachable)."""
    from code.common.harness import ray_executor

    wanted = [s for s in ctx.settings if s.values.get("executor") == "ray"]
    ok_, why = ray_executor.available()
    if not ok_:
        return (fail if wanted else warn)("Ray", f"{why}; --executor=ray cannot run", PREBUILD)
    addr = next((s.values.get("ray_address") for s in wanted if s.values.get("ray_address")), None)
    if addr and addr != "auto" and (problem := ray_executor.reachable(addr)):
        return fail("Ray", f"{why}; the cluster at --ray_address={addr} is unreachable ({problem})",
                    f"start it: {ray_executor.RAY_START}")
    return ok("Ray", why + (f", cluster {addr} reachable" if addr else " (--executor=ray)"))


def check_torch(ctx: Context) -> Check:
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        return fail("torch", f"torch does not import ({type(e).__name__}: {e})", PREBUILD)
    cuda = torch.version.cuda
    if not ctx.gpus:
        return ok("torch", f"torch {torch.__version__} ({'CUDA ' + cuda if cuda else 'CPU'} build); "
                           "CUDA is not needed without a GPU")
    if not cuda:
        return fail("torch", f"torch {torch.__version__} is a CPU-only build on a GPU system{ctx.injected}",
                    f".venv/bin/pip install --force-reinstall torch=={torch.__version__.split('+')[0]} (a CUDA build)")
    if not torch.cuda.is_available():
        return fail("torch", f"torch {torch.__version__} (CUDA {cuda}) sees no GPU{ctx.injected}",
                    "check the NVIDIA driver: nvidia-smi must list the GPUs, and CUDA_VISIBLE_DEVICES must not hide them")
    return ok("torch", f"torch {torch.__version__}, CUDA {cuda}, {torch.cuda.device_count()} device(s)")


# --- hardware --------------------------------------------------------------------------------------
def check_hardware(ctx: Context) -> Check:
    """Detect (fills ctx.info, ctx.match; a bad MLPERF_FAKE_SYSTEM is a FAIL with its fix), then one GPU
    model (mixed models break TensorRT engines and system configs) matching a known system."""
    from code.common.systems import detect, match_system

    if ctx.info is None:
        ctx.info = detect()
    kinds: dict[str, list[int]] = {}
    for i, g in enumerate(ctx.gpus):
        kinds.setdefault(g.name, []).append(i)
    if len(kinds) > 1:
        parts = [f"{len(ids)}x {n}" for n, ids in kinds.items()]
        picks = " or ".join(f"CUDA_VISIBLE_DEVICES={','.join(map(str, ids))}" for ids in kinds.values())
        return fail("hardware", f"mixed GPU models{ctx.injected}: {' + '.join(parts)} (TensorRT engines and "
                            "system configs are per model)", f"pick one model: {picks}")
    ctx.match = ctx.settings[0].system if ctx.settings else match_system(ctx.info)
    m = ctx.match
    if not ctx.gpus:
        return ok("hardware", f"no GPU{ctx.injected}; system {m.system_id} runs on the CPU (onnxruntime)")
    return ok("hardware", f"{len(ctx.gpus)}x {ctx.gpus[0].name}{ctx.injected}; system {m.system_id} ({m.arch})")


def _archs(ctx: Context) -> set[str]:
    """The architecture of each detected GPU (KnownSystems), "unknown" for a GPU no class matches."""
    if ctx.match is not None and ctx.match.accelerator == "gpu":
        return {ctx.match.arch}
    from code.common.systems import KnownSystems

    classes = KnownSystems.gpu_classes()
    return {next((c.arch for c in classes if c.matches_gpu(g)), "unknown") for g in ctx.gpus}


def check_nvml(ctx: Context) -> Check:
    if not ctx.gpus:
        return ok("NVML", "not needed without a GPU")
    try:
        import pynvml
    except Exception as e:  # noqa: BLE001
        return fail("NVML", f"pynvml does not import ({type(e).__name__}: {e})", PREBUILD + " (installs nvidia-ml-py)")
    try:
        pynvml.nvmlInit()
    except Exception as e:  # noqa: BLE001
        detail = f"NVML does not start ({type(e).__name__}: {e}){ctx.injected}"
        if shutil.which("nvidia-smi"):
            return warn("NVML", detail + "; detection falls back to nvidia-smi", "check the NVIDIA driver (nvidia-smi -q)")
        return fail("NVML", detail + "; nvidia-smi not found either", "install the NVIDIA driver (nvidia-smi must list the GPUs)")
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        return ok("NVML", f"driver {driver}, {pynvml.nvmlDeviceGetCount()} GPU(s) visible to NVML")
    finally:
        pynvml.nvmlShutdown()


def check_tensorrt(ctx: Context) -> list[Check]:
    """TensorRT present on a GPU system and new enough for its architecture; fp8 needs compute >= 8.9."""
    try:
        import tensorrt
        version, err = tensorrt.__version__, ""
    except Exception as e:  # noqa: BLE001
        version, err = "", f"{type(e).__name__}: {e}"
    if not ctx.gpus:
        return [ok("TensorRT", (f"{version} installed, " if version else "not installed; ") + "not needed without a GPU")]
    if not version:
        return [fail("TensorRT", f"tensorrt does not import ({err}) on a GPU system{ctx.injected}", GPU_PREBUILD)]
    out, have = [], tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    for arch in sorted(_archs(ctx)):
        need = MIN_TRT.get(arch)
        cc = ".".join(map(str, COMPUTE.get(arch, ()))) or "?"
        if need is None:
            out.append(warn("TensorRT", f"{version}; GPU architecture unknown, support not checked",
                            "add the GPU to systems/known/ (make add_system)"))
        elif have < need:
            out.append(fail("TensorRT", f"{version} cannot build engines for {arch} (compute {cc}; needs TensorRT "
                                        f">= {'.'.join(map(str, need))})", GPU_PREBUILD))
        else:
            out.append(ok("TensorRT", f"{version} supports {arch} (compute {cc})"))
    fp8 = sorted({s.benchmark for s in ctx.settings if s.values.get("precision") == "fp8"})
    from code.common.calibration import FP8_ARCHS

    old = [a for a in _archs(ctx) if a in COMPUTE and a not in FP8_ARCHS]
    if fp8 and old:
        out.append(fail("fp8", f"{', '.join(fp8)} asks for fp8, which needs compute capability >= 8.9 ({old[0]} has "
                               f"{'.'.join(map(str, COMPUTE[old[0]]))})", "use --precision=int8 or --precision=fp16"))
    return out


# --- scratch, models, data -------------------------------------------------------------------------
def check_scratch(ctx: Context, missing: list[tuple[BenchmarkSpec, str]]) -> Check:
    """MLPERF_SCRATCH_PATH exists (created if missing), takes a file, and has room for what is missing."""
    root = paths.scratch_path()
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor-"):
            pass
    except OSError as e:
        return fail("scratch", f"MLPERF_SCRATCH_PATH={root} is not writable ({type(e).__name__}: {e.strerror or e})",
                    SCRATCH_FIX)
    free = shutil.disk_usage(root).free / 1e9
    need = sum(TINY_GB if v == "tiny" else spec.scratch_gb for spec, v in missing)
    what = f"{root} writable, {free:,.0f} GB free"
    if need > free:
        names = ", ".join(spec.name + (" (tiny)" if v == "tiny" else "") for spec, v in missing)
        return fail("scratch", f"{what}; {names} still need about {need} GB", SCRATCH_FIX.replace("free space", f">= {need} GB free"))
    return ok("scratch", what + (f"; about {need} GB needed for what is missing" if missing else ""))


def _first(obj: Any, attrs: tuple[str, ...]) -> Path | None:
    """The first of obj's path attributes that exists on its class (a property may read settings)."""
    for a in attrs:
        if hasattr(type(obj), a):
            p = getattr(obj, a)
            if p:
                return Path(p)
    return None


def _present(p: Path | None) -> bool:
    return p is not None and (p.is_file() or (p.is_dir() and any(p.iterdir())))


def _model_marker(b: Any) -> Path:
    """What exists once download_model ran: an LLM's checkpoint folder, SDXL's pipeline folder, the
    benchmark's ONNX (or DLRM's config) in model_dir, else model_dir itself. Read-only: never calls
    onnx_path(), which may export or cut a model."""
    p = _first(b, ("checkpoint", "pipeline_dir"))
    if p is not None:
        return p
    base = _first(b, ("model_dir",)) or paths.models_dir(b.spec.name, b.settings.model_variant)
    mod = sys.modules.get(f"code.{b.spec.name}.model")
    name = getattr(mod, "ONNX_NAME", None) or getattr(mod, "CONFIG", None)
    return base / name if isinstance(name, str) else base


def check_benchmark(s: Any) -> list[Check]:
    """The model and the (preprocessed) data of one benchmark and model variant."""
    from code.common.benchmarks import implementation

    b = implementation(s.spec)(s)
    tag = s.benchmark + (" (tiny)" if s.model_variant == "tiny" else "")
    marker = _model_marker(b)
    model = ok(f"{tag} model", str(marker)) if _present(marker) else \
        fail(f"{tag} model", f"model not found: {marker}", b.fix("download_model"))
    pre = _first(b, ("preprocessed", "pre_dir"))
    raw = _first(b, ("image_dir", "raw_dir", "data_root", "squad_path", "data_dir"))
    if _present(pre):
        data = ok(f"{tag} data", str(pre))
    elif pre is not None and _present(raw):
        data = fail(f"{tag} data", f"preprocessed data not found: {pre} (raw data is in {raw})", b.fix("preprocess_data"))
    else:
        data = fail(f"{tag} data", f"data not found: {raw or '?'} (preprocessed: {pre or '?'})",
                    f"{b.fix('download_data')} && {b.fix('preprocess_data')}")
    return [model, data]


# --- docker ----------------------------------------------------------------------------------------
def check_docker(ctx: Context) -> Check:
    """--docker: the docker CLI, a reachable daemon, and the nvidia runtime when there are GPUs."""
    exe = shutil.which("docker")
    if not exe:
        return fail("docker", "docker is not on PATH", "install Docker Engine (docs.docker.com/engine/install), or skip "
                                                       "docker: make prebuild sets up .venv on the host")
    r = subprocess.run([exe, "info", "--format", "{{json .Runtimes}} {{.ServerVersion}}"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return fail("docker", f"docker info failed: {why}", "start the daemon (sudo systemctl start docker) and make "
                                                             "sure your user may use it (sudo usermod -aG docker $USER)")
    runtimes, _, server = r.stdout.strip().rpartition(" ")
    if ctx.gpus and '"nvidia"' not in runtimes:
        return fail("docker", f"docker {server} has no nvidia runtime (runtimes: {runtimes}){ctx.injected}",
                    "install the NVIDIA Container Toolkit, then sudo nvidia-ctk runtime configure --runtime=docker "
                    "&& sudo systemctl restart docker")
    return ok("docker", f"docker {server}" + (", nvidia runtime present" if ctx.gpus else "; no GPU, nvidia runtime not needed"))


# --- driver ----------------------------------------------------------------------------------------
def run_checks(cli: dict[str, Any], settings: list) -> list[Check]:
    """Every check, in display order. Hardware is detected here (first), never at import."""
    ctx = Context(cli, list(settings), info=settings[0].system.info if settings else None)
    out = guarded("Python", check_python, ctx) + guarded("LoadGen", check_loadgen, ctx) \
        + guarded("ORT", check_onnxruntime, ctx) + guarded("Ray", check_ray, ctx)
    hw = guarded("hardware", check_hardware, ctx)     # first: the GPU checks below read what it detected
    out += guarded("torch", check_torch, ctx) + hw + guarded("NVML", check_nvml, ctx) \
        + guarded("TensorRT", check_tensorrt, ctx)
    benches, seen = [], set()
    for s in ctx.settings:
        if (s.benchmark, s.model_variant) not in seen:
            seen.add((s.benchmark, s.model_variant))
            benches.append((s, guarded(f"{s.benchmark} model/data", check_benchmark, s)))
    missing = [(s.spec, s.model_variant) for s, cs in benches if any(c.status == "FAIL" for c in cs)]
    out += guarded("scratch", check_scratch, ctx, missing)
    for _, cs in benches:
        out += cs
    if cli.get("docker"):
        out += guarded("docker", check_docker, ctx)
    return out


def doctor(cli: dict[str, Any], settings: list) -> int:
    """Print one line per check and a summary; 1 when anything FAILs, else 0."""
    checks = run_checks(cli, settings)
    for c in checks:
        print(c.line(), flush=True)
    n = {k: sum(c.status == k for c in checks) for k in ("ok", "warn", "FAIL")}
    print(f"doctor: {n['ok']} ok, {n['warn']} warn, {n['FAIL']} FAIL")
    return 1 if n["FAIL"] else 0
