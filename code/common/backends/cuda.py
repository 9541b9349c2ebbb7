"""The little of the CUDA runtime the TensorRT engine needs: device memory, a stream, async copies.

One interface, two implementations, picked once per process by ``runtime()``:
  1. cuda-python (``cuda.bindings.runtime``, or ``cuda.cudart`` in cuda-python < 12.6);
  2. pycuda (``pycuda.driver``) as a fallback.
Nothing here imports a CUDA library at module import time, so this file imports on any machine.

Handles are plain ints: a device pointer is an int address, a stream is its int handle (what
TensorRT's ``execute_async_v3`` takes). The implementations keep the library objects behind them.

Thread safety: the runtime object is shared by the process. CUDA's current device (cuda-python) or
current context (pycuda) is per thread, so every thread must call ``set_device(i)`` before it
touches device memory; ``TrtEngine.infer`` does so on each call. A ``DeviceBuffer`` and a stream
belong to one engine and are used by one thread at a time.
"""
from __future__ import annotations

import os
import threading

import numpy as np


class CudaError(RuntimeError):
    """A CUDA call failed; the message names the call and CUDA's error name."""


class CudaRuntime:
    """Interface. Sizes are bytes; ``host`` arrays must be C-contiguous and stay alive until
    ``synchronize`` returns for the stream they were copied on."""

    name = "none"

    def device_count(self) -> int: raise NotImplementedError
    def set_device(self, device: int) -> None: raise NotImplementedError
    def malloc(self, nbytes: int) -> int: raise NotImplementedError
    def free(self, ptr: int) -> None: raise NotImplementedError
    def stream_create(self) -> int: raise NotImplementedError
    def stream_destroy(self, stream: int) -> None: raise NotImplementedError
    def htod_async(self, dst: int, host: np.ndarray, stream: int) -> None: raise NotImplementedError
    def dtoh_async(self, host: np.ndarray, src: int, stream: int) -> None: raise NotImplementedError
    def synchronize(self, stream: int) -> None: raise NotImplementedError


class _CudaPython(CudaRuntime):
    """cuda-python: every call returns (error, *values); errors are raised as CudaError."""

    name = "cuda-python"

    def __init__(self):
        try:
            from cuda.bindings import runtime as rt
        except ImportError:
            from cuda import cudart as rt  # cuda-python < 12.6
        self.rt = rt
        self._streams: dict[int, object] = {}

    def _call(self, fn: str, *args):
        res = getattr(self.rt, fn)(*args)
        err = res[0] if isinstance(res, tuple) else res
        if err != self.rt.cudaError_t.cudaSuccess:
            _, name = self.rt.cudaGetErrorName(err)
            _, text = self.rt.cudaGetErrorString(err)
            raise CudaError(f"{fn} failed: {_s(name)} ({_s(text)})")
        if isinstance(res, tuple):
            return res[1] if len(res) == 2 else res[1:]
        return None

    def device_count(self) -> int:
        return int(self._call("cudaGetDeviceCount"))

    def set_device(self, device: int) -> None:
        self._call("cudaSetDevice", device)

    def malloc(self, nbytes: int) -> int:
        return int(self._call("cudaMalloc", max(1, int(nbytes))))

    def free(self, ptr: int) -> None:
        self._call("cudaFree", ptr)

    def stream_create(self) -> int:
        s = self._call("cudaStreamCreateWithFlags", self.rt.cudaStreamNonBlocking)
        self._streams[int(s)] = s
        return int(s)

    def stream_destroy(self, stream: int) -> None:
        self._call("cudaStreamDestroy", self._streams.pop(stream, stream))

    def htod_async(self, dst: int, host: np.ndarray, stream: int) -> None:
        self._call("cudaMemcpyAsync", dst, host.ctypes.data, host.nbytes,
                   self.rt.cudaMemcpyKind.cudaMemcpyHostToDevice, self._streams.get(stream, stream))

    def dtoh_async(self, host: np.ndarray, src: int, stream: int) -> None:
        self._call("cudaMemcpyAsync", host.ctypes.data, src, host.nbytes,
                   self.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost, self._streams.get(stream, stream))

    def synchronize(self, stream: int) -> None:
        self._call("cudaStreamSynchronize", self._streams.get(stream, stream))


