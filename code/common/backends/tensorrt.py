"""TensorRT backend: ONNX -> serialized engine (.plan) with the builder API; runtime on one CUDA stream.

Written against the TensorRT 10 Python API (name-based tensors, ``execute_async_v3``) and aware of
TensorRT 11, which removed weak typing. Imports of tensorrt and CUDA happen inside functions, so
this file imports on a machine without either.

Precision (``EngineSpec.precision``):
  fp32  TF32 off unless ``extra["allow_tf32"]``, so "fp32" means fp32.
  fp16  TensorRT 10: BuilderFlag.FP16. TensorRT 11 (no weak typing): the ONNX must already carry
        fp16 types (e.g. converted with `python -m modelopt.onnx.autocast`).
  int8  BuilderFlag.INT8 (+FP16 for layers without int8 kernels). Either the ONNX has Q/DQ nodes,
        or a calibration cache is used: ``extra["calibration_cache"]`` (path). If the cache file
        is missing and ``extra["calibration_data"]`` names an .npz (one array per input name,
        first axis = samples), TensorRT calibrates with it (IInt8EntropyCalibrator2 via
        polygraphy's Calibrator) and the cache is written atomically. TensorRT 11 removed
        calibration: only Q/DQ ONNX works there.
  fp8   Needs FP8 Q/DQ nodes in the ONNX (TensorRT cannot calibrate fp8; produce them with
        nvidia-modelopt). TensorRT 10: BuilderFlag.FP8 + FP16.
``extra["strongly_typed"] = True`` builds a strongly typed network (no precision flags; the ONNX's
types rule), as TensorRT 11 always does.

Optimisation profiles: one per batch size b in ``spec.profile_batch_sizes`` (default
(1, spec.batch_size)), each min=1, opt=max=b in the batch dimension (-1 in ``spec.input_shapes``).
At run time a batch of n uses the smallest profile whose max >= n; each profile has its own
execution context, and the contexts share one activation scratch buffer where TensorRT allows.

Thread safety: a TrtEngine is used by one thread at a time (the Engine contract). Inputs and
outputs are host numpy arrays; outputs are fresh arrays the caller owns.
"""
from __future__ import annotations

import os
import threading
from typing import Mapping

import numpy as np

from code.common.backends import cuda
from code.common.backends.base import Backend, Engine, EngineSpec
from code.common.errors import HarnessError, RunError
from code.common.fileio import staged_path

_LOGGER = None


def _trt():
    import tensorrt as trt

    return trt


def _logger(trt):
    """One TensorRT logger per process; MLPERF_TRT_VERBOSE=1 turns on INFO."""
    global _LOGGER
    if _LOGGER is None:
        level = trt.Logger.INFO if os.environ.get("MLPERF_TRT_VERBOSE") == "1" else trt.Logger.WARNING
        _LOGGER = trt.Logger(level)
    return _LOGGER


def _flag(trt, name: str):
    return getattr(trt.BuilderFlag, name, None)


def _weak_typing_supported(trt) -> bool:
    return _flag(trt, "FP16") is not None  # TensorRT 11 removed every precision flag


def _has_qdq(trt, network) -> bool:
    kinds = {trt.LayerType.QUANTIZE, trt.LayerType.DEQUANTIZE}
    return any(network.get_layer(i).type in kinds for i in range(network.num_layers))


def _has_half(trt, network) -> bool:
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        if any(layer.get_output(j).dtype == trt.float16 for j in range(layer.num_outputs)):
            return True
    return False


