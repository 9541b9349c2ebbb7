"""Harness overhead benchmark for ResNet50 on ONNX Runtime (CPU). Prints figures; asserts nothing.

Uses the full-size ResNet50-v1.5 architecture (torchvision, random weights, the MLPerf ONNX
interface) at 224x224 so the figures compare with ../shared/FACTS.md, in a private scratch folder.

  (a) raw backend samples/s: a tight loop over the same engine, batch size and threads
  (b) harness Offline samples/s through LoadGen
  (c) b/a (goal >= 0.98)
  (d) SingleStream p90 latency minus the raw batch-1 p90 latency
  (e) null-backend harness Offline throughput (the harness's own ceiling)
  (f) null-backend harness Server: the highest VALID target QPS of a sweep (double until INVALID,
      then bisect), batch --server-batch with a 1 ms batcher timeout
  (g) the same sweep for a bare Python SUT completing inline (LoadGen + pybind's ceiling here)
  (h) f/g

usage: python scripts/bench_harness.py [--batch 8] [--seconds 30] [--tiny] [--server-batch 64]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def prepare(root: Path, tiny: bool) -> dict:
    """Model, val_map and preprocessed data for the bench, in a private scratch."""
    env = {"MLPERF_BUILD_DIR": str(root / "build"), "MLPERF_SCRATCH_PATH": str(root / "scratch"),
           "MLPERF_DATA_MAPS_DIR": str(root / "data_maps")}
    os.environ.update(env)
    from code.common import paths
    from code.resnet50 import model

    if tiny:
        for action in ("download_model", "download_data", "preprocess_data"):
            subprocess.run([sys.executable, "-m", "code.main", f"--action={action}", "--benchmarks=resnet50",
                            "--model_variant=tiny"], cwd=REPO, check=True, env={**os.environ})
        return env
    random_full_set(1024)
    return env


def random_full_set(images: int) -> None:
    """The reference variant's files with the full-size ResNet50 architecture and random weights, in the scratch
    that MLPERF_SCRATCH_PATH / MLPERF_DATA_MAPS_DIR name: the ONNX, a val_map of ``images`` names and their
    pre-processed random 224x224 images (scripts/gpu_check.py uses it too)."""
    from code.common import paths
    from code.resnet50 import model

    onnx_path = paths.models_dir("resnet50") / model.ONNX_NAME
    if not onnx_path.exists():
        model.export_random_full(onnx_path)
    vm = paths.data_maps_dir() / "imagenet" / "val_map.txt"
    vm.parent.mkdir(parents=True, exist_ok=True)
    vm.write_text("".join(f"ILSVRC2012_val_{i + 1:08d}.JPEG {i % 1000}\n" for i in range(images)))
    pre = paths.preprocessed_dir("imagenet") / f"val_uint8_nchw_{model.REAL_CROP}.npy"
    if not pre.exists() or np.load(pre, mmap_mode="r").shape[0] != images:
        pre.parent.mkdir(parents=True, exist_ok=True)
        np.save(pre, np.random.default_rng(0).integers(0, 256, (images, 3, model.REAL_CROP, model.REAL_CROP),
                                                       dtype=np.uint8))


def settings_for(scenario: str, extra: list[str], tiny: bool):
    from code.main import plan

    # --force: the rates here are deliberately far above the CPU config's (null backend, sweeps)
    args = ["--action=run_harness", "--benchmarks=resnet50", f"--scenarios={scenario}", "--force", *extra]
    if tiny:
        args.append("--model_variant=tiny")
    return plan(args)[1][0]


def raw_loop(settings, seconds: float) -> tuple[float, float]:
    """(samples/s, p90 batch latency ms) over the same engine file and spec the harness uses."""
    from code.common.backends import get_backend
    from code.resnet50.harness import ResNet50Benchmark

    b = ResNet50Benchmark(settings)
    engine = get_backend(settings.backend).load(b.generate_engines()["resnet50"], b.engine_spec())
    qsl = b.make_qsl()
    qsl.load(range(qsl.performance_count))
    bs = b.engine_spec().batch_size
    # a batch larger than the loaded set (2048 > 1024 samples on an H200) repeats samples, as LoadGen's queries do
    feeds = {"input_tensor:0": qsl.batch([i % qsl.performance_count for i in range(bs)])}
    for _ in range(3):
        engine.infer(feeds)
    lat, n, t0 = [], 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        t = time.perf_counter()
        engine.infer(feeds)
        lat.append(time.perf_counter() - t)
        n += bs
    return n / (time.perf_counter() - t0), float(np.percentile(lat, 90) * 1e3)


def harness(settings, mode_dir: Path, null: bool = False) -> dict:
    from code.common.harness.runner import run_one
    from code.common.settings import RunControl
    from code.resnet50.harness import ResNet50Benchmark

    engines = {} if null else ResNet50Benchmark(settings).generate_engines()
    return run_one(settings, RunControl(null_processor=null, overwrite=True), mode_dir, engines)


def server_sweep(root: Path, tiny: bool, seconds: float, batch: int, start: float = 20000.0) -> tuple[float, list]:
    """Highest VALID Server target QPS of the null backend: double until INVALID, then bisect.
    Returns (best VALID target QPS, [(target, validity, completed samples/s)])."""
    probes = []

    def probe(qps: float) -> bool:
        s = settings_for("Server", [f"--gpu_batch_size={batch}", "--server_batch_timeout_ms=1",
                                    f"--min_duration={int(seconds * 1000)}", "--min_query_count=1",
                                    f"--server_target_qps={qps:.0f}"], tiny)
        m = harness(s, root / "logs" / f"server-null-{qps:.0f}", null=True)
        probes.append((round(qps), m["result_validity"], round(m["metric_value"] or 0, 1)))
        print(f"  server null probe {qps:>10.0f} QPS: {m['result_validity']} ({m['metric_value']:.0f} samples/s)",
              flush=True)
        return m["result_validity"] == "VALID"

    return sweep(probe, start), probes


BARE = """
import json, os, sys, tempfile
import numpy as np
import mlperf_loadgen as lg
qps = float(sys.argv[1]); seconds = float(sys.argv[2])
buf = np.zeros(1, np.uint8); ptr = buf.__array_interface__["data"][0]
def issue(samples):
    lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, ptr, 1) for s in samples])
