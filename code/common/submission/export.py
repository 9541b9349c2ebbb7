"""``make export_submission``: build/submission/<division>/<SUBMITTER>/ in the official layout of
the round, then build/mlperf_submission_<SUBMITTER>.tar.gz (+ .sha1).

v6.x layout (what ``submission_checker --version v6.1`` reads):

    results/<system>/<benchmark>/<scenario>/{performance/run_1, accuracy, TEST01, TEST04,
        measurements.json, user.conf, mlperf.conf, README.md, calibration_process.adoc}
        (an endpoints-client result: config.yaml, performance/result_summary.json, accuracy/accuracy_results.json,
        audit/ in place of the LoadGen logs and TEST dirs; no user.conf / mlperf.conf)
    systems/<system>.json
    src/                      this harness's source (git-tracked and untracked-not-ignored files)
    documentation/            README.md, calibration.md

v5.x layout (``--round=v5.0|v5.1``: the checker's ``MEASUREMENTS_PATH``, ``TEST0x_*_PATH`` and
``SRC_PATH`` for those rounds): the audits and measurements sit in their own trees beside results/,
and the source is code/:

    results/<system>/<benchmark>/<scenario>/{performance/run_1, accuracy}
    compliance/<system>/<benchmark>/<scenario>/{TEST01, TEST04, ...}
    measurements/<system>/<benchmark>/<scenario>/{<system>_<scenario>.json, user.conf, mlperf.conf, README.md, ...}
    systems/<system>.json, code/, documentation/

Only the official files are exported (our metadata.json / verification.json stay in the staged
tree). Accuracy logs must already be truncated (``make truncate_results``). The export is built
beside the old one and swapped in whole.

Run: ``make export_submission`` (``python -m code.main --action=export_submission [--submitter=ORG] [--division=closed]``).
"""
from __future__ import annotations

import hashlib
import subprocess
import tarfile
from pathlib import Path

from code.common import paths
from code.common.errors import HarnessError
from code.common.fileio import (claim_dir, clean_stale_partials, prune_empty_dirs, read_json, staged_dir,
                                staged_path, write_text)
from code.common import rounds
from code.common.results.accuracy_text import has_hash
from code.common.results.selection import test_only
from code.common.submission import endpoints
from code.common.power import result as power_result
from code.common.submission.stage import EXTRA_ACCURACY_DIRS, check_name, staging_root
from code.common.submission.tree import link_or_copy, link_tree, mark_smoke_tree, smoke_allowance
from code.common.submission.truncate import MAX_TRUNCATED

PERF_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json")
ACC_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json", "accuracy.txt")
TEST01_ACC_FILES = ("mlperf_log_accuracy.json", "accuracy.txt", "baseline_accuracy.txt", "compliance_accuracy.txt")
MEASURE_FILES = ("user.conf", "mlperf.conf", "README.md", "calibration_process.adoc")
SRC_EXCLUDE_TOP = ("results", "compliance", "measurements", "build")


def export_root() -> Path:
    return paths.build_dir() / "submission"


def _copy_some(src: Path, dst: Path, names) -> None:
    for n in names:
        if (src / n).is_file():
            link_or_copy(src / n, dst / n)


def _check_submittable(run_dir: Path, allow: tuple[str, ...] = ()) -> None:
    """A staged run made with test-only control values (its metadata.json) is never exported (a smoke tree's
    smoke runs excepted: ``allow``)."""
    md = run_dir / "metadata.json"
    why = test_only(read_json(md, "make update_results"), allow) if md.is_file() else None
    if why:
        raise HarnessError(f"{run_dir}: {why}", "make update_results (it stages only submittable runs)")


def _check_truncated(acc_dir: Path) -> None:
    log, txt = acc_dir / "mlperf_log_accuracy.json", acc_dir / "accuracy.txt"
    if not log.is_file():
        return
    if log.stat().st_size > MAX_TRUNCATED or not (txt.is_file() and has_hash(txt.read_text())):
        raise HarnessError(f"{log} is not truncated ({log.stat().st_size} bytes, "
                           f"{'hash recorded' if txt.is_file() and has_hash(txt.read_text()) else 'no hash in accuracy.txt'})",
                           "make truncate_results")