def _profile_shapes(spec: EngineSpec, name: str, net_shape: tuple[int, ...], b: int):
    """(min, opt, max) for one input in the profile of batch b; None for a fully static input."""
    if all(d >= 0 for d in net_shape):
        return None
    want = spec.input_shapes.get(name)
    if want is None:
        raise HarnessError(f"ONNX input '{name}' has dynamic shape {list(net_shape)} but the engine spec "
                           f"gives no shape for it", "add it to EngineSpec.input_shapes (-1 marks the batch dim)")
    if len(want) != len(net_shape) or any(n >= 0 and w >= 0 and n != w for n, w in zip(net_shape, want)):
        raise HarnessError(f"EngineSpec.input_shapes['{name}']={list(want)} does not match the ONNX shape "
                           f"{list(net_shape)}", "fix input_shapes in the benchmark's engine spec")
    lo = tuple(n if n >= 0 else (1 if w < 0 else w) for n, w in zip(net_shape, want))
    hi = tuple(n if n >= 0 else (b if w < 0 else w) for n, w in zip(net_shape, want))
    return lo, hi, hi


def _set_precision(trt, config, network, spec: EngineSpec, strongly_typed: bool, onnx_path: str) -> bool:
    """Apply precision flags; returns True when int8 needs a calibrator (no Q/DQ in the network)."""
    p = spec.precision
    if p not in ("fp32", "fp16", "int8", "fp8"):
        raise HarnessError(f"unknown precision '{p}' for TensorRT", "use fp32, fp16, int8 or fp8")
    tf32 = _flag(trt, "TF32")
    if tf32 is not None and not spec.extra.get("allow_tf32") and p == "fp32":
        config.clear_flag(tf32)
    qdq = _has_qdq(trt, network)
    if p == "fp8" and not qdq:
        raise HarnessError(f"fp8 needs FP8 Q/DQ nodes in the ONNX and {onnx_path} has none",
                           "quantize the model with nvidia-modelopt (mtq.quantize, FP8 config) and export that ONNX")
    if strongly_typed:
        if p == "fp16" and not _has_half(trt, network):
            raise HarnessError(f"strongly typed fp16 build, but {onnx_path} has no fp16 tensors",
                               "convert it first: python -m modelopt.onnx.autocast --onnx_path IN --output_path OUT")
        if p == "int8" and not qdq:
            raise HarnessError(f"strongly typed int8 build needs Q/DQ nodes; {onnx_path} has none",
                               "quantize with nvidia-modelopt, or use TensorRT 10 with a calibration cache")
        return False
    if p in ("fp16", "int8", "fp8"):
        config.set_flag(trt.BuilderFlag.FP16)
    if p == "int8":
        config.set_flag(trt.BuilderFlag.INT8)
    if p == "fp8":
        config.set_flag(trt.BuilderFlag.FP8)
    return p == "int8" and not qdq


def _batches_from_npz(path: str, batch: int, input_names: list[str]):
    data = np.load(path)
    missing = [n for n in input_names if n not in data.files]
    if missing:
        raise HarnessError(f"calibration data {path} lacks inputs {missing}", "save one array per input name")
    total = min(data[n].shape[0] for n in input_names)
    for i in range(0, total - batch + 1, batch):
        yield {n: np.ascontiguousarray(data[n][i:i + batch]) for n in input_names}


def _calibrate(trt, builder, network, config, spec: EngineSpec, inputs):
    """Attach an entropy calibrator that reads (or writes) spec.extra['calibration_cache']."""
    from polygraphy.backend.trt import Calibrator

    cache = spec.extra.get("calibration_cache")
    data = spec.extra.get("calibration_data")
    if not cache and not data:
        raise HarnessError("int8 without Q/DQ nodes needs a calibration cache",
                           "set calibration_cache (and calibration_data to create it) in the engine spec")
    if not hasattr(config, "int8_calibrator"):
        raise HarnessError(f"TensorRT {trt.__version__} has no implicit int8 calibration",
                           "use a Q/DQ ONNX (nvidia-modelopt) or TensorRT 10.x")
    have_cache = bool(cache) and os.path.exists(cache) and os.path.getsize(cache) > 0
    if not have_cache and not data:
        raise HarnessError(f"calibration cache {cache} does not exist",
                           "set calibration_data to an .npz of inputs so it can be created")
    batch = int(spec.extra.get("calibration_batch_size", spec.batch_size))
    names = [t.name for t in inputs]
    loader = [] if have_cache else list(_batches_from_npz(str(data), batch, names))
    # Calibration runs at one fixed shape: the calibration batch.
    prof = builder.create_optimization_profile()
    for t in inputs:
        shapes = _profile_shapes(spec, t.name, tuple(t.shape), batch)
        if shapes:
            prof.set_shape(t.name, shapes[1], shapes[1], shapes[1])
    config.set_calibration_profile(prof)
    return Calibrator(data_loader=loader, cache=cache if have_cache else None), (None if have_cache else cache)


