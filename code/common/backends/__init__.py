"""Backend registry. Backends import their libraries lazily; ``get_backend`` never fails on import."""
from __future__ import annotations

import importlib

from code.common.backends.base import Backend, Engine, EngineSpec  # noqa: F401
from code.common.errors import HarnessError

_IMPLS = {
    "onnxruntime": "code.common.backends.onnxruntime:OnnxRuntimeBackend",
    "tensorrt": "code.common.backends.tensorrt:TensorRTBackend",
    "pytorch": "code.common.backends.pytorch:PyTorchBackend",
    # LLM backends (code.common.llm.backends): generation, not ONNX engines
    "transformers": "code.common.llm.backends:TransformersBackend",
    "vllm": "code.common.llm.backends:VLLMBackend",
    "tensorrt_llm": "code.common.llm.backends:TensorRTLLMBackend",
}
LLM_BACKENDS = ("tensorrt_llm", "vllm", "transformers")   # an LLM benchmark's preference order on a GPU


NAMES: tuple[str, ...] = tuple(_IMPLS)   # the schema's --backend choices


def backend_class(name: str) -> type[Backend]:
    if name not in _IMPLS:
        from code.common.errors import did_you_mean

        raise HarnessError(f"unknown backend '{name}'{did_you_mean(name, _IMPLS)}",
                           f"use --backend={'|'.join(_IMPLS)}")
    mod, attr = _IMPLS[name].split(":")
    return getattr(importlib.import_module(mod), attr)


def get_backend(name: str, *, require: bool = True) -> Backend:
    cls = backend_class(name)
    ok, why = cls.available()
    if require and not ok:
        raise HarnessError(f"backend '{name}' is not usable here: {why}",
                           "run `make build` to see what is missing, or pick another --backend")
    return cls()


def names() -> tuple[str, ...]:
    return tuple(_IMPLS)
