"""``make check_submission``: our pre-flight checks on an exported submission tree, stricter than
the official checker where it is lax, with one plain line per finding.

Checked for every results/<system>/<benchmark>/<scenario>:

- required files (performance, accuracy, compliance, measurements, systems JSON, src/ or v5.x's code/;
  v5.x keeps compliance/ and measurements/ beside results/);
- every LoadGen log (performance, accuracy, compliance): no error lines, and performance logs
  ``result_validity`` VALID — the official package checks neither by default;
- min_duration >= 600 s (a --fast run is named as such: it can never be a submission result),
  the round's seeds, performance_sample_count, Offline samples per query, Server latency bound;
- accuracy runs: the full dataset, accuracy inside the round's targets (``code.common.rounds``),
  a truncated log with its hash, SDXL's sample images;
- compliance: each required test present and passing, the audit seed and sampling target;
- measurements.json fields and systems/<system>.json fields non-empty, no TO FILL placeholders,
  system_type consistent with the benchmarks, all required scenarios present;
- an endpoints-client result (``checks.endpoints``): the round accepts it, seeds, min_duration and the run's
  own length, TTFT/TPOT, every accuracy sample scored with the benchmark's metrics and targets, its audits.

With $MLPERF_INFERENCE_DIR set, the official submission_checker of the round is run too and its
summary shown. Run: ``make check_submission`` (``python -m code.main --action=check_submission [--submission_dir=build/submission]``).

The checks themselves are in ``code.common.submission.checks`` (one module per concern); this module
walks the tree, runs them per directory, and is the CLI.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from code.common import rounds
from code.common.errors import HarnessError
from code.common.submission import mlperf_conf
from code.common.submission.checks import accuracy, compliance, endpoints, measurements, performance, system
from code.common.submission.endpoints import is_endpoints_dir
from code.common.submission.checks.findings import Findings
from code.common.submission.checks.measurements import MEASUREMENT_FIELDS
from code.common.submission.checks.performance import FAST_MIN_DURATION_MS
from code.common.submission.checks.system import check_system
from code.common.power import nameplate, preflight as power_preflight

__all__ = ["FAST_MIN_DURATION_MS", "MEASUREMENT_FIELDS", "Findings", "check", "check_scenario", "check_system",
           "run_official_checker"]
DIVISIONS = ("closed", "open", "network")


def check_scenario(f: Findings, d: Path, rnd: rounds.Round, rb: rounds.RoundBenchmark, scen: str, conf: dict) -> None:
    """One results/<system>/<benchmark>/<scenario> directory, concern by concern. Before v6.0 the audits
    and measurements of it are in compliance/ and measurements/ trees beside results/ (see export)."""
    if is_endpoints_dir(d):          # an endpoints-client report in place of LoadGen's logs
        endpoints.check_endpoints(f, d, rnd, rb, scen, conf)
        measurements.check_measurements(f, d, run_files=("README.md",))
        return
    performance.check_performance(f, d, rnd, rb, scen, conf)
    power_preflight.check_power_result(f, d / "performance")
    accuracy.check_accuracy(f, d, rnd, rb)
    if rnd.results_hold_compliance:
        compliance.check_compliance(f, d, rnd, rb, scen, conf)
        measurements.check_measurements(f, d)
    else:
        sub, rel = d.parents[3], d.relative_to(d.parents[2])
        compliance.check_compliance(f, sub / "compliance" / rel, rnd, rb, scen, conf)
        measurements.check_measurements(f, sub / "measurements" / rel, f"{rel.parts[0]}_{scen}.json")


def check(input_root: Path, *, submitter: str | None = None, version: str | None = None) -> Findings:
    rnd = rounds.current(version)
    conf = mlperf_conf.parse(mlperf_conf.text())
    f = Findings(input_root)
    divisions = [p for p in sorted(input_root.iterdir()) if p.is_dir() and p.name in DIVISIONS] \
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
                    system.check_scenarios(f, bench_dir, rnd, rb, stype, div.name, scens)
                    for scen in scens:
                        check_scenario(f, bench_dir / scen, rnd, rb, scen, conf)
                if rnd.version in nameplate.ROUNDS:        # v6.1: systems/<system>_power.yaml
                    powered = any(power_preflight.has_power(p) for p in system_dir.glob("*/*/performance"))
                    nameplate.check(f, nameplate.path_for(sub / "systems", system_dir.name), powered, desc)
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


def check_submission(input_root: Path, *, submitter: str | None, version: str | None) -> int:
    """``make check_submission``: our pre-flight, then the official checker where MLPERF_INFERENCE_DIR has it;
    1 if either found an error."""
    rnd = rounds.current(version)
    f = check(input_root, submitter=submitter, version=rnd.version)
    for line in f.lines():
        print(line)
    print(f"[check_submission] ours: {len(f.errors)} errors, {len(f.items) - len(f.errors)} warnings "
          f"({rnd.version}, {input_root})")
    rc = 1 if f.errors else 0
    from code.common.compliance.official import inference_dir

    root = inference_dir()
    if root is not None and f.unreadable:
        print(f"[check_submission] official submission_checker not run: it cannot read "
              f"{', '.join(sorted(set(f.unreadable)))} (fix the errors above first)")
    elif root is not None:
        orc, lines = run_official_checker(input_root, submitter, rnd.version, root)
        print(f"[check_submission] official submission_checker --version {rnd.version} (exit {orc}):")
        for line in lines:
            print(f"  {line}")
        rc = rc or (1 if orc else 0)
    return rc
