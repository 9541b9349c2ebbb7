"""``make submission``: a round's whole submission in one resumable command.

The plan (code.common.submission.plan) runs item by item, in this process, through the same actions as
``make run_harness`` / ``make run_audit_test01`` (``code.main.plan`` then ``code.common.actions.dispatch``), then
stages, truncates, exports, checks (our pre-flight, and the official checker where $MLPERF_INFERENCE_DIR is set)
and writes the report, and ends with one table.

Resuming: an item whose record is complete and passing is kept, anything else is redone. The record is the run's
metadata.json under build/logs/submission/<plan>/ (judged as staging judges it: code.common.results.selection), an
audit's metadata.json and verification.json under build/compliance_logs. A stopped run leaves no folder (the runner
removes its partial logs), so Ctrl-C / SIGTERM keeps every finished run. The plan's state is
build/submission_plan/<plan>/plan.json, written whole after each item (fileio.write_json: a staged rename).

--smoke: every run short and recorded as such (RunControl.smoke, never submittable); the whole flow runs in a build
folder of its own (build/smoke: its own logs, audits and engines), and its staging root and export are marked as a
smoke tree (submission.tree.SMOKE_MARKER), the one place staging accepts smoke runs.

POWER_SERVER=host[:port] (--power_server): the server is checked (code.common.power.ptd.check_server, as make
run_power_harness checks it) before anything is run or written; each power item is make run_power_harness's pair of
runs under <plan logs>/power/, its record the latest testing run there with its power result folder complete.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import time
from pathlib import Path

from code.common import paths, rounds
from code.common.errors import HarnessError
from code.common.fileio import write_json
from code.common.power import ptd
from code.common.submission import plan as P

DONE = ("kept", "done")


def _name(version: str, system_type: str, smoke: bool) -> str:
    return f"{version}_{system_type}{'_smoke' if smoke else ''}"


def _dispatch(plan, argv: list[str]) -> int:
    """One action exactly as ``python -m code.main`` runs it (``plan``: code.main.plan), in this process."""
    from code.common import actions

    cli, settings = plan(argv)
    return actions.dispatch(cli["action"], cli, settings) or 0


def _read(path: Path) -> dict | None:
    import json

    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def record(item: P.Item, s, logs: Path, smoke: bool) -> tuple[bool, str, Path]:
    """(is the item's record complete and passing, why not, its folder). A full plan wants what staging stages
    (VALID performance, passing accuracy, an accepted audit, nothing test-only); a smoke plan a complete smoke run
    (VALID performance, an audit whose accuracy part passed: _smoke_excused)."""
    from code.common.compliance.audit import log_dir_for
    from code.common.harness.runner import default_log_dir
    from code.common.power.result import missing
    from code.common.results import selection as sel

    allow = ("smoke",) if smoke else ()
    if item.audit:
        d = log_dir_for(item.kind, s.system_name, s.log_name, s.scenario)
    elif item.kind == "power":
        d = _testing_run(s, logs / "power")
    else:
        d = default_log_dir(s, P.MODES[item.kind], "", str(logs))
    meta = _read(d / "metadata.json")
    if meta is None:
        return False, "not run yet", d
    if bool((meta.get("control") or {}).get("smoke")) != smoke:
        return False, f"a {'full' if smoke else 'smoke'} run, not this plan's", d
    if item.audit:
        rec = _read(d / "verification.json")
        if meta.get("status") != "ok" or rec is None:
            return False, f"audit incomplete: {meta.get('error') or 'no verification.json'}", d
        if sel.test_only(meta, allow):
            return False, sel.test_only(meta, allow), d
        if not smoke and not rec.get("accepted"):
            return False, f"{item.kind} failed (see {d}/verify_*.txt)", d
        if smoke and not rec.get("accepted") and not _smoke_excused(rec):
            return False, f"{item.kind} failed its accuracy check (see {d}/verify_accuracy.txt)", d
        return True, "", d
    run = sel.Run(d, meta)
    if item.kind in ("performance", "power"):
        # VALID in a smoke plan too: its runs are sized so they can be (P.SMOKE_ARGS), and its audits are verified
        # against them (an INVALID Server run left its TEST01/TEST04 failing on every rerun, the run itself kept)
        why = sel._why_not_performance(run, allow)
        gone = missing((meta.get("power_run") or {}).get("performance_dir") or d) if item.kind == "power" else []
        if why is None and gone:
            why = f"power result incomplete: no {gone[0]}"
    else:
        why = sel._why_not_accuracy(run, allow)
        if why is None and not smoke and (meta.get("accuracy") or {}).get("passed") is not True:
            why = "accuracy below the round's target"
    return why is None, why or "", d


def _smoke_excused(rec: dict) -> bool:
    """A smoke plan's audit not accepted is kept when only its timed comparison failed (short runs cannot match it:
    TEST01/TEST04's performance part), never when its accuracy part failed (TEST06's token checks, TEST01's
    results), which a smoke run can pass and the next invocation should redo: the v5.0 smoke kept four GPT-J TEST06
    audits made before their runs logged tokens, and the checker failed them on every resume."""
    acc = rec.get("accuracy")
    return not rec.get("errors") and (acc is None or bool(acc.get("passed"))
                                      or bool((rec.get("fallback") or {}).get("passed")))


def _kept_run(entry: str, scenario: str, items: list[P.Item], settings: dict, logs: Path, smoke: bool) -> dict | None:
    """The metadata of ``entry``'s performance (or power) run in ``scenario`` when the plan keeps it, else None."""
    run = next((i for i in items if i.entry == entry and i.scenario == scenario
                and i.kind in ("performance", "power")), None)
    if run is None:
        return None
    ok, _, d = record(run, settings[run.key], logs, smoke)
    return _read(d / "metadata.json") if ok else None


