"""Accuracy runs: every sample scored, the round's accuracy targets, the truncated log with its hash,
and the sample files some benchmarks add (SDXL's images and captions)."""
from __future__ import annotations

from pathlib import Path

from code.common import rounds
from code.common.results import accuracy_text as acc_text
from code.common.submission.checks.findings import Findings, log_basics, read_log, read_text, require, run_record
from code.common.submission.truncate import MAX_TRUNCATED

RUN_FILES = ("mlperf_log_summary.txt", "accuracy.txt", "mlperf_log_accuracy.json")


def _extra_files(f: Findings, a: Path, rnd: rounds.Round, rb: rounds.RoundBenchmark) -> None:
    for sub, stems in rb.extra_accuracy_files.items():
        have = {p.stem for p in (a / sub).glob("*")} if (a / sub).is_dir() else set()
        missing = [s for s in stems if s not in have]
        if missing:
            f.error(a / sub, f"missing {len(missing)} of the {len(stems)} {rnd.version} sample {sub}: "
                             f"{', '.join(s + ('.png' if sub == 'images' else '') for s in missing)}")
        if "captions" not in have and (a / sub).is_dir():
            f.error(a / sub, "missing captions.txt")


def check_accuracy(f: Findings, d: Path, rnd: rounds.Round, rb: rounds.RoundBenchmark) -> None:
    """<scenario>/accuracy against the round entry ``rb`` (the one owner of accuracy targets)."""
    a = d / "accuracy"
    for name in RUN_FILES:
        require(f, a / name)
    run_record(f, a)
    log = read_log(f, a / "mlperf_log_detail.txt")
    if log:
        log_basics(f, log, rnd, "accuracy")
        n = log.get("effective_accuracy_sample_count", log.get("qsl_reported_total_count"))
        if n != rb.accuracy_samples:
            what = "accuracy set" if rb.accuracy_sample_count else "dataset"
            f.error(log.path, f"accuracy run covered {n} samples; the {rb.name} {what} has {rb.accuracy_samples} "
                              "(every sample must be scored)")
    txt = a / "accuracy.txt"
    text = read_text(f, txt) if txt.is_file() else None
    if text is not None:
        found = acc_text.values(text, rb.accuracy_metrics)
        for p in acc_text.judge(found, dict(rb.accuracy_min), dict(rb.accuracy_max)):
            f.error(txt, p)
        for why in acc_text.unofficial(text):
            f.error(txt, f"not an official score: {why}")
        if not acc_text.has_hash(text):
            f.error(txt, "no hash= line: run make truncate_results")
    acc_log = a / "mlperf_log_accuracy.json"
    if acc_log.is_file() and acc_log.stat().st_size > MAX_TRUNCATED:
        f.error(acc_log, "not truncated: run make truncate_results")
    _extra_files(f, a, rnd, rb)
