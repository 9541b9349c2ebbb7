"""Run one LoadGen test in its own child process and record it as data.

``FromConfig`` must be called once per process, so every test gets a fresh interpreter
(``python -m code.common.harness.child``). The child's working directory is a fresh staging folder
beside the final log folder (``.<name>.pid<parent pid>.<random>.partial``): LoadGen writes there, an
audit.config (compliance runs) is read from there, and the folder is renamed to its final name only
once metadata.json is complete. The parent resolves the engines once and hands their paths to the
child in request.json.

Faults: Ctrl-C and SIGTERM (``code.main`` turns SIGTERM into KeyboardInterrupt) stop the child and
remove the staging folder; the child is started with a parent-death signal, so it dies with a
parent killed outright; staging folders whose owner process is gone are removed at the next run.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from code.common import calibration, paths, scenarios
from code.common.results import explain
from code.common.errors import HarnessError, disk_full
from code.common.fileio import clean_stale_partials, make_stage_dir, partial_prefix, write_json, write_text
from code.common.harness import zygote
from code.common.harness.deathsig import death_signal_hook
from code.common.power import limits as power_limits
from code.common.results.loadgen_logs import summarize
from code.common.settings import FAST_MIN_DURATION_MS, RunControl, RunSettings


def user_conf_text(s: RunSettings, control: RunControl) -> str:
    """The one place run settings become LoadGen settings (user.conf, loaded with FromConfig)."""
    m, sc = s.loadgen_model, scenarios.get(s.scenario).loadgen_enum
    lines = [f"# written by the harness for {s.benchmark} {sc} on {s.system_id} ({control.test_mode})"]

    def put(key, value):
        lines.append(f"{m}.{sc}.{key} = {value}")

    factor = s.audit_server_qps_factor if control.audit_test else None
    lines += scenarios.conf_lines(s.scenario, m, dict(s.values), audit_factor=factor)
    min_duration = s.min_duration or (FAST_MIN_DURATION_MS if s.fast else 0)     # 0: mlperf.conf's
    min_query_count = s.min_query_count or (1 if s.fast else 0)
    if min_duration:
        put("min_duration", min_duration)
    if min_query_count:
        put("min_query_count", min_query_count)
    if s.max_query_count:
        put("max_query_count", s.max_query_count)
    if s.performance_sample_count:
        put("performance_sample_count_override", s.performance_sample_count)
    bound = end_to_end_bound_ns(s)
    if bound and not s.values.get("server_target_latency_ns"):
        put("target_latency", f"{bound / 1e6:g}")
    entry = _round_entry(s)
    for key, value in (entry.loadgen_conf.get(s.scenario, {}) if entry else {}).items():
        put(key, value)
    return "\n".join(lines) + "\n"


def _round_entry(s: RunSettings):
    """The run's round entry, None for a benchmark outside the round."""
    from code.common import rounds

    if not rounds.ROUNDS:
        return None
    try:
        return s.round_entry()
    except Exception:  # noqa: BLE001 - a benchmark outside the round: no figures of its own
        return None


def end_to_end_bound_ns(s: RunSettings) -> int:
    """The round's end-to-end p99 bound of this run's scenario (RoundBenchmark.latency_constraint_ns; Qwen3-VL's
    Interactive 1.5 s is in no mlperf.conf LoadGen compiles), 0 where it has none."""
    entry = _round_entry(s) if scenarios.get(s.scenario).runs_as_server else None
    return int(entry.latency_constraint_ns.get(s.scenario, 0)) if entry else 0


def system_to_json(system) -> dict:
    return {"system_id": system.system_id, "class_id": system.class_id, "accelerator": system.accelerator,
            "arch": system.arch, "class_memory_mb": system.class_memory_mb, "info": dataclasses.asdict(system.info)}


def system_from_json(d: dict):
    from code.common.systems import SystemMatch
    from code.common.systems.facts import info_of

    return SystemMatch(d["system_id"], d["class_id"], info_of(d["info"]), d["accelerator"], d["arch"],
                       int(d.get("class_memory_mb", 0)))


def timestamp() -> str:
    """A run folder name: the time plus a short random suffix, so runs started in the same second
    never share a folder."""
    import secrets

    return dt.datetime.now().strftime("%Y.%m.%d-%H.%M.%S-") + secrets.token_hex(2)


def refuse_existing(log_dir: Path, control: RunControl) -> None:
    """An earlier run's folder is never replaced unless the user says --overwrite."""
    if log_dir.exists() and not control.overwrite:
        raise HarnessError(f"{log_dir} already holds a run's logs; they are not replaced",
                           "pick another --log_dir (or drop it for a fresh build/logs/<timestamp>), or add --overwrite")


def default_log_dir(s: RunSettings, test_mode: str, stamp: str, log_dir: str | None = None) -> Path:
    base = Path(log_dir) if log_dir else paths.logs_dir() / stamp
    return base / s.system_name / s.log_name / s.scenario / scenarios.MODE_DIRS[test_mode]


