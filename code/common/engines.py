"""Engine files per system config, rebuilt only when their config changes.

Layout: build/engines/<system_id>/<benchmark>/<scenario>/<component>-b<batch>-<precision><suffix>,
with <engine>.json beside it recording the config hash and what went into it. A changed config
(or ONNX file) gives a different hash and the engine is rebuilt; an unchanged one is reused.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Callable

from code.common import paths
from code.common.backends.base import Backend, EngineSpec
from code.common.fileio import sha256_file, staged_path, write_json


def engine_path(system_id: str, benchmark: str, scenario: str, spec: EngineSpec, backend: Backend) -> Path:
    fname = f"{spec.name}-b{spec.batch_size}-{spec.precision}{backend.engine_suffix}"
    return paths.engines_dir() / system_id / benchmark / scenario / fname


def config_hash(spec: EngineSpec, backend: Backend, onnx_sha: str, extra: dict | None = None) -> str:
    blob = json.dumps({"spec": spec.as_dict(), "backend": backend.name, "versions": backend.versions(),
                       "onnx_sha256": onnx_sha, "extra": extra or {}}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def get_or_build(backend: Backend, onnx_path: str | Path, spec: EngineSpec, *, system_id: str, benchmark: str,
                 scenario: str, extra: dict | None = None, log: Callable[[str], None] = print) -> Path:
    """Return the engine for ``spec``, building it only if missing or built from another config."""
    onnx_path = Path(onnx_path)
    out = engine_path(system_id, benchmark, scenario, spec, backend)
    meta_path = out.with_name(out.name + ".json")
    h = config_hash(spec, backend, sha256_file(onnx_path), extra)
    if out.exists() and meta_path.exists():
        try:
            if json.loads(meta_path.read_text()).get("config_hash") == h:
                log(f"[engine] reuse {out} (config {h})")
                return out
        except (OSError, ValueError):
            pass
    log(f"[engine] build {out} (config {h})")
    t0 = time.time()
    with staged_path(out, suffix=backend.engine_suffix) as tmp:
        tmp.unlink()  # backends write the file themselves
        backend.build(str(onnx_path), str(tmp), spec)
    write_json(meta_path, {"config_hash": h, "backend": backend.name, "spec": spec.as_dict(),
                           "onnx": str(onnx_path), "extra": extra or {}, "build_seconds": round(time.time() - t0, 3),
                           "versions": backend.versions()})
    return out


def is_current(path: Path) -> bool:
    return path.exists() and path.with_name(path.name + ".json").exists()
