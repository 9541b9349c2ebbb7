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


class MissingDataError(HarnessError):
    def __init__(self, cause: str, fix: str | None = None):
        super().__init__(cause, fix, exit_code=3)


class RunError(HarnessError):
    def __init__(self, cause: str, fix: str | None = None):
        super().__init__(cause, fix, exit_code=4)