SIGNAL_CAUSES = {
    "SIGKILL": "killed outright: most often the kernel's out-of-memory killer (see `dmesg`), or a user",
    "SIGBUS": "a file the run had mapped changed or shrank under it (an engine or data file rewritten?)",
    "SIGSEGV": "a crash in native code (the inference library or LoadGen)",
    "SIGABRT": "a native library aborted (its message is above)",
    "SIGTERM": "stopped from outside (timeout, a batch scheduler, docker stop)",
    "SIGINT": "interrupted (Ctrl-C)",
}


def child_exit_reason(rc: int) -> str:
    """The harness child's end in words: the signal's name and its likely cause, or the exit code."""
    if rc >= 0:
        return f"harness child exited with code {rc}"
    try:
        name = signal.Signals(-rc).name
    except ValueError:
        return f"harness child ended by signal {-rc}"
    return f"harness child ended by {name}: {SIGNAL_CAUSES.get(name, 'see the log above')}"


def _stop(proc: subprocess.Popen) -> None:
    """Stop the child: SIGTERM, then SIGKILL if it has not exited within 10 s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_one(settings: RunSettings, control: RunControl, log_dir: str | Path, engines: Mapping[str, str], *,
            audit_config: str | None = None) -> dict[str, Any]:
    """Run one LoadGen test; return the metadata dict that is also written to log_dir/metadata.json.

    ``engines``: component -> engine path, as ``Benchmark.generate_engines`` resolved them."""
    log_dir = Path(log_dir)
    refuse_existing(log_dir, control)
    log_dir.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_partials(log_dir.parent)
    stage = make_stage_dir(log_dir)
    try:
        with power_limits.applied(settings.values):      # power_limit, clock locks: restored even on Ctrl-C
            meta = _run_staged(settings, control, log_dir, stage, engines, audit_config)
    except BaseException:              # Ctrl-C, a full disk, a bug: never leave a half-written run behind
        import shutil

        shutil.rmtree(stage, ignore_errors=True)
        raise
    return meta


def _run_staged(settings: RunSettings, control: RunControl, log_dir: Path, stage: Path, engines: Mapping[str, str],
                audit_config: str | None) -> dict[str, Any]:
    started = dt.datetime.now().astimezone()
    t0 = time.time()
    conf = user_conf_text(settings, control)
    request = {"settings": settings.to_json(), "system": system_to_json(settings.system),
               "control": control.to_json(), "engines": dict(engines), "audit": audit_config is not None}
    write_text(stage / "user.conf", conf)
    write_json(stage / "settings.json", {"requested": settings.to_json(), "control": control.to_json()})
    write_json(stage / "request.json", request)
    if audit_config is not None:
        write_text(stage / "audit.config", audit_config)
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["PYTHONPATH"] = str(paths.REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = zygote.start("code.common.harness.child", [str(stage / "request.json")], stage, env) or \
        subprocess.Popen([sys.executable, "-m", "code.common.harness.child", str(stage / "request.json")],
                         cwd=stage, env=env, preexec_fn=death_signal_hook())
    try:
        rc = proc.wait()
    finally:
        _stop(proc)
        (stage / "audit.config").unlink(missing_ok=True)   # never left behind, even on failure
    child = {}
    try:
        child = json.loads((stage / "child_result.json").read_text())
    except FileNotFoundError:
        pass
    except (OSError, ValueError):          # a child killed while writing it, or a full disk
        child = {}
    err = child.get("error")
    if rc != 0 and not err:
        err = child_exit_reason(rc)
        full = disk_full(stage, log_dir)
        if full is not None:                # the child could not write its result: say why
            raise full
    meta = build_metadata(settings, control, stage, conf, child, err, started, time.time() - t0)
    meta["log_dir"] = str(log_dir)
    write_json(stage / "metadata.json", meta)
    (stage / "request.json").unlink(missing_ok=True)
    (stage / "child_result.json").unlink(missing_ok=True)
    if log_dir.exists() and control.overwrite:   # swap the old folder out
        import shutil

        old = log_dir.with_name(f"{partial_prefix(log_dir)}old.partial")     # a killed swap: cleaned later
        os.replace(log_dir, old)
        os.replace(stage, log_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        log_dir = _claim(stage, log_dir)
        if str(log_dir) != meta["log_dir"]:     # another run took the folder while this one ran
            meta["log_dir"] = str(log_dir)
            write_json(log_dir / "metadata.json", meta)
    return meta


def _claim(stage: Path, log_dir: Path) -> Path:
    """Rename the finished stage to ``log_dir``; if another run created that folder meanwhile, keep both:
    this one goes to ``<log_dir>-<n>`` (never replacing anything)."""
    for n in range(100):
        target = log_dir if n == 0 else log_dir.with_name(f"{log_dir.name}-{n}")
        try:
            os.rename(stage, target)      # fails on an existing non-empty folder (and os.replace would not)
            if n:
                print(f"[run] {log_dir} was taken by another run meanwhile; these logs are in {target}", flush=True)
            return target
        except OSError:
            if not target.exists():
                raise
    raise HarnessError(f"no free folder name beside {log_dir}", "clean up build/logs")


def token_metrics(lg: dict, s: RunSettings) -> dict | None:
    """LLM runs, and runs whose round result is in tokens (whisper): tokens/s (the checker's result field), TTFT/TPOT
    p99 against their bounds (Server and Interactive), from LoadGen's detail log."""
    try:
        field = s.round_entry().result_field.get(scenarios.get(s.scenario).loadgen_enum)
    except HarnessError:
        field = None
    if not s.spec.generates_tokens and not (field and "tokens" in field):
        return None
    res, eff = lg["results"], lg["effective"]
    out = {"result_field": field, "tokens_per_second": res.get(field) if field else None}
    for key in ("result_tokens_per_second", "result_completed_tokens_per_second", "result_inferred_tokens_per_second",
                "result_inferred_completed_tokens_per_second"):
        if res.get(key) is not None:
            out["tokens_per_second"] = out["tokens_per_second"] or res[key]
    ttft, tpot = res.get("result_first_token_99.00_percentile_latency_ns"), res.get("result_time_per_output_token_99.00_percentile_ns")
    if ttft is not None:
        out.update({"ttft_p99_ns": ttft, "tpot_p99_ns": tpot,
                    "ttft_limit_ns": lg["requested"].get("requested_server_ttft_latency"),
                    "tpot_limit_ns": lg["requested"].get("requested_server_tpot_latency"),
                    "ttft_mean_ns": res.get("result_first_token_mean_latency_ns")})
    samples = res.get("result_samples_per_second") or res.get("result_completed_samples_per_sec")
    if samples and out["tokens_per_second"]:
        out["tokens_per_sample"] = round(out["tokens_per_second"] / samples, 2)
    out["effective_sample_concatenate_permutation"] = eff.get("effective_sample_concatenate_permutation")
    return out


def build_metadata(s: RunSettings, control: RunControl, stage: Path, conf: str, child: dict, err: str | None,
                   started, wall: float) -> dict[str, Any]:
    test_mode = control.test_mode
    lg = summarize(stage, s.scenario)
    if test_mode == "AccuracyOnly":   # LoadGen reports no validity in accuracy mode; the score is the result
        ok = err is None and child.get("accuracy") is not None
        if err is None and not ok:
            err = "no accuracy result was computed"
    else:
        ok = err is None and lg["result_validity"] is not None
        if err is None and lg["result_validity"] is None:
            err = "LoadGen wrote no result (see mlperf_log_detail.txt)"
    overload = child.get("overload")
    invalid_reasons = explain.explain(lg, s, overload) if test_mode != "AccuracyOnly" else []
    if overload:           # the SUT shed samples: INVALID whatever LoadGen's summary says
        lg["result_validity"], lg["valid"] = "INVALID", False
        invalid_reasons.insert(0, explain.overload(overload, s))
    return {
        "schema": 2,
        "benchmark": s.benchmark, "log_name": s.log_name, "loadgen_model": s.loadgen_model,
        "accuracy_target": s.accuracy_target, "round": s.values.get("round"),
        "scenario": s.scenario, "test_mode": test_mode, "audit_test": control.audit_test,
        "system_id": s.system_id, "system_name": s.system_name, "config_ver": s.config_ver,
        "model_variant": s.model_variant, "backend": s.backend, "precision": s.precision,
        "config_hash": s.config_hash(), "fast": bool(s.fast),
        "settings": s.to_json()["values"], "sources": dict(s.sources), "notes": list(s.notes),
        "control": control.to_json(), "user_conf": conf,
        "status": "ok" if ok else "error", "error": err,
        "error_fix": child.get("error_fix"), "error_exit_code": child.get("error_exit_code"),
        "result_validity": lg["result_validity"], "valid": lg["valid"] and ok,
        "metric": lg["metric"], "metric_value": lg["metric_value"], "metric_unit": lg["metric_unit"],
        "early_stopping": lg["early_stopping"], "loadgen_errors": lg["loadgen_errors"],
        "loadgen_warnings": lg["loadgen_warnings"], "effective": lg["effective"], "results": lg["results"],
        "invalid_reasons": invalid_reasons, "overload": overload, "stall": child.get("stall"),
        "fast_sizing": child.get("fast_sizing"),
        "generation": child.get("generation"), "tokens": token_metrics(lg, s),
        "accuracy": child.get("accuracy"),
        "completed_samples": child.get("completed_samples"),
        "timeline": child.get("timeline"),
        "power": child.get("power"),
        "executor": child.get("executor") or {"kind": "local"},
        "engines": child.get("engines", {}),
        "calibration": calibration.of_engines(child.get("engines", {})),
        "versions": child.get("versions", {}),
        "machine": child.get("machine"),
        "started": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "wall_seconds": round(wall, 3),
    }
