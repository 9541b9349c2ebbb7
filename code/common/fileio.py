"""Atomic file writes and checked downloads. Nothing is ever left half-written under its final name."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import urllib.request
from pathlib import Path
from typing import Iterator

from code.common.errors import HarnessError


def partial_prefix(final: Path) -> str:
    """Prefix of a staging name beside ``final``; it names the owning process (see clean_stale_partials)."""
    return f".{final.name}.pid{os.getpid()}."


_OWNER = re.compile(r"\.pid(\d+)\.[^/]*\.partial$")


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
    for p in entries:
        m = _OWNER.search(p.name)
        if m is None or _alive(int(m.group(1))):
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p)
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
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def staged_dir(final: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp directory beside ``final``; swap it into place only if the block succeeds."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=partial_prefix(final), suffix=".partial", dir=final.parent))
    try:
        yield tmp
        old = None
        if final.exists():
            old = final.with_name(f".{final.name}.old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(final, old)
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    with staged_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | os.PathLike, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def md5_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(chunk), b""):
            h.update(b)
    return h.hexdigest()


def download(url: str, dest: str | os.PathLike, *, sha256: str | None = None, md5: str | None = None,
             fix: str | None = None, timeout: float = 60.0) -> Path:
    """Fetch ``url`` into ``dest`` with a checksum check. Reuses a present file whose checksum matches.

    Downloads to a ``.partial`` file and renames on success, so an interrupted or corrupt download
    never appears under the final name.
    """
    dest = Path(dest)

    def ok(p: Path) -> bool:
        if sha256 and sha256_file(p) != sha256:
            return False
        if md5 and md5_file(p) != md5:
            return False
        return True

    if dest.exists() and ok(dest):
        return dest
    try:
        with staged_path(dest) as tmp:
            req = urllib.request.Request(url, headers={"User-Agent": "mlperf-harness/1.0"})
            with urllib.request.urlopen(req, timeout=timeout) as r, open(tmp, "wb") as f:
                shutil.copyfileobj(r, f, 1 << 20)
            if not ok(tmp):
                raise HarnessError(f"checksum mismatch for {url} (file discarded)",
                                   fix or "retry the download; if it persists the upstream file changed", 3)
    except HarnessError:
        raise
    except Exception as e:  # network errors, HTTP errors
        raise HarnessError(f"could not download {url}: {type(e).__name__}: {e}",
                           fix or "check network access, or place the file by hand at " + str(dest), 3) from None
    return dest