def smoke_rate(item: P.Item, items: list[P.Item], settings: dict, logs: Path, smoke: bool) -> float | None:
    """A smoke plan's Server / Interactive item (its run or an audit of it): its target QPS. An audit takes the rate of
    the kept performance run it is verified against (which may be the half-rate retry, ``_smoke_or_run``); the run,
    or an audit whose run is not kept yet, P.SMOKE_SERVER_SHARE of the same entry's Offline smoke run, when that run
    is complete; else None (the config's rate)."""
    if not smoke or item.scenario not in P.RATE_SCENARIOS or item.kind == "accuracy":
        return None
    if item.audit:
        meta = _kept_run(item.entry, item.scenario, items, settings, logs, smoke) or {}
        qps = (meta.get("effective") or {}).get("effective_target_qps") or \
            (meta.get("settings") or {}).get("server_target_qps")
        if qps:
            print(f"[submission] {item.key}: Server rate {qps} QPS (its performance run's)")
            return float(qps)
    meta = _kept_run(item.entry, "Offline", items, settings, logs, smoke)
    sps = ((meta or {}).get("results") or {}).get("result_samples_per_second") or 0
    if not sps:
        return None
    qps = round(max(0.1, P.SMOKE_SERVER_SHARE * float(sps)), 3)
    print(f"[submission] {item.key}: Server rate {qps} QPS ({P.SMOKE_SERVER_SHARE:.0%} of the Offline smoke run's "
          f"{float(sps):.2f} samples/s)")
    return qps


def _smoke_or_run(item: P.Item, items: list[P.Item], settings: dict, logs: Path, smoke: bool, run) -> int:
    """``run(extra_flags)`` once; a smoke plan's Server / Interactive performance run at ``smoke_rate``, and once more
    at half that rate when LoadGen calls it INVALID for the load alone (as its own advice says: on a busy machine
    tiny ResNet50 at 40% of its Offline rate had 5 of 662 queries over the 15 ms bound)."""
    from code.common.results.explain import LOAD_REASONS

    qps = smoke_rate(item, items, settings, logs, smoke)
    with _cpu_first(qps is not None):
        rc = run([] if qps is None else [f"--server_target_qps={qps}"])
        if qps is None or item.kind not in ("performance", "power"):
            return rc
        ok, why, _ = record(item, settings[item.key], logs, smoke)
        if ok or not why.startswith("LoadGen result INVALID") or not any(k in why for k in LOAD_REASONS):
            return rc
        qps = round(qps / 2, 3)
        print(f"[submission] {item.key}: INVALID for the load; once more at {qps} QPS")
        return run([f"--server_target_qps={qps}"])