class _PyCuda(CudaRuntime):
    """pycuda: driver API with the device's primary context pushed once per thread."""

    name = "pycuda"

    def __init__(self):
        import pycuda.driver as drv

        drv.init()
        self.drv = drv
        self._tls = threading.local()
        self._ctx: dict[int, object] = {}
        self._allocs: dict[int, object] = {}
        self._streams: dict[int, object] = {}
        self._lock = threading.Lock()

    def _err(self, what: str, e: Exception) -> CudaError:
        return CudaError(f"{what} failed: {type(e).__name__}: {e}")

    def device_count(self) -> int:
        return self.drv.Device.count()

    def set_device(self, device: int) -> None:
        if getattr(self._tls, "device", None) == device:
            return
        with self._lock:
            ctx = self._ctx.get(device)
            if ctx is None:
                ctx = self._ctx[device] = self.drv.Device(device).retain_primary_context()
        if getattr(self._tls, "device", None) is not None:
            self.drv.Context.pop()
        ctx.push()
        self._tls.device = device

    def malloc(self, nbytes: int) -> int:
        try:
            a = self.drv.mem_alloc(max(1, int(nbytes)))
        except Exception as e:
            raise self._err("mem_alloc", e) from None
        self._allocs[int(a)] = a
        return int(a)

    def free(self, ptr: int) -> None:
        a = self._allocs.pop(ptr, None)
        if a is not None:
            a.free()

    def stream_create(self) -> int:
        s = self.drv.Stream()
        self._streams[s.handle] = s
        return s.handle

    def stream_destroy(self, stream: int) -> None:
        self._streams.pop(stream, None)  # pycuda destroys it when the object dies

    def htod_async(self, dst: int, host: np.ndarray, stream: int) -> None:
        self.drv.memcpy_htod_async(dst, host, self._streams[stream])

    def dtoh_async(self, host: np.ndarray, src: int, stream: int) -> None:
        self.drv.memcpy_dtoh_async(host, src, self._streams[stream])

    def synchronize(self, stream: int) -> None:
        self._streams[stream].synchronize()


def _s(x) -> str:
    return x.decode(errors="replace") if isinstance(x, (bytes, bytearray)) else str(x)


_RUNTIME: CudaRuntime | None = None
_RUNTIME_LOCK = threading.Lock()


def _hidden_by_env() -> str:
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and cvd.strip() in ("", "-1", "none", "NoDevFiles"):
        return f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU"
    return ""


def runtime() -> CudaRuntime:
    """The process's CUDA runtime with at least one visible GPU, else CudaError naming why not."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is not None:
            return _RUNTIME
        hidden = _hidden_by_env()
        if hidden:
            raise CudaError(hidden)
        tried = []
        for cls in (_CudaPython, _PyCuda):
            try:
                rt = cls()
            except ImportError as e:
                tried.append(f"{cls.name} not installed ({e})")
                continue
            except Exception as e:  # pycuda's init fails without a driver
                tried.append(f"{cls.name}: {type(e).__name__}: {e}")
                continue
            try:
                n = rt.device_count()
            except Exception as e:
                tried.append(f"{cls.name}: {e}")
                continue
            if n < 1:
                tried.append(f"{cls.name}: no CUDA device")
                continue
            _RUNTIME = rt
            return rt
        raise CudaError("no usable NVIDIA GPU: " + "; ".join(tried))


def probe() -> tuple[bool, str]:
    """(True, "") when a CUDA binding imports and sees a GPU, else (False, one-line reason)."""
    try:
        runtime()
    except CudaError as e:
        return False, str(e).replace("\n", " ")
    return True, ""


class DeviceBuffer:
    """``nbytes`` of device memory on the current device. Owned by whoever made it; ``free`` is
    idempotent. Not thread-safe."""

    def __init__(self, rt: CudaRuntime, nbytes: int):
        self.rt = rt
        self.nbytes = int(nbytes)
        self.ptr = rt.malloc(self.nbytes)

    def free(self) -> None:
        if self.ptr:
            self.rt.free(self.ptr)
            self.ptr = 0
