"""KnownSystems: the machines configs can be written for, matched tolerantly against detection.

A GPU system is matched by PCI device id first, then by a normalised nvidia-smi name; the GPU count
must be one the class supports. CPU-only machines are matched by vendor/model and get an id that
carries the core count. Users add machines as data: ``systems/known/<id>.json`` holding
``{"system_id": ..., "gpu_names": [...], "pci_ids": [...], "arch": ..., "counts": [...]}``.
"""
from __future__ import annotations

import dataclasses
import json
import re

from code.common import paths
from code.common.errors import HarnessError
from code.common.systems.detect import SystemInfo


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower().replace("nvidia", ""))


@dataclasses.dataclass(frozen=True)
class SystemClass:
    system_id: str                 # class id, e.g. "H200-SXM-141GB"; the match id appends "x<count>"
    gpu_names: tuple[str, ...]     # names as nvidia-smi reports them
    pci_ids: tuple[str, ...]       # 4-hex PCI device ids, e.g. "2335"
    arch: str                      # "Ampere" | "Ada" | "Hopper" | "Blackwell"
    counts: tuple[int, ...]        # supported GPU counts
    memory_mb: int = 0             # one GPU's memory as nvidia-smi reports it (MiB); sizes LLM blocks (llm.memory)

    def matches_gpu(self, gpu) -> bool:
        if gpu.device_id and gpu.device_id.lower() in {p.lower() for p in self.pci_ids}:
            return True
        return _norm(gpu.name) in {_norm(n) for n in self.gpu_names}


@dataclasses.dataclass(frozen=True)
class CPUClass:
    system_id: str                 # e.g. "AMD-EPYC"; the match id appends "-<cores>c"
    vendor: str                    # regex on vendor_id
    model: str                     # regex on model name
    arch: str = "x86_64"

    def matches(self, cpu) -> bool:
        return (re.search(self.vendor, cpu.vendor, re.I) is not None
                and re.search(self.model, cpu.model_name, re.I) is not None
                and (self.arch == "*" or self.arch == cpu.arch))


class KnownSystems:
    A100_PCIe_40GB = SystemClass("A100-PCIe-40GB", ("NVIDIA A100-PCIE-40GB",), ("20f1",), "Ampere", (1, 2, 4, 8), 40960)
    A100_PCIe_80GB = SystemClass("A100-PCIe-80GB", ("NVIDIA A100 80GB PCIe",), ("20b5",), "Ampere", (1, 2, 4, 8), 81920)
    A100_SXM4_40GB = SystemClass("A100-SXM4-40GB", ("NVIDIA A100-SXM4-40GB",), ("20b0",), "Ampere", (1, 8), 40960)
    A100_SXM_80GB = SystemClass("A100-SXM-80GB", ("NVIDIA A100-SXM4-80GB",), ("20b2",), "Ampere", (1, 4, 8), 81920)
    L4 = SystemClass("L4", ("NVIDIA L4",), ("27b8",), "Ada", (1, 2, 4, 8), 23034)
    L40S = SystemClass("L40S", ("NVIDIA L40S",), ("26b9",), "Ada", (1, 2, 4, 8), 46068)
    H100_PCIe_80GB = SystemClass("H100-PCIe-80GB", ("NVIDIA H100 PCIe",), ("2331",), "Hopper", (1, 2, 4, 8), 81559)
    H100_SXM_80GB = SystemClass("H100-SXM-80GB", ("NVIDIA H100 80GB HBM3",), ("2330",), "Hopper", (1, 2, 4, 8), 81559)
    H100_NVL = SystemClass("H100-NVL-94GB", ("NVIDIA H100 NVL",), ("2321",), "Hopper", (1, 2, 4, 8), 95830)
    H200_SXM_141GB = SystemClass("H200-SXM-141GB", ("NVIDIA H200",), ("2335",), "Hopper", (1, 2, 4, 8), 143771)
    H200_NVL = SystemClass("H200-NVL-141GB", ("NVIDIA H200 NVL",), ("233b",), "Hopper", (1, 2, 4, 8), 143771)
    GH200_96GB = SystemClass("GH200-96GB", ("NVIDIA GH200 480GB", "NVIDIA GH200 96GB HBM3"), ("2342",), "Hopper", (1,), 97871)
    B200_SXM_180GB = SystemClass("B200-SXM-180GB", ("NVIDIA B200",), ("2901",), "Blackwell", (1, 2, 4, 8), 183359)

    CPU_AMD_EPYC = CPUClass("AMD-EPYC", "AMD", r"EPYC")
    CPU_INTEL_XEON = CPUClass("Intel-Xeon", "Intel", r"Xeon")
    CPU_ARM_GRACE = CPUClass("NVIDIA-Grace", "ARM|NVIDIA", r"Grace|Neoverse-V2|.*", arch="aarch64")
    CPU_GENERIC_X86 = CPUClass("CPU-x86_64", ".*", ".*", arch="x86_64")

    @classmethod
    def gpu_classes(cls) -> list[SystemClass]:
        """User entries (systems/known/*.json) first: they extend or override a built-in class (a
        3-GPU H200 file wins over the built-in H200 class's counts)."""
        builtin = [v for v in vars(cls).values() if isinstance(v, SystemClass)]
        return _user_classes() + builtin

    @classmethod
    def cpu_classes(cls) -> list[CPUClass]:
        return [v for v in vars(cls).values() if isinstance(v, CPUClass)]  # generic last (declaration order)


