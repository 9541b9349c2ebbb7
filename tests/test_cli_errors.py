"""Bad input: one line of cause, the fixing command, a non-zero exit code, never a traceback."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import REPO, run_main


def _assert_user_error(r, code: int, *needles: str):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and lines[1].strip().startswith("fix: "), r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)


def test_unknown_flag_suggests_nearest(harness_env):
    r = run_main("--action=run_harness", "--benchmarks=resnet50", "--sever_target_qps=3", env=harness_env)
    _assert_user_error(r, 2, "--sever_target_qps", "server_target_qps")


def test_unknown_benchmark_suggests_nearest(harness_env):
    r = run_main("--action=info", "--benchmarks=resnett", env=harness_env)
    _assert_user_error(r, 2, "resnett", "did you mean")


def test_unknown_scenario_and_value(harness_env):
    _assert_user_error(run_main("--action=info", "--benchmarks=resnet50", "--scenarios=Ofline", env=harness_env),
                       2, "Ofline", "Offline")
    _assert_user_error(run_main("--action=run_harness", "--benchmarks=resnet50", "--test_mode=Perf", env=harness_env),
                       2, "Perf", "PerformanceOnly")
    _assert_user_error(run_main("--action=info", "--benchmarks=resnet50", "--gpu_batch_size=abc", env=harness_env),
                       2, "gpu_batch_size")
    # of two benchmarks, the one that lacks the scenario is named (3D-UNet has no Server)
    _assert_user_error(run_main("--action=info", "--benchmarks=resnet50,unet3d", "--scenarios=Server", env=harness_env),
                       2, "scenario Server is not supported by unet3d", "Offline,SingleStream")


def test_flag_that_does_not_apply_is_an_error(harness_env):
    r = run_main("--action=run_harness", "--benchmarks=resnet50", "--scenarios=Offline", "--server_target_qps=3",
                 env=harness_env)
    _assert_user_error(r, 2, "server_target_qps", "Server")
    r = run_main("--action=download_model", "--benchmarks=resnet50", "--test_mode=AccuracyOnly", env=harness_env)
    _assert_user_error(r, 2, "test_mode", "download_model")


def test_unknown_gpu_exits_2_and_names_it(harness_env):
    fake = json.dumps({"gpus": [{"name": "NVIDIA Mystery 9000", "pci_id": "0xABCD10DE", "memory_mb": 1000}] * 2})
    r = run_main("--action=info", "--benchmarks=resnet50", env={**harness_env, "MLPERF_FAKE_SYSTEM": fake})
    _assert_user_error(r, 2, "NVIDIA Mystery 9000", "0xABCD10DE", "2x", "systems/known")


def test_known_gpu_without_config_block(harness_env, tmp_path):
    """A known GPU without a block of its own runs on its architecture's block, and says so; a config
    file without that fallback either is an error naming the system and the file."""
    fake = json.dumps({"gpus": [{"name": "NVIDIA H100 NVL", "pci_id": "0x232110DE", "memory_mb": 95000}]})
    env = {**harness_env, "MLPERF_FAKE_SYSTEM": fake}
    r = run_main("--action=info", "--benchmarks=resnet50", "--scenarios=Offline", env=env)
    assert r.returncode == 0, r.stderr
    assert "note:" in r.stdout and "no block for H100-NVL-94GBx1" in r.stdout and "'Hopper'" in r.stdout
    (tmp_path / "resnet50" / "Offline").mkdir(parents=True)
    (tmp_path / "resnet50" / "Offline" / "config.json").write_text('{"default": {}, "L4x1": {"extends": "default"}}')
    r = run_main("--action=info", "--benchmarks=resnet50", "--scenarios=Offline",
                 env={**env, "MLPERF_CONFIGS_DIR": str(tmp_path)})
    _assert_user_error(r, 2, "H100-NVL-94GBx1", "config.json", "Hopper")


def test_missing_data_says_which_make_target(tmp_path):
    env = {"MLPERF_BUILD_DIR": str(tmp_path / "b"), "MLPERF_SCRATCH_PATH": str(tmp_path / "s")}
    r = run_main("--action=preprocess_data", "--benchmarks=resnet50", "--model_variant=tiny", env=env)
    _assert_user_error(r, 3, "val_map", "make download_data BENCHMARKS=resnet50")
    r = run_main("--action=generate_engines", "--benchmarks=resnet50", "--model_variant=tiny", "--scenarios=Offline", env=env)
    _assert_user_error(r, 3, "model not found", "make download_model")


@pytest.mark.parametrize("body,needle", [
    ('{"default": {"gpu_batch_sise": 8}}', "gpu_batch_size"),
    ('{"default": {"gpu_batch_size": "eight"}}', "bad value"),
    ('{"default": {"gpu_batch_size": 8,}}', "bad JSON"),
    ('{"default": {"server_target_qps": 8}}', "applies only to Server"),
    ('{"default": {}, "AMD-EPYC": {"extends": "nope"}}', "unknown block"),
])
def test_bad_config_json_reports_file_key_and_line(tmp_path, harness_env, body, needle):
    cfg = tmp_path / "configs"
    (cfg / "resnet50" / "Offline").mkdir(parents=True)
    (cfg / "resnet50" / "Offline" / "config.json").write_text(body)
    r = run_main("--action=info", "--benchmarks=resnet50", "--scenarios=Offline",
                 env={**harness_env, "MLPERF_CONFIGS_DIR": str(cfg)})
    _assert_user_error(r, 2, "config.json", needle)
    if "bad JSON" in needle or "gpu_batch_sise" in body:
        assert "config.json:1" in r.stderr


def test_help_lists_every_cli_field(harness_env):
    from code.common.benchmarks import registry

    r = run_main("--help", env=harness_env)
    assert r.returncode == 0
    for f in registry():
        if f.cli:
            assert f"--{f.name}" in r.stdout


def test_onnxruntime_rejects_reduced_precision(tiny_resnet):
    r = run_main("--action=generate_engines", "--benchmarks=resnet50", "--model_variant=tiny", "--scenarios=Offline",
                 "--precision=fp16", env=tiny_resnet)
    _assert_user_error(r, 2, "fp32", "--precision=fp32")


def test_docs_flags_md_is_generated_from_the_schema():
    from code.common import paths
    from code.common.args import render_markdown
    from code.common.benchmarks import registry

    assert (paths.REPO_ROOT / "docs" / "flags.md").read_text() == render_markdown(registry()), \
        "docs/flags.md is stale: run `python -m code.main --action=docs`"


def test_gpu_copy_streams_other_than_one_is_refused(harness_env):
    """Accepted-then-ignored was the bug: a value the runtime cannot honour is an error saying why."""
    r = run_main("--action=info", "--benchmarks=resnet50", "--scenarios=Offline", "--gpu_copy_streams=2",
                 env=harness_env)
    _assert_user_error(r, 2, "gpu_copy_streams", "gpu_inference_streams")


def test_non_finite_and_runaway_rates_are_refused(harness_env):
    base = ("--action=info", "--benchmarks=resnet50", "--scenarios=Server", "--model_variant=tiny")
    for bad in ("nan", "inf", "-inf"):
        r = run_main(*base, f"--server_target_qps={bad}", env=harness_env)
        _assert_user_error(r, 2, "finite")
    r = run_main(*base, "--server_target_qps=100000", env=harness_env)     # 1000x the tiny config's 100
    _assert_user_error(r, 2, "samples", "--force")
    assert run_main(*base, "--server_target_qps=100000", "--force", env=harness_env).returncode == 0
    assert run_main(*base, "--server_target_qps=300", env=harness_env).returncode == 0


def test_submission_tools_share_the_schema(harness_env):
    """update_results, truncate_results, export_submission and check_submission are actions of the one entry point:
    --round as everywhere (the old --version names it), the same strict flag errors, in docs/flags.md."""
    from code.common import paths

    r = run_main("--action=update_results", "--version=v6.1", env=harness_env)
    _assert_user_error(r, 2, "--version", "--round=v6.1")
    _assert_user_error(run_main("--action=export_submission", "--division=opne", env=harness_env), 2, "open")
    _assert_user_error(run_main("--action=check_submission", "--report_dir=x", env=harness_env), 2,
                       "--report_dir does not apply to --action=check_submission")
    _assert_user_error(run_main("--action=truncate_results", "--submiter=x", env=harness_env), 2, "submitter")
    flags = (paths.REPO_ROOT / "docs" / "flags.md").read_text()
    for f in ("submitter", "division", "staging_root", "stage_logs", "submission_dir", "tarball"):
        assert f"| `{f}` |" in flags, f


@pytest.mark.parametrize("case", ["min_query_count", "forced_rate", "config_rate", "latency"])
def test_a_schedule_larger_than_memory_is_refused_whatever_set_it(harness_env, tmp_path, case):
    """LoadGen builds the whole query schedule before the first query, so a run whose effective settings (a flag,
    --force or not, or config.json) ask for more samples than memory holds is refused at once: exit 2, one line
    naming the setting and where it came from, and no run folder (it used to pass 6 GB in 17 s)."""
    env = dict(harness_env, MLPERF_FAKE_SYSTEM='{"gpus": [], "memory_gb": 16}')
    args = ["--action=run_harness", "--benchmarks=resnet50", "--model_variant=tiny", f"--log_dir={tmp_path / 'logs'}"]
    if case == "min_query_count":
        args += ["--scenarios=Offline", "--min_query_count=1000000000"]
        named = "min_query_count = 1,000,000,000"
    elif case == "forced_rate":
        args += ["--scenarios=Server", "--server_target_qps=10000000", "--force"]
        named = "server_target_qps = 10,000,000"
    elif case == "latency":
        args += ["--scenarios=SingleStream", "--single_stream_expected_latency_ns=1"]
        named = "single_stream_expected_latency_ns = 1"
    else:
        configs = tmp_path / "configs"
        shutil.copytree(REPO / "configs", configs)
        cfg = configs / "resnet50" / "Server" / "config.json"
        data = json.loads(cfg.read_text())
        data["default"]["model_variant"]["tiny"]["server_target_qps"] = 1e8      # what a tiny run reads
        cfg.write_text(json.dumps(data))
        env["MLPERF_CONFIGS_DIR"] = str(configs)
        args += ["--scenarios=Server"]
        named = "server_target_qps = 100,000,000"
    r = run_main(*args, env=env, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "LoadGen would schedule about" in err[0] and named in err[0], r.stderr
    if case == "config_rate":
        assert "config.json" in err[0], err[0]
    assert not (tmp_path / "logs").exists()


def test_a_server_rate_with_minutes_between_queries_is_refused(harness_env, tmp_path):
    """--server_target_qps=0.001 used to wait silently (no sample outstanding, so no watchdog): refused before it
    starts, naming the mean gap; --force runs it anyway (not run here: it would wait)."""
    r = run_main("--action=run_harness", "--benchmarks=resnet50", "--model_variant=tiny", "--scenarios=Server",
                 "--server_target_qps=0.001", f"--log_dir={tmp_path / 'logs'}", env=harness_env, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "one query every 1,000 s on average" in r.stderr and "--force" in r.stderr, r.stderr
    assert not (tmp_path / "logs").exists()
