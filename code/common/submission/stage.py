"""``make update_results``: stage the chosen runs into results/, compliance/, measurements/ and
systems/ under the staging root (the repository root, or $MLPERF_STAGING_ROOT).

Layout written (NVIDIA-style; ``export`` turns it into the round's official layout):

    results/<system>/<benchmark>/<scenario>/performance/run_1/   LoadGen logs (+ metadata.json)
    results/<system>/<benchmark>/<scenario>/accuracy/            LoadGen logs, accuracy.txt (+ images/)
    results/<system>/<benchmark>/<scenario>/                     or an endpoints-client report (--endpoints_results:
                                                                 config.yaml, performance/result_summary.json,
                                                                 accuracy/accuracy_results.json; see endpoints.py)
    compliance/<system>/<benchmark>/<scenario>/TEST0x/           verify_*.txt, accuracy/, performance/run_1/
    measurements/<system>/<benchmark>/<scenario>/                README.md, user.conf, mlperf.conf,
                                                                 <system>_<scenario>.json, calibration_process.adoc
    systems/<system>.json

<benchmark> is the round's name (``resnet`` for resnet50 in v6.1). Entries of earlier stagings
that no run in build/logs replaces are kept. The new tree is built beside the old one and swapped
in only when complete, so a failure leaves the earlier results/ untouched.

Run: ``python -m code.common.submission.stage [--submitter ORG] [--division closed]``.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from code.common import paths
from code.common.compliance.audit import SELF_CONTAINED, verify_audit_dir
from code.common.errors import HarnessError
from code.common.fileio import clean_stale_partials, make_stage_dir, read_json, write_json, write_text
from code.common import rounds
from code.common.submission import endpoints, measurements, mlperf_conf, sysdesc
from code.common.power import result as power_result
from code.common.results.selection import Run, Selection, choose, scan
from code.common.submission.tree import link_or_copy, link_tree, smoke_allowance, swap_dirs

SUBDIRS = ("results", "compliance", "measurements")
PERF_COPY = ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json", "metadata.json")
ACC_COPY = ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json", "metadata.json")


def staging_root() -> Path:
    return Path(os.environ.get("MLPERF_STAGING_ROOT", paths.REPO_ROOT))


def check_name(kind: str, value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", value or ""):
        raise HarnessError(f"{kind} '{value}' is not a usable directory name",
                           f"use letters, digits, '_', '-', '.', e.g. {kind.upper()}=OpenHarness")
    return value


# accuracy/ subfolders the checker's extra-files check reads (REQUIRED_ACC_BENCHMARK: SDXL's images, Wan's videos)
EXTRA_ACCURACY_DIRS = ("images", "videos")


def _copy_perf(run: Run, dst: Path) -> None:
    for f in PERF_COPY:
        if (run.dir / f).is_file():
            link_or_copy(run.dir / f, dst / f)


def _copy_acc(run: Run, dst: Path) -> None:
    for f in ACC_COPY:
        if (run.dir / f).is_file():
            link_or_copy(run.dir / f, dst / f)
    if (run.dir / "accuracy.txt").is_file():
        shutil.copy2(run.dir / "accuracy.txt", dst / "accuracy.txt")   # copied: truncation appends to it
    else:
        write_text(dst / "accuracy.txt", (run.meta.get("accuracy") or {}).get("text") or "")
    for extra in EXTRA_ACCURACY_DIRS:
        if (run.dir / extra).is_dir():
            link_tree(run.dir / extra, dst / extra)


def _stage_compliance(test: str, audit_dir: Path, dst: Path, perf: Run, acc: Run | None,
                      rb: rounds.RoundBenchmark, notes: list[str], label: str) -> None:
    """Copy one audit into the official per-test layout, re-verifying it if the references changed."""
    vj = audit_dir / "verification.json"
    rec = read_json(vj, f"rerun the audit: make run_audit_{test.lower()}") if vj.is_file() else {}
    ref = rec.get("reference") or {}
    # TEST06/07/09 check the audit run's own log: they never depend on the staged reference runs; TEST08 depends on
    # the accuracy run alone
    same_acc = ref.get("accuracy") == str(acc.dir if acc else None)
    same = test in SELF_CONTAINED or (same_acc if test == "TEST08" else (
        (ref.get("performance") == str(perf.dir)) and (test != "TEST01" or same_acc)))
    work = dst / ".audit"
    link_tree(audit_dir, work)
    if not same:
        for f in ("verify_accuracy.txt", "verify_performance.txt", "verification.json"):
            if (work / f).exists():
                (work / f).unlink()                 # hard links: never write through them
        if test in ("TEST01", "TEST08") and acc is None:
            notes.append(f"{label} {test}: no accuracy run to verify against")
        else:
            cfg = rec.get("audit_config")
            rec = verify_audit_dir(test, work, perf_ref=perf.dir, acc_ref=acc.dir if acc else None, rb=rb, scorer=None)
            if cfg:
                rec["audit_config"] = cfg
                write_json(work / "verification.json", rec)
            notes.append(f"{label} {test}: re-verified against the staged runs: "
                         f"{'TEST PASS' if rec['passed'] else 'TEST FAIL'}"
                         + ("" if rec["passed"] else f" (rerun make run_audit_{test.lower()})"))
    elif not rec.get("accepted", rec.get("passed")):
        notes.append(f"{label} {test}: the audit did not pass (see {audit_dir}/verify_*.txt)")
    elif not rec.get("passed"):
        notes.append(f"{label} {test}: passed only through the non-deterministic accuracy fallback")
    run1 = dst / "performance" / "run_1"
    for f in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
        if (work / f).is_file():
            link_or_copy(work / f, run1 / f)
    for f in ("verify_accuracy.txt", "verify_performance.txt", "verify_output_len.txt", "verification.json"):
        if (work / f).is_file():
            link_or_copy(work / f, dst / f)
    if test == "TEST08" and (work / "mlperf_log_accuracy.json").is_file():
        # the performance run's sampled answers, as the official README has them beside verify_accuracy.txt
        link_or_copy(work / "mlperf_log_accuracy.json", dst / "accuracy" / "mlperf_log_accuracy.json")
        write_text(dst / "accuracy" / "accuracy.txt", "")
    if test in ("TEST07", "TEST09") and (work / "mlperf_log_accuracy.json").is_file():
        # run_verification.py's layout: the whole log under accuracy/ (truncate_results records its hash in
        # accuracy.txt, which holds TEST07's score as the accuracy script printed it)
        accd = dst / "accuracy"
        link_or_copy(work / "mlperf_log_accuracy.json", accd / "mlperf_log_accuracy.json")
        va = work / "verify_accuracy.txt"
        printed = va.read_text().split("\n" + "=" * 80, 1)[0] + "\n" if test == "TEST07" and va.is_file() else ""
        write_text(accd / "accuracy.txt", printed)
    if test == "TEST01":
        accd = dst / "accuracy"
        if (work / "mlperf_log_accuracy.json").is_file():
            link_or_copy(work / "mlperf_log_accuracy.json", accd / "mlperf_log_accuracy.json")
        fb = rec.get("fallback")
        if fb and (work / "accuracy").is_dir():
            for f in ("baseline_accuracy.txt", "compliance_accuracy.txt"):
                if (work / "accuracy" / f).is_file():
                    shutil.copy2(work / "accuracy" / f, accd / f)
        # accuracy.txt must exist for truncation to record the log's hash; it holds the
        # compliance-run score when the fallback was used, else nothing.
        text = (accd / "compliance_accuracy.txt").read_text() if (accd / "compliance_accuracy.txt").exists() else ""
        write_text(accd / "accuracy.txt", text)
    shutil.rmtree(work)


def plan(sel: Selection, rnd: rounds.Round) -> tuple[dict, list[tuple[Run, str]]]:
    """Group chosen runs by staged key (system, round benchmark name, scenario)."""
    staged: dict[tuple[str, str, str], dict] = {}
    dropped = []
    for kind, table in (("performance", sel.performance), ("accuracy", sel.accuracy)):
        for (system, log_name, scen), run in table.items():
            bench = str(run.meta.get("benchmark") or log_name)
            if not rnd.entries(bench):
                dropped.append((run, f"{bench} is not a benchmark of MLPerf Inference {rnd.version}; "
                                     f"{rounds.not_in_round(rnd, bench).fix}"))
                continue
            try:
                rb = rnd.entry(bench, run.meta.get("accuracy_target"),
                               edge=str(run.meta.get("loadgen_model", "")).endswith("-edge"))
            except HarnessError as e:
                dropped.append((run, e.cause))
                continue
            entry = staged.setdefault((system, rb.name, scen), {"rb": rb, "pkg": log_name, "bench": bench})
            entry[kind] = run
    return staged, dropped


def _add_endpoints(staged: dict, sel: Selection, found: dict) -> None:
    """Endpoints-client results (endpoints.read_all) into the plan; each replaces the LoadGen runs of its key."""
    for key, (rb, run) in found.items():
        old = staged.pop(key, {})
        for kind in ("performance", "accuracy"):
            if old.get(kind) is not None:
                sel.skipped.append((old[kind], f"replaced by the endpoints-client result {run.dir}"))
        staged[key] = {"rb": rb, "pkg": run.meta["log_name"], "bench": run.meta["benchmark"], "endpoints": run,
                       "performance": run}


def stage(*, submitter: str, division: str, version: str | None = None, log_roots=None,
          root: Path | None = None, system_info=None, host=None, gpus_extra=None, endpoints_results=(),
          system_name: str | None = None, log=print) -> dict:
    """Stage the best runs, and the endpoints-client reports ``endpoints_results`` (``[[BENCHMARK/]SCENARIO=]DIR``
    each, for the system detected here or ``system_name``); returns a report dict (also printed through ``log``)."""
    submitter, division = check_name("submitter", submitter), check_name("division", division)
    if division not in ("closed", "open"):
        raise HarnessError(f"division '{division}' is not closed or open", "DIVISION=closed")
    rnd = rounds.current(version)
    root = Path(root or staging_root())
    found = endpoints.read_all(endpoints_results, rnd, system_name)     # every report checked before any write
    runs, problems = scan(log_roots or [paths.logs_dir()], strict=True)
    sel = choose(runs, rnd.min_duration_ms, smoke_allowance(root))     # smoke runs only into a smoke tree
    staged, dropped = plan(sel, rnd)
    sel.skipped += dropped
    _add_endpoints(staged, sel, found)
    if not staged:
        raise HarnessError(f"no stageable run found under {', '.join(str(r) for r in (log_roots or [paths.logs_dir()]))}"
                           + (f" ({len(sel.skipped)} skipped: {sel.skipped[0][1]})" if sel.skipped else ""),
                           "make run_harness RUN_ARGS=\"--benchmarks=... --scenarios=... --test_mode=PerformanceOnly\"")
    conf_text = mlperf_conf.text()
    notes = list(problems) + list(sel.notes)
    root.mkdir(parents=True, exist_ok=True)
    clean_stale_partials(root)                 # what a killed update_results left
    tmp = make_stage_dir(root / "staging")
    report = {"staged": [], "skipped": [(str(r.dir), why) for r, why in sel.skipped], "notes": notes,
              "to_fill": {}, "root": str(root)}
    try:
        for name in SUBDIRS:
            (tmp / name).mkdir()
            if (root / name).is_dir():
                link_tree(root / name, tmp / name)
        systems: dict[str, list[Run]] = {}
        for (system, bname, scen), e in sorted(staged.items()):
            rb, perf, acc = e["rb"], e.get("performance"), e.get("accuracy")
            label = f"{system}/{bname}/{scen}"
            res = tmp / "results" / system / bname / scen
            if e.get("endpoints") is not None:
                _stage_endpoints(e["endpoints"], res, tmp / "measurements" / system / bname / scen, rnd)
                # its audits are the report's audit/ (staged with it), never LoadGen audits of an earlier staging
                shutil.rmtree(tmp / "compliance" / system / bname / scen, ignore_errors=True)
                systems.setdefault(system, []).append(perf)
                report["staged"].append({"key": label, "endpoints": str(perf.dir), "performance": str(perf.dir),
                                         "accuracy": str(perf.dir)})
                continue
            if endpoints.is_endpoints_dir(res):
                shutil.rmtree(res)                         # an earlier endpoints result LoadGen runs now replace
            if perf is None:
                notes.append(f"{label}: no VALID performance run; only accuracy staged")
            else:
                if (res / "performance").exists():
                    shutil.rmtree(res / "performance")
                _copy_perf(perf, res / "performance" / "run_1")
                power_result.stage(perf.meta, res / "performance")      # a power run's ranging/, power/, spl.txt
                systems.setdefault(system, []).append(perf)
                meas = tmp / "measurements" / system / bname / scen
                if meas.exists():
                    shutil.rmtree(meas)
                user_conf = (perf.dir / "user.conf").read_text() if (perf.dir / "user.conf").is_file() \
                    else str(perf.meta.get("user_conf") or "")
                write_text(meas / "user.conf", user_conf)
                write_text(meas / "mlperf.conf", conf_text)
                write_text(meas / "README.md", measurements.readme(perf.meta, rnd.version, rb.compliance_tests))
                write_text(meas / "calibration_process.adoc", measurements.calibration(perf.meta))
                write_json(meas / f"{system}_{scen}.json", measurements.measurements_json(perf.meta))
            if acc is None:
                notes.append(f"{label}: no accuracy run; run make run_harness RUN_ARGS=\"--benchmarks={e['bench']} "
                             f"--scenarios={scen} --test_mode=AccuracyOnly\"")
            else:
                if (res / "accuracy").exists():
                    shutil.rmtree(res / "accuracy")
                _copy_acc(acc, res / "accuracy")
            comp = tmp / "compliance" / system / bname / scen
            if perf is not None:
                for test in rb.compliance_tests:
                    audit_dir = paths.compliance_logs_dir() / test / system / e["pkg"] / scen
                    if comp.joinpath(test).exists():
                        shutil.rmtree(comp / test)
                    if not (audit_dir / "mlperf_log_detail.txt").is_file():
                        notes.append(f"{label}: {test} not run; run make run_audit_{test.lower()} "
                                     f"RUN_ARGS=\"--benchmarks={e['bench']} --scenarios={scen}\"")
                        continue
                    _stage_compliance(test, audit_dir, comp / test, perf, acc, rb, notes, label)
            report["staged"].append({"key": label, "performance": str(perf.dir) if perf else None,
                                     "accuracy": str(acc.dir) if acc else None})
        # system descriptions
        desc_out = {}
        for system, perf_runs in systems.items():
            desc_out[system] = _system_desc(system, perf_runs, rnd, staged, root, submitter, division,
                                            system_info, host, gpus_extra)
            report["to_fill"][system] = sysdesc.to_fill(desc_out[system])
        swap_dirs(tmp, root, SUBDIRS)
        for system, desc in desc_out.items():
            write_json(root / "systems" / f"{system}.json", desc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _print_report(report, log)
    return report


def _stage_endpoints(run: Run, res: Path, meas: Path, rnd: rounds.Round) -> None:
    """One endpoints-client report: its files into the results scenario directory, measurements beside."""
    endpoints.stage_files(run, res)
    if meas.exists():
        shutil.rmtree(meas)
    write_text(meas / "README.md", endpoints.readme(run.meta, rnd.version))
    write_text(meas / "calibration_process.adoc", measurements.calibration(run.meta))
    write_json(meas / f"{run.meta['system_name']}_{run.meta['scenario']}.json",
               measurements.measurements_json(run.meta))


def _system_desc(system, perf_runs, rnd, staged, root, submitter, division, system_info, host, gpus_extra):
    benches = [e["rb"] for (s, _, _), e in staged.items() if s == system]
    scen_by_bench: dict[str, set[str]] = {}
    for (s, b, sc) in staged:
        if s == system:
            scen_by_bench.setdefault(b, set()).add(sc)
    software: dict[str, str] = {}
    for r in perf_runs:
        for k, v in (r.meta.get("versions") or {}).items():
            if v:
                software[k] = str(v)
    record = _machine_record(system, perf_runs) if None in (system_info, host, gpus_extra) else {}
    if system_info is None:
        from code.common.systems.facts import info_of

        system_info = info_of(record["info"])
    existing_path = root / "systems" / f"{system}.json"
    fix = f"fix {existing_path} (or delete it to start again from the detected values), then rerun make update_results"
    existing = read_json(existing_path, fix) if existing_path.is_file() else None
    wrong = sysdesc.field_problems(existing or {})
    if wrong:
        raise HarnessError(f"{existing_path}: {'; '.join(wrong)}", fix)
    detected = sysdesc.describe(
        division=division, submitter=submitter, system_type=sysdesc.system_type_for(benches, scen_by_bench),
        system_info=system_info, host=host if host is not None else record.get("host") or {},
        gpus_extra=gpus_extra if gpus_extra is not None else record.get("gpus_extra") or [], software=software,
        backends={str(r.meta.get("backend")) for r in perf_runs if r.meta.get("backend")},
        harness_version=_harness_version(),
        nodes=max([int((r.meta.get("executor") or {}).get("node_count") or 1) for r in perf_runs] or [1]))
    return sysdesc.merge(detected, existing, division=division, submitter=submitter)


def _machine_record(system: str, perf_runs) -> dict:
    """The machine the system's newest performance run recorded (metadata.json "machine"): the description
    is of the machine that ran, wherever staging runs."""
    recs = [r for r in perf_runs if (r.meta.get("machine") or {}).get("info")]
    if not recs:
        raise HarnessError(f"no staged performance run of {system} records the machine it ran on (metadata.json "
                           f"\"machine\"; runs made before this harness version lack it): "
                           f"{', '.join(str(r.dir) for r in perf_runs)}",
                           "run the performance runs again with this version (make run_harness RUN_ARGS=\"...\"), "
                           "then stage")
    return max(recs, key=lambda r: r.when).meta["machine"]


def _harness_version() -> str:
    head = paths.REPO_ROOT / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            ref = (paths.REPO_ROOT / ".git" / ref[5:]).read_text().strip()
        return f"(git {ref[:12]})"
    except OSError:
        return ""


def _print_report(report: dict, log) -> None:
    log(f"[update_results] staged into {report['root']}:")
    for s in report["staged"]:
        if s.get("endpoints"):
            log(f"  {s['key']}: endpoints-client report {s['endpoints']}")
            continue
        log(f"  {s['key']}: performance {s['performance'] or '-'}; accuracy {s['accuracy'] or '-'}")
    if report["skipped"]:
        log("[update_results] skipped runs:")
        for d, why in report["skipped"]:
            log(f"  {d}: {why}")
    for n in report["notes"]:
        log(f"[update_results] note: {n}")
    for system, fields in report["to_fill"].items():
        if fields:
            log(f"[update_results] systems/{system}.json: fill in {', '.join(fields)} (edit the file; "
                "your values are kept by later runs of make update_results)")
