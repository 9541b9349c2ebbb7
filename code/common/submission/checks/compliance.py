"""Compliance audits: each test the round requires, present and passing, with the audit's settings."""
from __future__ import annotations

from pathlib import Path

from code.common import rounds
from code.common.compliance.verify import verdict_line_passed
from code.common.results import accuracy_text as acc_text
from code.common.submission.checks.findings import Findings, read_log, read_text, require
from code.common.submission.checks.performance import perf_checks

TEST04_ISSUE_INDEX = 3   # the sample TEST04 issues again and again


def check_test01_fallback(f: Findings, t: Path, rb: rounds.RoundBenchmark) -> None:
    """A failed TEST01 accuracy check passes when baseline and compliance accuracy agree within delta."""
    a = t / "accuracy"
    base, comp = a / "baseline_accuracy.txt", a / "compliance_accuracy.txt"
    if not (base.is_file() and comp.is_file()):
        f.error(t / "verify_accuracy.txt", "TEST01 accuracy check failed and there is no baseline/compliance "
                                           "accuracy for the non-deterministic fallback")
        return
    btext, ctext = read_text(f, base), read_text(f, comp)
    if btext is None or ctext is None:
        return
    b = acc_text.values(btext, rb.accuracy_metrics)
    c = acc_text.values(ctext, rb.accuracy_metrics)
    for m in rb.accuracy_metrics:
        if not b.get(m) or not c.get(m):
            f.error(a, f"TEST01 fallback: {m} missing or zero (baseline {b.get(m)}, compliance {c.get(m)})")
            continue
        delta = abs(1 - b[m] / c[m]) * 100
        if delta > rb.delta_perc(m):
            f.error(a, f"TEST01 fallback: {m} differs by {delta:.3f}% (> {rb.delta_perc(m)}%)")
        else:
            f.warn(a, f"TEST01 passed only through the non-deterministic fallback ({m} delta {delta:.3f}%)")


def _check_test01(f: Findings, t: Path, log, rnd: rounds.Round, rb: rounds.RoundBenchmark) -> None:
    va = t / "verify_accuracy.txt"
    if log and log.get("effective_accuracy_log_rng_seed") != rnd.audit_accuracy_log_rng_seed:
        f.error(log.path, f"TEST01 accuracy_log_rng_seed is {log.get('effective_accuracy_log_rng_seed')}, "
                          f"the audit value is {rnd.audit_accuracy_log_rng_seed}")
    if log and log.get("effective_accuracy_log_sampling_target") != rb.test01_sampling_target:
        f.error(log.path, f"TEST01 accuracy_log_sampling_target is {log.get('effective_accuracy_log_sampling_target')}, "
                          f"the official value is {rb.test01_sampling_target}")
    if require(f, va) and not verdict_line_passed(va.read_text()):
        check_test01_fallback(f, t, rb)
    require(f, t / "accuracy" / "mlperf_log_accuracy.json")


def _check_test06(f: Findings, t: Path) -> None:
    """TEST06 as the checker judges it: verify_accuracy.txt says the first-token check passed (or was skipped:
    Offline), the EOS check and the sample-length check passed."""
    va = t / "verify_accuracy.txt"
    if not require(f, va):
        return
    lines = [ln.strip() for ln in va.read_text().splitlines()]
    failed = [name for name, ok in (
        ("first token", "First token check pass: True" in lines or "First token check pass: Skipped" in lines),
        ("EOS", "EOS check pass: True" in lines), ("sample length", "Sample length check pass: True" in lines)) if not ok]
    if failed:
        f.error(va, f"TEST06 {', '.join(failed)} check(s) did not pass: rerun make run_audit_test06")


def _check_test07_09(f: Findings, t: Path, test: str) -> None:
    """TEST07 / TEST08 / TEST09 as the checker judges them: verify_accuracy.txt / verify_output_len.txt holds
    ``TEST PASS``; the audit's log is there."""
    v = t / ("verify_output_len.txt" if test == "TEST09" else "verify_accuracy.txt")
    if require(f, v) and "TEST PASS" not in v.read_text():
        why = [ln[2:] for ln in v.read_text().splitlines() if ln.startswith("# ")]
        f.error(v, f"{test} did not pass{': ' + why[0] if why else ''}: rerun make run_audit_{test.lower()}")
    require(f, t / "accuracy" / "mlperf_log_accuracy.json")


def check_test(f: Findings, t: Path, test: str, rnd: rounds.Round, rb: rounds.RoundBenchmark, scen: str,
               conf: dict) -> None:
    """One audit directory <scenario>/<test>."""
    if not t.is_dir():
        f.error(t, f"{test} missing: run make run_audit_{test.lower()} then make update_results")
        return
    if test == "TEST06":           # the checker reads verify_accuracy.txt only (no performance check)
        _check_test06(f, t)
        return
    if test in ("TEST07", "TEST08", "TEST09"):   # likewise verify_accuracy.txt / verify_output_len.txt
        _check_test07_09(f, t, test)
        return
    vp = t / "verify_performance.txt"
    if require(f, vp) and not verdict_line_passed(vp.read_text()):
        f.error(vp, f"{test} performance check did not pass: {vp.read_text().strip().splitlines()[-1]}")
    log = read_log(f, t / "performance" / "run_1" / "mlperf_log_detail.txt")
    if log:
        perf_checks(f, log, rnd, rb, scen, conf, test)
    if test == "TEST01":
        _check_test01(f, t, log, rnd, rb)
    if test == "TEST04" and log:
        if log.get("effective_performance_issue_same") is not True \
                or log.get("effective_performance_issue_same_index") != TEST04_ISSUE_INDEX:
            f.error(log.path, "TEST04 run did not issue the same sample "
                              f"(performance_issue_same=1, index {TEST04_ISSUE_INDEX})")


def check_compliance(f: Findings, d: Path, rnd: rounds.Round, rb: rounds.RoundBenchmark, scen: str,
                     conf: dict) -> None:
    """Every audit the round requires of ``rb``, under the scenario directory ``d``."""
    for test in rb.compliance_tests:
        check_test(f, d / test, test, rnd, rb, scen, conf)