@contextlib.contextmanager
def _cpu_first(on: bool):
    """A smoke plan's latency-bound runs get the CPU first where this process may raise its priority (nice -10,
    root or CAP_SYS_NICE; the harness's child inherits it), as a machine kept for the benchmark gives them: on this
    2-core VM tiny ResNet50's Server missed the 15 ms p99 at 16 QPS (19.2 ms) beside nothing but the OS. Restored
    after; as it is where not allowed."""
    old = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        if on:
            os.setpriority(os.PRIO_PROCESS, 0, min(old, -10))
    except OSError:
        pass
    try:
        yield
    finally:
        if on:
            try:
                os.setpriority(os.PRIO_PROCESS, 0, old)
            except OSError:
                pass


def _testing_run(s, root: Path) -> Path:
    """The latest testing run of ``s``'s benchmark and scenario under ``root`` (a power item's runs), else ``root``."""
    from code.common.results.selection import scan

    runs = [r for r in scan([root])[0] if r.key == (s.system_name, s.log_name, s.scenario)
            and (r.meta.get("power_run") or {}).get("role") == "testing"]
    return max(runs, key=lambda r: r.when).dir if runs else root


class Progress:
    """One line for the whole plan: done / total and an ETA scaled by how this invocation's items compared
    with their estimates."""

    def __init__(self, items, rnd, smoke):
        self.est = {i.key: i.estimate_s(rnd, smoke) for i in items}
        self.spent = self.spent_est = 0.0

    def add(self, key: str, seconds: float) -> None:
        self.spent += seconds
        self.spent_est += self.est[key]

    def line(self, done: int, total: int, remaining: list) -> str:
        scale = self.spent / self.spent_est if self.spent_est else 1.0
        eta = scale * sum(self.est[i.key] for i in remaining)
        return f"[submission] {done}/{total} done, ETA {P.fmt_s(eta)}"


def submission(cli: dict, plan) -> int:
    """``plan``: code.main.plan, which turns each item's flags into its settings."""
    rnd = rounds.current(cli.get("round"))
    st = cli.get("system_type")
    if not st:
        raise HarnessError("make submission needs the system type the plan is for",
                           f"make submission ROUND={rnd.version} SYSTEM_TYPE=edge (or datacenter)")
    smoke = bool(cli.get("smoke"))
    variant = cli.get("model_variant") or "reference"
    power = cli.get("power_server") or ""
    if power:
        ptd.server_address(power)           # a malformed address is refused before the plan
    items, notes = P.derive(rnd.version, st, tuple(cli.get("benchmarks") or ()), tuple(cli.get("scenarios") or ()),
                            power_server=power)
    print(P.render(items, notes, rnd, st, smoke))
    if cli.get("dry_run"):
        return 0
    if power:                               # reachable, before anything is run or written
        ptd.check_server(power)
    if smoke:          # its own build folder: smoke audits and logs never sit beside (or replace) real ones
        os.environ["MLPERF_SCRATCH_PATH"] = str(paths.scratch_path())
        os.environ["MLPERF_BUILD_DIR"] = str(paths.build_dir() / "smoke")
    name = _name(rnd.version, st, smoke)
    home, logs = paths.build_dir() / "submission_plan" / name, paths.logs_dir() / "submission" / name
    again = f"make submission ROUND={rnd.version} SYSTEM_TYPE={st}" + \
        (f" BENCHMARKS={','.join(cli['benchmarks'])}" if cli.get("benchmarks") else "") + \
        (f" MODEL_VARIANT={variant}" if variant != "reference" else "") + (" SMOKE=1" if smoke else "") + \
        (f" POWER_SERVER={power}" if power else "") + \
        (f" RUN_ARGS=\"--scenarios={','.join(cli['scenarios'])}\"" if cli.get("scenarios") else "")
    state = {"round": rnd.version, "system_type": st, "smoke": smoke, "model_variant": variant,
             "power_server": power, "command": again, "items": {}, "steps": {}}
    old = _read(home / "plan.json") or {}
    state["items"] = {k: v for k, v in (old.get("items") or {}).items() if isinstance(v, dict)}

    def save():
        write_json(home / "plan.json", state)

    argvs = {i.key: i.argv(rnd.version, variant, smoke, str(logs)) for i in items}
    settings = {i.key: plan(argvs[i.key])[1][0] for i in items}     # every item resolves before any runs
    _inputs(settings.values(), variant, plan)
    prog = Progress(items, rnd, smoke)
    done = 0
    try:
        for n, item in enumerate(items):
            run = lambda a=argvs[item.key], i=item: _smoke_or_run(i, items, settings, logs, smoke,
                                                                 lambda extra: _dispatch(plan, a + extra))
            done += _one(item, n, items, settings[item.key], run, state, logs, smoke, prog, done, save)
    except KeyboardInterrupt:      # the runner has stopped the run and removed its partial folder
        for rec in state["items"].values():
            if rec.get("state") == "running":
                rec.update(state="interrupted", why="stopped (Ctrl-C / SIGTERM); redone next time")
        save()
        print(f"[submission] stopped: {done}/{len(items)} done, every finished run kept; continue with: {again}")
        raise
    state["items"] = {i.key: state["items"][i.key] for i in items}
    errors = _finish(cli, state, home, logs, rnd, smoke)
    save()
    print(table(items, state, errors, rnd, variant, again, home, smoke))
    failed = [k for k, v in state["items"].items() if v.get("state") not in DONE]
    bad_steps = [k for k, v in state["steps"].items() if v != "ok"]
    return 1 if failed or bad_steps or (errors and not smoke) else 0


