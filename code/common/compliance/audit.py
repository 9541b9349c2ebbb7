"""Compliance audits: run TEST01/TEST04/TEST06/TEST07/TEST08/TEST09 for one benchmark x scenario and verify them.

TEST08 (dlrm-v3) is verified against the accuracy run alone: each answer its performance-mode run logged must have
the accuracy run's answer for the same (ts_idx, query_idx), its NE within 0.1% of that one's.

TEST06, TEST07 and TEST09 judge the audit run's own log (no reference run): TEST07 scores a performance-mode run
over the benchmark's compliance set against the audit.config's threshold (the benchmark's ``audit_score``), TEST09
the mean output length over the whole performance set against its bounds. A variant whose sets are not the official
ones (tiny) supplies its own sample counts and thresholds (``Benchmark.audit_overrides``); such an audit is marked
``audit_official_config: false``.

``run_audit(settings_or_benchmark, "TEST01")``:

1. finds the reference runs the submission will use (the same choice ``make update_results``
   makes from build/logs: best VALID performance run, latest passing accuracy run) and stops
   early, with the command to run, when one is missing;
2. runs one PerformanceOnly LoadGen test through ``code.common.harness.runner.run_one`` with the
   test's audit.config (the runner writes it into the child's working directory and removes it
   afterwards); its RunControl names the audit test, so the runner derates the Server target QPS
   by ``audit_server_qps_factor`` (0.92);
3. verifies the result (``verify_audit_dir``) and writes verify_accuracy.txt /
   verify_performance.txt in the official format plus verification.json; with
   $MLPERF_INFERENCE_DIR set it also runs the official run_verification.py and records any
   disagreement as an error.

Logs: build/compliance_logs/<TEST>/<system_name>/<log_name>/<scenario>/ (each audit of that key
replaces it whole; the runner stages the run beside it and renames it into place).
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from code.common import paths, scenarios
from code.common.compliance import audit_config as ac
from code.common.compliance import official, verify
from code.common.results.loadgen_logs import read_accuracy_entries
from code.common.errors import HarnessError, RunError
from code.common.fileio import sha256_file, write_json, write_text
from code.common import rounds
from code.common.rounds.model import TEST08_NE_TOLERANCE
from code.common.results.accuracy_text import values as accuracy_values
from code.common.results.selection import Run, choose, scan


def log_dir_for(test: str, system_name: str, benchmark: str, scenario: str) -> Path:
    return paths.compliance_logs_dir() / test / system_name / benchmark / scenario


def _settings_of(target: Any):
    return getattr(target, "settings", target)


def reference_runs(system_name: str, benchmark: str, scenario: str, *, roots=None,
                   round_min_ms: int = 600_000, why: list | None = None,
                   allow: tuple[str, ...] = ()) -> tuple[Run | None, Run | None]:
    """(performance run, accuracy run) the submission would stage for this key, or None each.
    ``why``: if given, receives (run, reason) for every run of this key that was not chosen."""
    runs, _ = scan(roots or [paths.logs_dir()])
    runs = [r for r in runs if r.key == (system_name, benchmark, scenario)]
    sel = choose(runs, round_min_ms, allow)     # a smoke audit (allow=("smoke",)) is verified against smoke runs
    key = (system_name, benchmark, scenario)
    if why is not None:
        why.extend(sel.skipped)
    return sel.performance.get(key), sel.accuracy.get(key)


def _missing_ref(kind: str, benchmark: str, scenario: str, system_name: str, skipped: list) -> HarnessError:
    mode = "PerformanceOnly" if kind == "performance" else "AccuracyOnly"
    tried = [(r, w) for r, w in skipped if r.mode == mode]
    detail = f" (latest of {len(tried)} skipped: {max(tried, key=lambda x: x[0].when)[1]})" if tried else ""
    return HarnessError(f"no usable {kind} run of {benchmark} {scenario} on {system_name} in {paths.logs_dir()}"
                        f"{detail}; a compliance audit is verified against it",
                        f"make run_harness RUN_ARGS=\"--benchmarks={benchmark} --scenarios={scenario} --test_mode={mode}\"")


# --- verification ------------------------------------------------------------------------------------

def _fallback_test01(audit_dir: Path, ref_acc_dir: Path, rb: rounds.RoundBenchmark, scorer) -> dict:
    """Non-deterministic fallback: score the audit's sampled log and the matching subset of the
    accuracy-mode log; pass if every metric is within the round's delta (checker rule)."""
    out = audit_dir / "accuracy"
    out.mkdir(exist_ok=True)
    test_entries = read_accuracy_entries(audit_dir / "mlperf_log_accuracy.json")
    wanted = {e["qsl_idx"] for e in test_entries}
    seen, baseline = set(), []
    for e in read_accuracy_entries(ref_acc_dir / "mlperf_log_accuracy.json"):
        if e["qsl_idx"] in wanted and e["qsl_idx"] not in seen:
            seen.add(e["qsl_idx"])
            baseline.append(e)
    res: dict[str, Any] = {"applied": True, "passed": False, "metrics": {}, "problems": []}
    if scorer is None:
        res["problems"].append("no benchmark available to score the logs")
        return res
    with tempfile.TemporaryDirectory(prefix="test01-baseline-") as tmp:
        base_log = Path(tmp) / "mlperf_log_accuracy_baseline.json"
        base_log.write_text(json.dumps(baseline))
        texts = {}
        for name, log in (("baseline", base_log), ("compliance", audit_dir / "mlperf_log_accuracy.json")):
            d = Path(tmp) / name
            d.mkdir()
            try:
                r = scorer(str(log), str(d))
            except Exception as e:  # noqa: BLE001 - a scorer failure fails the fallback, with the reason
                res["problems"].append(f"scoring the {name} log failed: {type(e).__name__}: {e}")
                return res
            texts[name] = (r or {}).get("text") or ((d / "accuracy.txt").read_text() if (d / "accuracy.txt").exists() else "")
    write_text(out / "baseline_accuracy.txt", texts["baseline"])
    write_text(out / "compliance_accuracy.txt", texts["compliance"])
    base = accuracy_values(texts["baseline"], rb.accuracy_metrics)
    comp = accuracy_values(texts["compliance"], rb.accuracy_metrics)
    ok = True
    for m in rb.accuracy_metrics:
        b, c = base.get(m, 0.0), comp.get(m, 0.0)
        if not b or not c:
            ok = False
            res["problems"].append(f"{m}: baseline {b}, compliance {c} (a zero or missing score cannot be compared)")
            continue
        delta = abs(1 - b / c) * 100
        allowed = rb.delta_perc(m)
        res["metrics"][m] = {"baseline": b, "compliance": c, "delta_perc": delta, "allowed_perc": allowed}
        if delta > allowed:
            ok = False
            res["problems"].append(f"{m}: baseline {b} vs compliance {c}: delta {delta:.3f}% > {allowed}%")
    res["passed"] = ok
    return res


