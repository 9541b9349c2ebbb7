"""Fault injection for the harness's bad-input promise (issue 27): run each case, print one table.

The promise for bad input: one line giving the cause (``error: ...``), a fix line naming a command
(``  fix: ...``), an exit code other than 0, no traceback, and nothing lost or half-written (files that
were there before are byte-identical; no ``*.partial`` / ``.staging*`` leftovers). Some cases check a
tolerated input instead (exit 0, and the property the case names).

Each case is a small function that builds its own input under one temporary root, runs
``python -m code.main ...`` as a subprocess (cwd = this repository; wall time, exit and peak RSS
recorded), and returns one row: case, exit, first error line, fix named, traceback, intact, verdict.
Nothing is written into the repository; the network is never used (downloads are the tiny variants,
built locally).

    .venv/bin/python scripts/fault_run.py                  # every case, root in a new temporary folder
    .venv/bin/python scripts/fault_run.py --root /tmp/f    # reuse /tmp/f (tiny models built there once)
    .venv/bin/python scripts/fault_run.py --only export    # the cases whose name holds "export"
    .venv/bin/python scripts/fault_run.py --list           # the case names

The table is printed (with rich when installed) and written to <root>/fault_table.json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PY = sys.executable
TINY_RN = ("--benchmarks=resnet50", "--model_variant=tiny")
TINY_LLAMA = ("--benchmarks=llama2_70b", "--model_variant=tiny")
GPU = {"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "pci_id": "0x2BB510DE", "memory_mb": 97887}
COMMAND = re.compile(r"\bmake \w|--\w|\bpython\b|\brm\b|\bmv\b|\bexport \w|\b[A-Z_]{3,}=|\bchmod\b|\bdf\b")


@dataclass
class Run:
    args: list[str]
    exit: int | str
    out: str
    err: str
    wall_s: float
    max_rss_mb: float

    @property
    def text(self) -> str:
        return self.out + "\n" + self.err


@dataclass
class Row:
    case: str
    exit: str
    error: str
    fix: str
    traceback: str
    intact: str
    verdict: str
    note: str = ""
    wall_s: float = 0.0


@dataclass
class Ctx:
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    _exported: dict | None = None

    def tmp(self, name: str) -> Path:
        d = self.root / "cases" / name
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        return d


# --- running the harness -------------------------------------------------------------------------------

def _environ(env: dict[str, str]) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("MLPERF_")}
    return dict(e, PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO), **env)


def start(args: Iterable[str], env: dict[str, str], tag: Path) -> tuple[subprocess.Popen, float]:
    """``python -m code.main args`` in its own session, output into files next to ``tag``."""
    tag.parent.mkdir(parents=True, exist_ok=True)
    out, err = open(f"{tag}.out", "w"), open(f"{tag}.err", "w")
    p = subprocess.Popen([PY, "-m", "code.main", *args], cwd=REPO, env=_environ(env), stdout=out, stderr=err,
                         start_new_session=True)
    out.close(), err.close()
    return p, time.monotonic()


def finish(p: subprocess.Popen, t0: float, args: list[str], tag: Path, timeout: float) -> Run:
    """Wait (os.wait4, for the child's peak RSS) at most ``timeout`` seconds; kill the group past it."""
    code: int | str = "timeout"
    rss = 0.0
    while time.monotonic() - t0 < timeout:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            code, rss = os.waitstatus_to_exitcode(status), ru.ru_maxrss / 1024
            break
        time.sleep(0.05)
    else:
        os.killpg(p.pid, signal.SIGKILL)
        os.wait4(p.pid, 0)
    p.returncode = code if isinstance(code, int) else -9
    wall = time.monotonic() - t0
    return Run(args, code, Path(f"{tag}.out").read_text(errors="replace"), Path(f"{tag}.err").read_text(errors="replace"),
               wall, rss)


def harness(ctx: Ctx, name: str, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Run:
    tag = ctx.root / "runs" / f"{name}-{time.monotonic_ns()}"
    p, t0 = start(args, {**ctx.env, **(env or {})}, tag)
    return finish(p, t0, list(args), tag, timeout)


# --- judging --------------------------------------------------------------------------------------------

def snapshot(*roots: Path) -> dict[str, str]:
    files = [p for r in roots for p in ([r] if r.is_file() else sorted(r.rglob("*"))) if p.is_file()]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def leftovers(*roots: Path) -> list[str]:
    found = []
    for r in roots:
        if r.is_dir():
            found += [str(p) for p in r.rglob("*") if p.name.endswith(".partial") or p.name.startswith(".staging")]
    return found


def first_error(run: Run) -> str:
    for ln in run.text.splitlines():
        if ln.startswith(("error:", "ERROR")):
            return ln
    return ""


def fixes(run: Run) -> list[str]:
    return [m.group(1) for m in re.finditer(r"(?:^\s*fix:|\(fix:)\s*(.*)", run.text, re.M)]


def fix_named(run: Run) -> bool:
    return any(COMMAND.search(f) for f in fixes(run))


def mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def judge(case: str, run: Run, *, before: dict[str, str] | None = None, roots: tuple[Path, ...] = (),
          expect_error: bool = True, needle: str = "", checks: Iterable[tuple[bool, str]] = (),
          note: str = "") -> Row:
    """A row: for an expected error, exit != 0 with an error line (holding ``needle``) and a fix naming a
    command; for a tolerated input, exit 0. Always: no traceback, ``before`` byte-identical, no leftovers."""
    err = first_error(run)
    tb_free = "Traceback" not in run.text
    now = snapshot(*roots) if before is not None else {}
    changed = [k for k in (before or {}) if now.get(k) != before[k]]
    left = leftovers(*roots)
    intact = not changed and not left
    fix = fix_named(run)
    why = []
    if expect_error:
        if run.exit == 0 or run.exit == "timeout":
            why.append(f"exit {run.exit}, expected an error")
        if not err:
            why.append("no error line")
        elif needle and needle not in err:
            why.append(f"error line lacks {needle!r}")
        if not fix:
            said = fixes(run)
            why.append(f"fix names no command: {said[0][:70]!r}" if said else "no fix line")
    elif run.exit != 0:
        why.append(f"exit {run.exit}, expected 0: {(err or run.text.strip()[-160:])}")
    if not tb_free:
        why.append("traceback printed")
    if changed:
        why.append(f"{len(changed)} file(s) changed, e.g. {changed[0]}")
    if left:
        why.append(f"leftover {left[0]}")
    why += [msg for ok, msg in checks if not ok]
    verdict_ok = not why
    text = note if verdict_ok else "; ".join(why) + (f" ({note})" if note else "")
    return Row(case, str(run.exit), err[:90] or "—", mark(fix) if expect_error else "n/a",
               mark(tb_free), mark(intact), mark(verdict_ok), f"{text} [{run.wall_s:.1f}s]", round(run.wall_s, 2))


def skipped(case: str, why: str) -> Row:
    return Row(case, "—", "—", "—", "—", "—", "skipped", why)


# --- shared inputs --------------------------------------------------------------------------------------

def tiny(ctx: Ctx, bench: str) -> None:
    """download_model, download_data, preprocess_data of ``bench``'s tiny variant into the shared scratch (once)."""
    done = Path(ctx.env["MLPERF_SCRATCH_PATH"]) / f".tiny-{bench}.built"
    if done.is_file():
        return
    for action in ("download_model", "download_data", "preprocess_data"):
        r = harness(ctx, f"build-{bench}", f"--action={action}", f"--benchmarks={bench}", "--model_variant=tiny",
                    timeout=1800)
        if r.exit != 0:
            raise RuntimeError(f"building tiny {bench} failed at {action}: {r.text[-2000:]}")
    done.write_text("built\n")


def private_scratch(ctx: Ctx, d: Path, bench: str) -> dict[str, str]:
    """A copy of ``bench``'s tiny scratch that a case may damage, and a build folder of its own."""
    tiny(ctx, bench)
    src, dst = Path(ctx.env["MLPERF_SCRATCH_PATH"]), d / "scratch"
    for part in ("models", "data", "preprocessed_data"):
        if (src / part / bench).exists():
            shutil.copytree(src / part / bench, dst / part / bench)
    if (src / "models" / "llm_tokenizer").exists():
        shutil.copytree(src / "models" / "llm_tokenizer", dst / "models" / "llm_tokenizer")
    return {"MLPERF_SCRATCH_PATH": str(dst), "MLPERF_BUILD_DIR": str(d / "build")}


def private_data(d: Path) -> dict[str, str]:
    shutil.copytree(REPO / "configs", d / "configs")
    shutil.copytree(REPO / "systems", d / "systems")
    return {"MLPERF_CONFIGS_DIR": str(d / "configs"), "MLPERF_SYSTEMS_DIR": str(d / "systems"),
            "MLPERF_FAKE_SYSTEM": json.dumps({"gpus": [GPU]})}


class _Factory:
    def __init__(self, base: Path) -> None:
        self.base = base

    def mktemp(self, name: str) -> Path:
        d = Path(tempfile.mkdtemp(prefix=name, dir=self.base))
        return d


def exported(ctx: Ctx) -> dict:
    """The staged + exported tree of synthetic LoadGen runs that tests/test_submission_pipeline.py builds
    (its ``env`` and ``exported`` fixtures, called here through pytest's wrapped functions)."""
    if ctx._exported is None:
        from tests import test_submission_pipeline as tsp
        from code.common.submission import export, stage, truncate

        base = ctx.root / "submission_fixture"
        base.mkdir(parents=True, exist_ok=True)
        gen = tsp.env.__wrapped__(_Factory(base))
        env = next(gen)               # leaves MLPERF_BUILD_DIR / MLPERF_STAGING_ROOT set in this process
        stage.stage(submitter="OpenHarness", division="closed", log=lambda *_: None)
        truncate.truncate_all(env["root"], log=lambda *_: None)
        export.export(submitter="OpenHarness", division="closed", log=lambda *_: None)
        ctx._exported = env
    return ctx._exported


# --- 1. report ------------------------------------------------------------------------------------------

def case_report_dir_run_logs(ctx: Ctx) -> Row:
    d, ex = ctx.tmp("report_dir_run_logs"), exported(ctx)
    target = d / "logs"
    shutil.copytree(ex["build"] / "logs", target)
    (target / "notes.txt").write_text("keep me\n")
    before = snapshot(d)
    r = harness(ctx, "report", "--action=report", f"--report_logs={ex['build'] / 'logs'}", f"--report_dir={target}")
    return judge("report --report_dir=<run logs + notes>", r, before=before, roots=(d,), needle=str(target),
                 checks=[(sorted(p.name for p in d.iterdir()) == ["logs"], "something new beside the folder")])


def case_report_dir_plain_file(ctx: Ctx) -> Row:
    d, ex = ctx.tmp("report_dir_file"), exported(ctx)
    target = d / "report.html"
    target.write_text("<p>mine</p>\n")
    before = snapshot(d)
    r = harness(ctx, "report", "--action=report", f"--report_logs={ex['build'] / 'logs'}", f"--report_dir={target}")
    return judge("report --report_dir=<plain file>", r, before=before, roots=(d,), needle="is a file")


# --- 2. add_system --------------------------------------------------------------------------------------

def case_add_system_twice(ctx: Ctx) -> Row:
    d = ctx.tmp("add_system_twice")
    env = private_data(d)
    first = harness(ctx, "add_system", "--action=add_system", env=env)
    if first.exit != 0:
        return judge("add_system (1st of 2, no --based_on)", first, expect_error=False)
    before = snapshot(d / "configs", d / "systems")
    again = harness(ctx, "add_system", "--action=add_system", env=env)
    return judge("add_system twice: 2nd changes nothing", again, before=before, roots=(d,), expect_error=False,
                 checks=[("0 file(s) changed" in again.out, "2nd run did not say 0 file(s) changed")])


def case_add_system_force(ctx: Ctx) -> Row:
    d = ctx.tmp("add_system_force")
    env = private_data(d)
    harness(ctx, "add_system", "--action=add_system", env=env)
    forced = harness(ctx, "add_system", "--action=add_system", "--force", env=env)
    selfs = []
    for cfg in (d / "configs").glob("*/*/config.json"):
        for name, block in json.loads(cfg.read_text()).items():
            ext = block.get("extends") if isinstance(block, dict) else None
            if ext and (ext == name or (name.startswith(ext) and name[len(ext):].lstrip("x").isdigit()
                                        and ext.startswith("RTX-PRO"))):
                selfs.append(f"{cfg.relative_to(d)}:{name}")
    return judge("add_system --force: no self-extends", forced, roots=(d,), expect_error=False,
                 checks=[(not selfs, f"self-extends in {selfs[:1]}")])


def case_add_system_broken_config(ctx: Ctx) -> Row:
    d = ctx.tmp("add_system_broken")
    env = private_data(d)
    broken = d / "configs/sdxl/Offline/config.json"
    broken.write_text(broken.read_text().replace("{", "{,", 1))
    before = snapshot(d / "configs", d / "systems")
    r = harness(ctx, "add_system", "--action=add_system", "--based_on=H100-SXM-80GB", env=env)
    return judge("add_system, a broken config.json midway", r, before=before, roots=(d,), needle=str(broken))


# --- 3. memory --------------------------------------------------------------------------------------------

def _memory(ctx: Ctx, case: str, scen: str, *flags: str, env: dict[str, str] | None = None, d: Path) -> Row:
    tiny(ctx, "resnet50")
    r = harness(ctx, "mem", "--action=run_harness", *TINY_RN, f"--scenarios={scen}", f"--log_dir={d / 'logs'}",
                *flags, env=env, timeout=60)
    return judge(case, r, roots=(d,), checks=[(r.wall_s < 20, f"took {r.wall_s:.0f}s"),
                                              (r.max_rss_mb < 2048, f"peak RSS {r.max_rss_mb:.0f} MB")],
                 note=f"peak RSS {r.max_rss_mb:.0f} MB")


def case_mem_min_query_count(ctx: Ctx) -> Row:
    d = ctx.tmp("mem_mqc")
    return _memory(ctx, "Offline --min_query_count=1000000000", "Offline", "--min_query_count=1000000000", d=d)


def case_mem_forced_qps(ctx: Ctx) -> Row:
    d = ctx.tmp("mem_forced")
    return _memory(ctx, "Server --server_target_qps=1e8 --force", "Server", "--server_target_qps=100000000", "--force",
                   d=d)


def case_mem_config_qps(ctx: Ctx) -> Row:
    d = ctx.tmp("mem_config")
    shutil.copytree(REPO / "configs", d / "configs")
    cfg = d / "configs/resnet50/Server/config.json"
    data = json.loads(cfg.read_text())
    data["default"]["model_variant"]["tiny"]["server_target_qps"] = 1e8
    cfg.write_text(json.dumps(data))
    return _memory(ctx, "config.json server_target_qps=1e8 (tiny)", "Server", d=d,
                   env={"MLPERF_CONFIGS_DIR": str(d / "configs")})


# --- 4. exports --------------------------------------------------------------------------------------------

def _export(ctx: Ctx, name: str, out: Path, *flags: str) -> Run:
    ex = exported(ctx)
    return harness(ctx, name, "--action=export_submission", f"--staging_root={ex['root']}",
                   f"--submission_dir={out}", *flags)


def case_export_open_after_closed(ctx: Ctx) -> Row:
    d = ctx.tmp("export_divisions")
    out = d / "submission"
    first = _export(ctx, "export", out, "--submitter=OpenHarness", "--division=closed")
    if first.exit != 0:
        return judge("export closed (before open)", first, expect_error=False)
    before = snapshot(out / "closed")
    r = _export(ctx, "export", out, "--submitter=OpenHarness", "--division=open")
    return judge("export DIVISION=open after closed", r, before=before, roots=(d,), expect_error=False,
                 checks=[((out / "open" / "OpenHarness").is_dir(), "no open/OpenHarness tree")])


def case_export_other_submitter(ctx: Ctx) -> Row:
    d = ctx.tmp("export_submitters")
    out = d / "submission"
    _export(ctx, "export", out, "--submitter=OpenHarness", "--division=closed")
    before = snapshot(d)
    r = _export(ctx, "export", out, "--submitter=OtherOrg", "--division=closed")
    return judge("export another SUBMITTER", r, before=before, roots=(d,), expect_error=False,
                 checks=[((out / "closed" / "OtherOrg").is_dir(), "no closed/OtherOrg tree"),
                         ((d / "mlperf_submission_OtherOrg.tar.gz").is_file(), "no OtherOrg tarball")])


def case_export_file_at_out(ctx: Ctx) -> Row:
    d = ctx.tmp("export_file_at_out")
    out = d / "submission"
    out.write_text("notes\n")
    before = snapshot(d)
    r = _export(ctx, "export", out, "--submitter=OpenHarness")
    return judge("export: plain file at the export folder", r, before=before, roots=(d,),
                 checks=[(sorted(p.name for p in d.iterdir()) == ["submission"], "new files beside it")])


def case_export_folder_at_tarball(ctx: Ctx) -> Row:
    d = ctx.tmp("export_folder_at_tarball")
    out = d / "submission"
    _export(ctx, "export", out, "--submitter=OpenHarness")
    tarball = d / "mlperf_submission_OpenHarness.tar.gz"
    tarball.unlink()
    tarball.mkdir()
    (tarball / "mine.txt").write_text("keep\n")
    before = snapshot(d)
    r = _export(ctx, "export", out, "--submitter=OpenHarness")
    return judge("export: folder where the tarball goes", r, before=before, roots=(d,), needle="tarball")


def case_export_foreign_file(ctx: Ctx) -> Row:
    d = ctx.tmp("export_foreign")
    out = d / "submission"
    (out / "closed" / "OpenHarness").mkdir(parents=True)
    (out / "closed" / "OpenHarness" / "my_notes.txt").write_text("keep me\n")
    before = snapshot(d)
    r = _export(ctx, "export", out, "--submitter=OpenHarness")
    return judge("export: foreign file in closed/<submitter>", r, before=before, roots=(d,), needle="my_notes.txt")


# --- 5. check_submission / update_results on wrong-typed files ---------------------------------------------

def _check_case(key: str) -> Callable[[Ctx], Row]:
    def case(ctx: Ctx) -> Row:
        from tests import test_submission_pipeline as tsp

        ex = exported(ctx)
        d = ctx.tmp(f"check_{key}")
        tree = d / "submission"
        shutil.copytree(ex["build"] / "submission", tree)
        tsp._doctor(tree)
        rel, spoil, says = tsp._BAD_TREE[key]
        spoil(tree / rel)
        before = snapshot(d)
        r = harness(ctx, "check", "--action=check_submission", f"--submission_dir={tree}")
        errors = [ln for ln in r.text.splitlines() if ln.startswith(("ERROR", "error:"))]
        return judge(f"check_submission: {key}", r, before=before, roots=(d,), needle=says,
                     checks=[(len(errors) == 1, f"{len(errors)} error lines")])
    case.__name__ = f"case_check_{key}"
    return case


def _stage_case(key: str) -> Callable[[Ctx], Row]:
    def case(ctx: Ctx) -> Row:
        from tests import test_submission_pipeline as tsp

        ex = exported(ctx)
        d = ctx.tmp(f"stage_{key}")
        root, logs = d / "stage", d / "logs"
        shutil.copytree(ex["root"], root)
        shutil.copytree(ex["build"] / "logs", logs)
        which, spoil, says = tsp._BAD_STAGE[key]
        if which == "systems":
            spoil(root / "systems" / f"{tsp.SYS}.json")
        else:
            spoil(logs)
        before = snapshot(root)
        r = harness(ctx, "stage", "--action=update_results", f"--staging_root={root}", f"--stage_logs={logs}")
        return judge(f"update_results: {key}", r, before=before, roots=(root,), needle=says)
    case.__name__ = f"case_stage_{key}"
    return case


# --- 6. LLM data ------------------------------------------------------------------------------------------------

def _llm_data_case(key: str) -> Callable[[Ctx], Row]:
    def case(ctx: Ctx) -> Row:
        from tests.test_llm_harness import spoil_llama_data

        d = ctx.tmp(f"llm_data_{key}")
        env = private_scratch(ctx, d, "llama2_70b")
        spoil_llama_data(Path(env["MLPERF_SCRATCH_PATH"]), key)
        before = snapshot(d / "scratch" / "data")
        r = harness(ctx, "llm", "--action=preprocess_data", *TINY_LLAMA, env=env)
        return judge(f"llama2 preprocess_data: {key}", r, before=before, roots=(d,))
    case.__name__ = f"case_llm_data_{key}"
    return case


# --- 7. damaged files -----------------------------------------------------------------------------------------

def _damaged_case(name: str) -> Callable[[Ctx], Row]:
    def case(ctx: Ctx) -> Row:
        d = ctx.tmp(f"damaged_{name}")
        env = private_scratch(ctx, d, "llama2_70b")
        where = "preprocessed_data" if name in ("prompts.npz", "references.json") else "models"
        [f] = list((Path(env["MLPERF_SCRATCH_PATH"]) / where / "llama2_70b" / "tiny").rglob(name))[:1]
        data = f.read_bytes()
        f.write_bytes(data[: len(data) // 2])
        action = "run_harness" if where == "preprocessed_data" else "generate_engines"
        flags = ("--min_duration=100", "--min_query_count=1", f"--log_dir={d / 'logs'}") \
            if action == "run_harness" else ()
        r = harness(ctx, "damaged", f"--action={action}", *TINY_LLAMA, "--scenarios=Offline", *flags, env=env,
                    timeout=300)
        return judge(f"truncated {name} -> {action}", r, roots=(d,), needle=name)
    case.__name__ = f"case_damaged_{name}"
    return case


def case_latest_binary(ctx: Ctx) -> Row:
    d = ctx.tmp("latest_binary")
    (d / "build" / "logs").mkdir(parents=True)
    (d / "build" / "logs" / "LATEST").write_bytes(b"\x00\xff\xfe binary\n")
    before = snapshot(d)
    r = harness(ctx, "report", "--action=report", env={"MLPERF_BUILD_DIR": str(d / "build")})
    return judge("report: binary build/logs/LATEST", r, before=before, roots=(d / "build",))


def case_results_list(ctx: Ctx) -> Row:
    d, ex = ctx.tmp("results_list"), exported(ctx)
    logs = d / "logs"
    shutil.copytree(ex["build"] / "logs", logs)
    md = next(p for p in sorted(logs.rglob("metadata.json")) if "/performance/" in str(p))
    meta = json.loads(md.read_text())
    meta["results"] = [1, 2]
    md.write_text(json.dumps(meta))
    before = snapshot(logs)
    r = harness(ctx, "report", "--action=report", f"--report_logs={logs}", f"--report_dir={d / 'rep'}")
    return judge('report: metadata.json "results": [1,2]', r, before=before, roots=(d,), expect_error=False,
                 note="tolerated: drawn without percentiles")


# --- 8. full disk -------------------------------------------------------------------------------------------------

def case_disk_full_engine(ctx: Ctx) -> Row:
    d = ctx.tmp("disk_full_engine")
    tiny(ctx, "resnet50")
    build = d / "build"
    build.mkdir()
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(build)], capture_output=True, text=True)
    if m.returncode != 0:
        return skipped("disk full during generate_engines", "not run here (needs a small file system)")
    try:
        free = shutil.disk_usage(build).free - (64 << 10)
        with open(build / "filler", "wb") as f:
            try:
                f.write(b"\0" * max(0, free))
            except OSError:
                pass
        before = snapshot(build)
        r = harness(ctx, "disk", "--action=generate_engines", *TINY_RN, "--scenarios=Offline",
                    env={"MLPERF_BUILD_DIR": str(build)})
        return judge("disk full during generate_engines (256k tmpfs)", r, before=before, roots=(build,),
                     needle="no space left")
    finally:
        subprocess.run(["umount", "-l", str(build)], capture_output=True)


def case_disk_full_model(ctx: Ctx) -> Row:
    d = ctx.tmp("disk_full_model")
    scratch = d / "scratch"
    scratch.mkdir()
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(scratch)], capture_output=True, text=True)
    if m.returncode != 0:
        return skipped("disk full during download_model", "not run here (needs a small file system)")
    try:
        (scratch / "notes.txt").write_text("keep me\n")
        before = snapshot(scratch)
        r = harness(ctx, "disk", "--action=download_model", *TINY_RN,
                    env={"MLPERF_SCRATCH_PATH": str(scratch), "MLPERF_BUILD_DIR": str(d / "build")})
        return judge("disk full during download_model (128k tmpfs)", r, before=before, roots=(scratch,),
                     needle="no space left")
    finally:
        subprocess.run(["umount", "-l", str(scratch)], capture_output=True)