def _inputs(settings, variant: str, plan) -> None:
    """Every planned benchmark's model and data, before any run: the tiny variant's are built where missing (from
    their seeds, a few seconds each: a fresh clone's smoke plan runs as it is); the real ones are downloads of up to
    terabytes, which the plan never starts: one line names them all, with the commands."""
    from code.common.doctor import check_benchmark
    from code.common.fields import DATA

    missing: dict[str, list] = {}
    for s in settings:
        if s.benchmark not in missing:
            missing[s.benchmark] = [c for c in check_benchmark(s) if c.status != "ok"]
    missing = {b: cs for b, cs in missing.items() if cs}
    if not missing:
        return
    if variant != "tiny":
        found = "; ".join(c.detail for cs in missing.values() for c in cs)
        raise HarnessError(f"the plan's models or data are not here: {found}",
                           " && ".join(f"make {a} BENCHMARKS={','.join(missing)}"
                                       for a in DATA))
    for b in missing:
        print(f"[submission] tiny {b}: model or data missing, building them (download_model, download_data, "
              f"preprocess_data)")
        for action in DATA:
            rc = _dispatch(plan, [f"--action={action}", f"--benchmarks={b}", "--model_variant=tiny"])
            if rc:
                raise HarnessError(f"building the tiny {b} ({action}) ended with exit {rc}",
                                   f"make {action} BENCHMARKS={b} MODEL_VARIANT=tiny")


def _one(item, n, items, s, run, state, logs, smoke, prog, done, save) -> int:
    """Keep or (re)do one item; returns 1 when its record is complete afterwards."""
    ok, why, d = record(item, s, logs, smoke)
    rec = state["items"].setdefault(item.key, {})
    rec.update(dir=str(d))
    if ok:
        rec.update(state="kept", why="")
        return 1
    print(f"{prog.line(done, len(items), items[n:])}: now {item.key} ({why})", flush=True)
    rec.update(state="running", why=why)
    save()
    t0 = time.monotonic()
    try:
        rc = run()
        err = "" if rc == 0 else f"exit {rc}"
    except HarnessError as e:
        err = e.cause + (f" (fix: {e.fix})" if e.fix else "")
    secs = time.monotonic() - t0
    prog.add(item.key, secs)
    ok, why, d = record(item, s, logs, smoke)
    rec.update(state="done" if ok else "failed", why="" if ok else (err or why), seconds=round(secs, 1),
               dir=str(d), finished=time.time())
    save()
    print(f"{prog.line(done + ok, len(items), items[n + 1:])}: {item.key} {rec['state']}"
          + (f": {rec['why']}" if rec["why"] else ""), flush=True)
    return int(ok)


