"""Run records (metadata.json) as data: finding them and printing the summary table."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from code.common import paths


def find_metadata(root: str | Path) -> list[dict]:
    """Every run record under ``root`` (code.common.results.selection.scan); an unreadable metadata.json is
    named on stderr, never skipped silently."""
    import sys

    from code.common.results.selection import scan

    runs, problems = scan([root])
    for p in problems:
        print(f"warning: skipped {p}", file=sys.stderr)
    return [r.meta for r in runs]


def latest_logs() -> Path | None:
    """The log folder of the last make run_harness (build/logs/LATEST); None when that file is missing, damaged
    or names a folder that is gone (it is a pointer: the tools fall back to scanning build/logs)."""
    p = paths.logs_dir() / "LATEST"
    try:
        text = p.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    target = Path(text) if text and "\0" not in text and "\n" not in text else None
    return target if target is not None and target.is_dir() else None


def server_rate(offline: dict, share: float, cap: float | None = None) -> float:
    """A Server / Interactive target QPS: ``share`` of what an Offline performance run (its record, metadata.json)
    measured just before on this machine, never above ``cap``, at least 0.5. Never a fixed rate alone: machines of
    this kind differ several-fold, and a rate one serves was more than a slower one's CI served (tiny RetinaNet at 10
    QPS: 6.7 completed/s there, latencies past the 2 s bound)."""
    sps = (offline.get("results") or {}).get("result_samples_per_second") or offline.get("metric_value") or 0
    rate = max(0.5, share * sps)        # samples/s, also where an LLM's metric is tokens/s
    return round(min(rate, cap) if cap else rate, 2)


def set_latest(path: Path) -> None:
    from code.common.fileio import write_text

    write_text(paths.logs_dir() / "LATEST", str(path.resolve()) + "\n")


def metric_text(m: dict) -> str:
    """The headline figure of a run as the tables print it ("-" for an accuracy run)."""
    from code.common import scenarios

    if m.get("test_mode") == "AccuracyOnly":
        return "-"
    tok = m.get("tokens")
    if tok and tok.get("tokens_per_second") is not None:      # an LLM: tokens/s, and TTFT/TPOT against their bounds
        out = f"{tok['tokens_per_second']:.2f} tokens/s"
        sc = scenarios.get(m.get("scenario", "Offline"))
        if sc.latency_sized:                                 # SingleStream: its latency first
            out = sc.format_metric(m.get("metric_value")) + f", {out}"
        if tok.get("ttft_p99_ns") is not None:
            def ms(v):
                return "?" if v is None else f"{v / 1e6:.4g}"
            out += (f"; TTFT p99 {ms(tok['ttft_p99_ns'])}/{ms(tok.get('ttft_limit_ns'))} ms"
                    f", TPOT p99 {ms(tok['tpot_p99_ns'])}/{ms(tok.get('tpot_limit_ns'))} ms")
        return out
    return scenarios.get(m.get("scenario", "Offline")).format_metric(m.get("metric_value"))


def run_notes(m: dict) -> list[str]:
    """What a table's note column says of a run: --fast, its audit, its error, why it is INVALID."""
    note = []
    if m.get("fast"):
        note.append("--fast (not submittable)")
    if m.get("audit_test"):
        note.append(m["audit_test"])
    if m.get("error"):
        note.append(m["error"][:80])
    for why in m.get("invalid_reasons") or ():
        note.append(why.split(";")[0][:100])
    return note


def table(records: Iterable[dict]) -> str:
    rows = [("system", "benchmark", "scenario", "mode", "result", "metric", "accuracy", "note")]
    metas = list(records)
    for m in metas:
        acc = m.get("accuracy") or {}
        metrics = acc.get("metrics") or {}
        acc_s = ", ".join(f"{k}={v}" for k, v in metrics.items() if k not in ("good", "total")) or "-"
        if acc.get("passed") is not None:
            acc_s += " PASS" if acc["passed"] else " FAIL"
        result = m.get("result_validity") or "-" if m.get("status") == "ok" else "ERROR"
        rows.append((m.get("system_name", "?"), m.get("benchmark", "?"), m.get("scenario", "?"),
                     m.get("test_mode", "?").replace("Only", ""), result, metric_text(m), acc_s,
                     "; ".join(run_notes(m))))
    from code.common.power.sampler import text as power_text

    if any((m.get("power") or {}).get("available") for m in metas):     # a column only where a run measured it
        rows = [r + (c,) for r, c in zip(rows, ["power (informative)"] + [power_text(m.get("power")) for m in metas])]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
