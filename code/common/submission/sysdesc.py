"""systems/<system_name>.json: the system description the submission checker requires.

Filled from what the runs recorded where possible: the harness's ``code.common.systems.detect()`` (GPUs,
CPU, memory), ``lscpu -J``, /etc/os-release, /sys (DMI product name, disks, NICs), nvidia-ml-py (PCIe
link, clocks, NVLink) and the software versions, all in the staged runs' metadata. Values that
cannot be detected are written as ``"TO FILL: <hint>"``; the staging command lists them and the
pre-flight check fails until they are replaced. A value already in an existing file (one the
submitter edited) is kept, so filling a field once is enough.

Nothing here touches the machine: the facts come from the runs' records (metadata.json "machine", written
by ``code.common.systems.facts.machine_record`` in the process that ran), so staging on another host
describes the system that ran.
"""
from __future__ import annotations

from typing import Any

TO_FILL = "TO FILL: "

# Keys the official v6.1 checker requires, and those it requires to be non-empty.
REQUIRED_FIELDS = (
    "division", "submitter", "status", "system_name", "number_of_nodes", "host_processor_model_name",
    "host_processors_per_node", "host_processor_core_count", "host_memory_capacity", "host_storage_capacity",
    "host_storage_type", "accelerators_per_node", "accelerator_model_name", "accelerator_memory_capacity",
    "framework", "operating_system", "system_type", "other_software_stack", "host_processor_frequency",
    "host_processor_caches", "host_memory_configuration", "host_processor_interconnect", "host_networking",
    "host_networking_topology", "accelerator_frequency", "accelerator_host_interconnect",
    "accelerator_interconnect", "accelerator_interconnect_topology", "accelerator_memory_configuration",
    "accelerator_on-chip_memories", "cooling", "hw_notes", "sw_notes", "host_network_card_count",
    "system_type_detail")
MEANINGFUL_FIELDS = (
    "division", "submitter", "system_type", "status", "system_name", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count", "host_memory_capacity",
    "host_memory_configuration", "host_storage_capacity", "host_storage_type", "host_networking",
    "host_network_card_count", "host_networking_topology", "accelerators_per_node", "accelerator_model_name",
    "accelerator_memory_capacity", "accelerator_host_interconnect", "accelerator_memory_configuration",
    "accelerator_interconnect", "cooling", "framework", "operating_system", "other_software_stack")
# The type each field must have (tools/submission/submission_checker of the same commit reads them so):
# counts are whole numbers (results.py does int(number_of_nodes) * int(accelerators_per_node) for its CSV;
# a JSON integer or a string of digits, as the checker's own examples write either), everything else is
# text (system_check.py and performance_check.py call .lower() on status, submitter, division, system_type
# and is_network; the rest go into the results table as strings). A dict or list anywhere is wrong.
WHOLE_NUMBER_FIELDS = ("number_of_nodes", "host_processors_per_node", "host_processor_core_count",
                       "accelerators_per_node", "host_network_card_count")
TEXT_FIELDS = tuple(k for k in REQUIRED_FIELDS if k not in WHOLE_NUMBER_FIELDS) + ("is_network",)
VALID_STATUS = ("available", "preview", "rdi")
VALID_SYSTEM_TYPES = ("datacenter", "edge", "datacenter,edge", "edge,datacenter")

# GPU memory technology by marketing name (NVML does not report it).
_GPU_MEMORY = (("H200", "HBM3e"), ("B200", "HBM3e"), ("GB200", "HBM3e"), ("GH200", "HBM3"),
               ("H100 PCIe", "HBM2e"), ("H100", "HBM3"), ("A100", "HBM2e"), ("L40S", "GDDR6"),
               ("L40", "GDDR6"), ("L4", "GDDR6"), ("A10", "GDDR6"), ("T4", "GDDR6"))



def is_placeholder(v: Any) -> bool:
    return isinstance(v, str) and v.startswith(TO_FILL)


def is_empty(v: Any) -> bool:
    """What the checker calls empty (falsy), plus whitespace-only strings."""
    return (not v) or (isinstance(v, str) and not v.strip())


# --- the description --------------------------------------------------------------------------------

