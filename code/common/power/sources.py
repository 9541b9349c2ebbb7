"""Where informative power comes from: NVML (GPU board power) and RAPL through powercap (CPU package power).

A source reads one cumulative energy counter in joules (``read()``); the sampler turns two readings into watts.
Nothing is probed at import. Injection for tests: ``detect(nvml=<a module-like object>, powercap_root=<folder>)``;
``MLPERF_POWERCAP_ROOT`` points the RAPL search at another folder, ``MLPERF_NO_NVML=1`` leaves NVML out.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

POWERCAP = "/sys/class/powercap"


class GpuNvml:
    """Board energy of every visible GPU, summed: NVML's total-energy counter (mJ, Volta and later), else the
    power reading (mW) integrated between calls."""
    name = "gpu"

    def __init__(self, nvml: Any, handles: list, labels: list[str], clock: Callable[[], float] = time.monotonic):
        self.nvml, self.handles, self._clock = nvml, handles, clock
        self.describe = f"NVML: {len(handles)} GPU(s) ({', '.join(sorted(set(labels)))})"
        self._counter = []
        for h in handles:
            try:
                nvml.nvmlDeviceGetTotalEnergyConsumption(h)
                self._counter.append(True)
            except Exception:
                self._counter.append(False)
        self._integrated = [0.0] * len(handles)
        self._last: tuple[float, list[float]] | None = None

    def read(self) -> float:
        now = self._clock()
        watts = []
        total = 0.0
        for i, h in enumerate(self.handles):
            if self._counter[i]:
                total += self.nvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1e3
                watts.append(0.0)
            else:
                watts.append(self.nvml.nvmlDeviceGetPowerUsage(h) / 1e3)
        if self._last is not None:       # trapezoids for the devices without a counter
            dt = now - self._last[0]
            for i, w in enumerate(watts):
                self._integrated[i] += (w + self._last[1][i]) / 2 * dt
        self._last = (now, watts)
        return total + sum(self._integrated)


class CpuRapl:
    """CPU package energy from powercap's RAPL zones (intel-rapl:N, and AMD's, which the kernel names the same):
    ``energy_uj`` wraps at ``max_energy_range_uj``; each wrap between two readings is added back."""
    name = "cpu"

    def __init__(self, zones: list[Path]):
        self.zones = zones
        self._max = [int((z / "max_energy_range_uj").read_text()) for z in zones]
        self._prev = [self._raw(z) for z in zones]
        self._acc = [0] * len(zones)
        names = [(z / "name").read_text().strip() if (z / "name").is_file() else z.name for z in zones]
        self.describe = f"RAPL: {', '.join(names)}"

    @staticmethod
    def _raw(z: Path) -> int:
        return int((z / "energy_uj").read_text())

    def read(self) -> float:
        for i, z in enumerate(self.zones):
            v = self._raw(z)
            d = v - self._prev[i]
            if d < 0:                    # the counter wrapped (once: a sampling period is far below its range)
                d += self._max[i] + 1
            self._acc[i] += d
            self._prev[i] = v
        return sum(self._acc) / 1e6


def rapl_zones(root: str | Path | None = None) -> tuple[list[Path], str | None]:
    """The package zones (top-level intel-rapl:N) whose counter this process can read; (zones, why none)."""
    root = Path(root or os.environ.get("MLPERF_POWERCAP_ROOT") or POWERCAP)
    tops = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1) if root.is_dir() else []
    if not tops:
        return [], f"no RAPL zones under {root}"
    ok, why = [], None
    for z in tops:
        try:
            int((z / "energy_uj").read_text())
            int((z / "max_energy_range_uj").read_text())
            ok.append(z)
        except PermissionError:
            why = f"{z}/energy_uj is readable by root only (sudo chmod o+r {root}/intel-rapl:*/energy_uj)"
        except (OSError, ValueError) as e:
            why = f"{z}/energy_uj unreadable ({type(e).__name__})"
    return ok, (None if ok else why)


def nvml_gpus(nvml: Any = None) -> tuple[GpuNvml | None, str | None]:
    """The NVML source over the GPUs CUDA_VISIBLE_DEVICES leaves (all when unset); (source, why none)."""
    if nvml is None:
        if os.environ.get("MLPERF_NO_NVML"):
            return None, "NVML left out (MLPERF_NO_NVML)"
        try:
            import pynvml as nvml
        except ImportError:
            return None, "no NVML (nvidia-ml-py is not installed)"
    try:
        nvml.nvmlInit()
        n = nvml.nvmlDeviceGetCount()
    except Exception as e:
        return None, f"no NVML GPU ({type(e).__name__})"
    idx = list(range(n))
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        idx = [int(t) for t in cvd.split(",") if t.strip().isdigit() and int(t) < n]
    if not idx:
        return None, "no NVML GPU"
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in idx]
    labels = []
    for h in handles:
        name = nvml.nvmlDeviceGetName(h)
        labels.append(name.decode() if isinstance(name, bytes) else str(name))
    return GpuNvml(nvml, handles, labels), None


def detect(nvml: Any = None, powercap_root: str | Path | None = None) -> tuple[list, str | None]:
    """(the sources here, None) or ([], the one line saying why there is no informative power)."""
    out, whys = [], []
    gpu, why = nvml_gpus(nvml)
    if gpu is not None:
        out.append(gpu)
    else:
        whys.append(why)
    zones, why = rapl_zones(powercap_root)
    if zones:
        out.append(CpuRapl(zones))
    else:
        whys.append(why)
    return out, (None if out else "no informative power on this machine: " + "; ".join(whys))