ARCHS = ("Ampere", "Ada", "Hopper", "Blackwell")
USER_KEYS = ("system_id", "gpu_names", "pci_ids", "arch", "counts", "memory_mb", "description")


def _user_classes() -> list[SystemClass]:
    """systems/known/*.json, each checked by ``check_user_entry``."""
    from code.common.fileio import read_json

    d = paths.systems_dir() / "known"
    return [check_user_entry(read_json(p, _user_fix(p)), p) for p in (sorted(d.glob("*.json")) if d.is_dir() else [])]


def _user_fix(p) -> str:
    return (f"fix {p}: {{\"system_id\": \"RTX-6000-Ada\", \"gpu_names\": [\"NVIDIA RTX 6000 Ada Generation\"], "
            "\"pci_ids\": [\"0x26B1\"], \"arch\": \"Ada\", \"counts\": [1, 2]} (README 'Adding a system')")


def check_user_entry(j: dict, p) -> SystemClass:
    """One systems/known entry, checked field by field (a string where a list belongs, a number where a
    string belongs, or an empty id is an error naming the file and the key)."""
    fix = _user_fix(p)

    def bad(key: str, want: str):
        return HarnessError(f"{p}: '{key}' must be {want}, found {json.dumps(j.get(key))}", fix)

    for k in j:
        if k not in USER_KEYS:
            from code.common.errors import did_you_mean

            raise HarnessError(f"{p}: unknown key '{k}'{did_you_mean(k, USER_KEYS)}", fix)
    sid = j.get("system_id")
    if not isinstance(sid, str) or not re.fullmatch(SYSTEM_ID, sid):
        raise bad("system_id", "a name of 1 to 64 letters, digits, '-', '_' or '.'")
    for key in ("gpu_names", "pci_ids"):
        v = j.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
            raise bad(key, "a list of strings")
    if not j.get("gpu_names") and not j.get("pci_ids"):
        raise HarnessError(f"{p}: needs 'gpu_names' or 'pci_ids' to match a GPU", fix)
    for x in j.get("pci_ids", []):
        if not re.fullmatch(r"(0x)?[0-9a-fA-F]{4}([0-9a-fA-F]{4})?", x.strip()):
            raise bad("pci_ids", 'a list of PCI device ids such as "0x2335" or "0x233510DE"')
    counts = j.get("counts")
    if not isinstance(counts, list) or not counts or not all(type(c) is int and c >= 1 for c in counts):
        raise bad("counts", "a list of GPU counts such as [1, 2, 4, 8]")
    arch = j.get("arch", "unknown")
    if arch != "unknown" and arch not in ARCHS:
        raise bad("arch", f"one of {', '.join(ARCHS)}")
    mem = j.get("memory_mb", 0)
    if type(mem) is not int or mem < 0:
        raise bad("memory_mb", "one GPU's memory in MiB as nvidia-smi reports it, such as 49140")
    return SystemClass(sid, tuple(j.get("gpu_names", ())),
                       tuple(x.strip().lower().replace("0x", "")[:4] for x in j.get("pci_ids", ())), arch, tuple(counts),
                       mem)


@dataclasses.dataclass(frozen=True)
class SystemMatch:
    system_id: str          # "H200-SXM-141GBx8", "AMD-EPYC-2c"
    class_id: str           # "H200-SXM-141GB", "AMD-EPYC"
    info: SystemInfo
    accelerator: str        # "gpu" | "cpu"
    arch: str
    class_memory_mb: int = 0    # the matched class's GPU memory, for a forced --system_name without that GPU here

    @property
    def gpu_count(self) -> int:
        return len(self.info.gpus)

    @property
    def gpu_memory_gib(self) -> float:
        """One GPU's memory in GiB: what NVML detected, else what the class declares (0: unknown)."""
        mb = next((g.memory_mb for g in self.info.gpus if g.memory_mb), 0) or self.class_memory_mb
        return mb / 1024


