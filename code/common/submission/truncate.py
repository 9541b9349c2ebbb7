"""``make truncate_results``: shrink each staged mlperf_log_accuracy.json to its first and last
4 KiB and append ``hash=<sha256 of the full file>`` to the accuracy.txt beside it — the same
result as the official tools/submission/truncate_accuracy_log.py (head, "\\n\\n...\\n\\n", tail;
files under 4 KiB are left whole but still hashed). Idempotent: a file whose accuracy.txt already
holds a hash and that is under 10 KiB is skipped.

The full log is kept first under build/full_accuracy_logs/<same relative path>; every write
replaces the file (never edits in place), so hard-linked run logs under build/logs stay intact.

Run: ``make truncate_results`` (``python -m code.main --action=truncate_results [--staging_root=DIR]``).
"""
from __future__ import annotations

from pathlib import Path

from code.common import paths
from code.common.errors import HarnessError
from code.common.fileio import sha256_file, staged_path
from code.common.results.accuracy_text import has_hash
from code.common.submission.tree import link_or_copy

VIEWABLE = 4096
MAX_TRUNCATED = 10 * 1024
SEPARATOR = b"\n\n...\n\n"


def backup_root() -> Path:
    return paths.build_dir() / "full_accuracy_logs"


def accuracy_dirs(root: Path) -> list[Path]:
    """Every directory that holds a staged accuracy log: results/.../accuracy and TEST01/accuracy
    (staging layout), or results/.../accuracy and results/.../TEST01/accuracy (official layout)."""
    found = set()
    for sub in ("results", "compliance"):
        base = root / sub
        if base.is_dir():
            found.update(p.parent for p in base.rglob("accuracy/mlperf_log_accuracy.json"))
    return sorted(found)


def truncate_file(path: Path) -> None:
    size = path.stat().st_size
    if size < VIEWABLE:
        return
    with open(path, "rb") as f:
        head = f.read(VIEWABLE)
        f.seek(size - VIEWABLE)
        tail = f.read(VIEWABLE)
    with staged_path(path) as tmp:
        tmp.write_bytes(head + SEPARATOR + tail)


def truncate_dir(acc_dir: Path, rel: Path, log=print) -> str:
    """Truncate one accuracy directory; returns "truncated", "skipped" or an error line."""
    log_file, txt = acc_dir / "mlperf_log_accuracy.json", acc_dir / "accuracy.txt"
    if not txt.is_file():
        return f"{txt} missing: rerun make update_results"
    text = txt.read_text()
    if has_hash(text) and log_file.stat().st_size < MAX_TRUNCATED:
        return "skipped"
    if has_hash(text):
        return f"{txt} already holds a hash but {log_file} is {log_file.stat().st_size} bytes: rerun make update_results"
    backup = backup_root() / rel / "mlperf_log_accuracy.json"
    link_or_copy(log_file, backup)
    digest = sha256_file(log_file)
    with staged_path(txt) as tmp:
        tmp.write_text(text + f"\nhash={digest}\n")
    truncate_file(log_file)
    log(f"[truncate_results] {log_file}: truncated (sha256 {digest[:16]}..., full log in {backup})")
    return "truncated"


def _endpoints_only(root: Path) -> bool:
    from code.common.submission.endpoints import is_endpoints_dir

    return any(is_endpoints_dir(p) for p in (root / "results").glob("*/*/*"))


def truncate_all(root: Path, log=print) -> dict:
    dirs = accuracy_dirs(root)
    if not dirs and _endpoints_only(root):
        log("[truncate_results] nothing to truncate: the staged results are endpoints-client reports (no LoadGen "
            "accuracy log)")
        return {"truncated": 0, "skipped": 0, "errors": []}
    if not dirs:
        raise HarnessError(f"no staged accuracy logs under {root}/results", "make update_results")
    out = {"truncated": 0, "skipped": 0, "errors": []}
    for d in dirs:
        r = truncate_dir(d, d.relative_to(root), log)
        if r in ("truncated", "skipped"):
            out[r] += 1
        else:
            out["errors"].append(r)
            log(f"[truncate_results] error: {r}")
    log(f"[truncate_results] {out['truncated']} truncated, {out['skipped']} already truncated, "
        f"{len(out['errors'])} errors")
    return out