# --- 9. names and rates ------------------------------------------------------------------------------------------

def case_unet3d_server(ctx: Ctx) -> Row:
    r = harness(ctx, "info", "--action=info", "--benchmarks=resnet50,unet3d", "--scenarios=Server")
    return judge("--benchmarks=resnet50,unet3d --scenarios=Server", r, needle="unet3d")


def case_system_id_space(ctx: Ctx) -> Row:
    d = ctx.tmp("system_id_space")
    env = private_data(d)
    before = snapshot(d / "configs", d / "systems")
    r = harness(ctx, "add_system", "--action=add_system", "--based_on=H100-SXM-80GB", "--system_id=my gpu", env=env)
    return judge('add_system --system_id="my gpu"', r, before=before, roots=(d,), needle="my gpu")


def case_gpu_name_300(ctx: Ctx) -> Row:
    d = ctx.tmp("gpu_name_300")
    env = private_data(d)
    gpu = {"name": "NVIDIA " + "Very Long Accelerator Name " * 11 + "Hopper", "pci_id": "0x2BB610DE", "memory_mb": 81920}
    env["MLPERF_FAKE_SYSTEM"] = json.dumps({"gpus": [gpu]})
    r = harness(ctx, "add_system", "--action=add_system", "--based_on=H100-SXM-80GB", env=env)
    known = [p for p in (d / "systems" / "known").glob("*.json") if "Very-Long" in p.name]
    return judge(f"add_system, a {len(gpu['name'])}-character GPU name", r, roots=(d,), expect_error=False,
                 checks=[(len(known) == 1 and len(known[0].stem) <= 64, "no known-system file of <= 64 characters")],
                 note=f"id cut to {len(known[0].stem) if known else '?'} characters")


