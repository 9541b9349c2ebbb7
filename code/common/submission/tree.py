"""File-tree helpers for staging and export: cheap copies (hard links where possible) and an
all-or-nothing swap of several top-level directories.

Contract: large files in a staged tree may be hard links to the run logs under build/. Anything that
changes a staged file (truncation) must replace it (write a new file, rename over), never edit it
in place; ``fileio.staged_path`` does that.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterable

from code.common.fileio import partial_prefix


LINK_MIN_BYTES = 1 << 20   # smaller files are copied: an in-place edit of one copy never shows in another


def link_or_copy(src: str | Path, dst: str | Path) -> None:
    """Hard-link ``src`` to ``dst`` if it is large (>= 1 MiB) and on the same file system, else copy it."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        dst.unlink()
    if os.path.getsize(src) >= LINK_MIN_BYTES:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)


def link_tree(src: str | Path, dst: str | Path) -> None:
    shutil.copytree(src, dst, copy_function=lambda s, d: link_or_copy(s, d), dirs_exist_ok=True)


def swap_dirs(new_root: Path, final_root: Path, names: Iterable[str]) -> None:
    """Move ``new_root/<name>`` over ``final_root/<name>`` for every name, or none of them.

    Each existing directory is first renamed aside; if any rename fails, the ones already done are
    put back. Renames stay within one file system, so each step is atomic.
    """
    names = list(names)
    done: list[tuple[Path, Path | None]] = []
    try:
        for name in names:
            src, dst = new_root / name, final_root / name
            if not src.exists():
                continue
            old = None
            if dst.exists():
                old = final_root / f"{partial_prefix(final_root / name)}old.partial"   # a killed swap: cleaned later
                os.replace(dst, old)
            done.append((dst, old))
            os.replace(src, dst)
    except BaseException:
        for dst, old in reversed(done):
            if old is not None:
                if dst.exists():
                    shutil.rmtree(dst, ignore_errors=True)
                os.replace(old, dst)
        raise
    for _, old in done:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


# A staging root or export folder holding `make submission --smoke` runs says so in this file: staging and export
# accept smoke runs (RunControl.smoke, never submittable) only in such a tree, and never mix them into another.
SMOKE_MARKER = "SMOKE_NOT_SUBMITTABLE.txt"


def mark_smoke_tree(root: str | Path) -> None:
    from code.common.fileio import write_text

    write_text(Path(root) / SMOKE_MARKER, "This tree holds make submission --smoke runs: short runs of the whole "
               "flow, never submittable.\n")


def smoke_allowance(root: str | Path) -> tuple[str, ...]:
    """The test-only control names a tree's runs may carry: (\"smoke\",) in a smoke tree, else none."""
    return ("smoke",) if (Path(root) / SMOKE_MARKER).is_file() else ()


def files_under(root: str | Path) -> list[str]:
    """Sorted relative paths of every file under ``root`` (for reports and tests)."""
    root = Path(root)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
