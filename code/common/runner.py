"""Run one LoadGen test in its own child process and record it as data.

``FromConfig`` must be called once per process, so every test gets a fresh interpreter
(``python -m code.common.harness_child``). The child's working directory is a fresh staging folder
beside the final log folder: LoadGen writes there, an audit.config (compliance runs) is read from
there, and the folder is renamed to its final name only once metadata.json is complete.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from code.common import paths
from code.common.errors import RunError
from code.common.fileio import write_json, write_text
from code.common.loadgen_logs import summarize
from code.common.settings import RunSettings

MODE_DIR = {"PerformanceOnly": "performance", "AccuracyOnly": "accuracy", "SubmissionRun": "submission"}


def user_conf_text(s: RunSettings, test_mode: str) -> str:
    """The one place run settings become LoadGen settings (user.conf, loaded with FromConfig)."""
    m, sc = s.spec.loadgen_model, s.scenario
    lines = [f"# written by the harness for {s.benchmark} {sc} on {s.system_id} ({test_mode})"]

    def put(key, value):
        lines.append(f"{m}.{sc}.{key} = {value}")

    if sc == "Offline" and s.offline_expected_qps:
        put("target_qps", f"{s.offline_expected_qps:g}")
    if sc == "Server":
        qps = s.server_target_qps or 1.0
        if s.action == "run_audit_harness":
            qps *= s.audit_server_qps_factor
        put("target_qps", f"{qps:g}")
        if s.server_target_latency_ns:
            put("target_latency", f"{s.server_target_latency_ns // 1_000_000}")
    if sc == "SingleStream" and s.single_stream_expected_latency_ns:
        put("target_latency", f"{s.single_stream_expected_latency_ns / 1e6:g}")
    if sc == "MultiStream":
        if s.multi_stream_expected_latency_ns:
            put("target_latency", f"{s.multi_stream_expected_latency_ns / 1e6:g}")
        if s.multi_stream_samples_per_query != 8:
            put("samples_per_query", s.multi_stream_samples_per_query)
    min_duration = s.min_duration or (60000 if s.fast else 0)
    min_query_count = s.min_query_count or (1 if s.fast else 0)
    if min_duration:
        put("min_duration", min_duration)
    if min_query_count:
        put("min_query_count", min_query_count)
    if s.max_query_count:
        put("max_query_count", s.max_query_count)
    if s.performance_sample_count:
        put("performance_sample_count_override", s.performance_sample_count)
    return "\n".join(lines) + "\n"


def system_to_json(system) -> dict:
    return {"system_id": system.system_id, "class_id": system.class_id, "accelerator": system.accelerator,
            "arch": system.arch, "info": dataclasses.asdict(system.info)}


def system_from_json(d: dict):
    from code.common.systems import CPUInfo, GPUInfo, SystemInfo, SystemMatch

    info = d["info"]
    si = SystemInfo(tuple(GPUInfo(**g) for g in info["gpus"]), CPUInfo(**info["cpu"]), info["memory_gb"], info["source"])
    return SystemMatch(d["system_id"], d["class_id"], si, d["accelerator"], d["arch"])


def timestamp() -> str:
    return dt.datetime.now().strftime("%Y.%m.%d-%H.%M.%S")


def default_log_dir(s: RunSettings, test_mode: str, stamp: str) -> Path:
    base = Path(s.log_dir) if s.log_dir else paths.logs_dir() / stamp
    return base / s.system_name / s.benchmark / s.scenario / MODE_DIR[test_mode]


def run_one(settings: RunSettings, test_mode: str, log_dir: str | Path, *, audit_config: str | None = None,
            audit_test: str | None = None, null_processor: bool = False) -> dict[str, Any]:
    """Run one LoadGen test; return the metadata dict that is also written to log_dir/metadata.json."""
    log_dir = Path(log_dir)
    log_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{log_dir.name}.", suffix=".partial", dir=log_dir.parent))
    started = dt.datetime.now().astimezone()
    t0 = time.time()
    conf = user_conf_text(settings, test_mode)
    request = {"settings": settings.to_json(), "system": system_to_json(settings.system), "test_mode": test_mode,
               "audit": audit_config is not None, "null_processor": null_processor}
    write_text(stage / "user.conf", conf)
    write_json(stage / "settings.json", {"requested": settings.to_json(), "test_mode": test_mode})
    write_json(stage / "request.json", request)
    if audit_config is not None:
        write_text(stage / "audit.config", audit_config)
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["PYTHONPATH"] = str(paths.REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    rc, err = 0, None
    try:
        proc = subprocess.run([sys.executable, "-m", "code.common.harness_child", str(stage / "request.json")],
                              cwd=stage, env=env)
        rc = proc.returncode
    except KeyboardInterrupt:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    finally:
        (stage / "audit.config").unlink(missing_ok=True)   # never left behind, even on failure
    child = {}
    if (stage / "child_result.json").exists():
        child = json.loads((stage / "child_result.json").read_text())
    if rc != 0:
        err = child.get("error") or f"harness child exited with code {rc}"
    elif child.get("error"):
        err = child["error"]
    meta = build_metadata(settings, test_mode, stage, conf, child, err, started, time.time() - t0, audit_test)
    meta["log_dir"] = str(log_dir)
    write_json(stage / "metadata.json", meta)
    (stage / "request.json").unlink(missing_ok=True)
    (stage / "child_result.json").unlink(missing_ok=True)
    if log_dir.exists():
        shutil.rmtree(log_dir)
    os.replace(stage, log_dir)
    return meta


def build_metadata(s: RunSettings, test_mode: str, stage: Path, conf: str, child: dict, err: str | None,
                   started, wall: float, audit_test: str | None) -> dict[str, Any]:
    lg = summarize(stage, s.scenario)
    if test_mode == "AccuracyOnly":   # LoadGen reports no validity in accuracy mode; the score is the result
        ok = err is None and child.get("accuracy") is not None
        if err is None and not ok:
            err = "no accuracy result was computed"
    else:
        ok = err is None and lg["result_validity"] is not None
        if err is None and lg["result_validity"] is None:
            err = "LoadGen wrote no result (see mlperf_log_detail.txt)"
    return {
        "schema": 1,
        "benchmark": s.benchmark, "mlperf_name": s.spec.mlperf_name, "loadgen_model": s.spec.loadgen_model,
        "scenario": s.scenario, "test_mode": test_mode, "audit_test": audit_test,
        "system_id": s.system_id, "system_name": s.system_name, "config_ver": s.config_ver,
        "model_variant": s.model_variant, "backend": s.backend, "precision": s.precision,
        "config_hash": s.config_hash(), "fast": bool(s.fast),
        "settings": s.to_json()["values"], "sources": dict(s.sources), "user_conf": conf,
        "status": "ok" if ok else "error", "error": err,
        "error_fix": child.get("error_fix"), "error_exit_code": child.get("error_exit_code"),
        "result_validity": lg["result_validity"], "valid": lg["valid"] and ok,
        "metric": lg["metric"], "metric_value": lg["metric_value"],
        "early_stopping": lg["early_stopping"], "loadgen_errors": lg["loadgen_errors"],
        "loadgen_warnings": lg["loadgen_warnings"], "effective": lg["effective"], "results": lg["results"],
        "accuracy": child.get("accuracy"),
        "completed_samples": child.get("completed_samples"),
        "versions": child.get("versions", {}),
        "started": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "wall_seconds": round(wall, 3),
    }


def require_ok(meta: dict) -> None:
    if meta["status"] != "ok":
        raise RunError(f"{meta['benchmark']} {meta['scenario']} {meta['test_mode']} failed: {meta['error']}",
                       f"see {meta['log_dir']}/mlperf_log_detail.txt; rerun with --verbose")