sut = lg.ConstructSUT(issue, lambda: None)
qsl = lg.ConstructQSL(1024, 1024, lambda x: None, lambda x: None)
ts = lg.TestSettings(); ts.scenario = lg.TestScenario.Server; ts.mode = lg.TestMode.PerformanceOnly
d = tempfile.mkdtemp(); conf = os.path.join(d, "user.conf")
open(conf, "w").write(f"resnet50.Server.target_qps = {qps}\\nresnet50.Server.min_duration = {int(seconds * 1000)}\\n"
                      "resnet50.Server.min_query_count = 1\\n")
ts.FromConfig(conf, "resnet50", "Server")
out = lg.LogOutputSettings(); out.outdir = d; log = lg.LogSettings(); log.log_output = out; log.enable_trace = False
lg.StartTestWithLogSettings(sut, qsl, ts, log)
kv = {}
for line in open(os.path.join(d, "mlperf_log_detail.txt")):
    if line.startswith(":::MLLOG"):
        e = json.loads(line[8:]); kv[e["key"]] = e["value"]
print(json.dumps([kv.get("result_validity"), kv.get("result_completed_samples_per_sec")]))
"""


def sweep(probe, start: float) -> float:
    """Highest target for which probe(target) is True: code.common.tuning.search (double until it
    fails, then bisect), to 1/16 of the bracket, as four bisections of a doubling step give."""
    from code.common.tuning import search

    return search(probe, start, precision=1 / 16)


def bare_sweep(seconds: float, start: float = 20000.0) -> tuple[float, list]:
    """LoadGen + pybind ceiling on this machine: a bare Python SUT completing inline, no data (the
    FACTS.md "bare Python SUT" row), swept the same way, one LoadGen test per process."""
    probes = []

    def probe(qps: float) -> bool:
        r = subprocess.run([sys.executable, "-c", BARE, str(qps), str(seconds)], capture_output=True, text=True)
        validity, rate = json.loads(r.stdout.strip().splitlines()[-1])
        probes.append((round(qps), validity, round(rate or 0, 1)))
        print(f"  bare inline SUT probe {qps:>10.0f} QPS: {validity}", flush=True)
        return validity == "VALID"

    return sweep(probe, start), probes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=30.0, help="duration of each measurement")
    ap.add_argument("--server-batch", type=int, default=64, help="batch size of the null-backend Server sweep")
    ap.add_argument("--tiny", action="store_true", help="use the tiny variant instead of full-size ResNet50")
    ap.add_argument("--root", default=str(REPO / "build" / "bench_harness"))
    a = ap.parse_args()
    prepare(Path(a.root), a.tiny)
    dur = int(a.seconds * 1000)
    off = settings_for("Offline", [f"--gpu_batch_size={a.batch}", f"--min_duration={dur}", "--min_query_count=1"], a.tiny)
    raw_qps, _ = raw_loop(off, a.seconds)
    expected = f"--offline_expected_qps={raw_qps:.1f}"
    off = settings_for("Offline", [f"--gpu_batch_size={a.batch}", f"--min_duration={dur}", "--min_query_count=1", expected], a.tiny)
    m_off = harness(off, Path(a.root) / "logs" / "offline")
    ss = settings_for("SingleStream", [f"--min_duration={dur}", "--min_query_count=64"], a.tiny)
    _, raw_p90_b1 = raw_loop(ss, a.seconds)
    ss = settings_for("SingleStream", [f"--min_duration={dur}", "--min_query_count=64",
                                       f"--single_stream_expected_latency_ns={int(raw_p90_b1 * 1e6)}"], a.tiny)
    m_ss = harness(ss, Path(a.root) / "logs" / "singlestream")
    null = settings_for("Offline", [f"--gpu_batch_size={a.batch}", "--min_duration=10000", "--min_query_count=1",
                                    "--offline_expected_qps=400000"], a.tiny)
    m_null = harness(null, Path(a.root) / "logs" / "null", null=True)
    server_best, server_probes = server_sweep(Path(a.root), a.tiny, min(a.seconds, 10.0), a.server_batch)
    bare_best, bare_probes = bare_sweep(min(a.seconds, 10.0))
    fig = {
        "model": "tiny ResNet50" if a.tiny else "ResNet50-v1.5 (random weights, 224x224)",
        "batch": a.batch, "threads": off.cpu_threads or len(os.sched_getaffinity(0)),
        "a_raw_samples_per_s": round(raw_qps, 2),
        "b_harness_offline_samples_per_s": round(m_off["metric_value"], 2), "b_validity": m_off["result_validity"],
        "c_ratio_b_over_a": round(m_off["metric_value"] / raw_qps, 4),
        "raw_batch1_p90_ms": round(raw_p90_b1, 3),
        "harness_singlestream_p90_ms": round(m_ss["metric_value"] / 1e6, 3), "ss_validity": m_ss["result_validity"],
        "d_ss_p90_minus_raw_ms": round(m_ss["metric_value"] / 1e6 - raw_p90_b1, 3),
        "e_null_backend_offline_samples_per_s": round(m_null["metric_value"], 1),
        "f_null_backend_server_max_valid_qps": round(server_best),
        "f_server_batch": a.server_batch,
        "f_server_probes": server_probes,
        "g_bare_inline_sut_server_max_valid_qps": round(bare_best),
        "g_bare_probes": bare_probes,
        "h_ratio_f_over_g": round(server_best / bare_best, 3) if bare_best else None,
    }
    for k, v in fig.items():
        print(f"{k:40s} {v}")
    (Path(a.root) / "figures.json").write_text(json.dumps(fig, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