def case_server_qps_tiny(ctx: Ctx) -> Row:
    d = ctx.tmp("server_qps_0.001")
    tiny(ctx, "resnet50")
    r = harness(ctx, "qps", "--action=run_harness", *TINY_RN, "--scenarios=Server", "--server_target_qps=0.001",
                f"--log_dir={d / 'logs'}", timeout=30)
    if r.exit == "timeout":
        tail = (r.out + r.err).strip().splitlines()[-1:] or ["(nothing printed)"]
        return Row("--server_target_qps=0.001 (30 s timeout)", "timeout", first_error(r)[:90] or "—", "—",
                   mark("Traceback" not in r.text), "—", "✗",
                   f"still running after 30 s; last line: {tail[0][:80]}", round(r.wall_s, 2))
    return judge("--server_target_qps=0.001 (30 s timeout)", r, roots=(d,))


# --- 10. interruptions ---------------------------------------------------------------------------------------------

def _sigterm_then_again(ctx: Ctx, case: str, args: list[str], watch: Path, again: list[str]) -> Row:
    tag = ctx.root / "runs" / f"sigterm-{time.monotonic_ns()}"
    p, t0 = start(args, ctx.env, tag)
    caught = False
    while time.monotonic() - t0 < 60 and p.poll() is None:
        if leftovers(watch):
            caught = True
            break
        time.sleep(0.02)
    if p.poll() is None:
        os.kill(p.pid, signal.SIGTERM)
    first = finish(p, t0, args, tag, 60)
    note = f"1st run exit {first.exit} ({'SIGTERM while staging' if caught else 'signal after no staging seen'})"
    second = harness(ctx, "again", *again)
    return judge(case, second, roots=(watch,), expect_error=False, note=note,
                 checks=[("Traceback" not in first.text, "traceback in the signalled run")])


