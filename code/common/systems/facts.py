"""The machine's facts a system description needs, probed in the process that runs (the harness child) and
recorded in each run's metadata.json ("machine"): detection (GPUs, CPU, memory), host facts (lscpu, OS, DMI
product, disks, NICs, memory configuration), GPU link facts (nvidia-ml-py). These are the only probes of the
host beside ``detect``; staging reads the records (``info_of``), never the live machine."""
from __future__ import annotations

import dataclasses
import json
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from code.common.systems.detect import CPUInfo, GPUInfo, SystemInfo, detect


def machine_record() -> dict[str, Any]:
    """What metadata.json records of the machine a run ran on."""
    return {"hostname": platform.node(), "info": dataclasses.asdict(detect()), "host": host_facts(),
            "gpus_extra": gpu_facts()}


def software_versions() -> dict[str, str | None]:
    """Python, LoadGen, numpy and every backend's library (None where absent), from package metadata: what
    metadata.json records as "versions" and what each Ray worker must match."""
    import importlib.metadata as im

    from code.common.backends import library_versions

    out = {"python": platform.python_version()}
    for key, dist in (("loadgen", "mlcommons-loadgen"), ("numpy", "numpy")):
        try:
            out[key] = im.version(dist)
        except im.PackageNotFoundError:
            out[key] = None
    return {**out, **library_versions()}


def info_of(d: dict[str, Any]) -> SystemInfo:
    """The SystemInfo a record's "info" (``dataclasses.asdict`` of one) describes."""
    return SystemInfo(tuple(GPUInfo(**g) for g in d.get("gpus", ())), CPUInfo(**d["cpu"]), d.get("memory_gb", 0.0),
                      d.get("source", "detected"))


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def host_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {"kernel": platform.release()}
    try:
        r = subprocess.run(["lscpu", "-J"], capture_output=True, text=True, timeout=20)
        if r.returncode == 0:
            facts["lscpu"] = {e["field"].rstrip(":"): e["data"] for e in json.loads(r.stdout).get("lscpu", [])}
    except (OSError, ValueError, subprocess.TimeoutExpired):
        pass
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            facts["os"] = line.split("=", 1)[1].strip().strip('"')
    vendor, product = _read("/sys/class/dmi/id/sys_vendor"), _read("/sys/class/dmi/id/product_name")
    facts["product"] = " ".join(x for x in (vendor, product) if x and x.lower() not in ("none", "to be filled by o.e.m."))
    try:
        facts["storage_bytes"] = shutil.disk_usage(Path(__file__).resolve().parents[3]).total
    except OSError:
        pass
    disks = []
    for dev in sorted(Path("/sys/block").glob("*")) if Path("/sys/block").exists() else []:
        if dev.name.startswith(("loop", "ram", "zram", "dm-", "md", "sr")):
            continue
        disks.append({"name": dev.name, "rotational": _read(str(dev / "queue/rotational"))})
    facts["disks"] = disks
    nics = []
    for nic in sorted(Path("/sys/class/net").glob("*")) if Path("/sys/class/net").exists() else []:
        if nic.name == "lo" or not (nic / "device").exists():
            continue
        nics.append({"name": nic.name, "speed_mbit": _read(str(nic / "speed"))})
    facts["nics"] = nics
    facts["memory_config"] = _dmidecode_memory()
    return facts


def _dmidecode_memory() -> str:
    exe = shutil.which("dmidecode")
    if not exe:
        return ""
    try:
        r = subprocess.run([exe, "-t", "memory"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if r.returncode != 0:
        return ""
    sizes, kinds, speeds = [], set(), set()
    for block in r.stdout.split("Memory Device")[1:]:
        size = re.search(r"^\s*Size:\s*(\d+)\s*(GB|MB)", block, re.M)
        if not size:
            continue
        sizes.append(f"{size.group(1)} {size.group(2)}")
        if (m := re.search(r"^\s*Type:\s*(\S+)", block, re.M)):
            kinds.add(m.group(1))
        if (m := re.search(r"^\s*Speed:\s*(\d+ MT/s)", block, re.M)):
            speeds.add(m.group(1))
    if not sizes:
        return ""
    common = max(set(sizes), key=sizes.count)
    return " ".join([f"{sizes.count(common)}x {common}", *sorted(kinds), *sorted(speeds)])


def gpu_facts() -> list[dict[str, Any]]:
    """Per visible GPU: PCIe link, max SM clock, NVLink use (empty list without NVML)."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML: nothing to add
        return []
    out = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            f: dict[str, Any] = {}
            for key, fn in (("pcie_gen", pynvml.nvmlDeviceGetMaxPcieLinkGeneration),
                            ("pcie_width", pynvml.nvmlDeviceGetMaxPcieLinkWidth)):
                try:
                    f[key] = int(fn(h))
                except Exception:  # noqa: BLE001
                    pass
            try:
                f["max_sm_mhz"] = int(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM))
            except Exception:  # noqa: BLE001
                pass
            links = 0
            for link in range(18):
                try:
                    links += int(pynvml.nvmlDeviceGetNvLinkState(h, link) == pynvml.NVML_FEATURE_ENABLED)
                except Exception:  # noqa: BLE001
                    break
            f["nvlinks"] = links
            out.append(f)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return out