class TensorRTBackend(Backend):
    name = "tensorrt"
    short = "TRT"
    engine_suffix = ".plan"
    precisions = ("fp32", "fp16", "int8", "fp8")
    library = "tensorrt"
    display = "TensorRT"
    static_shapes = True
    preference = {"gpu": 0}

    @classmethod
    def available(cls, deep: bool = True) -> tuple[bool, str]:
        try:                 # always deep: libnvinfer and the CUDA probe are what can be missing
            _trt()
        except Exception as e:  # ImportError, or OSError when libnvinfer is missing
            return False, f"tensorrt does not import ({type(e).__name__}: {e})".replace("\n", " ")
        return cuda.probe()

    def build(self, onnx_path: str, engine_path: str, spec: EngineSpec) -> None:
        trt = _trt()
        logger = _logger(trt)
        builder = trt.Builder(logger)
        strongly_typed = bool(spec.extra.get("strongly_typed")) or not _weak_typing_supported(trt)
        flags = 0
        st = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
        if strongly_typed and st is not None:
            flags |= 1 << int(st)
        network = builder.create_network(flags)
        parser = trt.OnnxParser(network, logger)
        if not parser.parse_from_file(str(onnx_path)):
            errs = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors)) or "no detail"
            raise HarnessError(f"TensorRT could not parse {onnx_path}: {errs}".replace("\n", " "),
                               f"inspect it with `polygraphy inspect model {onnx_path}`", 4)
        config = builder.create_builder_config()
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(spec.workspace_bytes))
        if "builder_optimization_level" in spec.extra:
            config.builder_optimization_level = int(spec.extra["builder_optimization_level"])
        needs_calib = _set_precision(trt, config, network, spec, strongly_typed, str(onnx_path))

        inputs = [network.get_input(i) for i in range(network.num_inputs)]
        sizes = sorted(set(spec.profile_batch_sizes or (1, spec.batch_size)))
        if sizes[0] < 1 or sizes[-1] > spec.batch_size:
            raise HarnessError(f"profile batch sizes {sizes} must lie in 1..{spec.batch_size}",
                               "fix profile_batch_sizes in the engine spec")
        if any(_profile_shapes(spec, t.name, tuple(t.shape), 1) for t in inputs):
            for b in sizes:
                prof = builder.create_optimization_profile()
                for t in inputs:
                    shapes = _profile_shapes(spec, t.name, tuple(t.shape), b)
                    if shapes:
                        prof.set_shape(t.name, *shapes)
                config.add_optimization_profile(prof)

        calibrator = write_cache = None
        if needs_calib:
            calibrator, write_cache = _calibrate(trt, builder, network, config, spec, inputs)
            config.int8_calibrator = calibrator
        plan = builder.build_serialized_network(network, config)
        if plan is None:
            raise HarnessError(f"TensorRT failed to build {spec.name} ({spec.precision}, batch {spec.batch_size})",
                               "rerun with MLPERF_TRT_VERBOSE=1 and read the TensorRT log", 4)
        with open(engine_path, "wb") as f:
            f.write(memoryview(plan))
        if write_cache:
            blob = getattr(calibrator, "cache_contents", None)
            if blob:
                with staged_path(write_cache) as tmp:
                    tmp.write_bytes(bytes(blob))

    def load(self, engine_path: str, spec: EngineSpec) -> Engine:
        return TrtEngine(engine_path, spec)

    @staticmethod
    def versions() -> dict[str, str | None]:
        try:
            return {"tensorrt": _trt().__version__}
        except Exception:
            return {"tensorrt": None}