def case_sigterm_update_results(ctx: Ctx) -> Row:
    ex = exported(ctx)
    d = ctx.tmp("sigterm_update")
    root = d / "stage"
    args = ["--action=update_results", f"--staging_root={root}", f"--stage_logs={ex['build'] / 'logs'}"]
    return _sigterm_then_again(ctx, "SIGTERM update_results, then again", args, d, args)


def case_sigterm_export(ctx: Ctx) -> Row:
    ex = exported(ctx)
    d = ctx.tmp("sigterm_export")
    args = ["--action=export_submission", f"--staging_root={ex['root']}", f"--submission_dir={d / 'submission'}"]
    return _sigterm_then_again(ctx, "SIGTERM export_submission, then again", args, d, args)


def case_sigterm_run_harness(ctx: Ctx) -> Row:
    tiny(ctx, "resnet50")
    d = ctx.tmp("sigterm_run")
    logs = d / "logs"
    args = ["--action=run_harness", *TINY_RN, "--scenarios=Offline", "--min_duration=600000", f"--log_dir={logs}"]
    tag = ctx.root / "runs" / f"sigterm-run-{time.monotonic_ns()}"
    p, t0 = start(args, ctx.env, tag)
    while time.monotonic() - t0 < 240 and p.poll() is None and not leftovers(logs):
        time.sleep(0.2)
    time.sleep(1.0)
    if p.poll() is None:
        os.kill(p.pid, signal.SIGTERM)
    r = finish(p, t0, args, tag, 60)
    left = sorted(str(x.relative_to(logs)) for x in logs.rglob("*")) if logs.is_dir() else []
    ok = r.exit == 130 and not left and not leftovers(d) and "Traceback" not in r.text
    note = "--log_dir left empty" if not left else f"left {left[:2]}"
    return Row("SIGTERM run_harness: no empty folders", str(r.exit), first_error(r)[:90] or "—", "n/a",
               mark("Traceback" not in r.text), mark(not left and not leftovers(d)), mark(ok),
               f"{note}{'' if r.exit == 130 else f', exit {r.exit} (expected 130)'} [{r.wall_s:.1f}s]",
               round(r.wall_s, 2))


