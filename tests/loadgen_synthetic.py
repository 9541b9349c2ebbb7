"""Real LoadGen logs from a trivial SUT, for tests and dry runs of the submission pipeline.

``run(out_dir, ...)`` starts a child process (LoadGen's FromConfig may run once per process) that
runs one LoadGen test against an in-process SUT whose response for QSL index ``i`` is the int32
``i % 1000`` (deterministic, like a classifier's label). It writes LoadGen's files plus a
``metadata.json`` shaped like the harness runner's, so staging/check code can be exercised on
real-format logs without a model. Knobs make the SUT misbehave on purpose:

- ``latency_ms``: work per sample (on one worker thread, paced: a query's samples complete ``latency_ms`` apart
  from its arrival, a late wake-up caught up on the next sample, so the rate is the same on a busy machine: with
  a plain sleep per sample three busy loops beside the suite moved TEST01's two Offline runs 247.8 vs 363.7
  samples/s, past the ±10% the audit allows);
- ``corrupt``: QSL indices whose response is different (TEST01 must fail);
- ``cached``: answer repeats of a sample at once (TEST04 must fail).

Used by the tests only (test_compliance_verify, test_submission_pipeline).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def run(out_dir: str | Path, *, mode: str = "PerformanceOnly", scenario: str = "Offline",
        model: str = "resnet50", total: int = 64, perf_count: int = 32, min_duration_ms: int = 300,
        min_query_count: int = 16, latency_ms: float = 0.0, expected_qps: float = 1000.0,
        audit_config: str | None = None, corrupt: tuple[int, ...] = (), cached: bool = False,
        user_conf_extra: str = "", metadata: dict[str, Any] | None = None, timeout: float = 120) -> dict:
    """Run one synthetic LoadGen test in a child process; returns the metadata it wrote."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    job = dict(out_dir=str(out.resolve()), mode=mode, scenario=scenario, model=model, total=total,
               perf_count=perf_count, min_duration_ms=min_duration_ms, min_query_count=min_query_count,
               latency_ms=latency_ms, expected_qps=expected_qps, audit_config=audit_config,
               corrupt=list(corrupt), cached=cached, user_conf_extra=user_conf_extra, metadata=metadata or {})
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(repo) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(Path(__file__).resolve()), json.dumps(job)],
                       cwd=str(repo), env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"synthetic LoadGen run failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return json.loads((out / "metadata.json").read_text())


def _user_conf(job: dict) -> str:
    m, s = job["model"], job["scenario"]
    lines = [f"{m}.{s}.min_duration = {job['min_duration_ms']}",
             f"{m}.{s}.min_query_count = {job['min_query_count']}",
             f"{m}.{s}.performance_sample_count_override = {job['perf_count']}"]
    if s == "Offline":
        lines.append(f"{m}.{s}.target_qps = {job['expected_qps']}")
    elif s == "Server":
        lines.append(f"{m}.{s}.target_qps = {job['expected_qps']}")
    elif s in ("SingleStream", "MultiStream"):
        lines.append(f"{m}.{s}.target_latency = {max(1, int(job['latency_ms'] or 1))}")
    return "\n".join(lines) + "\n" + job.get("user_conf_extra", "")


def _child(job: dict) -> None:
    import queue
    import threading

    import numpy as np
    import mlperf_loadgen as lg

    out = Path(job["out_dir"])
    user_conf = out / "user.conf"
    user_conf.write_text(_user_conf(job))
    work = Path(tempfile.mkdtemp(prefix="synthetic-cwd-"))
    os.chdir(work)
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, job["scenario"])
    settings.FromConfig(str(user_conf), job["model"], job["scenario"], 1)
    settings.mode = getattr(lg.TestMode, job["mode"])
    if job["audit_config"]:
        Path("audit.config").write_text(job["audit_config"])
        settings.FromConfig("audit.config", job["model"], job["scenario"], 2)

    corrupt = set(job["corrupt"])
    cache: dict[int, np.ndarray] = {}
    keep: list[np.ndarray] = []          # response buffers stay alive until the test ends
    q: "queue.Queue" = queue.Queue()

    due = [0.0]          # when the sample being answered is due (monotonic seconds)

    def answer(sample) -> None:
        idx = sample.index
        if job["cached"] and idx in cache:
            arr = cache[idx]
        else:
            if job["latency_ms"]:
                due[0] += job["latency_ms"] / 1000.0
                time.sleep(max(0.0, due[0] - time.monotonic()))
            arr = np.array([(idx + 1 if idx in corrupt else idx) % 1000], dtype=np.int32)
            cache[idx] = arr
        keep.append(arr)
        lg.QuerySamplesComplete([lg.QuerySampleResponse(sample.id, arr.ctypes.data, arr.nbytes)])

    def worker() -> None:
        while True:
            item = q.get()
            if item is None:
                return
            due[0] = max(due[0], time.monotonic())        # a query that arrived after an idle spell starts now
            for s in item:
                answer(s)

    t = threading.Thread(target=worker, daemon=True)
    t.start()
    sut = lg.ConstructSUT(lambda samples: q.put(list(samples)), lambda: None)
    qsl = lg.ConstructQSL(job["total"], min(job["total"], job["perf_count"]), lambda s: None, lambda s: None)
    log_out = lg.LogOutputSettings()
    log_out.outdir = str(out)
    log_out.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = log_out
    log_settings.enable_trace = False
    started = time.time()
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings, log_settings)
    finally:
        q.put(None)
        t.join()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
        if Path("audit.config").exists():
            Path("audit.config").unlink()
        os.chdir("/")
        work.rmdir()
    (out / "mlperf_log_trace.json").unlink(missing_ok=True)
    _write_metadata(out, job, started, time.time())


