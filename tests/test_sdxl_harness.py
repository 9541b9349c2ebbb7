"""SDXL tiny end to end through the CLI (`python -m code.main`), exactly as a user runs it, on CPU with
ONNX Runtime: data steps, engine cache, every scenario in short --fast runs, AccuracyOnly with
the accuracy step, and the one-line errors. Runs are kept short with --min_duration and
--sdxl_sample_count; the full tiny set (320 captions) is exercised by `make demo`.
"""
from __future__ import annotations

import json
from pathlib import Path


from tests.conftest import metadata_under, offline_samples, run_main

COMMON = ("--benchmarks=sdxl", "--model_variant=tiny")


def run(env, tmp_path: Path, scenario: str, mode: str, *extra: str) -> dict:
    log_dir = tmp_path / f"{scenario}-{mode}"
    r = run_main("--action=run_harness", *COMMON, f"--scenarios={scenario}", f"--test_mode={mode}", "--fast",
                 f"--log_dir={log_dir}", *extra, env=env, check=True)
    assert r.stdout.count("[engine] ") == 4, r.stdout     # one line per component (clip1, clip2, unet, vae)
    metas = metadata_under(log_dir)
    assert len(metas) == 1
    m = metas[0]
    assert m["status"] == "ok", m.get("error")
    assert m["benchmark"] == "sdxl" and m["loadgen_model"] == "stable-diffusion-xl" and m["scenario"] == scenario
    assert m["loadgen_errors"] == []
    return m


def test_sdxl_generate_engines_per_component_and_cached(tiny_sdxl):
    args = ("--action=generate_engines", *COMMON, "--scenarios=Offline", "--gpu_batch_size=clip1:4,clip2:4,unet:2,vae:1")
    first = run_main(*args, env=tiny_sdxl, check=True)
    names = sorted(Path(line.split()[-1]).name for line in first.stdout.splitlines() if line.startswith("[generate_engines]"))
    assert names == ["clip1-b4-fp32.onnx", "clip2-b4-fp32.onnx", "unet-b4-fp32.onnx", "vae-b1-fp32.onnx"]
    again = run_main(*args, env=tiny_sdxl, check=True)
    assert again.stdout.count("[engine] reuse") == 4 and "[engine] build" not in again.stdout


def test_sdxl_Offline_AccuracyOnly(tiny_sdxl, tmp_path):
    m = run(tiny_sdxl, tmp_path, "Offline", "AccuracyOnly", "--sdxl_sample_count=12")
    acc = m["accuracy"]
    assert set(acc["metrics"]) == {"FID_SCORE", "CLIP_SCORE"} and acc["passed"] is None   # tiny: comparative only
    out = Path(m["log_dir"])
    assert (out / "accuracy.txt").read_text().startswith("Accuracy Results: {'FID_SCORE': '")
    assert sorted(p.name for p in (out / "images").glob("*.png")) == sorted(f"{i}.png" for i in range(10))
    assert len((out / "images" / "captions.txt").read_text().splitlines()) == 10
    entries = json.loads((out / "mlperf_log_accuracy.json").read_text())
    assert sorted({e["qsl_idx"] for e in entries}) == list(range(12))
    assert all(len(e["data"]) == 128 * 128 * 3 * 2 for e in entries)     # uint8 HWC, hex


def test_sdxl_Offline_PerformanceOnly(tiny_sdxl, tmp_path):
    m = run(tiny_sdxl, tmp_path, "Offline", "PerformanceOnly", *offline_samples(16))
    assert m["metric_value"] and m["metric_value"] > 0.5     # samples/s (about 6-8 on 2 cores)
    assert m["settings"]["gpu_batch_size"] == {"clip1": 8, "clip2": 8, "unet": 8, "vae": 8}


def test_sdxl_SingleStream_PerformanceOnly(tiny_sdxl, tmp_path):
    m = run(tiny_sdxl, tmp_path, "SingleStream", "PerformanceOnly", "--min_duration=1000")
    assert m["metric_value"] and m["metric_value"] > 0


def test_sdxl_Server_PerformanceOnly(tiny_sdxl, tmp_path):
    m = run(tiny_sdxl, tmp_path, "Server", "PerformanceOnly", "--min_duration=3000", "--server_target_qps=2",
            "--server_batch_timeout_ms=250", "--gpu_batch_size=clip1:4,clip2:4,unet:4,vae:4")
    assert m["settings"]["server_batch_timeout_ms"] == 250
    assert m["effective"].get("effective_min_duration_ms") in (3000, "3000")


def test_sdxl_bad_batch_mapping_is_one_line_error(tiny_sdxl, tmp_path):
    r = run_main("--action=generate_engines", *COMMON, "--scenarios=Offline", "--gpu_batch_size=unet:4",
                 env=tiny_sdxl)
    assert r.returncode == 2
    assert "gpu_batch_size has no entry for SDXL component 'clip1'" in r.stderr + r.stdout
    assert "Traceback" not in r.stderr


def test_sdxl_missing_data_names_the_fix(tiny_sdxl, tmp_path):
    scratch = tmp_path / "scratch_without_data"      # the model is there, the preprocessed data is not
    scratch.mkdir()
    (scratch / "models").symlink_to(Path(tiny_sdxl["MLPERF_SCRATCH_PATH"]) / "models")
    env = dict(tiny_sdxl, MLPERF_SCRATCH_PATH=str(scratch))
    r = run_main("--action=run_harness", *COMMON, "--scenarios=Offline", "--test_mode=PerformanceOnly", "--fast",
                 f"--log_dir={tmp_path / 'logs'}", env=env)
    text = r.stdout + r.stderr
    # The run happens in a child process; its HarnessError comes back with its fix and exit code.
    assert r.returncode == 3, text
    assert "preprocessed SDXL data missing" in text and "Traceback" not in text
    assert "fix: make preprocess_data" in text, text
