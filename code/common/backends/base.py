"""Backend contract: build an engine file from ONNX, load it, run it.

A backend is stateless; engines hold sessions. ``Engine.infer`` is called from one worker thread
at a time per engine instance. Inputs and outputs are host numpy arrays (the TensorRT engine
copies them to and from its device buffers).
"""
from __future__ import annotations

import abc
import dataclasses
from typing import Mapping

import numpy as np


@dataclasses.dataclass(frozen=True)
class EngineSpec:
    """What an engine is built for. Everything here feeds the engine's config hash."""

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
    """Resolve the cpu_spin_wait field: "auto" spins only when one worker owns the cores."""
    return setting == "on" or (setting == "auto" and workers == 1)


class Engine(abc.ABC):
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]

    @abc.abstractmethod
    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one batch. Returns host arrays the caller owns."""

    def close(self) -> None:
        return None


class Backend(abc.ABC):
    name: str          # "onnxruntime" | "tensorrt" | "pytorch"
    short: str         # submission suffix: "ORT" | "TRT" | "PyT"
    engine_suffix: str # ".onnx" | ".plan" | ".pt"

    @classmethod
    @abc.abstractmethod
    def available(cls) -> tuple[bool, str]:
        """(True, "") or (False, one-line reason naming what is missing)."""

    @abc.abstractmethod
    def build(self, onnx_path: str, engine_path: str, spec: EngineSpec) -> None:
        """Write the engine to engine_path (callers stage to a temp name and rename)."""

    @abc.abstractmethod
    def load(self, engine_path: str, spec: EngineSpec) -> Engine: ...

    @staticmethod
    def versions() -> dict[str, str | None]:
        return {}