# Deserialized engines shared by every TrtEngine of the same file and device: weights are loaded
# once however many workers (streams) a benchmark runs; each TrtEngine has its own contexts,
# stream and buffers. Guarded by _SHARED_LOCK; entries are dropped when their last user closes.
_SHARED: dict[tuple, list] = {}
_SHARED_LOCK = threading.Lock()


def _acquire(trt, path: str, device: int):
    key = (os.path.realpath(path), os.stat(path).st_mtime_ns, device)
    with _SHARED_LOCK:
        ent = _SHARED.get(key)
        if ent is None:
            runtime = trt.Runtime(_logger(trt))
            with open(path, "rb") as f:
                engine = runtime.deserialize_cuda_engine(f.read())
            if engine is None:
                raise HarnessError(f"TensorRT {trt.__version__} could not deserialize {path} (other TensorRT "
                                   "version or GPU?)", f"delete {path} and rerun `make generate_engines`", 4)
            ent = _SHARED[key] = [runtime, engine, 0]
        ent[2] += 1
        return key, ent[1]


def _release(key: tuple) -> None:
    with _SHARED_LOCK:
        ent = _SHARED.get(key)
        if ent is not None:
            ent[2] -= 1
            if ent[2] <= 0:
                del _SHARED[key]


class TrtEngine(Engine):
    """A deserialized engine, its per-profile contexts and device buffers sized for the largest
    profile. Owns every device allocation; ``close`` frees them."""

    def __init__(self, path: str, spec: EngineSpec):
        trt = _trt()
        try:
            self.cu = cuda.runtime()
        except cuda.CudaError as e:
            raise HarnessError(f"cannot load TensorRT engine {path}: {e}", "run on a machine with an NVIDIA GPU") from None
        self.device = spec.device_id
        self.stream = None
        self.buffers: dict[str, cuda.DeviceBuffer] = {}
        self.contexts: list = []
        self.capacity: list[int] = []   # max batch per profile
        self._scratch = None
        self.cu.set_device(self.device)
        self._key, self.engine = _acquire(trt, path, self.device)
        try:
            self._io(trt)
            self.stream = self.cu.stream_create()
            self._setup(trt)
        except Exception:
            self.close()
            raise

    def _io(self, trt) -> None:
        eng = self.engine
        names = [eng.get_tensor_name(i) for i in range(eng.num_io_tensors)]
        self.input_names = tuple(n for n in names if eng.get_tensor_mode(n) == trt.TensorIOMode.INPUT)
        self.output_names = tuple(n for n in names if eng.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT)
        self.dtypes = {}
        for n in names:
            try:
                self.dtypes[n] = np.dtype(trt.nptype(eng.get_tensor_dtype(n)))
            except TypeError:
                raise HarnessError(f"engine tensor '{n}' has type {eng.get_tensor_dtype(n)}, which numpy cannot hold",
                                   "keep engine inputs/outputs fp32/fp16/int (modelopt keep_io_types=True)") from None

    def _setup(self, trt) -> None:
        eng = self.engine
        nprof = eng.num_optimization_profiles
        shared = (hasattr(trt, "ExecutionContextAllocationStrategy") and hasattr(eng, "device_memory_size_v2"))
        if shared:
            self._scratch = cuda.DeviceBuffer(self.cu, eng.device_memory_size_v2)
        need: dict[str, int] = {}
        for p in range(nprof):
            if shared:
                ctx = eng.create_execution_context(trt.ExecutionContextAllocationStrategy.USER_MANAGED)
            else:
                ctx = eng.create_execution_context()
            if ctx is None:
                raise RunError(f"TensorRT could not create an execution context for profile {p}")
            if shared:
                ctx.set_device_memory(self._scratch.ptr, self._scratch.nbytes)
            if nprof > 1 and not ctx.set_optimization_profile_async(p, self.stream):
                raise RunError(f"TensorRT could not select optimization profile {p}")
            cap = None
            for n in self.input_names:
                static = tuple(eng.get_tensor_shape(n))
                mx = tuple(eng.get_tensor_profile_shape(n, p)[2]) if any(d < 0 for d in static) else static
                if any(d < 0 for d in static):
                    ctx.set_input_shape(n, mx)
                    cap = mx[0] if cap is None else min(cap, mx[0])
                need[n] = max(need.get(n, 0), int(np.prod(mx)) * self.dtypes[n].itemsize)
            for n in self.output_names:
                shape = tuple(ctx.get_tensor_shape(n))
                if any(d < 0 for d in shape):
                    raise HarnessError(f"engine output '{n}' has a data-dependent shape {list(shape)}",
                                       "this runtime supports outputs whose shape follows from the inputs only")
                need[n] = max(need.get(n, 0), int(np.prod(shape)) * self.dtypes[n].itemsize)
            if cap is None:  # fully static engine: its batch is the first input's first dim
                s = tuple(eng.get_tensor_shape(self.input_names[0])) if self.input_names else (1,)
                cap = s[0] if s else 1
            self.contexts.append(ctx)
            self.capacity.append(int(cap))
        self.cu.synchronize(self.stream)
        for n, nbytes in need.items():
            self.buffers[n] = cuda.DeviceBuffer(self.cu, nbytes)
        for ctx in self.contexts:
            for n, buf in self.buffers.items():
                if not ctx.set_tensor_address(n, buf.ptr):
                    raise RunError(f"TensorRT rejected the device address for '{n}'")

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.cu.set_device(self.device)  # CUDA's current device is per thread
        arrays = {n: np.ascontiguousarray(feeds[n], dtype=self.dtypes[n]) for n in self.input_names}
        batch = arrays[self.input_names[0]].shape[0] if self.input_names and arrays[self.input_names[0]].ndim else 1
        fits = [p for p, c in enumerate(self.capacity) if c >= batch]
        if not fits:
            raise RunError(f"batch {batch} exceeds the engine's largest profile ({max(self.capacity)})",
                           "rebuild the engine with a larger gpu_batch_size")
        p = min(fits, key=lambda i: self.capacity[i])
        ctx = self.contexts[p]
        for n, a in arrays.items():
            if a.nbytes > self.buffers[n].nbytes:
                raise RunError(f"input '{n}' of shape {a.shape} is larger than the engine allows")
            if tuple(ctx.get_tensor_shape(n)) != a.shape and not ctx.set_input_shape(n, a.shape):
                raise RunError(f"TensorRT rejected shape {a.shape} for input '{n}' (profile {p})")
            self.cu.htod_async(self.buffers[n].ptr, a, self.stream)
        if not ctx.execute_async_v3(self.stream):
            raise RunError(f"TensorRT execute_async_v3 failed (profile {p}, batch {batch})")
        outs = {n: np.empty(tuple(ctx.get_tensor_shape(n)), dtype=self.dtypes[n]) for n in self.output_names}
        for n, o in outs.items():
            self.cu.dtoh_async(o, self.buffers[n].ptr, self.stream)
        self.cu.synchronize(self.stream)  # `arrays` stay referenced until here
        return outs

    def close(self) -> None:
        """Free everything this engine owns; idempotent."""
        if self.engine is None:
            return
        try:
            self.cu.set_device(self.device)
            if self.stream is not None:
                self.cu.synchronize(self.stream)
        except cuda.CudaError:
            pass
        self.contexts.clear()          # contexts before the engine and their memory
        for b in self.buffers.values():
            b.free()
        self.buffers.clear()
        if self._scratch is not None:
            self._scratch.free()
            self._scratch = None
        self.engine = None
        _release(self._key)
        if self.stream is not None:
            self.cu.stream_destroy(self.stream)
            self.stream = None
