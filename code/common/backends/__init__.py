"""Backend registry: one line per backend. Backends import their libraries lazily; ``get_backend`` never
fails on import. What a backend is (display name, capabilities, default rank on a system, library) is the
backend class's (``code.common.backends.base.Backend``); everything here derives from those facts."""
from __future__ import annotations

import importlib
from importlib import metadata as im

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
    "openai": "code.common.llm.backends:OpenAIBackend",
}


NAMES: tuple[str, ...] = tuple(_IMPLS)   # the schema's --backend choices


def backend_class(name: str) -> type[Backend]:
    if name not in _IMPLS:
        from code.common.errors import did_you_mean

        raise HarnessError(f"unknown backend '{name}'{did_you_mean(name, _IMPLS)}",
                           f"use --backend={'|'.join(_IMPLS)}")
    mod, attr = _IMPLS[name].split(":")
    return getattr(importlib.import_module(mod), attr)


def get_backend(name: str, *, require: bool = True, deep: bool = True) -> Backend:
    """The backend ``name``; with ``require`` it must be usable here (``deep=False``: installed, not imported;
    see ``Backend.available``)."""
    cls = backend_class(name)
    ok, why = cls.available(deep=deep)
    if require and not ok:
        raise HarnessError(f"backend '{name}' is not usable here: {why}",
                           "run `make build` to see what is missing, or pick another --backend")
    return cls()


def names() -> tuple[str, ...]:
    return tuple(_IMPLS)


def for_benchmark(generates_tokens: bool) -> tuple[str, ...]:
    """The backends that run a benchmark: the token-serving ones for an LLM, the engine ones otherwise."""
    return tuple(n for n in _IMPLS if backend_class(n).serves_tokens == generates_tokens)


def ranked(accelerator: str, generates_tokens: bool) -> tuple[str, ...]:
    """The backends that may be the default on a system with this accelerator, best first (their ``preference``)."""
    cands = [n for n in for_benchmark(generates_tokens) if accelerator in backend_class(n).preference]
    return tuple(sorted(cands, key=lambda n: backend_class(n).preference[accelerator]))


def default_for(accelerator: str, generates_tokens: bool) -> str:
    """The best-ranked backend that is usable here; else the last ranked one, unchecked (its run then says what
    is missing; a CPU LLM run does not import transformers in the parent to learn it)."""
    order = ranked(accelerator, generates_tokens)
    return next((n for n in order[:-1] if backend_class(n).available()[0]), order[-1])


def library_versions() -> dict[str, str | None]:
    """Installed version of every backend's library (None when absent), from package metadata: nothing imported."""
    out: dict[str, str | None] = {}
    for n in _IMPLS:
        lib = backend_class(n).library
        try:
            out[lib] = im.version(lib)
        except im.PackageNotFoundError:
            out[lib] = None
    return out
