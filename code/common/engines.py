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
    meta = _read_meta(meta_path) if out.exists() else {}
    st = onnx_path.stat()
    stamp = [st.st_size, st.st_mtime_ns]
    # Re-hash the ONNX only when its size or mtime changed: every run checks its engines (parent and
    # child), and the real SDXL unet is ~10 GB.
    onnx_sha = meta["onnx_sha256"] if meta.get("onnx_stat") == stamp and meta.get("onnx_sha256") \
        else sha256_file(onnx_path)
    h = config_hash(spec, backend, onnx_sha, extra)
    if meta.get("config_hash") == h:
        log(f"[engine] reuse {out} (config {h})")
        return out
    log(f"[engine] build {out} (config {h})")
    t0 = time.time()
    with staged_path(out, suffix=backend.engine_suffix) as tmp:
        tmp.unlink()  # backends write the file themselves
        backend.build(str(onnx_path), str(tmp), spec)
    write_json(meta_path, {"config_hash": h, "backend": backend.name, "spec": spec.as_dict(),
                           "onnx": str(onnx_path), "onnx_sha256": onnx_sha, "onnx_stat": stamp, "extra": extra or {}, "build_seconds": round(time.time() - t0, 3),
                           "versions": backend.versions()})
    return out


def _read_meta(meta_path: Path) -> dict:
    try:
        return json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return {}
