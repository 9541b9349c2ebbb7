"""``make check_submission``: our pre-flight checks on an exported submission tree, stricter than
the official checker where it is lax, with one plain line per finding.

Checked for every results/<system>/<benchmark>/<scenario>:

- required files (performance, accuracy, compliance, measurements, systems JSON, src/);
- every LoadGen log (performance, accuracy, compliance): no error lines, and performance logs
  ``result_validity`` VALID — the official package checks neither by default;
- min_duration >= 600 s (a --fast run is named as such: it can never be a submission result),
  the round's seeds, performance_sample_count, Offline samples per query, Server latency bound;
- accuracy runs: the full dataset, accuracy inside the round's targets (and the harness's
  BenchmarkSpec.accuracy_targets), a truncated log with its hash, SDXL's sample images;
- compliance: each required test present and passing, the audit seed and sampling target;
- measurements.json fields and systems/<system>.json fields non-empty, no TO FILL placeholders,
  system_type consistent with the benchmarks, all required scenarios present.

With $MLPERF_INFERENCE_DIR set, the official submission_checker of the round is run too and its
summary shown. Run: ``python -m code.common.submission.check [--input build/submission]``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from code.common.cli import ArgumentParser
from code.common import paths
from code.common.compliance.mlperf_log import DetailLog
from code.common.compliance.verify import verdict_line_passed
from code.common.errors import HarnessError
from code.common.submission import accuracy as acc_text
from code.common.submission import mlperf_conf, rounds, sysdesc
from code.common.submission.measurements import TINY_WEIGHTS
from code.common.submission.truncate import MAX_TRUNCATED

MEASUREMENT_FIELDS = ("input_data_types", "retraining", "starting_weights_filename", "weight_data_types",
                      "weight_transformations")
FAST_MIN_DURATION_MS = 60_000


class Findings:
    def __init__(self, base: Path):
        self.base = base
        self.items: list[tuple[str, str, str]] = []

    def _rel(self, p) -> str:
        try:
            return str(Path(p).relative_to(self.base))
        except ValueError:
            return str(p)

    def error(self, where, msg: str) -> None:
        self.items.append(("ERROR", self._rel(where), msg))

    def warn(self, where, msg: str) -> None:
        self.items.append(("WARN", self._rel(where), msg))

    @property
    def errors(self) -> list[tuple[str, str, str]]:
        return [i for i in self.items if i[0] == "ERROR"]

    def lines(self) -> list[str]:
        return [f"{lvl} {where}: {msg}" for lvl, where, msg in self.items]


def _spec_targets(mlperf_name: str) -> tuple:
    try:
        from code.common.benchmarks import all_specs

        for s in all_specs():
            if s.mlperf_name == mlperf_name:
                return s.accuracy_targets
    except Exception:  # noqa: BLE001 - no benchmark packages importable: round targets still apply
        pass
    return ()


def _log(f: Findings, path: Path) -> DetailLog | None:
    if not path.is_file():
        f.error(path, "missing")
        return None
    try:
        return DetailLog(path)
    except OSError as e:
        f.error(path, f"unreadable: {e}")
        return None


def _common_log_checks(f: Findings, log: DetailLog, rnd: rounds.Round, what: str) -> None:
    for e in log.errors():
        f.error(log.path, f"LoadGen error in {what} log: {e}")
    for k, want in rnd.seeds.items():
        got = log.get(f"effective_{k}")
        if got != want:
            f.error(log.path, f"{k} is {got}, the {rnd.version} value is {want} (LoadGen's compiled-in mlperf.conf "
                              "was overridden or another LoadGen was used)")


def _perf_checks(f: Findings, log: DetailLog, rnd: rounds.Round, rb: rounds.RoundBenchmark, scen: str,
                 conf: dict, what: str) -> None:
    _common_log_checks(f, log, rnd, what)
    if log.scenario != scen:
        f.error(log.path, f"{what} log is a {log.scenario or 'unknown'} run in the {scen} directory")
    if log.get("result_validity") != "VALID":
        f.error(log.path, f"{what} result is {log.get('result_validity') or 'missing'}, not VALID")
    md = log.get("effective_min_duration_ms")
    if md is None or int(md) < rnd.min_duration_ms:
        fast = " — this is a --fast (--test_run) run" if md == FAST_MIN_DURATION_MS else ""
        f.error(log.path, f"{what} min_duration is {md} ms, below the required {rnd.min_duration_ms} ms{fast}; "
                          "a shortened run can never be a submission result: rerun without --fast/--min_duration")
    psc = log.get("effective_performance_sample_count")
    if psc is not None and int(psc) < rb.performance_sample_count:
        f.error(log.path, f"{what} performance_sample_count is {psc}, needs >= {rb.performance_sample_count}")
    if scen == "Offline":
        need = mlperf_conf.lookup(conf, rb.loadgen_model, "Offline", "min_query_count")
        spq = log.get("effective_samples_per_query")
        if need and spq is not None and int(spq) < int(need):
            f.error(log.path, f"{what} Offline query has {spq} samples, needs >= {need}")
    if scen == "Server":
        bound = mlperf_conf.lookup(conf, rb.loadgen_model, "Server", "target_latency")
        tl = log.get("effective_target_latency_ns")
        if bound and tl is not None and int(tl) > int(float(bound) * 1e6):
            f.error(log.path, f"{what} Server latency bound {tl} ns exceeds the official {float(bound) * 1e6:.0f} ns")
    if log.get("effective_max_query_count") not in (None, 0):
        f.error(log.path, f"{what} run capped max_query_count at {log.get('effective_max_query_count')}")


def check_scenario(f: Findings, d: Path, rnd: rounds.Round, rb: rounds.RoundBenchmark, scen: str, conf: dict) -> None:
    perf = _log(f, d / "performance" / "run_1" / "mlperf_log_detail.txt")
    if not (d / "performance" / "run_1" / "mlperf_log_summary.txt").is_file():
        f.error(d / "performance" / "run_1" / "mlperf_log_summary.txt", "missing")
    if perf:
        _perf_checks(f, perf, rnd, rb, scen, conf, "performance")
    # accuracy
    a = d / "accuracy"
    for name in ("mlperf_log_summary.txt", "accuracy.txt", "mlperf_log_accuracy.json"):
        if not (a / name).is_file():
            f.error(a / name, "missing")
    alog = _log(f, a / "mlperf_log_detail.txt")
    if alog:
        _common_log_checks(f, alog, rnd, "accuracy")
        n = alog.get("effective_accuracy_sample_count", alog.get("qsl_reported_total_count"))
        if n != rb.dataset_size:
            f.error(alog.path, f"accuracy run covered {n} samples; the {rb.name} dataset has {rb.dataset_size} "
                               "(every sample must be scored)")
    if (a / "accuracy.txt").is_file():
        text = (a / "accuracy.txt").read_text()
        found = acc_text.values(text, rb.accuracy_metrics)
        for p in acc_text.judge(found, dict(rb.accuracy_min), dict(rb.accuracy_max), _spec_targets_for(rb, rnd)):
            f.error(a / "accuracy.txt", p)
        if not acc_text.has_hash(text):
            f.error(a / "accuracy.txt", "no hash= line: run make truncate_results")
    if (a / "mlperf_log_accuracy.json").is_file() and (a / "mlperf_log_accuracy.json").stat().st_size > MAX_TRUNCATED:
        f.error(a / "mlperf_log_accuracy.json", "not truncated: run make truncate_results")
    for sub, stems in rb.extra_accuracy_files.items():
        have = {p.stem for p in (a / sub).glob("*")} if (a / sub).is_dir() else set()
        missing = [s for s in stems if s not in have]
        if missing:
            f.error(a / sub, f"missing {len(missing)} of the {len(stems)} {rnd.version} sample {sub}: "
                             f"{', '.join(s + ('.png' if sub == 'images' else '') for s in missing)}")
        if "captions" not in have and (a / sub).is_dir():
            f.error(a / sub, "missing captions.txt")
    # compliance
    for test in rb.compliance_tests:
        _check_test(f, d / test, test, rnd, rb, scen, conf)
    # measurements
    mj = d / "measurements.json"
    if not mj.is_file():
        f.error(mj, "missing")
    else:
        try:
            m = json.loads(mj.read_text())
        except ValueError as e:
            f.error(mj, f"not JSON: {e}")
            m = {}
        for k in MEASUREMENT_FIELDS:
            if sysdesc.is_empty(m.get(k)):
                f.error(mj, f"field {k} is missing or empty")
        if m.get("starting_weights_filename") == TINY_WEIGHTS:
            f.error(mj, "model_variant=tiny: the tiny seeded model can never be a submission result")
    for name in ("user.conf", "README.md", "mlperf.conf"):
        p = d / name
        if not p.is_file():
            f.error(p, "missing")
        elif name != "user.conf" and p.stat().st_size == 0:
            f.error(p, "empty")
    if (d / "user.conf").is_file() and (d / "user.conf").stat().st_size == 0:
        f.error(d / "user.conf", "empty (the checker requires the user.conf the run used)")


_SPEC_CACHE: dict[str, tuple] = {}


def _spec_targets_for(rb: rounds.RoundBenchmark, rnd: rounds.Round) -> tuple:
    key = next((k for k, v in rnd.benchmarks.items() if v is rb), rb.name)
    if key not in _SPEC_CACHE:
        _SPEC_CACHE[key] = _spec_targets(key)
    return _SPEC_CACHE[key]


def _check_test(f: Findings, t: Path, test: str, rnd, rb, scen, conf) -> None:
    if not t.is_dir():
        f.error(t, f"{test} missing: run make run_audit_{test.lower()} then make update_results")
        return
    vp = t / "verify_performance.txt"
    if not vp.is_file():
        f.error(vp, "missing")
    elif not verdict_line_passed(vp.read_text()):
        f.error(vp, f"{test} performance check did not pass: {vp.read_text().strip().splitlines()[-1]}")
    log = _log(f, t / "performance" / "run_1" / "mlperf_log_detail.txt")
    if log:
        _perf_checks(f, log, rnd, rb, scen, conf, f"{test}")
    if test == "TEST01":
        va = t / "verify_accuracy.txt"
        if log and log.get("effective_accuracy_log_rng_seed") != rnd.audit_accuracy_log_rng_seed:
            f.error(log.path, f"TEST01 accuracy_log_rng_seed is {log.get('effective_accuracy_log_rng_seed')}, "
                              f"the audit value is {rnd.audit_accuracy_log_rng_seed}")
        if log and log.get("effective_accuracy_log_sampling_target") != rb.test01_sampling_target:
            f.error(log.path, f"TEST01 accuracy_log_sampling_target is {log.get('effective_accuracy_log_sampling_target')}, "
                              f"the official value is {rb.test01_sampling_target}")
        if not va.is_file():
            f.error(va, "missing")
        elif not verdict_line_passed(va.read_text()):
            _check_test01_fallback(f, t, rb)
        if not (t / "accuracy" / "mlperf_log_accuracy.json").is_file():
            f.error(t / "accuracy" / "mlperf_log_accuracy.json", "missing")
    if test == "TEST04" and log:
        if log.get("effective_performance_issue_same") is not True or log.get("effective_performance_issue_same_index") != 3:
            f.error(log.path, "TEST04 run did not issue the same sample (performance_issue_same=1, index 3)")


def _check_test01_fallback(f: Findings, t: Path, rb: rounds.RoundBenchmark) -> None:
    a = t / "accuracy"
    base, comp = a / "baseline_accuracy.txt", a / "compliance_accuracy.txt"
    if not (base.is_file() and comp.is_file()):
        f.error(t / "verify_accuracy.txt", "TEST01 accuracy check failed and there is no baseline/compliance "
                                           "accuracy for the non-deterministic fallback")
        return
    b = acc_text.values(base.read_text(), rb.accuracy_metrics)
    c = acc_text.values(comp.read_text(), rb.accuracy_metrics)
    for m in rb.accuracy_metrics:
        if not b.get(m) or not c.get(m):
            f.error(a, f"TEST01 fallback: {m} missing or zero (baseline {b.get(m)}, compliance {c.get(m)})")
            continue
        delta = abs(1 - b[m] / c[m]) * 100
        if delta > rb.delta_perc(m):
            f.error(a, f"TEST01 fallback: {m} differs by {delta:.3f}% (> {rb.delta_perc(m)}%)")
        else:
            f.warn(a, f"TEST01 passed only through the non-deterministic fallback ({m} delta {delta:.3f}%)")


def check_system(f: Findings, path: Path, division: str, submitter: str) -> dict:
    if not path.is_file():
        f.error(path, "missing: run make update_results")
        return {}
    try:
        desc = json.loads(path.read_text())
    except ValueError as e:
        f.error(path, f"not JSON: {e}")
        return {}
    for k in sysdesc.REQUIRED_FIELDS:
        if k not in desc:
            f.error(path, f"field {k} is missing")
        elif sysdesc.is_placeholder(desc[k]):
            f.error(path, f"field {k} still says '{desc[k]}': edit the staged systems JSON and rerun make update_results")
        elif sysdesc.is_empty(desc[k]):
            (f.error if k in sysdesc.MEANINGFUL_FIELDS else f.warn)(path, f"field {k} is empty")
    if str(desc.get("status", "")).lower() not in sysdesc.VALID_STATUS:
        f.error(path, f"status '{desc.get('status')}' is not one of {', '.join(sysdesc.VALID_STATUS)}")
    if desc.get("system_type") not in sysdesc.VALID_SYSTEM_TYPES:
        f.error(path, f"system_type '{desc.get('system_type')}' is not one of {', '.join(sysdesc.VALID_SYSTEM_TYPES)}")
    if str(desc.get("division", "")).lower() != division.lower():
        f.error(path, f"division is '{desc.get('division')}', the directory says '{division}'")
    if str(desc.get("submitter", "")).lower() != submitter.lower():
        f.error(path, f"submitter is '{desc.get('submitter')}', the directory says '{submitter}'")
    if str(desc.get("is_network", "false")).lower() == "true" and division == "closed":
        f.error(path, "is_network is true in the closed division")
    return desc


def check(input_root: Path, *, submitter: str | None = None, version: str | None = None) -> Findings:
    rnd = rounds.current(version)
    conf = mlperf_conf.parse(mlperf_conf.text())
    f = Findings(input_root)
    divisions = [p for p in sorted(input_root.iterdir()) if p.is_dir() and p.name in ("closed", "open", "network")] \
        if input_root.is_dir() else []
    if not divisions:
        f.error(input_root, "no closed/ or open/ submission here: run make export_submission")
        return f
    for div in divisions:
        for sub in sorted(p for p in div.iterdir() if p.is_dir()):
            if submitter and sub.name != submitter:
                continue
            if not (sub / rnd.src_dir).is_dir():
                f.error(sub / rnd.src_dir, f"missing (the harness source; {rnd.version} names it {rnd.src_dir}/)")
            results = sub / "results"
            if not results.is_dir():
                f.error(results, "missing")
                continue
            for system_dir in sorted(p for p in results.iterdir() if p.is_dir()):
                desc = check_system(f, sub / "systems" / f"{system_dir.name}.json", div.name, sub.name)
                stype = str(desc.get("system_type", ""))
                for bench_dir in sorted(p for p in system_dir.iterdir() if p.is_dir()):
                    rb = rnd.by_submission_name(bench_dir.name)
                    if rb is None:
                        f.error(bench_dir, f"'{bench_dir.name}' is not a {rnd.version} benchmark name")
                        continue
                    scens = sorted(p.name for p in bench_dir.iterdir() if p.is_dir())
                    req = rb.required_scenarios(stype) if stype in sysdesc.VALID_SYSTEM_TYPES else None
                    if req is None and stype in sysdesc.VALID_SYSTEM_TYPES:
                        f.error(bench_dir, f"{rb.name} is not a '{stype}' benchmark in {rnd.version} "
                                           f"(edge: {', '.join(rb.edge_scenarios) or '-'}; datacenter: "
                                           f"{', '.join(rb.datacenter_scenarios) or '-'}); fix system_type")
                    elif req and div.name == "closed":
                        missing = [s for s in req if s not in scens]
                        if missing:
                            f.error(bench_dir, f"missing required scenario(s) for {stype}: {', '.join(missing)}")
                        extra = [s for s in scens if s not in req]
                        if extra:
                            f.error(bench_dir, f"scenario(s) not part of {rb.name} for {stype}: {', '.join(extra)}")
                    for scen in scens:
                        check_scenario(f, bench_dir / scen, rnd, rb, scen, conf)
    return f


def run_official_checker(input_root: Path, submitter: str | None, version: str, inference_dir: Path,
                         timeout: float = 1800) -> tuple[int, list[str]]:
    """Run tools/submission/submission_checker; return (exit code, its ERROR and summary lines)."""
    tools = inference_dir / "tools" / "submission"
    if not (tools / "submission_checker" / "main.py").is_file():
        raise HarnessError(f"{inference_dir} has no tools/submission/submission_checker",
                           "point MLPERF_INFERENCE_DIR at a current mlcommons/inference checkout")
    with tempfile.TemporaryDirectory(prefix="official-checker-") as tmp:
        cmd = [sys.executable, "-m", "submission_checker.main", "--input", str(input_root.resolve()),
               "--version", version, "--csv", str(Path(tmp) / "summary.csv")]
        if submitter:
            cmd += ["--submitter", submitter]
        r = subprocess.run(cmd, cwd=tools, capture_output=True, text=True, timeout=timeout)
    out = (r.stdout + r.stderr).splitlines()
    keep = [ln for ln in out if " ERROR]" in ln or "ERROR:" in ln or "SUMMARY" in ln or "Results=" in ln
            or "NoResults" in ln or "Traceback" in ln or "Error:" in ln
            or (" WARNING]" in ln and "not met" in ln)]        # accuracy targets are only warnings there
    return r.returncode, keep


def main(argv=None) -> int:
    p = ArgumentParser(prog="python -m code.common.submission.check")
    p.add_argument("--input", default=str(paths.build_dir() / "submission"))
    p.add_argument("--submitter", default=os.environ.get("SUBMITTER"))
    p.add_argument("--version", default=os.environ.get("MLPERF_ROUND"))
    a = p.parse_args(argv)
    try:
        rnd = rounds.current(a.version)
        f = check(Path(a.input), submitter=a.submitter, version=rnd.version)
        for line in f.lines():
            print(line)
        print(f"[check_submission] ours: {len(f.errors)} errors, {len(f.items) - len(f.errors)} warnings "
              f"({rnd.version}, {a.input})")
        rc = 1 if f.errors else 0
        from code.common.compliance.official import inference_dir

        root = inference_dir()
        if root is not None:
            orc, lines = run_official_checker(Path(a.input), a.submitter, rnd.version, root)
            print(f"[check_submission] official submission_checker --version {rnd.version} (exit {orc}):")
            for line in lines:
                print(f"  {line}")
            rc = rc or (1 if orc else 0)
    except HarnessError as e:
        print(e.render(), file=sys.stderr)
        return e.exit_code
    return rc


if __name__ == "__main__":
    sys.exit(main())
