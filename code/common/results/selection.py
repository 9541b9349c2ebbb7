"""Pick, per system x benchmark x scenario, the runs a submission is built from.

Reads only each run's ``metadata.json`` (written by the runner next to LoadGen's logs), never
stdout. Rules:

- performance: status "ok", LoadGen VALID, no LoadGen error lines, the log files present. Among
  those, full-length runs (not --fast, min_duration >= the round's) beat short ones, then the best
  headline metric wins (highest samples/s for Offline/Server, lowest latency otherwise).
- accuracy: status "ok", no LoadGen error lines; the latest run whose accuracy passed. If none
  passed, the latest completed one is chosen and flagged (the pre-flight check will fail it).
- reference-model runs beat tiny-variant runs for the same key.

Everything not chosen is reported with the reason, so ``make update_results`` can say why.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Iterable

from code.common import scenarios
from code.common.errors import HarnessError
from code.common.results import accuracy_text
from code.common.settings import RunControl

PERF_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")
ACC_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json")


@dataclasses.dataclass
class Run:
    dir: Path
    meta: dict

    @property
    def key(self) -> tuple[str, str, str]:
        return (str(self.meta.get("system_name")), str(self.meta.get("log_name") or self.meta.get("benchmark")),
                str(self.meta.get("scenario")))

    @property
    def mode(self) -> str:
        return str(self.meta.get("test_mode"))

    @property
    def when(self) -> float:
        """Finish time (epoch seconds) from metadata: a number or an ISO-8601 string; 0 if unknown."""
        v = self.meta.get("finished") or self.meta.get("started") or 0
        try:
            return float(v)
        except (TypeError, ValueError):
            pass
        try:
            return dt.datetime.fromisoformat(str(v)).timestamp()
        except ValueError:
            return 0.0

    @property
    def min_duration_ms(self) -> int | None:
        v = (self.meta.get("effective") or {}).get("effective_min_duration_ms")
        return int(v) if v is not None else None

    def short(self, round_min_ms: int) -> bool:
        md = self.min_duration_ms
        return bool(self.meta.get("fast")) or (md is not None and md < round_min_ms)

    @property
    def tiny(self) -> bool:
        return self.meta.get("model_variant") == "tiny"

    def __str__(self) -> str:
        return str(self.dir)


@dataclasses.dataclass
class Selection:
    performance: dict[tuple[str, str, str], Run] = dataclasses.field(default_factory=dict)
    accuracy: dict[tuple[str, str, str], Run] = dataclasses.field(default_factory=dict)
    skipped: list[tuple[Run, str]] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    def keys(self) -> list[tuple[str, str, str]]:
        return sorted(set(self.performance) | set(self.accuracy))


# Fields of a run record that selection and staging compute with, and the type each must have: a record edited
# by hand to hold another type is named (scan), never an internal error later.
_INT = "an integer"
META_FIELDS = {("effective", "effective_min_duration_ms"): _INT, ("executor", "node_count"): _INT}


def meta_problem(meta: dict) -> str | None:
    """Why a run record's fields have the wrong type (the first such field), or None."""
    for (outer, key), want in META_FIELDS.items():
        sub = meta.get(outer)
        if sub is None:
            continue
        if not isinstance(sub, dict):
            return f"field {outer} is {type(sub).__name__}, not an object"
        v = sub.get(key)
        if v is not None and want == _INT and (isinstance(v, bool) or not isinstance(v, int)):
            return f"field {outer}.{key} is {v!r}, not {want}"
    return None


def scan(roots: Iterable[str | Path], strict: bool = False) -> tuple[list[Run], list[str]]:
    """Every run under ``roots`` (any depth) with a readable metadata.json; unreadable ones reported. A record whose
    fields have the wrong type (meta_problem: edited by hand) is reported too, or with ``strict`` (staging, which
    must not choose among runs whose records lie) a HarnessError naming the file and the field."""
    runs, problems = [], []
    for root in roots:
        root = Path(root)
        if not root.exists():
            continue
        for md in sorted(root.rglob("metadata.json")):
            if any(part.endswith(".partial") for part in md.relative_to(root).parts):
                continue                   # a run still being written, or one whose owner died
            try:
                meta = json.loads(md.read_text())
                if not isinstance(meta, dict) or "test_mode" not in meta:
                    raise ValueError("not a run metadata file")
            except (OSError, ValueError) as e:
                problems.append(f"{md}: unreadable metadata ({e})")
                continue
            why = meta_problem(meta)
            if why and strict:
                raise HarnessError(f"{md}: {why}", f"correct it from the LoadGen logs beside it (or move that run "
                                                   "out of the logs folder), then rerun make update_results")
            if why:
                problems.append(f"{md}: {why}")
                continue
            runs.append(Run(md.parent, meta))
    return runs, problems


def test_only(meta: dict, allow: tuple[str, ...] = ()) -> str | None:
    """Why a run made with test-only control values (metadata.json ``control``) can never be submitted, or None.
    ``allow``: control names not counted (``smoke`` where a smoke plan stages its own runs into a smoke tree)."""
    bad = RunControl.not_submittable(meta.get("control"), allow) if isinstance(meta, dict) else []
    return f"made with {', '.join(bad)} (test-only; never submittable): rerun without it" if bad else None


