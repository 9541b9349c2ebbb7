"""Small shared pieces for the command-line modules under code/ (besides code.main)."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

from code.common.errors import HarnessError, from_os_error


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the harness's error shape: one line of cause, one line of fix, exit code 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        print(f"error: {message}\n  fix: run `{self.prog} --help` for the options", file=sys.stderr)
        sys.exit(2)


def guarded(fn: Callable[..., Any], *args, interrupted: str = "interrupted", **kwargs) -> int:
    """Call fn; a HarnessError becomes its one-line message and exit code, Ctrl-C (and SIGTERM where
    the caller maps it to KeyboardInterrupt) ``interrupted`` and 130, anything else one line saying
    it is a bug (MLPERF_DEBUG=1 shows the traceback). Returns fn's int result or 0."""
    try:
        rc = fn(*args, **kwargs)
    except HarnessError as e:
        print(e.render(), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        return 130
    except OSError as e:             # a full disk, a read-only folder: the environment, not a bug
        he = from_os_error(e)
        if he is None:
            return _internal(e)
        print(he.render(), file=sys.stderr)
        return he.exit_code
    except Exception as e:  # noqa: BLE001 - never a traceback for the user
        return _internal(e)
    return rc if isinstance(rc, int) else 0


def _internal(e: Exception) -> int:
    """Anything else is a bug: one line saying so (MLPERF_DEBUG=1 re-raises for the traceback)."""
    if os.environ.get("MLPERF_DEBUG"):
        raise e
    full = _full_output_disk()
    if full is not None:           # a library failed its write on a full disk in its own words
        print(full.render(), file=sys.stderr)
        return full.exit_code
    print(f"error: internal error: {type(e).__name__}: {e}\n  fix: rerun with MLPERF_DEBUG=1 for the traceback "
          "and report it", file=sys.stderr)
    return 1


def _full_output_disk():
    """The no-space error of the first folder the harness writes to (scratch, build) that is full, else None."""
    from code.common import paths
    from code.common.errors import disk_full

    for folder in (paths.scratch_path(), paths.build_dir()):
        full = disk_full(folder) if folder.exists() else None
        if full is not None:
            return full
    return None