def _finish(cli, state, home: Path, logs: Path, rnd, smoke: bool) -> list[tuple[str, str, str]]:
    """Stage, truncate, export, check and report the plan's runs; each step's outcome in state["steps"]. Returns
    the checkers' errors as (checker, where, message)."""
    from code.common.compliance.official import inference_dir
    from code.common.report import report
    from code.common.submission import check, export, stage
    from code.common.submission.tree import mark_smoke_tree
    from code.common.submission.truncate import truncate_all

    submitter, division = cli.get("submitter") or "OpenHarness", cli.get("division") or "closed"
    root, out = home / "staging", home / "submission"
    errors: list[tuple[str, str, str]] = []
    if smoke:
        mark_smoke_tree(root)
    steps = [
        ("stage", lambda: (stage.stage(submitter=submitter, division=division, version=rnd.version,
                                       log_roots=[logs], root=root), _nameplate_stubs(root, rnd.version))),
        ("truncate", lambda: truncate_all(root)),
        ("export", lambda: export.export(submitter=submitter, division=division, version=rnd.version, root=root,
                                         out=out, tarball=False)),
        ("pre-flight", lambda: errors.extend(("pre-flight", w, m) for _, w, m in
                                             check.check(out, submitter=submitter, version=rnd.version).errors)),
        ("official checker", lambda: _official(out, submitter, rnd, inference_dir(), errors)),
        ("report", lambda: report({"report_logs": [str(logs)], "report_dir": str(home / "report")})),
    ]
    for label, fn in steps:
        print(f"[submission] {label}", flush=True)
        try:
            fn()
            state["steps"][label] = "ok"
        except HarnessError as e:
            state["steps"][label] = f"error: {e.cause}" + (f" (fix: {e.fix})" if e.fix else "")
            print(f"[submission] {label}: {state['steps'][label]}")
            if label in ("stage", "export"):
                break            # nothing to check after a failed stage or export
    return errors


def _nameplate_stubs(root: Path, version: str) -> None:
    """The round's nameplate-power stub (systems/<system>_power.yaml, TO FILL values; never over an existing one) for
    each staged system with a power result: the pre-flight then names the file to fill in."""
    from code.common.power import nameplate

    if version not in nameplate.ROUNDS:
        return
    for system in (d for d in sorted((root / "results").glob("*")) if any(d.glob("*/*/performance/power"))):
        nameplate.write_stub(root / "systems", system.name, force=False,
                             log=lambda m: print(m.replace("[add_system]", "[submission]")))


def _official(out: Path, submitter: str, rnd, root: Path | None, errors: list) -> None:
    from code.common.submission.check import run_official_checker

    if root is None:
        print("[submission] official checker: not run (MLPERF_INFERENCE_DIR is not set)")
        return
    rc, lines = run_official_checker(out, submitter, rnd.version, root)
    print(f"[submission] official submission_checker --version {rnd.version}: exit {rc}")
    for ln in lines:
        ln = checker_gap(ln, root)
        print(f"  {ln}")
        if " ERROR]" in ln or "ERROR:" in ln:
            errors.append(("official", "", ln.strip()))


GAP = "the official checker's own gap"
RAISED = re.compile(r"Execution occurred in running check (\S+?)\.? Running min_query_count_check")


def checker_gap(line: str, root: Path) -> str:
    """``line``, with its cause added where the official checker raised inside its own min_query_count_check for want
    of a table entry, no fault of the tree: that check looks every Offline result's model up in
    OFFLINE_MIN_SPQ_SINCE_V4, which no longer lists GPT-J (gptj-99, gptj-99.9; the v4-era checkers had 13,368) while
    its v5.0 round still has GPT-J: a KeyError on every GPT-J Offline result, whatever the logs say."""
    m = RAISED.search(line)
    p = PATH.search(m.group(1)) if m else None
    if p is None or p.group(1) != "results" or p.group(4) != "Offline":
        return line
    table = _checker_table(str(root), "OFFLINE_MIN_SPQ_SINCE_V4")
    if table is None or p.group(3) in table:
        return line
    return (f"{line} [{GAP}: its OFFLINE_MIN_SPQ_SINCE_V4 (constants.py) has no {p.group(3)}, a KeyError on every "
            "Offline result of it]")


