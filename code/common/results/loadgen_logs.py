"""Read LoadGen's own logs (mlperf_log_detail.txt) into data. Nothing here parses our stdout."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from code.common import scenarios



def read_accuracy_entries(accuracy_log: str | Path, fix: str = "rerun with --test_mode=AccuracyOnly") -> list[dict]:
    """mlperf_log_accuracy.json's entries ({"seq_id", "qsl_idx", "data"}); unreadable, not JSON or not a
    list is a one-line RunError with ``fix``."""
    from code.common.errors import RunError

    try:
        entries = json.loads(Path(accuracy_log).read_text())
    except (OSError, ValueError) as e:
        raise RunError(f"cannot read {accuracy_log}: {e}", fix) from None
    if not isinstance(entries, list):
        raise RunError(f"{accuracy_log}: not a LoadGen accuracy log (a JSON list)", fix)
    return entries


def first_answers(accuracy_log: str | Path, dtype="int32",
                  fix: str = "rerun with --test_mode=AccuracyOnly") -> dict:
    """qsl_idx -> the response of its first entry in mlperf_log_accuracy.json as a ``dtype`` array: a sample
    logged twice counts once, with its first answer, as the reference accuracy scripts de-dupe."""
    import numpy as np

    out: dict[int, np.ndarray] = {}
    for e in read_accuracy_entries(accuracy_log, fix):
        i = int(e["qsl_idx"])
        if i not in out:
            out[i] = np.frombuffer(bytes.fromhex(e["data"]), dtype=dtype)
    return out


def read_detail(path: str | Path) -> list[dict[str, Any]]:
    out = []
    p = Path(path)
    if not p.exists():
        return out
    for line in p.read_text(errors="replace").splitlines():
        if line.startswith(":::MLLOG"):
            try:
                out.append(json.loads(line[len(":::MLLOG"):].strip()))
            except ValueError:
                continue
    return out


def summarize(log_dir: str | Path, scenario: str) -> dict[str, Any]:
    """Validity, metric, early stopping, effective settings and error lines of one LoadGen run."""
    entries = read_detail(Path(log_dir) / "mlperf_log_detail.txt")
    kv: dict[str, Any] = {}
    errors, warnings = [], []
    for e in entries:
        key, val, meta = e.get("key"), e.get("value"), e.get("metadata", {}) or {}
        kv[key] = val
        if meta.get("is_error"):
            errors.append(f"{key}: {val}")
        elif meta.get("is_warning"):
            warnings.append(f"{key}: {val}")
    sc = scenarios.get(scenario)
    early = {k: v for k, v in kv.items() if k.startswith("early_stopping")}
    return {
        "result_validity": kv.get("result_validity"),
        "valid": kv.get("result_validity") == "VALID",
        "metric": sc.metric,
        "metric_value": kv.get(sc.metric_key),
        "metric_unit": sc.unit,
        "early_stopping": {"met": kv.get("early_stopping_met"), "lines": [f"{k}: {v}" for k, v in early.items()],
                           "raw": early},
        "effective": {k: v for k, v in kv.items() if k.startswith("effective_")},
        "requested": {k: v for k, v in kv.items() if k.startswith("requested_")},
        "results": {k: v for k, v in kv.items() if k.startswith("result_")},
        "loadgen_errors": errors,
        "loadgen_warnings": warnings,
        "loadgen_version": kv.get("loadgen_version"),
    }