def case_find_performance_reuse(ctx: Ctx) -> Row:
    tiny(ctx, "resnet50")
    d = ctx.tmp("find_perf_reuse")
    shutil.copytree(REPO / "configs" / "resnet50", d / "configs" / "resnet50")
    info = harness(ctx, "info", "--action=info", *TINY_RN, "--scenarios=SingleStream")
    sys_id = (re.findall(r"system id: (\S+)", info.out) or ["AMD-EPYC-2c"])[0]
    earlier = d / "l" / f"{sys_id}_ORT" / "resnet50" / "SingleStream" / "performance"
    earlier.mkdir(parents=True)
    (earlier / "metadata.json").write_text('{"earlier": true}')
    before = snapshot(d / "l")
    r = harness(ctx, "find", "--action=find_performance", *TINY_RN, "--scenarios=SingleStream",
                "--find_probe_seconds=1", f"--log_dir={d / 'l'}", env={"MLPERF_CONFIGS_DIR": str(d / "configs")},
                timeout=400)
    probes = [p for p in (d / "l").rglob("metadata.json") if p.parent != earlier]
    return judge("find_performance, reused --log_dir", r, before=before, roots=(d / "l",), expect_error=False,
                 checks=[(bool(probes), "no probes written")], note="earlier probe kept")