# audits that judge their own run's log (no reference run of the submission is compared)
SELF_CONTAINED = ("TEST06", "TEST07", "TEST09")


def _test07_09(test: str, audit_dir: Path, rb: rounds.RoundBenchmark, text: str, bench) -> tuple[dict, dict]:
    """(record part, our verdicts) of TEST07 / TEST09, judged with the values of the audit.config the run used."""
    size = verify.audit_config_value(text, "min_query_count")
    if test == "TEST07":
        threshold = verify.audit_config_value(text, "test07_accuracy_threshold")
        metric = rb.accuracy_metrics[0]
        if bench is None:
            raise HarnessError("TEST07 is verified by scoring the audit's log: the benchmark is needed",
                               "make run_audit_test07 RUN_ARGS=\"--benchmarks=... --scenarios=...\"")
        v = verify.test07(audit_dir / "mlperf_log_accuracy.json", bench.audit_score, metric,
                          rb.test07_accuracy_threshold if threshold is None else threshold,
                          int(size or rb.test07_samples))
        write_text(audit_dir / "verify_accuracy.txt", v.text)
        return {"accuracy": {"passed": v.passed, "verdict": v.text.strip().splitlines()[-1], **v.figures}}, \
            {"accuracy": v.passed}
    lo = verify.audit_config_value(text, "test09_min_output_tokens")
    hi = verify.audit_config_value(text, "test09_max_output_tokens")
    dlo, dhi = rb.test09_output_tokens
    v = verify.test09(audit_dir / "mlperf_log_accuracy.json", dlo if lo is None else lo, dhi if hi is None else hi,
                      int(size or rb.dataset_size))
    write_text(audit_dir / "verify_output_len.txt", v.text)
    return {"output_len": {"passed": v.passed, "verdict": v.text.strip().splitlines()[-1], **v.figures}}, \
        {"output_len": v.passed}


