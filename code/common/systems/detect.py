"""What hardware is here. Nothing runs at import time.

Injection for tests and dry runs: ``MLPERF_FAKE_SYSTEM`` holds JSON (or a path to a JSON file) like
``{"gpus": [{"name": "NVIDIA H200", "pci_id": "0x233510DE", "memory_mb": 143771}] * 8,
"cpu": {"vendor": "AuthenticAMD", "model_name": "AMD EPYC 9654", "cores": 96, "sockets": 2, "arch": "x86_64"},
"memory_gb": 2048}``. Missing keys fall back to the real detection of that part.
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class GPUInfo:
    name: str           # as nvidia-smi reports it, e.g. "NVIDIA H200"
    pci_id: str         # PCI device id as NVML reports it: "0x233510DE" (device 0x2335, vendor 0x10DE)
    memory_mb: int = 0
    driver: str = ""

    @property
    def device_id(self) -> str:
        """Lower-case 4-hex PCI device id ("2335"), from either "0x233510DE" or "10de:2335" forms."""
        s = self.pci_id.lower().replace("0x", "")
        if ":" in s:
            return s.split(":")[1][:4]
        return s[:4]


@dataclasses.dataclass(frozen=True)
class CPUInfo:
    vendor: str         # "AuthenticAMD", "GenuineIntel", "ARM", ...
    model_name: str
    cores: int          # usable logical CPUs for this process
    sockets: int = 1
    arch: str = "x86_64"


@dataclasses.dataclass(frozen=True)
class SystemInfo:
    gpus: tuple[GPUInfo, ...]
    cpu: CPUInfo
    memory_gb: float = 0.0
    source: str = "detected"     # "detected" | "injected"

    def describe(self) -> str:
        if self.gpus:
            names = sorted({f"{g.name} (PCI {g.pci_id})" for g in self.gpus})
            return f"{len(self.gpus)}x GPU: {', '.join(names)}; CPU: {self.cpu.model_name} ({self.cpu.cores} cores)"
        return f"no GPU; CPU: {self.cpu.model_name} [{self.cpu.vendor}], {self.cpu.cores} cores, {self.cpu.arch}"


def _visible(gpus: list[GPUInfo], uuids: list[str] | None = None) -> list[GPUInfo]:
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return gpus
    keep = []
    for tok in [t.strip() for t in cvd.split(",") if t.strip()]:
        if tok.isdigit() and int(tok) < len(gpus):
            keep.append(gpus[int(tok)])
        elif uuids and tok in uuids:
            keep.append(gpus[uuids.index(tok)])
        elif tok in ("-1", "NoDevFiles"):
            return []
    return keep


def _gpus_nvml() -> list[GPUInfo] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        out, uuids = [], []
        driver = pynvml.nvmlSystemGetDriverVersion()
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            pci = pynvml.nvmlDeviceGetPciInfo(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            uuids.append(pynvml.nvmlDeviceGetUUID(h))
            out.append(GPUInfo(str(name), f"0x{pci.pciDeviceId:08X}", int(mem.total // (1 << 20)), str(driver)))
        return _visible(out, uuids)
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _gpus_smi() -> list[GPUInfo] | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        r = subprocess.run([exe, "--query-gpu=name,pci.device_id,memory.total,driver_version,uuid",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    out, uuids = [], []
    for line in r.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 5:
            out.append(GPUInfo(parts[0], parts[1], int(float(parts[2] or 0)), parts[3]))
            uuids.append(parts[4])
    return _visible(out, uuids)


def _cpu() -> CPUInfo:
    vendor, model, sockets = "", "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            k, v = k.strip(), v.strip()
            if k == "vendor_id" and not vendor:
                vendor = v
            elif k == "model name" and not model:
                model = v
            elif k == "physical id":
                sockets.add(v)
            elif k == "CPU implementer" and not vendor:
                vendor = "ARM"
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return CPUInfo(vendor or platform.processor() or "unknown", model or platform.processor() or "unknown",
                   cores, max(1, len(sockets)), platform.machine())


def _memory_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return 0.0


FAKE_SHAPE = ('{"gpus": [{"name": "NVIDIA H200", "pci_id": "0x233510DE", "memory_mb": 143771}], '
              '"cpu": {"vendor": "AuthenticAMD", "model_name": "AMD EPYC 9654", "cores": 96}, "memory_gb": 2048}')


def _injected() -> dict | None:
    """MLPERF_FAKE_SYSTEM, checked against the shape above: a wrong shape is a one-line error."""
    raw = os.environ.get("MLPERF_FAKE_SYSTEM")
    if not raw:
        return None
    from code.common.errors import HarnessError

    fix = f"unset MLPERF_FAKE_SYSTEM, or give it JSON (or a JSON file) like {FAKE_SHAPE}"
    try:
        text = raw if raw.lstrip()[:1] in ("{", "[") else Path(raw).read_text()
        inj = json.loads(text)
    except (OSError, ValueError) as e:
        raise HarnessError(f"MLPERF_FAKE_SYSTEM is not valid JSON or a readable JSON file: {e}", fix) from None

    def bad(what: str):
        return HarnessError(f"MLPERF_FAKE_SYSTEM: {what}", fix)

    if not isinstance(inj, dict):
        raise bad(f"expected a JSON object, found a {type(inj).__name__}")
    for k in inj:
        if k not in ("gpus", "cpu", "memory_gb"):
            raise bad(f"unknown key '{k}' (keys: gpus, cpu, memory_gb)")
    _check_records(inj.get("gpus", []), GPUInfo, "gpus", bad, as_list=True)
    if "cpu" in inj:
        _check_records(inj["cpu"], CPUInfo, "cpu", bad, as_list=False)
    if "memory_gb" in inj and (isinstance(inj["memory_gb"], bool) or not isinstance(inj["memory_gb"], (int, float))):
        raise bad(f"memory_gb must be a number, found {json.dumps(inj['memory_gb'])}")
    return inj


def _check_records(value, cls, key: str, bad, as_list: bool) -> None:
    """Each record holds the dataclass's required fields, no others, each of its declared type."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    required = [f.name for f in fields.values() if f.default is dataclasses.MISSING]
    types = {"str": str, "int": int}
    records = value if as_list else [value]
    if as_list and not isinstance(value, list):
        raise bad(f"'{key}' must be a list of objects, found {json.dumps(value)}")
    for i, r in enumerate(records):
        where = f"{key}[{i}]" if as_list else key
        if not isinstance(r, dict):
            raise bad(f"'{where}' must be an object, found {json.dumps(r)}")
        for k, v in r.items():
            if k not in fields:
                raise bad(f"'{where}' has unknown key '{k}' (keys: {', '.join(fields)})")
            want = types.get(str(fields[k].type), str)
            if isinstance(v, bool) or not isinstance(v, want):
                raise bad(f"'{where}.{k}' must be {'an integer' if want is int else 'a string'}, found {json.dumps(v)}")
        missing = [k for k in required if k not in r]
        if missing:
            raise bad(f"'{where}' needs {', '.join(missing)}")


def detect() -> SystemInfo:
    """Detect GPUs (NVML, then nvidia-smi; honours CUDA_VISIBLE_DEVICES), CPU and memory."""
    inj = _injected()
    if inj is not None:
        gpus = tuple(GPUInfo(**g) for g in inj.get("gpus", []))
        cpu = CPUInfo(**inj["cpu"]) if "cpu" in inj else _cpu()
        return SystemInfo(gpus, cpu, float(inj.get("memory_gb", _memory_gb())), "injected")
    gpus = _gpus_nvml()
    if gpus is None:
        gpus = _gpus_smi() or []
    return SystemInfo(tuple(gpus), _cpu(), _memory_gb())