def _why_not(run: Run, files: tuple[str, ...], audit_note: str, allow: tuple[str, ...] = ()) -> str | None:
    """What rules a run out in either mode, or None."""
    m = run.meta
    if m.get("audit_test"):
        return f"compliance audit run ({m['audit_test']}){audit_note}"
    if m.get("status") != "ok":
        return f"run failed: {m.get('error') or 'status ' + str(m.get('status'))}"
    if m.get("loadgen_errors"):
        return f"LoadGen logged errors: {m['loadgen_errors'][0]}"
    why = test_only(m, allow)
    if why:
        return why
    missing = [f for f in files if not (run.dir / f).is_file()]
    if missing:
        return f"missing {', '.join(missing)}"
    return None


def _why_not_performance(run: Run, allow: tuple[str, ...] = ()) -> str | None:
    m = run.meta
    if m.get("status") == "ok" and not m.get("audit_test") and (m.get("result_validity") != "VALID"
                                                                  or not m.get("valid", False)):
        lines = m.get("invalid_reasons") or (m.get("early_stopping") or {}).get("lines") or []
        extra = f" ({'; '.join(str(x) for x in lines[:2])})" if lines else ""
        return f"LoadGen result {m.get('result_validity') or 'unknown'}{extra}"
    why = _why_not(run, PERF_FILES, ", not a submission run", allow)
    if why is None and (m.get("power_run") or {}).get("role") == "ranging":
        return "the ranging run of a power measurement (its testing run is the result)"
    if why is None and m.get("metric_value") is None:
        return "no headline metric in metadata"
    if why is None and (isinstance(m["metric_value"], bool) or not isinstance(m["metric_value"], (int, float))):
        return f"metadata.json metric_value is {m['metric_value']!r}, not a number (edited by hand?)"
    return why


def _why_not_accuracy(run: Run, allow: tuple[str, ...] = ()) -> str | None:
    why = _why_not(run, ACC_FILES, "", allow)
    if why is not None:
        return why
    rec = run.meta.get("accuracy") or {}
    txt = run.dir / "accuracy.txt"
    if not txt.is_file() and not rec.get("text"):
        return "no accuracy.txt (accuracy was not scored)"
    try:
        text = accuracy_text.read(txt) if txt.is_file() else ""
    except HarnessError as e:
        return e.cause
    reasons = list(rec.get("unofficial") or []) + accuracy_text.unofficial(text)
    if reasons:
        return f"not an official score: {reasons[0]}" + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else "")
    return None


def _acc_passed(run: Run) -> bool | None:
    return (run.meta.get("accuracy") or {}).get("passed")


def choose(runs: Iterable[Run], round_min_duration_ms: int = 600_000, allow: tuple[str, ...] = ()) -> Selection:
    """``allow``: test-only control names not held against a run (test_only); only a smoke tree passes one."""
    sel = Selection()
    perf_cands: dict[tuple, list[Run]] = {}
    acc_cands: dict[tuple, list[Run]] = {}
    for run in runs:
        if run.mode == "PerformanceOnly":
            why = _why_not_performance(run, allow)
            (sel.skipped.append((run, why)) if why else perf_cands.setdefault(run.key, []).append(run))
        elif run.mode == "AccuracyOnly":
            why = _why_not_accuracy(run, allow)
            (sel.skipped.append((run, why)) if why else acc_cands.setdefault(run.key, []).append(run))
        else:
            sel.skipped.append((run, f"test_mode {run.mode} is not staged"))

    for key, cands in perf_cands.items():
        sign = 1.0 if scenarios.get(key[2]).lower_is_better else -1.0
        cands.sort(key=lambda r: (r.tiny, r.short(round_min_duration_ms), not r.meta.get("power_run"),
                                  sign * float(r.meta["metric_value"]), -r.when, str(r.dir)))
        best = cands[0]
        sel.performance[key] = best
        for r in cands[1:]:
            sel.skipped.append((r, f"not the best VALID run ({r.meta.get('metric')}={r.meta.get('metric_value')} "
                                   f"vs chosen {best.meta.get('metric_value')} in {best.dir})"))
        if best.short(round_min_duration_ms):
            sel.notes.append(f"{'/'.join(key)}: only a short run is available ({best.dir}: min_duration "
                             f"{best.min_duration_ms} ms{', --fast' if best.meta.get('fast') else ''}); "
                             "it can never be a submission result")
        if best.tiny:
            sel.notes.append(f"{'/'.join(key)}: performance run uses the tiny model variant; "
                             "it can never be a submission result")

    for key, cands in acc_cands.items():
        cands.sort(key=lambda r: (r.tiny, _acc_passed(r) is not True, -r.when, str(r.dir)))
        best = cands[0]
        sel.accuracy[key] = best
        for r in cands[1:]:
            why = "accuracy below target" if _acc_passed(r) is False else "a newer or passing run was chosen"
            sel.skipped.append((r, f"{why} (chosen: {best.dir})"))
        if _acc_passed(best) is not True:
            sel.notes.append(f"{'/'.join(key)}: no accuracy run passed its targets; staged the latest one "
                             f"({best.dir}, passed={_acc_passed(best)}); check_submission will fail it")
    return sel
