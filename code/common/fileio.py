"""Atomic file writes and checked downloads. Nothing is ever left half-written under its final name."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable, Iterator

from code.common.errors import HarnessError


def make_stage_dir(final: Path) -> Path:
    """A private staging folder beside ``final`` (named for clean_stale_partials), with normal permissions."""
    tmp = Path(tempfile.mkdtemp(prefix=partial_prefix(final), suffix=".partial", dir=final.parent))
    _share(tmp, directory=True)
    return tmp


def _host() -> str:
    import socket

    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40] or "host"


def partial_prefix(final: Path) -> str:
    """Prefix of a staging name beside ``final``; it names the owning process and host (see
    clean_stale_partials: only this host's dead owners are cleaned, so machines sharing a folder
    never delete each other's live work)."""
    return f".{final.name}.pid{os.getpid()}-{_host()}."


_OWNER = re.compile(r"\.pid(\d+)-([A-Za-z0-9-]*)\.[^/]*\.partial$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_partials(folder: str | os.PathLike) -> list[Path]:
    """Remove staging files and folders in ``folder`` whose owning process is gone; returns them."""
    removed = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    host = _host()
    for p in entries:
        m = _OWNER.search(p.name)
        if m is None or m.group(2) != host or _alive(int(m.group(1))):
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p)
    return removed


def sweep_stale_partials(root: str | os.PathLike) -> list[Path]:
    """clean_stale_partials in every folder under ``root`` that holds a staging entry (a killed run
    leaves its ``.partial`` in a folder no later run writes to)."""
    removed: list[Path] = []
    root = Path(root)
    if not root.is_dir():
        return removed
    for folder in sorted({p.parent for p in root.rglob("*.partial")}):
        removed += clean_stale_partials(folder)
    return removed


@contextlib.contextmanager
def staged_path(final: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temp path beside ``final``; rename it into place only if the block succeeds."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=partial_prefix(final), suffix=suffix + ".partial", dir=final.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        if tmp.exists():
            _share(tmp)
        os.replace(tmp, final)
    except OSError as e:         # a failed write or close names no file: name the one being written
        if not e.filename:
            e.filename = str(final)
        raise
    except HarnessError:
        raise
    except Exception as e:       # a library's own words for a full disk (torch: "unexpected pos"; protobuf)
        _raise_if_full(final, e)
        raise
    finally:
        if tmp.exists():
            tmp.unlink()


def _raise_if_full(final: Path, e: Exception) -> None:
    """Asked while the partial file still holds the space it took (deleting it first made a full disk look
    free again): a failed write on a full file system is that, whatever the library called it."""
    from code.common.errors import disk_full

    full = disk_full(final.parent, final)
    if full is not None:
        raise full from e


def claim_dir(final: str | os.PathLike, ours: Callable[[Path], bool], what: str, fix: str) -> Path:
    """A folder a tool replaces whole may be replaced only if it is absent, empty, or what that tool wrote
    (``ours``): anything else is a one-line error naming a few of the files it would have deleted, before
    any work is done. A plain file there is an error too."""
    final = Path(final)
    if final.is_symlink() or (final.exists() and not final.is_dir()):
        raise HarnessError(f"{what} {final} is a file, not a folder", fix)
    if final.is_dir():
        try:
            names = sorted(p.name for p in final.iterdir())
        except OSError as e:
            raise HarnessError(f"{what} {final} cannot be read ({e.strerror or e})", fix) from None
        if names and not ours(final):
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            raise HarnessError(f"{what} {final} holds files this tool did not write ({shown}); it replaces its "
                               "folder whole, so it leaves this one alone", fix)
    return final


def prune_empty_dirs(root: str | os.PathLike, keep_root: bool = False) -> None:
    """Remove the folders under ``root`` that hold nothing (bottom up), and ``root`` itself unless ``keep_root``;
    anything with a file in it stays."""
    root = Path(root)
    if not root.is_dir() or root.is_symlink():
        return
    for d in sorted((p for p in root.rglob("*") if p.is_dir() and not p.is_symlink()), key=lambda p: -len(p.parts)):
        try:
            d.rmdir()
        except OSError:          # not empty (or not ours to remove): kept
            pass
    if not keep_root:
        try:
            root.rmdir()
        except OSError:
            pass


@contextlib.contextmanager
def staged_dir(final: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp directory beside ``final``; swap it into place only if the block succeeds."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_stage_dir(final)
    try:
        yield tmp
        old = None
        if final.exists():
            old = final.with_name(f"{partial_prefix(final)}old.partial")    # a killed swap: cleaned later
            os.replace(final, old)
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except (HarnessError, OSError):
        raise
    except Exception as e:       # noqa: BLE001 - as in staged_path: a full disk in a library's words
        _raise_if_full(final, e)
        raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    with staged_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | os.PathLike, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: str | os.PathLike, fix: str, expect: type = dict):
    """A JSON file a user may have edited: bad syntax or the wrong top-level type is a one-line error
    naming the file and line, with ``fix``."""
    path = Path(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise HarnessError(f"{path}: not UTF-8 text", fix) from None
    except json.JSONDecodeError as e:
        raise HarnessError(f"{path}:{e.lineno}: bad JSON: {e.msg} (column {e.colno})", fix) from None
    except OSError as e:
        raise HarnessError(f"{path}: cannot read: {e.strerror}", fix) from None
    if not isinstance(obj, expect):
        raise HarnessError(f"{path}: expected a JSON {expect.__name__}, found a {type(obj).__name__}", fix)
    return obj


def check_hf_folder(folder: str | os.PathLike, fix: str) -> Path:
    """A Hugging Face model folder whose files a download or a user can damage: every JSON file (config,
    tokenizer, generation config) parses and every safetensors file's header and length agree, or a one-line
    error names the file, with ``fix``. transformers would say only "JSONDecodeError" or "Error while
    deserializing header", with no file name."""
    folder = Path(folder)
    for p in sorted(folder.glob("*.json")):
        read_json(p, fix)
    for p in sorted(folder.glob("*.safetensors")):
        try:
            from safetensors import safe_open

            with safe_open(str(p), "np") as f:
                f.keys()
        except ImportError:
            break
        except Exception as e:  # noqa: BLE001 - safetensors raises its own SafetensorError (and OSError)
            raise HarnessError(f"{p} is damaged ({str(e).splitlines()[0][:120] or type(e).__name__})", fix) from None
    return folder


def read_dataframe(path: str | os.PathLike, fix: str, columns=(), name: str | None = None):
    """A pickled pandas DataFrame holding ``columns`` (the LLM data sets): a missing file, one that does not
    unpickle, anything but a DataFrame, or a missing column is a one-line MissingDataError naming it (``name``,
    default the path), with ``fix``. Unpickling runs code: only for a file whose md5 was checked or that
    make preprocess_data wrote."""
    import pandas as pd

    from code.common.errors import MissingDataError

    path = Path(path)
    name = name or str(path)
    if not path.is_file():
        raise MissingDataError(f"dataset not found: {path}", fix)
    try:
        df = pd.read_pickle(path)
    except Exception as e:  # noqa: BLE001 - any unreadable pickle is the same user error
        raise MissingDataError(f"{name}: not a readable pandas pickle ({type(e).__name__}: "
                               f"{str(e).splitlines()[0][:120] if str(e) else ''})", fix) from None
    if not isinstance(df, pd.DataFrame):
        raise MissingDataError(f"{name}: holds a {type(df).__name__}, not a DataFrame", fix)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise MissingDataError(f"{name}: no column(s) {', '.join(missing)} (has {', '.join(map(str, df.columns))})", fix)
    return df


def load_array(path: str | os.PathLike, fix: str, *, dtype=None, shape: tuple | None = None,
               mmap: bool = False):
    """np.load a preprocessed array and check it: a missing, truncated or non-.npy file, the wrong
    dtype, or the wrong shape (``shape`` entries of None match any length) is a one-line error naming
    the file, with ``fix`` (the make command that rewrites it); exit 3."""
    import numpy as np

    from code.common.errors import MissingDataError

    path = Path(path)
    if not path.is_file():
        raise MissingDataError(f"preprocessed data not found: {path}", fix)
    try:
        a = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:    # truncated, not .npy, a pickled object array
        raise MissingDataError(f"{path}: not a readable .npy array ({str(e).splitlines()[0][:120]})", fix) from None
    if not isinstance(a, np.ndarray):
        raise MissingDataError(f"{path}: holds an archive, not one array", fix)
    if dtype is not None and a.dtype != np.dtype(dtype):
        raise MissingDataError(f"{path}: dtype {a.dtype}, expected {np.dtype(dtype)}", fix)
    if shape is not None and (a.ndim != len(shape) or any(w is not None and w != n for w, n in zip(shape, a.shape))):
        want = "(" + ", ".join("N" if w is None else str(w) for w in shape) + ")"
        raise MissingDataError(f"{path}: shape {a.shape}, expected {want}", fix)
    return a


def git_blob_sha1(path: str | os.PathLike) -> str:
    """The id git (and the Hugging Face Hub, for non-LFS files) records for a file: sha1 of
    "blob <size>\\0" + its bytes."""
    h = hashlib.sha1()
    h.update(f"blob {os.path.getsize(path)}\0".encode())
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


SAMPLED_BLOCKS = 64              # sampled_sha256: blocks read from a large file
SAMPLED_BLOCK = 1 << 16          # 64 KiB each: 4 MiB read, whatever the file's size
WHOLE_BELOW = 64 << 20           # files under 64 MiB are hashed whole (about 0.1 s)


def sampled_sha256(path: str | os.PathLike) -> str:
    """A cheap content fingerprint: the whole file's sha256 under WHOLE_BELOW bytes, else the sha256 of
    SAMPLED_BLOCKS blocks at evenly spaced offsets (the first and the last included) and of the size.
    It sees a damaged header, tail or any sampled region, in milliseconds on a multi-GB engine; damage
    that falls between the samples of a large file goes unseen (the full sha256 runs whenever the size
    or mtime moved)."""
    size = os.path.getsize(path)
    if size < max(WHOLE_BELOW, SAMPLED_BLOCKS * SAMPLED_BLOCK):
        return sha256_file(path)
    h = hashlib.sha256(str(size).encode())
    step = (size - SAMPLED_BLOCK) / (SAMPLED_BLOCKS - 1)
    with open(path, "rb") as f:
        for i in range(SAMPLED_BLOCKS):
            f.seek(int(i * step))
            h.update(f.read(SAMPLED_BLOCK))
    return "sampled:" + h.hexdigest()


def md5_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(chunk), b""):
            h.update(b)
    return h.hexdigest()


MIRROR_ENV = "MLPERF_DOWNLOAD_MIRROR"


def mirrored(url: str) -> str:
    """``url`` through $MLPERF_DOWNLOAD_MIRROR when set: ``<mirror>/<host>/<path>`` (a plain HTTP folder
    laid out by host, e.g. an internal cache, or a server on 127.0.0.1 in tests)."""
    base = os.environ.get(MIRROR_ENV)
    if not base:
        return url
    parts = urllib.parse.urlsplit(url)
    return f"{base.rstrip('/')}/{parts.netloc}{parts.path}" + (f"?{parts.query}" if parts.query else "")


def download(url: str, dest: str | os.PathLike, *, sha256: str | None = None, md5: str | None = None,
             check: Callable[[Path], None] | None = None, fix: str | None = None, timeout: float = 60.0) -> Path:
    """Fetch ``url`` into ``dest`` and verify it: ``sha256`` / ``md5`` checksums and/or ``check`` (a
    validator that raises HarnessError). A present ``dest`` is reused only when it passes them; a
    file with nothing to verify it against is always fetched again.

    Bytes go to ``.<name>.download`` beside ``dest``, which a later call resumes with an HTTP Range
    request when the server allows it (large models); it is renamed to ``dest`` only once verified,
    so an interrupted, truncated or corrupt download never appears under the final name. A response
    shorter than its Content-Length, an HTTP error, or a server silent for ``timeout`` seconds is a
    one-line error (exit 3). Honours $MLPERF_DOWNLOAD_MIRROR (``mirrored``).
    """
    dest = Path(dest)
    fix = fix or f"retry; or place the file by hand at {dest}"

    def verify(p: Path) -> None:
        if sha256 and sha256_file(p) != sha256:
            raise HarnessError(f"checksum mismatch for {url}: sha256 is not {sha256} (file discarded)", fix, 3)
        if md5 and md5_file(p) != md5:
            raise HarnessError(f"checksum mismatch for {url}: md5 is not {md5} (file discarded)", fix, 3)
        if check is not None:
            check(p)

    if dest.exists() and (sha256 or md5 or check):
        try:
            verify(dest)
            return dest
        except HarnessError:
            pass
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(f".{dest.name}.download")
    src = mirrored(url)
    try:
        _fetch(src, part, timeout)
        verify(part)
    except HarnessError:
        part.unlink(missing_ok=True)
        raise
    except Exception as e:  # network and HTTP errors, timeouts, truncated bodies: keep what came for a resume
        if isinstance(e, urllib.error.HTTPError):
            part.unlink(missing_ok=True)
        raise HarnessError(f"could not download {src}: {type(e).__name__}: {e}".replace("\n", " "),
                           f"check network access ({MIRROR_ENV} names a mirror), then {fix}", 3) from None
    _share(part)
    os.replace(part, dest)
    return dest


def _fetch(url: str, part: Path, timeout: float) -> None:
    """Append the rest of ``url`` to ``part`` (resuming with Range when it has bytes already)."""
    have = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": "mlperf-harness/1.0"}
    if have:
        headers["Range"] = f"bytes={have}-"
    req = urllib.request.Request(url, headers=headers)
    from code.common import progress

    with urllib.request.urlopen(req, timeout=timeout) as r:
        resumed = have and r.status == 206
        length = r.headers.get("Content-Length")
        total = int(length) + (have if resumed else 0) if length is not None else None
        with open(part, "ab" if resumed else "wb") as f, \
                progress.bar(total, f"download {Path(urllib.parse.urlsplit(url).path).name}", "B", True) as bar:
            bar.update(have if resumed else 0)
            for chunk in iter(lambda: r.read(1 << 20), b""):
                f.write(chunk)
                bar.update(len(chunk))
        got = part.stat().st_size - (have if resumed else 0)
    if length is not None and got != int(length):
        raise ConnectionError(f"the server sent {got} of {length} bytes")


def _share(p: Path, directory: bool = False) -> None:
    """Give a staged file or folder the permissions a normal one gets under the umask (mkstemp and
    mkdtemp create them private: 0600 / 0700)."""
    mask = _umask()
    os.chmod(p, (0o777 if directory else 0o666) & ~mask)


_UMASK: list[int] = []


def _umask() -> int:
    if not _UMASK:
        m = os.umask(0)
        os.umask(m)
        _UMASK.append(m)
    return _UMASK[0]


def save_seeded_pipeline(pipe, model_dir: str | os.PathLike, seed: int) -> Path:
    """A tiny diffusers pipeline built from ``seed``, saved atomically with save_pretrained and its seed (SEED)."""
    model_dir = Path(model_dir)
    with staged_dir(model_dir) as tmp:
        pipe.save_pretrained(tmp, safe_serialization=True)
        (tmp / "SEED").write_text(f"{seed}\n")
    return model_dir