@functools.lru_cache(maxsize=None)
def _checker_table(root: str, name: str) -> dict | None:
    """The literal ``name = {...}`` of the official checker's constants.py (read, never imported), or None."""
    import ast

    try:
        tree = ast.parse((Path(root) / "tools" / "submission" / "submission_checker" / "constants.py").read_text())
        node = next(n for n in tree.body if isinstance(n, ast.Assign) and any(
            isinstance(x, ast.Name) and x.id == name for x in n.targets))
        value = ast.literal_eval(node.value)
    except (OSError, SyntaxError, ValueError, StopIteration):
        return None
    return value if isinstance(value, dict) else None


PATH = re.compile(r"(?:^|/)(results|compliance|measurements)/([^/\s]+)/([^/\s]+)/([^/\s,:]+)(/[^\s,:]*)?")


def fix_for(where: str, msg: str, items: list[P.Item], version: str, variant: str, again: str, home: Path,
            smoke: bool) -> str:
    """The command that fixes one checker error: the item it names, redone alone; a system description to fill
    in; else the whole plan again."""
    if GAP in msg:
        return "none in this tree: the official checker lacks the entry (see the line); nothing to rerun"
    m = PATH.search(where) or PATH.search(msg)
    if not m:
        sysjson = re.search(r"systems/([^/\s:]+\.(?:json|yaml))", where + " " + msg)
        if sysjson:
            return f"fill in {home / 'staging' / 'systems' / sysjson.group(1)} (its TO FILL fields), then {again}"
        return again
    _, system, entry, scen, rest = m.groups()
    rest = rest or ""
    t = re.search(r"TEST\d\d", rest + " " + msg)
    kind = t.group(0) if t else "accuracy" if "/accuracy" in rest else "performance" if "/performance" in rest else None
    unavoidable = smoke or "model_variant=tiny" in msg      # what only a full run of the real model meets
    if (m.group(1) == "measurements" or "measurements.json" in rest) and not unavoidable:
        return f"fill in {home / 'staging' / 'measurements' / system / entry / scen} (TO FILL fields), then {again}"
    kind = kind or ("performance" if unavoidable else None)
    kinds = (kind, "power") if kind == "performance" else (kind,)      # a power item makes the performance result
    cand = [i for i in items if i.entry == entry and i.scenario == scen and (kind is None or i.kind in kinds)]
    if not cand or kind is None:
        return again
    if not unavoidable:
        return cand[0].make_command(version, variant)
    return cand[0].make_command(version, "reference") + " (full length, the real model: a smoke run never meets it)"


def table(items, state, errors, rnd, variant, again, home, smoke) -> str:
    rows = [f"\n[submission] {rnd.version} {state['system_type']}{' smoke' if smoke else ''}: "
            f"{sum(state['items'][i.key].get('state') in DONE for i in items)}/{len(items)} items complete",
            f"  {'item':48s} {'state':11s} {'time':>8s}  note"]
    for i in items:
        r = state["items"][i.key]
        secs = f"{r['seconds']:.0f} s" if r.get("seconds") is not None and r.get("state") == "done" else ""
        rows.append(f"  {i.key:48s} {r.get('state', 'pending'):11s} {secs:>8s}  {r.get('why') or ''}")
    for step, v in state["steps"].items():
        rows.append(f"  {'step ' + step:48s} {'ok' if v == 'ok' else 'error':11s} {'':>8s}  {'' if v == 'ok' else v}")
    if errors:
        rows.append(f"  checker errors ({len(errors)}), each with the command that fixes it:")
        for checker, where, msg in errors:
            rows.append(f"  - {checker}: {(where + ': ') if where else ''}{msg}")
            rows.append(f"      fix: {fix_for(where, msg, items, rnd.version, variant, again, home, smoke)}")
    rows.append(f"  state: {home / 'plan.json'}; submission tree: {home / 'submission'}; report: "
                f"{home / 'report' / 'index.html'}")
    return "\n".join(rows)