def source_files(repo: Path) -> list[str]:
    """Files of the harness to ship as src/: git's tracked + untracked-not-ignored files."""
    try:
        r = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, timeout=60)
        names = [n for n in r.stdout.decode().split("\0") if n] if r.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        names = []
    if not names:
        names = [str(p.relative_to(repo)) for top in ("code", "configs", "docs", "scripts", "systems", "tests")
                 for p in (repo / top).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        names += [n for n in ("Makefile", "README.md", "requirements.txt", "requirements-gpu.txt") if (repo / n).is_file()]
    out = []
    for n in names:
        parts = Path(n).parts
        if not parts or parts[0] in SRC_EXCLUDE_TOP or parts[0].startswith("."):
            continue
        if parts[0] == "systems" and len(parts) == 2 and n.endswith(".json"):
            continue                       # staged system descriptions are exported under systems/
        if (repo / n).is_file():
            out.append(n)
    return sorted(set(out))


def export(*, submitter: str, division: str, version: str | None = None, root: Path | None = None,
           out: Path | None = None, repo: Path | None = None, tarball: bool = True, log=print) -> Path:
    submitter, division = check_name("submitter", submitter), check_name("division", division)
    rnd = rounds.current(version)
    root = Path(root or staging_root())
    out = Path(out or export_root())
    repo = Path(repo or paths.REPO_ROOT)
    results = root / "results"
    allow = smoke_allowance(root)       # a smoke tree exports its own smoke runs, marked as such
    if not results.is_dir() or not any(p.is_dir() for p in results.iterdir()):   # results/README.md is tracked
        raise HarnessError(f"nothing staged in {results}", "make update_results")
    # this export owns <out>/<division>/<submitter> only: other divisions and submitters stay
    fix = f"move it away, or export elsewhere: make export_submission RUN_ARGS=\"--submission_dir={out}-new\""
    claim_dir(out, lambda _: True, "the export folder", fix)
    final = claim_dir(out / division / submitter, is_export, "the export tree", fix)
    if allow:
        mark_smoke_tree(out)
    tar = tarball_path(out, submitter)
    for folder in (final.parent, tar.parent):   # what a killed export left
        clean_stale_partials(folder)
    if tarball and (tar.is_dir() or tar.is_symlink()):
        raise HarnessError(f"{tar} is a folder: the tarball cannot be written there", f"move it away: mv {tar} {tar}.old")
    made = [d for d in (out, final.parent) if not d.exists()]     # removed again if nothing is exported
    try:
        with staged_dir(final) as sub:
            systems = set()
            for scen_dir in sorted(p for p in results.glob("*/*/*") if p.is_dir()):
                system, bench, scen = scen_dir.relative_to(results).parts
                dst = sub / "results" / system / bench / scen
                if endpoints.is_endpoints_dir(scen_dir):          # an endpoints-client report: no LoadGen logs
                    rb = rnd.by_submission_name(bench)
                    if rb is None or not rnd.accepts_endpoints(rb):
                        raise HarnessError(f"{scen_dir} holds an endpoints-client result, which MLPerf Inference "
                                           f"{rnd.version} does not accept for {bench}",
                                           "export it for the round it was staged for (--round=v6.1)")
                    _check_submittable(scen_dir, allow)
                    endpoints.export_files(scen_dir, dst)
                    systems.add(system)
                elif not (scen_dir / "performance" / "run_1" / "mlperf_log_detail.txt").is_file():
                    # the official checker cannot read a scenario without a performance log (it crashes)
                    log(f"[export_submission] skipped {system}/{bench}/{scen}: no performance run staged")
                    continue
                else:
                    systems.add(system)
                    _check_submittable(scen_dir / "performance" / "run_1", allow)
                    _copy_some(scen_dir / "performance" / "run_1", dst / "performance" / "run_1", PERF_FILES)
                    power_result.export(scen_dir / "performance", dst / "performance")
                    if (scen_dir / "accuracy").is_dir():
                        _check_submittable(scen_dir / "accuracy", allow)
                        _check_truncated(scen_dir / "accuracy")
                        _copy_some(scen_dir / "accuracy", dst / "accuracy", ACC_FILES)
                        for extra in EXTRA_ACCURACY_DIRS:
                            if (scen_dir / "accuracy" / extra).is_dir():
                                link_tree(scen_dir / "accuracy" / extra, dst / "accuracy" / extra)
                rel = Path(system) / bench / scen
                comp_dst, meas_dst, meas_name = ((dst, dst, "measurements.json") if rnd.results_hold_compliance else
                                                 (sub / "compliance" / rel, sub / "measurements" / rel, f"{system}_{scen}.json"))
                comp = root / "compliance" / rel
                for test_dir in sorted(p for p in comp.glob("TEST*") if p.is_dir()) if comp.is_dir() else []:
                    t = comp_dst / test_dir.name
                    _copy_some(test_dir, t, ("verify_accuracy.txt", "verify_performance.txt", "verify_output_len.txt"))
                    _copy_some(test_dir / "performance" / "run_1", t / "performance" / "run_1", PERF_FILES[:2])
                    if (test_dir / "accuracy").is_dir():
                        _check_truncated(test_dir / "accuracy")
                        _copy_some(test_dir / "accuracy", t / "accuracy", TEST01_ACC_FILES)
                meas = root / "measurements" / rel
                if meas.is_dir():
                    _copy_some(meas, meas_dst, MEASURE_FILES)
                    mj = meas / f"{system}_{scen}.json"
                    if mj.is_file():
                        link_or_copy(mj, meas_dst / meas_name)
            if not systems:      # nothing stageable (an empty tree, or results without a VALID performance run)
                raise HarnessError(f"nothing to export: no system x benchmark x scenario under {results} has a staged "
                                   "performance run", "make run_harness RUN_ARGS=\"--benchmarks=... --scenarios=...\" "
                                   "then make update_results")
            for system in sorted(systems):
                sj = root / "systems" / f"{system}.json"
                if sj.is_file():
                    link_or_copy(sj, sub / "systems" / f"{system}.json")
                if (root / "systems" / f"{system}_power.yaml").is_file() and any(      # v6.1 nameplate power
                        (sub / "results" / system).glob("*/*/performance/power")):
                    link_or_copy(root / "systems" / f"{system}_power.yaml", sub / "systems" / f"{system}_power.yaml")
            src = sub / rnd.src_dir                       # src/ from v6.0, code/ before
            for name in source_files(repo):
                link_or_copy(repo / name, src / name)
            write_text(src / "SUBMISSION.md",
                       f"# {submitter} MLPerf Inference {rnd.version} submission source\n\n"
                       "This is the harness that produced the results. Start with README.md (if present) and\n"
                       "each results/<system>/<benchmark>/<scenario>/README.md for the exact commands.\n")
            write_text(sub / "documentation" / "README.md",
                       f"# {submitter} MLPerf Inference {rnd.version}\n\nResults were produced with the open harness "
                       "in `src/`; every scenario directory holds a README.md with the commands to reproduce it.\n")
            write_text(sub / "documentation" / "calibration.md",
                       "# Calibration\n\nSee calibration_process.adoc in each results/<system>/<benchmark>/<scenario>/.\n")
    except BaseException:
        for d in reversed(made):
            prune_empty_dirs(d)
        raise
    log(f"[export_submission] {final} ({rnd.version} layout)")
    if tarball:
        tar = pack(out, submitter, log)
        log(f"[export_submission] {tar}")
    return final


# what export() writes under <division>/<submitter> (code/ before v6.0, src/ from it)
EXPORT_NAMES = frozenset({"results", "systems", "code", "src", "documentation", "compliance", "measurements"})


def is_export(folder: Path) -> bool:
    """Does ``folder`` hold only what an export writes (so a new export of it may replace it)?"""
    return {p.name for p in folder.iterdir()} <= EXPORT_NAMES


def tarball_path(export_dir: Path, submitter: str) -> Path:
    return export_dir.parent / f"mlperf_submission_{submitter}.tar.gz"


def pack(export_dir: Path, submitter: str, log=print) -> Path:
    """mlperf_submission_<SUBMITTER>.tar.gz of ``<division>/<submitter>`` for every division under ``export_dir``
    that holds this submitter (another submitter's trees are not theirs to ship), plus its .sha1."""
    tar = tarball_path(export_dir, submitter)
    trees = sorted(d / submitter for d in export_dir.iterdir() if (d / submitter).is_dir())
    with staged_path(tar, suffix=".tar.gz") as tmp:
        with tarfile.open(tmp, "w:gz") as tf:
            for tree in trees:
                tf.add(tree, arcname=f"{tree.parent.name}/{submitter}")
    if len(trees) > 1:
        log(f"[export_submission] the tarball holds {', '.join(t.parent.name for t in trees)} for {submitter}")
    h = hashlib.sha1()
    with open(tar, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    write_text(tar.with_suffix("").with_suffix(".sha1"), f"{h.hexdigest()}  {tar.name}\n")
    return tar