def verify_audit_dir(test: str, audit_dir: Path, *, perf_ref: Path | None, acc_ref: Path | None,
                     rb: rounds.RoundBenchmark, scorer=None, run_official: bool = True, scenario: str = "",
                     eos_token_id: int | None = None, audit_config: str = "", bench=None) -> dict:
    """Verify one audit log directory against the reference runs; write verify_*.txt and
    verification.json into it. Returns the verification record:

    - ``passed``: the test's own verdict (TEST01: every sampled result identical and performance
      within bounds; TEST04: performance);
    - ``accepted``: what the submission checker accepts: ``passed``, or for TEST01 a failed
      accuracy comparison excused by the non-deterministic fallback (both subsets score within
      the round's delta) with performance passing.
    """
    audit_dir = Path(audit_dir)
    rec: dict[str, Any] = {"test": test, "errors": [], "reference": {
        "performance": str(perf_ref) if perf_ref else None, "accuracy": str(acc_ref) if acc_ref else None,
        "performance_detail_sha256": sha256_file(perf_ref / "mlperf_log_detail.txt") if perf_ref else None,
        "accuracy_log_sha256": sha256_file(acc_ref / "mlperf_log_accuracy.json") if acc_ref else None}}
    ours: dict[str, bool] = {}
    if test == "TEST01":
        if acc_ref is None:
            raise HarnessError("TEST01 needs the accuracy-mode log of the submission", "make run_harness RUN_ARGS=\"--test_mode=AccuracyOnly ...\"")
        acc = verify.test01_accuracy(acc_ref / "mlperf_log_accuracy.json", audit_dir / "mlperf_log_accuracy.json")
        perf = verify.test01_performance(perf_ref / "mlperf_log_detail.txt", audit_dir / "mlperf_log_detail.txt",
                                         dict(rb.result_field))
        write_text(audit_dir / "verify_accuracy.txt", acc.text)
        write_text(audit_dir / "verify_performance.txt", perf.text)
        rec["accuracy"] = {"passed": acc.passed, "verdict": acc.text.strip().splitlines()[-1], **acc.figures}
        rec["performance"] = {"passed": perf.passed, "verdict": perf.text.strip().splitlines()[-1], **perf.figures}
        rec["fallback"] = None if acc.passed else _fallback_test01(audit_dir, acc_ref, rb, scorer)
        ours = {"accuracy": acc.passed, "performance": perf.passed}
        rec["passed"] = acc.passed and perf.passed
        rec["accepted"] = perf.passed and (acc.passed or bool(rec["fallback"] and rec["fallback"]["passed"]))
    elif test == "TEST06":
        acc = verify.test06(audit_dir / "mlperf_log_accuracy.json", scenario, eos_token_id)
        write_text(audit_dir / "verify_accuracy.txt", acc.text)
        rec["accuracy"] = {"passed": acc.passed, "verdict": acc.text.strip().splitlines()[-1], **acc.figures}
        ours = {"accuracy": acc.passed}
        rec["passed"] = rec["accepted"] = acc.passed
    elif test == "TEST04":
        perf = verify.test04_performance(perf_ref / "mlperf_log_summary.txt", audit_dir / "mlperf_log_summary.txt")
        write_text(audit_dir / "verify_performance.txt", perf.text)
        rec["performance"] = {"passed": perf.passed, "verdict": perf.text.strip().splitlines()[-1], **perf.figures}
        ours = {"performance": perf.passed}
        rec["passed"] = rec["accepted"] = perf.passed
    elif test in ("TEST07", "TEST09"):
        part, ours = _test07_09(test, audit_dir, rb, audit_config, bench)
        rec.update(part)
        rec["passed"] = rec["accepted"] = all(ours.values())
    elif test == "TEST08":
        if acc_ref is None:
            raise HarnessError("TEST08 needs the accuracy-mode log of the submission",
                               "make run_harness RUN_ARGS=\"--test_mode=AccuracyOnly ...\"")
        acc = verify.test08(acc_ref / "mlperf_log_accuracy.json", audit_dir / "mlperf_log_accuracy.json",
                            TEST08_NE_TOLERANCE)
        write_text(audit_dir / "verify_accuracy.txt", acc.text)
        rec["accuracy"] = {"passed": acc.passed, "verdict": acc.text.strip().splitlines()[-2], **acc.figures}
        ours = {"accuracy": acc.passed}
        rec["passed"] = rec["accepted"] = acc.passed
    else:
        raise HarnessError(f"cannot verify {test}", "use TEST01, TEST04, TEST06, TEST07, TEST08 or TEST09")
    root = official.inference_dir() if run_official else None
    if root is not None:
        if test == "TEST06":
            res = official.run_test06(root, audit_dir=audit_dir, scenario=scenario, eos_token_id=eos_token_id)
        elif test in ("TEST07", "TEST09"):
            cmd = bench.official_accuracy_command(root, test) if test == "TEST07" and bench is not None else None
            res = official.run_test07_09(test, root, audit_dir=audit_dir, audit_config=audit_config,
                                         accuracy_command=cmd)
        elif test == "TEST08":
            res = official.run_test08(root, reference_acc=acc_ref, audit_dir=audit_dir,
                                      tolerance=TEST08_NE_TOLERANCE)
        else:
            res = official.run_verification(test, root, reference_perf=perf_ref, reference_acc=acc_ref,
                                            audit_dir=audit_dir)
        rec["official"] = {k: v for k, v in res.items()}
        rec["errors"] += official.disagreements(test, ours, res)
        if rec["errors"]:
            rec["passed"] = rec["accepted"] = False
    write_json(audit_dir / "verification.json", rec)
    return rec


