"""User-facing errors: one line of cause, the command that fixes it, a non-zero exit code."""
from __future__ import annotations

import difflib
from typing import Iterable


def nearest(name: str, options: Iterable[str]) -> str | None:
    """The option closest to ``name`` (case-insensitive), or None."""
    options = list(options)
    lower = {o.lower(): o for o in options}
    if name.lower() in lower:
        return lower[name.lower()]
    m = difflib.get_close_matches(name.lower(), list(lower), n=1, cutoff=0.5)
    return lower[m[0]] if m else None


def did_you_mean(name: str, options: Iterable[str]) -> str:
    n = nearest(name, options)
    return f" (did you mean '{n}'?)" if n else ""


class HarnessError(Exception):
    """Raised for bad input or a missing prerequisite. ``code.main`` prints it without a traceback.

    exit_code: 2 for usage/config/system errors, 3 for missing data/models, 4 for run failures.
    """

    def __init__(self, cause: str, fix: str | None = None, exit_code: int = 2):
        super().__init__(cause)
        self.cause = cause
        self.fix = fix
        self.exit_code = exit_code

    def render(self) -> str:
        msg = f"error: {self.cause}"
        if self.fix:
            msg += f"\n  fix: {self.fix}"
        return msg


LOCATION_FIX = ("point MLPERF_SCRATCH_PATH (models, data), MLPERF_BUILD_DIR (engines, logs) or --log_dir at a "
                "writable folder with free space")


def _mount_of(path: str) -> str:
    import os

    p = os.path.abspath(path)
    while not os.path.ismount(p):
        p = os.path.dirname(p)
    return p


def from_os_error(e: OSError) -> HarnessError | None:
    """A file-system error that is the user's environment, not a bug, as a one-line HarnessError
    (exit 3) naming the path: a full disk, a read-only or unwritable folder, a file where a folder
    belongs. None for any other OSError."""
    import errno
    import shutil

    path = e.filename or ""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        where = _mount_of(path) if path else "the output disk"
        free = ""
        if path:
            try:
                free = f", {shutil.disk_usage(where).free / 2**20:.0f} MiB free"
            except OSError:
                pass
        return HarnessError(f"no space left on {where}{free}" + (f" (writing {path})" if path else ""),
                            f"free space on {where}, or {LOCATION_FIX}", 3)
    if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        why = "read-only file system" if e.errno == errno.EROFS else "permission denied"
        return HarnessError(f"cannot write {path or 'a file'}: {why}", f"make it writable, or {LOCATION_FIX}", 3)
    if e.errno in (errno.ENOTDIR, errno.EEXIST) and path:
        import os

        p = os.path.abspath(path)
        while p != os.path.dirname(p) and not os.path.exists(p):
            p = os.path.dirname(p)
        if os.path.isfile(p) or e.errno == errno.ENOTDIR:
            return HarnessError(f"{p} is a file where a folder is needed (for {path})",
                                f"move {p} away, or {LOCATION_FIX}", 3)
    return None


FULL_BYTES = 1 << 20     # less free space than this, after a failed write, is a full disk


def disk_full(folder, writing=None) -> HarnessError | None:
    """After a write failed without saying why (a child process died, a library's own message):
    the no-space error if ``folder``'s file system is full, else None. ``writing``: what was being
    written (default ``folder``)."""
    import errno
    import shutil

    try:
        if shutil.disk_usage(folder).free >= FULL_BYTES:
            return None
    except OSError:
        return None
    return from_os_error(OSError(errno.ENOSPC, "No space left on device", str(writing or folder)))


class MissingDataError(HarnessError):
    def __init__(self, cause: str, fix: str | None = None):
        super().__init__(cause, fix, exit_code=3)


class RunError(HarnessError):
    def __init__(self, cause: str, fix: str | None = None):
        super().__init__(cause, fix, exit_code=4)
