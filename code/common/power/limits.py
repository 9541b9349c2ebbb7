"""Power settings as NVIDIA's harness has them, applied through NVML for one run and restored after it.

Config keys (code.common.fields): ``power_limit`` (W per GPU, NVML's power-management limit),
``gpu_clock_lock`` and ``memory_clock_lock`` (MHz; min = max). 0 leaves a setting as it is. The previous
limit is put back and the clock locks are reset in a ``finally``, which Ctrl-C reaches (KeyboardInterrupt)
and SIGTERM too (turned into SystemExit while the settings are held). Setting them needs root: NVML's
NoPermission becomes one line with the command that fixes it, before anything runs.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator, Mapping

from code.common.errors import HarnessError

KEYS = ("power_limit", "gpu_clock_lock", "memory_clock_lock")
NVML_ERROR_NO_PERMISSION = 4          # nvml.h: NVML_ERROR_NO_PERMISSION


def wanted(values: Mapping[str, Any]) -> dict[str, float]:
    return {k: values[k] for k in KEYS if values.get(k)}


def _no_permission(nvml: Any, e: Exception) -> bool:
    cls = getattr(nvml, "NVMLError_NoPermission", None)
    return (cls is not None and isinstance(e, cls)) or getattr(e, "value", None) == NVML_ERROR_NO_PERMISSION


@contextlib.contextmanager
def applied(values: Mapping[str, Any], nvml: Any = None, log=print) -> Iterator[dict]:
    """Hold the settings of ``values`` on every visible GPU for the ``with`` body; yields what was set."""
    want = wanted(values)
    if not want:
        yield {}
        return
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            nvml = None
    try:
        nvml.nvmlInit()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    except Exception as e:
        raise HarnessError(f"{', '.join(want)} set, but NVML finds no NVIDIA GPU here ({type(e).__name__})",
                           "drop power_limit / gpu_clock_lock / memory_clock_lock (config block or RUN_ARGS), "
                           "or run on the GPU machine")
    undo: list = []

    def restore() -> None:
        while undo:
            fn, args = undo.pop()
            try:
                fn(*args)
            except Exception as e:        # keep restoring the others; say which one is left
                log(f"[power] could not restore {fn.__name__}{args[1:]}: {type(e).__name__}")

    old_term = None
    try:
        for h in handles:
            if want.get("power_limit"):
                before = nvml.nvmlDeviceGetPowerManagementLimit(h)
                nvml.nvmlDeviceSetPowerManagementLimit(h, int(want["power_limit"] * 1000))
                undo.append((nvml.nvmlDeviceSetPowerManagementLimit, (h, before)))
            if want.get("gpu_clock_lock"):
                mhz = int(want["gpu_clock_lock"])
                nvml.nvmlDeviceSetGpuLockedClocks(h, mhz, mhz)
                undo.append((nvml.nvmlDeviceResetGpuLockedClocks, (h,)))
            if want.get("memory_clock_lock"):
                mhz = int(want["memory_clock_lock"])
                nvml.nvmlDeviceSetMemoryLockedClocks(h, mhz, mhz)
                undo.append((nvml.nvmlDeviceResetMemoryLockedClocks, (h,)))
    except Exception as e:
        restore()
        if _no_permission(nvml, e):
            raise HarnessError(f"setting {', '.join(want)} through NVML needs root (NVML: no permission)",
                               "run as root (sudo -E make run_harness ...), or remove the power settings") from None
        raise HarnessError(f"NVML refused {', '.join(want)} ({type(e).__name__}: {e})",
                           "check the values against nvidia-smi -q -d POWER,SUPPORTED_CLOCKS") from None
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        def on_term(signum, frame):
            raise SystemExit(128 + signum)
        old_term = signal.signal(signal.SIGTERM, on_term)
    log(f"[power] set {', '.join(f'{k}={v:g}' for k, v in want.items())} on {len(handles)} GPU(s)")
    try:
        yield want
    finally:
        restore()
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
        log("[power] restored the GPUs' power limit and clocks")