# the machine every synthetic run records (metadata.json "machine", as code.common.systems.facts writes it)
MACHINE = {"hostname": "synthetic-host",
           "info": {"gpus": [], "cpu": {"vendor": "AuthenticAMD", "model_name": "AMD EPYC 9654", "cores": 2,
                                        "sockets": 1, "arch": "x86_64"}, "memory_gb": 24.0, "source": "detected"},
           "host": {"kernel": "6.1.0", "os": "Debian GNU/Linux 12 (bookworm)", "product": "QEMU Standard PC",
                    "lscpu": {"Socket(s)": "1", "Core(s) per socket": "2", "L2 cache": "2 MiB", "L3 cache": "32 MiB"},
                    "storage_bytes": 100e9, "disks": [{"name": "vda", "rotational": "1"}], "nics": [],
                    "memory_config": ""},
           "gpus_extra": []}


def _write_metadata(out: Path, job: dict, started: float, finished: float) -> None:
    from code.common.compliance.mlperf_log import DetailLog
    from code.common import scenarios

    log = DetailLog(out / "mlperf_log_detail.txt")
    scen = job["scenario"]
    metric = scenarios.get(scen).checker_field
    value = log.get(metric)
    eff = {k: v for k, v in log.values.items() if k.startswith("effective_")}
    md = {
        "schema": 2, "benchmark": "resnet50", "log_name": "resnet50", "loadgen_model": job["model"],
        "scenario": scen, "test_mode": job["mode"], "audit_test": None, "system_id": "Synthetic-2c",
        "system_name": "Synthetic-2c_ORT", "config_ver": "default", "model_variant": "tiny",
        "backend": "onnxruntime", "precision": "fp32", "config_hash": "synthetic", "fast": False,
        "settings": {"gpu_batch_size": 1}, "sources": {}, "user_conf": (out / "user.conf").read_text(),
        "status": "ok", "error": None, "result_validity": log.get("result_validity"),
        "valid": log.get("result_validity") == "VALID" if job["mode"] == "PerformanceOnly" else True,
        "metric": metric, "metric_value": float(value) if value is not None and job["mode"] == "PerformanceOnly" else None,
        "early_stopping": {"met": log.get("early_stopping_met"), "lines": []},
        "loadgen_errors": log.errors(), "effective": eff,
        "accuracy": None, "versions": {"python": sys.version.split()[0]}, "machine": MACHINE,
        "started": started, "finished": finished, "wall_seconds": finished - started, "log_dir": str(out),
    }
    if job["mode"] == "AccuracyOnly":
        entries = json.loads((out / "mlperf_log_accuracy.json").read_text())
        good = sum(1 for e in entries if int.from_bytes(bytes.fromhex(e["data"]), "little") == e["qsl_idx"] % 1000)
        acc = 100.0 * good / max(1, len(entries))
        text = f"accuracy={acc:.3f}%, good={good}, total={len(entries)}\n"
        (out / "accuracy.txt").write_text(text)
        md["accuracy"] = {"metrics": {"acc": acc}, "passed": acc >= 99.0, "text": text}
    md.update(job.get("metadata") or {})
    (out / "metadata.json").write_text(json.dumps(md, indent=2, sort_keys=True, default=str) + "\n")


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
