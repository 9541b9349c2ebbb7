"""Engine files per system config, rebuilt only when what they are built from changes.

Layout: build/engines/<system_id>/<benchmark>/<scenario>/<component>-b<batch>-<precision><suffix>,
with <engine>.json beside it recording the build key and what went into it. The build key covers the
engine spec, the backend and its versions, and the source's content (an ONNX file's sha256, or a
folder's file listing with sizes and times); a changed key rebuilds, an unchanged one is reused as
long as the engine file still has the size it was written with.

The backend chooses what to build from (``Backend.prepare``: the ONNX model, or an eager torch
module factory), so benchmark code never names a backend.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Callable

from code.common import paths
from code.common.backends.base import Backend, EngineSpec, ModelSource
from code.common.fileio import clean_stale_partials, sha256_file, staged_path, write_json


def engine_path(system_id: str, benchmark: str, scenario: str, spec: EngineSpec, backend: Backend) -> Path:
    fname = f"{spec.name}-b{spec.batch_size}-{spec.precision}{backend.engine_suffix}"
    return paths.engines_dir() / system_id / benchmark / scenario / fname


def build_key(spec: EngineSpec, backend: Backend, source_digest: str) -> str:
    """What an engine file depends on (not the run's config hash: see code.common.settings)."""
    blob = json.dumps({"spec": spec.as_dict(), "backend": backend.name, "versions": backend.versions(),
                       "source": source_digest}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _stamp(p: Path) -> list:
    st = p.stat()
    return [st.st_size, st.st_mtime_ns]


def source_digest(source: Path, meta: dict) -> str:
    """sha256 of a file (reusing the recorded one while its size and mtime are unchanged: the real
    SDXL unet is ~10 GB), or of a folder's listing (name, size, mtime of every file)."""
    if source.is_dir():
        listing = sorted([str(p.relative_to(source)), *_stamp(p)] for p in source.rglob("*") if p.is_file())
        return hashlib.sha256(json.dumps(listing).encode()).hexdigest()
    if meta.get("source_stat") == _stamp(source) and meta.get("source_sha256"):
        return meta["source_sha256"]
    return sha256_file(source)


def get_or_build(backend: Backend, source: ModelSource | str | Path, spec: EngineSpec, *, system_id: str,
                 benchmark: str, scenario: str, log: Callable[[str], None] = print) -> Path:
    """Return the engine for ``spec``, building it only if missing or built from something else.
    ``source``: a ModelSource, or an ONNX path. Prints one ``[engine]`` line."""
    if not isinstance(source, ModelSource):
        source = ModelSource(lambda p=source: p)
    src, spec = backend.prepare(source, spec)
    src = Path(src)
    out = engine_path(system_id, benchmark, scenario, spec, backend)
    clean_stale_partials(out.parent)          # builds a killed process left half-written
    meta_path = out.with_name(out.name + ".json")
    meta = _read_meta(meta_path) if out.exists() else {}
    digest = source_digest(src, meta)
    key = build_key(spec, backend, digest)
    if meta.get("build_key") == key and meta.get("engine_size") == out.stat().st_size:
        log(f"[engine] reuse {out} (build key {key})")
        return out
    log(f"[engine] build {out} (build key {key})")
    t0 = time.time()
    with staged_path(out, suffix=backend.engine_suffix) as tmp:
        tmp.unlink()  # backends write the file themselves
        backend.build(str(src), str(tmp), spec)
    write_json(meta_path, {"build_key": key, "backend": backend.name, "spec": spec.as_dict(), "source": str(src),
                           "source_sha256": None if src.is_dir() else digest,
                           "source_stat": None if src.is_dir() else _stamp(src),
                           "engine_size": out.stat().st_size, "build_seconds": round(time.time() - t0, 3),
                           "versions": backend.versions()})
    return out


def _read_meta(meta_path: Path) -> dict:
    try:
        return json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return {}