def summary_lines(rec: dict) -> list[str]:
    t = rec["test"]
    lines = []
    if t == "TEST06":
        a = rec["accuracy"]
        lines.append(f"TEST06 first token / EOS / sample length over {a.get('samples', 0)} logged samples: "
                     + ("PASS" if a["passed"] else "FAIL — " + "; ".join(a.get("reasons") or ["see verify_accuracy.txt"])))
        lines += [f"{t} ERROR: {e}" for e in rec.get("errors", [])]
        lines.append(f"{t}: {'TEST PASS' if rec['passed'] else 'TEST FAIL'}")
        return lines
    if t == "TEST08":
        a = rec["accuracy"]
        lines.append(f"TEST08 NE of {a['num_matched']} of {a['num_perf_log_entries']} logged answers matched on "
                     f"(ts_idx, query_idx), {a['num_ne_mismatch']} beyond {a['tolerance']:.2%}, "
                     f"{a['num_unmatched']} unmatched: {'PASS' if a['passed'] else 'FAIL'}")
        lines += [f"{t}: {r}" for r in a.get("reasons") or []]
        lines += [f"{t} ERROR: {e}" for e in rec.get("errors", [])]
        lines.append(f"{t}: {'TEST PASS' if rec['passed'] else 'TEST FAIL'}")
        return lines
    if t in ("TEST07", "TEST09"):
        if t == "TEST07":
            a = rec["accuracy"]
            lines.append(f"TEST07 {a['metric']} over {a['samples']} logged samples: {a['score']} against the threshold "
                         f"{a['threshold']:g}: {'PASS' if a['passed'] else 'FAIL'}")
        else:
            a = rec["output_len"]
            lines.append(f"TEST09 mean output length over {a['samples']} logged samples: {a['mean_output_tokens']:.2f} "
                         f"tokens, allowed [{a['min']:g}, {a['max']:g}]: {'PASS' if a['passed'] else 'FAIL'}")
        lines += [f"{t}: {r}" for r in a.get("reasons") or []]
        lines += [f"{t} ERROR: {e}" for e in rec.get("errors", [])]
        lines.append(f"{t}: {'TEST PASS' if rec['passed'] else 'TEST FAIL'}")
        return lines
    if "accuracy" in rec:
        a = rec["accuracy"]
        lines.append(f"{t} accuracy: {'PASS' if a['passed'] else 'FAIL'} ({a['num_perf_log_qsl_idx_match']} of "
                     f"{a['num_perf_log_entries']} logged samples found, {a['num_perf_log_data_mismatch']} differ, "
                     f"{a['num_missing_qsl_idxs']} missing)")
        fb = rec.get("fallback")
        if fb:
            lines.append(f"{t} accuracy fallback (non-deterministic results): {'PASS' if fb['passed'] else 'FAIL'}"
                         + (f" — {'; '.join(fb['problems'])}" if fb["problems"] else ""))
    p = rec["performance"]
    if "reference_score" in p:
        lines.append(f"{t} performance: {'PASS' if p['passed'] else 'FAIL'} (reference {p['reference_score']:.6g}, "
                     f"audit {p['test_score']:.6g}, threshold {p['threshold']:.0%})")
    else:
        lines.append(f"{t} performance: FAIL ({p.get('verdict', 'see verify_performance.txt')})")
    lines += [f"{t} ERROR: {e}" for e in rec.get("errors", [])]
    lines.append(f"{t}: {'TEST PASS' if rec['passed'] else 'TEST FAIL'}"
                 + (" (accepted through the non-deterministic accuracy fallback)" if rec.get("accepted") and not rec["passed"] else ""))
    return lines