def describe(*, division: str, submitter: str, system_type: str, system_info: Any, host: dict[str, Any],
             gpus_extra: list[dict[str, Any]], software: dict[str, str], backends: set[str],
             harness_version: str = "", nodes: int = 1) -> dict[str, Any]:
    """A complete description from detected facts; undetectable values are ``TO FILL`` placeholders."""
    lscpu = host.get("lscpu") or {}
    cpu = system_info.cpu
    gpus = list(system_info.gpus)
    ngpu = len(gpus)
    sockets = int(lscpu.get("Socket(s)") or cpu.sockets or 1)
    cores = lscpu.get("Core(s) per socket") or (max(1, cpu.cores // max(1, sockets)))
    caches = ", ".join(f"{k.replace(' cache', '')}: {lscpu[k]}" for k in ("L1d cache", "L1i cache", "L2 cache", "L3 cache")
                       if lscpu.get(k))
    mhz = lscpu.get("CPU max MHz")
    d: dict[str, Any] = {
        "division": division, "submitter": submitter, "status": "available",
        "system_name": host.get("product") or (f"{ngpu}x {gpus[0].name}" if gpus else f"{cpu.model_name} server"),
        "system_type": system_type, "system_type_detail": "N/A", "number_of_nodes": nodes,
        "host_processor_model_name": cpu.model_name,
        "host_processors_per_node": sockets,
        "host_processor_core_count": int(cores),
        "host_processor_frequency": f"{float(mhz):.0f} MHz" if mhz else TO_FILL + "max CPU frequency, e.g. 3700 MHz",
        "host_processor_caches": caches or TO_FILL + "CPU caches, e.g. L2: 1 MiB/core, L3: 256 MiB",
        "host_processor_interconnect": "N/A (single socket)" if sockets == 1 else TO_FILL + "socket interconnect, e.g. 4x xGMI",
        "host_memory_capacity": f"{round(system_info.memory_gb)} GB" if system_info.memory_gb else TO_FILL + "e.g. 512 GB",
        "host_memory_configuration": host.get("memory_config") or TO_FILL + "DIMMs, e.g. 16x 32 GB DDR5 4800 MT/s",
        "host_storage_capacity": f"{host['storage_bytes'] / 1e9:.0f} GB" if host.get("storage_bytes") else TO_FILL + "e.g. 2 TB",
        "host_storage_type": _storage_type(host.get("disks") or []),
        "host_networking": _networking(host.get("nics") or []),
        "host_network_card_count": str(len(host.get("nics") or [])),
        "host_networking_topology": "N/A (single node)" if nodes == 1 else
        TO_FILL + f"how the {nodes} nodes connect, e.g. 2x 400G InfiniBand per node, fat tree",
        "accelerators_per_node": ngpu if ngpu else "0",
        "accelerator_model_name": gpus[0].name if gpus else "N/A (CPU only)",
        "accelerator_memory_capacity": f"{round(gpus[0].memory_mb / 1024)} GB" if gpus and gpus[0].memory_mb else
        ("N/A" if not gpus else TO_FILL + "per-accelerator memory, e.g. 141 GB"),
        "accelerator_memory_configuration": _gpu_memory(gpus),
        "accelerator_frequency": (f"{gpus_extra[0]['max_sm_mhz']} MHz" if gpus_extra and gpus_extra[0].get("max_sm_mhz")
                                  else ("N/A" if not gpus else TO_FILL + "max SM clock, e.g. 1980 MHz")),
        "accelerator_host_interconnect": _pcie(gpus, gpus_extra),
        "accelerator_interconnect": _interconnect(gpus, gpus_extra),
        "accelerator_interconnect_topology": "N/A" if ngpu <= 1 else TO_FILL + "e.g. NVSwitch all-to-all",
        "accelerator_on-chip_memories": "N/A" if not gpus else TO_FILL + "e.g. 50 MB L2 per GPU",
        "cooling": TO_FILL + "air or liquid",
        "hw_notes": "N/A",
        "sw_notes": f"Open MLPerf Inference harness {harness_version}".strip(),
        "framework": ", ".join(sorted(_framework(b, software) for b in backends)) or TO_FILL + "e.g. TensorRT 10.x",
        "operating_system": " ".join(x for x in (host.get("os"), f"(kernel {host['kernel']})" if host.get("kernel") else "")
                                     if x) or TO_FILL + "e.g. Ubuntu 24.04",
        "other_software_stack": _software(software, gpus) or TO_FILL + "e.g. CUDA 12.x, driver 5xx",
    }
    return d


def _storage_type(disks: list[dict]) -> str:
    kinds = []
    for dsk in disks:
        n = dsk.get("name", "")
        if n.startswith("nvme"):
            kinds.append("NVMe SSD")
        elif n.startswith(("vd", "xvd")):
            kinds.append("virtual disk")
        elif str(dsk.get("rotational")) == "0":
            kinds.append("SSD")
        elif str(dsk.get("rotational")) == "1":
            kinds.append("HDD")
    return ", ".join(sorted(set(kinds))) or TO_FILL + "e.g. NVMe SSD"


def _networking(nics: list[dict]) -> str:
    parts = []
    for nic in nics:
        sp = str(nic.get("speed_mbit") or "")
        parts.append(f"{nic['name']} {int(sp) // 1000} Gb/s" if sp.isdigit() and int(sp) >= 1000 else nic["name"])
    return ", ".join(parts) or "N/A (no physical NIC)"


def _gpu_memory(gpus) -> str:
    if not gpus:
        return "N/A"
    name = gpus[0].name
    for key, kind in _GPU_MEMORY:
        if key in name:
            return kind
    return TO_FILL + "accelerator memory type, e.g. HBM3e"


def _pcie(gpus, extra) -> str:
    if not gpus:
        return "N/A"
    if extra and extra[0].get("pcie_gen") and extra[0].get("pcie_width"):
        return f"PCIe Gen{extra[0]['pcie_gen']} x{extra[0]['pcie_width']}"
    return TO_FILL + "e.g. PCIe Gen5 x16"


def _interconnect(gpus, extra) -> str:
    if len(gpus) <= 1:
        return "N/A"
    if extra and any(e.get("nvlinks") for e in extra):
        return f"NVLink ({max(e.get('nvlinks', 0) for e in extra)} links per GPU)"
    if extra:
        return "PCIe"
    return TO_FILL + "e.g. NVLink 4"


def _framework(backend: str, software: dict[str, str]) -> str:
    from code.common.backends import backend_class

    cls = backend_class(backend)
    v = software.get(cls.library)
    return f"{cls.display_name()} {v}" if v else cls.display_name()


def _software(software: dict[str, str], gpus) -> str:
    from code.common.backends import backend_class, names as backend_names

    names = {"python": "Python", "loadgen": "MLPerf LoadGen", "cuda": "CUDA",
             **{backend_class(b).library: backend_class(b).display_name() for b in backend_names()}}
    parts = [f"{names.get(k, k)} {v}" for k, v in sorted(software.items()) if v]
    drivers = sorted({g.driver for g in gpus if getattr(g, "driver", "")})
    if drivers:
        parts.append(f"NVIDIA driver {', '.join(drivers)}")
    return ", ".join(parts)


def merge(detected: dict[str, Any], existing: dict[str, Any] | None, *, division: str, submitter: str) -> dict[str, Any]:
    """Existing non-empty, non-placeholder values win (the submitter's edits), except division/submitter."""
    out = dict(detected)
    for k, v in (existing or {}).items():
        if not is_empty(v) and not is_placeholder(v):
            out[k] = v
    out["division"], out["submitter"] = division, submitter
    return out


def field_problem(key: str, value: Any) -> str | None:
    """Why ``value`` is the wrong type for the systems JSON field ``key`` (WHOLE_NUMBER_FIELDS, TEXT_FIELDS), or
    None. Empty values and TO FILL placeholders are not judged here (to_fill and the pre-flight name them)."""
    if value is None or value == "" or is_placeholder(value):
        return None
    if key in WHOLE_NUMBER_FIELDS:
        ok = (isinstance(value, int) and not isinstance(value, bool) and value >= 0) or \
            (isinstance(value, str) and value.strip().isdigit())
        return None if ok else f"field {key} is {_show(value)}, not a whole number (e.g. 2)"
    if key in TEXT_FIELDS and not isinstance(value, str):
        return f"field {key} is {_show(value)}, not text (a JSON string)"
    return None


def _show(value: Any) -> str:
    import json

    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def field_problems(desc: dict[str, Any]) -> list[str]:
    """field_problem for every field of ``desc``, one line each."""
    return [why for k, v in desc.items() if (why := field_problem(k, v))]


def to_fill(desc: dict[str, Any]) -> list[str]:
    """Required fields still empty or placeholders: what the submitter must edit."""
    return [k for k in REQUIRED_FIELDS if k not in desc or is_placeholder(desc[k]) or
            (k in MEANINGFUL_FIELDS and is_empty(desc[k]))]


def system_type_for(round_benchmarks: list, staged_scenarios: dict[str, set[str]]) -> str:
    """The system type whose scenario lists the staged benchmarks fit: "edge", then "datacenter", then
    "datacenter,edge" (the first type in which every staged benchmark exists and holds only scenarios
    that type defines for it). A mix such as 3D-UNet SingleStream (edge) with DLRM-v2 (datacenter only)
    is "datacenter,edge"; the checker then requires each benchmark's "both" list."""
    def fits(st: str) -> bool:
        for b in round_benchmarks:
            req = b.required_scenarios(st)
            if req is None:
                return False
            if not set(staged_scenarios.get(b.name, ())) <= set(req) | set(b.optional(st)):
                return False
        return True

    return next((st for st in ("edge", "datacenter") if fits(st)), "datacenter,edge")