def case_calibrate_fp16(ctx: Ctx) -> Row:
    tiny(ctx, "resnet50")
    d = ctx.tmp("calibrate_fp16")
    r = harness(ctx, "calib", "--action=calibrate", *TINY_RN, "--precision=fp16",
                env={"MLPERF_BUILD_DIR": str(d / "build")})
    return judge("calibrate --precision=fp16", r, roots=(d,), needle="fp16")


def case_engine_same_size_overwrite(ctx: Ctx) -> Row:
    """An engine overwritten with bytes of the same size and its mtime put back: rebuilt, not reused."""
    tiny(ctx, "resnet50")
    d = ctx.tmp("engine_same_size")
    env = {"MLPERF_BUILD_DIR": str(d / "build")}
    first = harness(ctx, "engine", "--action=generate_engines", *TINY_RN, "--scenarios=Offline", env=env)
    if first.exit != 0:
        return judge("engine overwritten, same size and mtime", first, roots=(d,), expect_error=False)
    [eng] = [p for p in (d / "build" / "engines").rglob("*.onnx")][:1]
    st = eng.stat()
    data = bytearray(eng.read_bytes())
    data[-1] ^= 0xFF
    eng.write_bytes(bytes(data))
    os.utime(eng, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = harness(ctx, "engine", "--action=generate_engines", *TINY_RN, "--scenarios=Offline", env=env)
    return judge("engine overwritten, same size and mtime", r, roots=(d,), expect_error=False,
                 checks=[("sampled sha256 differs" in r.text, "not rebuilt: the damaged engine was reused")],
                 note="rebuilt: sampled sha256 differs")


def case_report_damaged_timeline(ctx: Ctx) -> Row:
    """make report over a real run whose sample_timeline.npz was cut short: a warning naming it, exit 0."""
    tiny(ctx, "resnet50")
    d = ctx.tmp("report_damaged_timeline")
    logs = d / "logs"
    run = harness(ctx, "run", "--action=run_harness", *TINY_RN, "--scenarios=Offline", "--min_duration=1",
                  "--min_query_count=64", "--offline_expected_qps=1", f"--log_dir={logs}",
                  env={"MLPERF_BUILD_DIR": str(d / "build")})
    tls = sorted(logs.rglob("sample_timeline.npz"))
    if run.exit != 0 or not tls:
        return judge("report: truncated sample_timeline.npz", run, roots=(d,), expect_error=False,
                     checks=[(bool(tls), "the run wrote no timeline")])
    tls[0].write_bytes(tls[0].read_bytes()[:40])
    before = snapshot(logs)
    r = harness(ctx, "report", "--action=report", f"--report_logs={logs}", f"--report_dir={d / 'rep'}")
    return judge("report: truncated sample_timeline.npz", r, before=before, roots=(d,), expect_error=False,
                 checks=[(f"{tls[0]}: unreadable sample timeline" in r.text, "the damaged file is not named")],
                 note="tolerated: a warning names it, the run is in the table without pictures")


# --- 11. scale ---------------------------------------------------------------------------------------------------------

def _system_id(ctx: Ctx, env: dict[str, str]) -> str:
    r = harness(ctx, "info", "--action=info", "--benchmarks=resnet50", "--scenarios=Offline", env=env)
    found = re.findall(r"system id: (\S+)", r.out)
    return found[0] if found else ""


def case_scale_8mb_config(ctx: Ctx) -> Row:
    d = ctx.tmp("scale_8mb")
    shutil.copytree(REPO / "configs", d / "configs")
    env = {"MLPERF_CONFIGS_DIR": str(d / "configs")}
    cfg = d / "configs/resnet50/Offline/config.json"
    data = json.loads(cfg.read_text())
    pad = "x" * 50
    for i in range(60_000):
        data[f"Block-{i:05d}x1"] = {"extends": "default", "offline_expected_qps": i + 1, "description": pad}
    cfg.write_text(json.dumps(data))
    size = cfg.stat().st_size / 2**20
    r = harness(ctx, "scale", "--action=info", "--benchmarks=resnet50", "--scenarios=Offline", env=env, timeout=60)
    return judge(f"8 MB config.json ({size:.1f} MB, 60,000 blocks), info", r, roots=(d,), expect_error=False,
                 checks=[(r.wall_s < 60, "over 60 s")], note=f"{r.wall_s:.1f} s")


def case_scale_extends_chain(ctx: Ctx) -> Row:
    d = ctx.tmp("scale_chain")
    shutil.copytree(REPO / "configs", d / "configs")
    env = {"MLPERF_CONFIGS_DIR": str(d / "configs")}
    sys_id = _system_id(ctx, env)
    cfg = d / "configs/resnet50/Offline/config.json"
    data = json.loads(cfg.read_text())
    data["Chain-00000"] = {"extends": "default"}
    for i in range(1, 10_000):
        data[f"Chain-{i:05d}"] = {"extends": f"Chain-{i - 1:05d}"}
    data[sys_id or "Chain-top"] = {"extends": "Chain-09999"}
    cfg.write_text(json.dumps(data))
    r = harness(ctx, "scale", "--action=info", "--benchmarks=resnet50", "--scenarios=Offline", env=env, timeout=60)
    ok_shape = r.exit == 0 or (bool(first_error(r)) and fix_named(r))
    return judge(f"10,000-deep extends chain ({sys_id or 'no id'}), info", r, roots=(d,), expect_error=False
                 if r.exit == 0 else True, checks=[(r.wall_s < 60, "over 60 s"), (ok_shape, "neither ran nor refused")],
                 note=f"{r.wall_s:.1f} s, exit {r.exit}")


# --- the table --------------------------------------------------------------------------------------------------------

def cases() -> list[Callable[[Ctx], Row]]:
    from tests import test_llm_harness as tlh
    from tests import test_submission_pipeline as tsp

    return [case_report_dir_run_logs, case_report_dir_plain_file,
            case_add_system_twice, case_add_system_force, case_add_system_broken_config,
            case_mem_min_query_count, case_mem_forced_qps, case_mem_config_qps,
            case_export_open_after_closed, case_export_other_submitter, case_export_file_at_out,
            case_export_folder_at_tarball, case_export_foreign_file,
            *[_check_case(k) for k in tsp._BAD_TREE], *[_stage_case(k) for k in tsp._BAD_STAGE],
            *[_llm_data_case(k) for k in tlh.LLM_DATA_FAULTS],
            *[_damaged_case(n) for n in ("tokenizer.json", "tokenizer_config.json", "config.json", "model.safetensors",
                                         "prompts.npz", "references.json")],
            case_latest_binary, case_results_list,
            case_disk_full_engine, case_disk_full_model,
            case_unet3d_server, case_system_id_space, case_gpu_name_300, case_server_qps_tiny,
            case_sigterm_update_results, case_sigterm_export, case_sigterm_run_harness, case_find_performance_reuse,
            case_calibrate_fp16, case_engine_same_size_overwrite, case_report_damaged_timeline,
            case_scale_8mb_config, case_scale_extends_chain]


COLUMNS = ("case", "exit", "error", "fix", "traceback", "intact", "verdict", "note")
HEADERS = ("case", "exit", "first error line", "fix named", "no traceback", "intact", "verdict", "note")


def print_table(rows: list[Row]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        for r in rows:
            print(" | ".join(str(getattr(r, c)) for c in COLUMNS))
        return
    t = Table(*HEADERS, show_lines=False)
    for r in rows:
        t.add_row(*(str(getattr(r, c)) for c in COLUMNS))
    Console(width=260).print(t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, help="where everything is written (default: a new temporary folder)")
    ap.add_argument("--only", default="", help="run the cases whose function name holds this")
    ap.add_argument("--list", action="store_true", help="list the case names and stop")
    a = ap.parse_args(argv)
    chosen = [c for c in cases() if a.only in c.__name__]
    if a.list:
        print("\n".join(c.__name__.removeprefix("case_") for c in chosen))
        return 0
    root = (a.root or Path(tempfile.mkdtemp(prefix="fault_run-"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(root, {"MLPERF_SCRATCH_PATH": str(root / "scratch"), "MLPERF_BUILD_DIR": str(root / "build")})
    rows: list[Row] = []
    t0 = time.monotonic()
    for case in chosen:
        print(f"[fault_run] {case.__name__.removeprefix('case_')} ...", file=sys.stderr, flush=True)
        try:
            rows.append(case(ctx))
        except Exception as e:          # a broken case is a row, not the end of the table
            rows.append(Row(case.__name__.removeprefix("case_"), "—", "—", "—", "—", "—", "✗",
                            f"the case itself failed: {type(e).__name__}: {str(e)[:160]}"))
    total = time.monotonic() - t0
    print_table(rows)
    bad = [r for r in rows if r.verdict == "✗"]
    print(f"{len(rows)} cases, {len(bad)} ✗, {sum(r.verdict == 'skipped' for r in rows)} skipped; "
          f"{total:.0f} s; root {root}")
    (root / "fault_table.json").write_text(json.dumps({"total_s": round(total, 1), "rows": [asdict(r) for r in rows]},
                                                      indent=1, ensure_ascii=False))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
