"""Backend contract: build an engine file from ONNX, load it, run it.

A backend is stateless; engines hold sessions. ``Engine.infer`` is called from one worker thread
at a time per engine instance. Inputs and outputs are host numpy arrays (the TensorRT engine
copies them to and from its device buffers).
"""
from __future__ import annotations

import abc
import dataclasses
import importlib
import importlib.util
import os
from pathlib import Path
from typing import Callable, Mapping

import numpy as np


@dataclasses.dataclass(frozen=True)
class EngineSpec:
    """What an engine is built for. Everything here feeds the engine's build key (code.common.engines)."""

    name: str                                   # component name: "resnet50", "unet", ...
    batch_size: int                             # max batch (TensorRT opt profile max)
    precision: str = "fp32"                     # fp32 | fp16 | int8 | fp8
    # input name -> shape with -1 for the batch dimension; used for TensorRT profiles
    input_shapes: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    # batch sizes to build optimisation profiles for (TensorRT); default (1, batch_size)
    profile_batch_sizes: tuple[int, ...] = ()
    workspace_bytes: int = 4 << 30
    intra_op_threads: int = 0                   # onnxruntime; 0 = library default
    inter_op_threads: int = 1
    allow_spinning: bool = False                # onnxruntime: idle pool threads spin (see cpu_spin)
    device_id: int = 0
    extra: Mapping[str, object] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["input_shapes"] = {k: list(v) for k, v in self.input_shapes.items()}
        d["extra"] = dict(self.extra)
        return d


def cpu_spin(setting: str, workers: int) -> bool:
    """Resolve the cpu_spin_wait field: "auto" spins only when one worker owns the cores, and not where
    MLPERF_SHARED_CPU=1 says other work shares them (the test suite's two workers: an idle pool that spins burns
    the core the other one needs, 2.2x the CPU time of a tiny ResNet50 Server run here)."""
    return setting == "on" or (setting == "auto" and workers == 1 and not shared_cpu())


def shared_cpu() -> bool:
    """MLPERF_SHARED_CPU=1: other work shares this machine's cores (the test suite's workers), so a pool of idle
    threads that spin, or more threads than the work needs, costs the others CPU."""
    return os.environ.get("MLPERF_SHARED_CPU", "") not in ("", "0")


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """Where a component's model comes from; the backend picks what it builds from (``Backend.prepare``).

    ``onnx``: returns the ONNX path, exporting it first if needed (called only when a backend wants
    ONNX). ``module_factory`` / ``module_dir``: an eager torch factory ("pkg.module:function") and the
    folder it loads weights from, for backends that run torch modules directly. ``fix``: the command
    that fetches the model again."""

    onnx: Callable[[], str | Path]
    module_factory: str | None = None
    module_dir: str | Path | None = None
    fix: str = ""              # the command that fetches the model again (a damaged model file's fix line)


class Engine(abc.ABC):
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]

    @abc.abstractmethod
    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one batch. Returns host arrays the caller owns."""

    def close(self) -> None:
        return None


class Backend(abc.ABC):
    """A backend's facts live here; the framework and the benchmarks ask them instead of naming backends."""

    name: str          # "onnxruntime" | "tensorrt" | "pytorch"
    short: str         # submission suffix: "ORT" | "TRT" | "PyT"
    display: str = ""  # the name a system description gives its framework ("ONNX Runtime"); default: name
    engine_suffix: str # ".onnx" | ".plan" | ".pt"
    precisions: tuple[str, ...] = ("fp32",)   # engine precisions this backend builds
    library: str = ""  # the Python package it runs on: available() and versions() ask it by default
    # --- capabilities (what benchmarks ask) ---
    serves_tokens: bool = False    # generates tokens (an LLM backend); the others run engines built from ONNX
    runs_modules: bool = False     # runs eager torch modules from checkpoints (benchmarks fetch the torch weights)
    static_shapes: bool = False    # engines for fixed input lengths, no data-dependent output shapes (NMS on the host)
    spans_ray_cluster: bool = False  # its own distributed runtime can place ranks over a Ray cluster's GPUs
    qdq_target: str = "tensorrt"   # whose Q/DQ conventions a calibrated model for it follows
    # default rank on a system with this accelerator ("gpu" | "cpu"): lowest available wins; absent: never default
    preference: Mapping[str, int] = {}

    @classmethod
    def display_name(cls) -> str:
        return cls.display or cls.name

    @classmethod
    def available(cls, deep: bool = True) -> tuple[bool, str]:
        """(True, "") or (False, one-line reason naming what is missing). ``deep=False``: installed (its package
        is found) without importing it, for a parent process whose child imports it anyway (a broken install is
        then the child's one-line error): an LLM run's parent saved the ~1 s transformers takes to import."""
        if not deep:
            if importlib.util.find_spec(cls.library.split(".")[0]) is None:
                return False, f"{cls.library} is not installed"
            return True, ""
        try:
            importlib.import_module(cls.library)
        except Exception as e:  # ImportError, or a broken install raising anything at import
            return False, f"{cls.library} does not import ({type(e).__name__}: {e})"
        return True, ""

    def prepare(self, source: ModelSource, spec: EngineSpec) -> tuple[str | Path, EngineSpec]:
        """(what to build from, the spec to build with). Default: the ONNX model, spec unchanged."""
        return source.onnx(), spec

    @classmethod
    def check_precision(cls, precision: str, component: str) -> None:
        if precision not in cls.precisions:
            from code.common.errors import HarnessError

            raise HarnessError(f"--backend={cls.name} builds {'/'.join(cls.precisions)} engines; {component} asked "
                               f"for {precision}", f"use --precision={cls.precisions[0]}, or a backend that builds "
                               f"{precision} (tensorrt on a GPU that supports it)")

    @abc.abstractmethod
    def build(self, onnx_path: str, engine_path: str, spec: EngineSpec) -> None:
        """Write the engine to engine_path (callers stage to a temp name and rename)."""

    @abc.abstractmethod
    def load(self, engine_path: str, spec: EngineSpec) -> Engine: ...

    @classmethod
    def versions(cls) -> dict[str, str | None]:
        """Library versions an engine depends on (part of its build key)."""
        try:
            return {cls.library: importlib.import_module(cls.library).__version__}
        except Exception:  # noqa: BLE001 - not importable: recorded as None
            return {cls.library: None}
