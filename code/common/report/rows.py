"""One report row per run, as data: read from the run's metadata.json and LoadGen's detail log
(through the summary the runner already stored), never from stdout."""
from __future__ import annotations

import re
from typing import Any

from code.common.errors import HarnessError
from code.common.results.selection import Run

# LoadGen's latency percentiles in mlperf_log_detail.txt (result_<p>_percentile_latency_ns)
_PCT = re.compile(r"^result_(\d+\.\d+)_percentile_latency_ns$")


def loadgen_percentiles(results: dict) -> list[tuple[float, float]]:
    """[(percentile, latency ms)] that LoadGen logged for this run, sorted."""
    out = []
    if not isinstance(results, dict):      # a hand-edited or damaged record: no percentiles to draw
        return out
    for k, v in results.items():
        hit = _PCT.match(k)
        if hit and isinstance(v, (int, float)):
            out.append((float(hit.group(1)), v / 1e6))
    return sorted(out)


def _entry(m: dict):
    from code.common import rounds

    try:
        return rounds.entry(m["benchmark"], m.get("accuracy_target"), m.get("round"),
                            edge=str(m.get("loadgen_model", "")).endswith("-edge"))
    except (HarnessError, KeyError):
        return None


def accuracy_rows(m: dict, entry) -> list[dict[str, Any]]:
    """Each scored metric with its target, upper limit and the reference it stands for, as % of both."""
    metrics = (m.get("accuracy") or {}).get("metrics") or {}
    out = []
    for name, value in metrics.items():
        if name in ("good", "total") or not isinstance(value, (int, float)):
            continue
        lo = entry.accuracy_min.get(name) if entry else None
        hi = entry.accuracy_max.get(name) if entry else None
        ref = entry.accuracy_reference(name) if entry else None
        out.append({"metric": name, "value": value, "target": lo, "upper_limit": hi, "reference": ref,
                    "pct_of_reference": round(100 * value / ref, 3) if ref else None,
                    "pct_of_target": round(100 * value / lo, 3) if lo else None})
    return out


def row(run: Run) -> dict[str, Any]:
    """The report's record of one run (also one entry of summary.json)."""
    from code.common.results import records

    m = run.meta
    entry = _entry(m)
    acc = m.get("accuracy") or {}
    validity = (m.get("result_validity") or "-") if m.get("status") == "ok" else "ERROR"
    if m.get("test_mode") == "AccuracyOnly" and m.get("status") == "ok":
        validity = {True: "PASS", False: "FAIL"}.get(acc.get("passed"), "-")
    return {
        "dir": str(run.dir),
        "system": m.get("system_name"), "benchmark": m.get("benchmark"),
        "submission_name": entry.name if entry else m.get("log_name"),
        "scenario": m.get("scenario"), "mode": str(m.get("test_mode", "?")).replace("Only", ""),
        "audit_test": m.get("audit_test"), "model_variant": m.get("model_variant"),
        "backend": m.get("backend"), "precision": m.get("precision"), "fast": bool(m.get("fast")),
        "status": m.get("status"), "validity": validity, "error": m.get("error"),
        "invalid_reasons": list(m.get("invalid_reasons") or ()),
        "metric": m.get("metric"), "metric_value": m.get("metric_value"), "metric_unit": m.get("metric_unit"),
        "metric_text": records.metric_text(m),
        "notes": (["tiny variant"] if m.get("model_variant") == "tiny" else []) + records.run_notes(m),
        "accuracy": accuracy_rows(m, entry), "accuracy_passed": acc.get("passed"),
        "loadgen_percentiles_ms": loadgen_percentiles(m.get("results") or {}),
        "tokens": m.get("tokens"), "timeline": m.get("timeline"), "power": m.get("power"),
        "finished": m.get("finished"),
    }


def accuracy_text(r: dict) -> str:
    """'acc 76.1 (99.5% of ref, 100.5% of target)' per metric, for the tables."""
    parts = []
    for a in r["accuracy"]:
        s = f"{a['metric']} {a['value']:.5g}"
        pcts = [f"{a[k]:.2f}% of {w}" for k, w in (("pct_of_reference", "reference"), ("pct_of_target", "target"))
                if a[k] is not None]
        parts.append(s + (f" ({', '.join(pcts)})" if pcts else ""))
    text = "; ".join(parts) or "-"
    if r["accuracy_passed"] is not None:
        text += " PASS" if r["accuracy_passed"] else " FAIL"
    return text