SYSTEM_ID = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"    # a file and directory name on every file system, and readable

ADD_SYSTEM_HELP = ("add it: write systems/known/<id>.json ({\"system_id\", \"gpu_names\", \"pci_ids\", \"counts\"}) "
                   "and a \"<id>x<count>\" block in configs/<benchmark>/<scenario>/config.json (see README 'Adding a system'); "
                   "or run on the CPU with CUDA_VISIBLE_DEVICES=\"\"")


def match_system(info: SystemInfo, system_name: str | None = None) -> SystemMatch:
    """Match detected hardware to KnownSystems; ``system_name`` forces an id (checked for existence)."""
    if system_name:
        return _forced(info, system_name)
    if info.gpus:
        return _match_gpus(info)
    for c in KnownSystems.cpu_classes():
        if c.matches(info.cpu):
            return SystemMatch(f"{c.system_id}-{info.cpu.cores}c", c.system_id, info, "cpu", info.cpu.arch)
    raise HarnessError(f"system not found: CPU '{info.cpu.model_name}' [{info.cpu.vendor}, {info.cpu.arch}] "
                       f"matches no KnownSystems CPU class", ADD_SYSTEM_HELP)


def _match_gpus(info: SystemInfo) -> SystemMatch:
    """One GPU type, and a class (user entries first) that supports the GPU count."""
    classes = KnownSystems.gpu_classes()
    n = len(info.gpus)
    kinds: dict[str, list] = {}                  # device id / name -> the GPUs of that kind
    for g in info.gpus:
        kinds.setdefault(g.device_id or _norm(g.name), []).append(g)
    if len(kinds) > 1:
        parts = []
        for gs in kinds.values():
            c = next((c for c in classes if c.matches_gpu(gs[0])), None)
            parts.append(f"{len(gs)}x {c.system_id if c else repr(gs[0].name)}")
        raise HarnessError(f"mixed GPU types: {' + '.join(parts)}; a system config is for one GPU type",
                           "pick one type with CUDA_VISIBLE_DEVICES (e.g. CUDA_VISIBLE_DEVICES=0,1), "
                           "or run on the CPU with CUDA_VISIBLE_DEVICES=\"\"")
    g = info.gpus[0]
    matching = [c for c in classes if c.matches_gpu(g)]
    if not matching:
        raise HarnessError(f"system not found: {n}x '{g.name}' (PCI {g.pci_id}) matches no KnownSystems entry",
                           ADD_SYSTEM_HELP)
    cls = next((c for c in matching if n in c.counts), None)
    if cls is None:
        c = matching[0]
        raise HarnessError(f"system not found: {n}x {c.system_id} (PCI {g.pci_id}): KnownSystems supports "
                           f"{c.system_id} in counts {list(c.counts)}",
                           f"add {n} to \"counts\" in a systems/known/{c.system_id}.json entry "
                           f"({{\"system_id\": \"{c.system_id}\", \"pci_ids\": [\"0x{g.device_id}\"], "
                           f"\"arch\": \"{c.arch}\", \"counts\": [{n}]}}), then add a \"{c.system_id}x{n}\" config block "
                           f"if you want values other than the one-GPU block's")
    return SystemMatch(f"{cls.system_id}x{n}", cls.system_id, info, "gpu", cls.arch, cls.memory_mb)


def known_ids() -> list[str]:
    ids = [f"{c.system_id}x{n}" for c in KnownSystems.gpu_classes() for n in c.counts]
    return ids + [c.system_id for c in KnownSystems.cpu_classes()]


def _forced(info: SystemInfo, name: str) -> SystemMatch:
    from code.common.errors import did_you_mean

    for c in KnownSystems.gpu_classes():
        for n in c.counts:
            if name == f"{c.system_id}x{n}":
                return SystemMatch(name, c.system_id, info, "gpu", c.arch, c.memory_mb)
    for c in KnownSystems.cpu_classes():
        if re.fullmatch(re.escape(c.system_id) + r"(-\d+c)?", name):
            return SystemMatch(name, c.system_id, info, "cpu", info.cpu.arch)
    raise HarnessError(f"unknown --system_name '{name}'{did_you_mean(name, known_ids())}",
                       "run `make info` to list known systems, or drop --system_name to use detection")
