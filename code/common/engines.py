"""Engine files per system config, rebuilt only when what they are built from changes.

Layout: build/engines/<system_id>/<benchmark>/<scenario>/<component>-b<batch>-<precision><suffix>,
with <engine>.json beside it recording the build key and what went into it. The build key covers the
engine spec, the backend and its versions, and the source's content (an ONNX file's sha256, or a
folder's file listing with sizes and times); a changed key rebuilds, an unchanged one is reused as
long as the engine file is intact: the size it was written with, its sampled fingerprint
(``fileio.sampled_sha256``: whole under 64 MiB, 64 blocks of 64 KiB above) on every reuse, and its full
sha256 whenever its size or mtime moved. ``--force_rebuild`` (``rebuilding``) builds regardless.

The backend chooses what to build from (``Backend.prepare``: the ONNX model, or an eager torch
module factory), so benchmark code never names a backend.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import time
from pathlib import Path
from typing import Callable, Iterator

from code.common import paths, progress
from code.common.backends.base import Backend, EngineSpec, ModelSource
from code.common.errors import HarnessError, MissingDataError
from code.common.fileio import clean_stale_partials, sampled_sha256, sha256_file, staged_path, write_json


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


_FORCE: contextvars.ContextVar[set | None] = contextvars.ContextVar("force_rebuild", default=None)


@contextlib.contextmanager
def rebuilding(force: bool) -> Iterator[None]:
    """``--force_rebuild``: inside the block, each engine is built once, whatever the cache holds
    (later uses in the same invocation reuse that fresh build)."""
    token = _FORCE.set(set() if force else None)
    try:
        yield
    finally:
        _FORCE.reset(token)


def _intact(out: Path, meta: dict) -> str | None:
    """None if the engine file is the one that was built; else why not. The size and the sampled
    fingerprint are always checked (a same-size overwrite with its mtime put back changes the fingerprint
    wherever it touches a sampled block, anywhere in a file under 64 MiB); the full sha256 only when the
    size or mtime moved (a multi-GB engine is not hashed whole on every run)."""
    if meta.get("engine_size") != out.stat().st_size:
        return f"its size is {out.stat().st_size}, not the {meta.get('engine_size')} bytes it was built with"
    if meta.get("engine_sampled") and sampled_sha256(out) != meta["engine_sampled"]:
        return "its content changed since it was built (sampled sha256 differs)"
    if meta.get("engine_stat") == _stamp(out):
        return None
    if meta.get("engine_sha256") and sha256_file(out) != meta["engine_sha256"]:
        return "its content changed since it was built (sha256 differs)"
    return None


def get_or_build(backend: Backend, source: ModelSource | str | Path, spec: EngineSpec, *, system_id: str,
                 benchmark: str, scenario: str, log: Callable[[str], None] = print) -> Path:
    """Return the engine for ``spec``, building it if missing, built from something else, damaged,
    or ``--force_rebuild`` (``rebuilding``). ``source``: a ModelSource, or an ONNX path. Prints one
    ``[engine]`` line."""
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
    forced = _FORCE.get()
    why = "--force_rebuild" if forced is not None and out not in forced else "no engine yet" if not out.exists() \
        else "built from something else" if meta.get("build_key") != key else _intact(out, meta)
    if why is None:
        log(f"[engine] reuse {out} (build key {key})")
        return out
    log(f"[engine] build {out} (build key {key}; {why})")
    t0 = time.time()
    try:
        with staged_path(out, suffix=backend.engine_suffix) as tmp, progress.waiting(f"build {out.name}"):
            tmp.unlink()  # backends write the file themselves
            backend.build(str(src), str(tmp), spec)
    except HarnessError:
        raise
    except Exception as e:    # noqa: BLE001 - a bad model or a full disk is the user's to fix, not a bug
        raise _build_failure(e, src, out, source.fix) from None
    write_json(meta_path, {"build_key": key, "backend": backend.name, "spec": spec.as_dict(), "source": str(src),
                           "source_sha256": None if src.is_dir() else digest,
                           "source_stat": None if src.is_dir() else _stamp(src),
                           "engine_size": out.stat().st_size, "engine_stat": _stamp(out),
                           "engine_sha256": sha256_file(out), "engine_sampled": sampled_sha256(out), "build_seconds": round(time.time() - t0, 3),
                           "versions": backend.versions()})
    if forced is not None:
        forced.add(out)
    return out


def _build_failure(e: Exception, src: Path, out: Path, fix: str) -> HarnessError:
    """Why a build failed, in one line: a full disk, a model file that is not a model, or else the
    builder's own message."""
    from code.common.errors import RunError, disk_full, from_os_error

    if isinstance(e, OSError) and from_os_error(e) is not None:
        return from_os_error(e)
    full = disk_full(out.parent)
    if full is not None:                 # e.g. "Protobuf serialization failed" on a full disk
        return full
    if src.is_file() and src.suffix == ".onnx":
        import onnx

        try:
            onnx.checker.check_model(str(src))
        except Exception as bad:  # noqa: BLE001 - onnx raises several types for damaged files
            return MissingDataError(f"{src}: not a valid ONNX model ({str(bad).splitlines()[0][:120]})",
                                    f"delete it and fetch it again: {fix}" if fix else f"delete {src} and rebuild it")
    return RunError(f"building {out.name} failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}",
                    f"rerun with --verbose; if the model is intact ({src}), report it")


def _read_meta(meta_path: Path) -> dict:
    try:
        return json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return {}