# --- the audit run --------------------------------------------------------------------------------

def run_audit(target: Any, test: str, *, extra_audit_keys: dict | None = None, run_one=None,
              control_over: dict | None = None, log=print) -> dict:
    """Run and verify compliance ``test`` for one benchmark x scenario; returns the verification record.

    ``target``: RunSettings, or a Benchmark (its settings are used and it scores the TEST01
    fallback). ``extra_audit_keys``: test-only additions to audit.config (e.g. a smaller
    min_query_count); such an audit is marked ``audit_official_config: false`` in its metadata.
    ``control_over``: RunControl values for the audit run (``use_cached_responses`` in tests).
    """
    from code.common.benchmarks import implementation
    from code.common.settings import RunControl

    settings = _settings_of(target)
    spec = settings.spec
    rnd = rounds.current(settings.values.get("round"))
    rb = settings.round_entry()
    bench = target if target is not settings else implementation(spec)(settings)
    bench.audit_test = test
    # a set smaller than the official one (the tiny variant's) needs its own sample count and thresholds
    extra_audit_keys = {**bench.audit_overrides(test), **(extra_audit_keys or {})} or None
    text = ac.audit_config(test, rnd, rb, settings.scenario, extra_audit_keys)
    skipped: list = []
    perf_ref, acc_ref = reference_runs(settings.system_name, settings.log_name, settings.scenario,
                                       round_min_ms=rnd.min_duration_ms, why=skipped,
                                       allow=("smoke",) if (control_over or {}).get("smoke") else ())
    if test in SELF_CONTAINED:     # checks the audit run's own log: no reference run is compared
        perf_ref = acc_ref = None
    elif test == "TEST08":         # compared with the accuracy run alone
        perf_ref = None
    elif perf_ref is None:
        raise _missing_ref("performance", spec.name, settings.scenario, settings.system_name, skipped)
    if test in ("TEST01", "TEST08") and acc_ref is None:
        raise _missing_ref("accuracy", spec.name, settings.scenario, settings.system_name, skipped)
    if run_one is None:
        from code.common.harness.runner import run_one
    final = log_dir_for(test, settings.system_name, settings.log_name, settings.scenario)
    if perf_ref is not None:
        log(f"[audit] {test} {spec.name} {settings.scenario}: reference performance run {perf_ref.dir}"
            + (f", accuracy run {acc_ref.dir}" if test == "TEST01" else ""))
    elif acc_ref is not None:
        log(f"[audit] {test} {spec.name} {settings.scenario}: reference accuracy run {acc_ref.dir}")
    if scenarios.get(settings.scenario).runs_as_server:
        log(f"[audit] Server target QPS x {settings.audit_server_qps_factor} (audit_server_qps_factor)")
    control = RunControl(action="run_audit_harness", test_mode="PerformanceOnly", audit_test=test,
                         overwrite=True, **(control_over or {}))   # each audit of a key replaces the last
    # run_one stages the run beside ``final`` and renames it into place when metadata.json is complete
    meta = dict(run_one(settings, control, final, bench.generate_engines(), audit_config=text))
    if extra_audit_keys:
        meta["audit_official_config"] = False
        write_json(final / "metadata.json", meta)
    if meta.get("status") != "ok":
        write_json(final / "verification.json", {"test": test, "passed": False, "accepted": False,
                                                 "errors": [f"audit run failed: {meta.get('error')}"]})
        raise RunError(f"{test} audit run of {spec.name} {settings.scenario} failed: {meta.get('error')}",
                       f"see the logs in {final}")
    scorer = getattr(target, "accuracy", None) if target is not settings else None
    if scorer is None and test == "TEST01":
        scorer = _lazy_scorer(settings)
    eos = bench.eos_token_id() if test == "TEST06" and hasattr(bench, "eos_token_id") else None
    rec = verify_audit_dir(test, final, perf_ref=perf_ref.dir if perf_ref else None,
                           acc_ref=acc_ref.dir if acc_ref else None, rb=rb, scorer=scorer,
                           scenario=settings.scenario, eos_token_id=eos, audit_config=text, bench=bench)
    rec["audit_config"] = text                      # provenance: the file itself is never left behind
    write_json(final / "verification.json", rec)
    for line in summary_lines(rec):
        log(f"[audit] {line}")
    log(f"[audit] logs: {final}")
    return rec


def run_audits(cli: dict, settings: list) -> int:
    """``--action=run_audit_harness``: the audit for every benchmark x scenario; 0 if all pass, else 4."""
    test = cli.get("audit_test")
    failed = []
    over = {k: cli[k] for k in ("verbose", "use_cached_responses", "plant_first_token", "plant_output_limit",
                                "plant_prediction_shift", "smoke") if k in cli}
    for s in settings:
        rec = run_audit(s, test, control_over=over)
        if not rec["accepted"]:
            failed.append(f"{s.benchmark} {s.scenario}")
    if failed:
        print(f"error: {test} failed for {', '.join(failed)}\n  fix: see verify_*.txt under "
              f"{paths.compliance_logs_dir() / test}")
        return 4
    return 0


def _lazy_scorer(settings):
    """Construct the benchmark only if the TEST01 fallback needs to score logs."""
    def score(log_path: str, out_dir: str):
        from code.common.benchmarks import implementation

        return implementation(settings.spec)(settings).accuracy(log_path, out_dir)
    return score
