"""Bad input is one line of cause naming the file, the fixing command, and exit 2 or 3: config files,
systems files, injected hardware, flags and preprocessed data (issue 8, items 10-12)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from code.common.errors import MissingDataError
from tests.conftest import REPO, run_main
from tests.test_cli_errors import _assert_user_error

H200 = {"name": "NVIDIA H200", "pci_id": "0x233510DE", "memory_mb": 143771}
L4 = {"name": "NVIDIA L4", "pci_id": "0x27B810DE", "memory_mb": 23034}


def _info(env, *extra, scenario="Offline"):
    return run_main("--action=info", "--benchmarks=resnet50", f"--scenarios={scenario}", *extra, env=env)


def _config(tmp_path, body: bytes | str) -> dict:
    d = tmp_path / "configs" / "resnet50" / "Offline"
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_bytes(body if isinstance(body, bytes) else body.encode())
    return {"MLPERF_CONFIGS_DIR": str(tmp_path / "configs")}


# --- config.json -----------------------------------------------------------------------------------

@pytest.mark.parametrize("body,needle", [
    ('{"default": {"gpu_batch_size": 8,\n "gpu_batch_size": 4}}', "config.json:2: key 'gpu_batch_size' given twice"),
    ('{"default": {"extends": "x"}, "x": {}}', "\"default\" block cannot extend"),
    ('{"default": {}, "x": {"extends": "y"}, "y": {"extends": "x"}}', "'extends' cycle"),
    # blocks no system here reads are validated too: a broken block fails on every machine
    ('{"default": {}, "Some-Other-Systemx8": {"extends": "nope"}}', "extends unknown block 'nope'"),
    ('{"default": {}, "Some-Other-Systemx8": {"gpu_batch_sise": 8}}', "unknown key 'gpu_batch_sise'"),
    (b'\xff\xfe{"default": {}}', "not UTF-8"),
])
def test_config_json_errors(tmp_path, harness_env, body, needle):
    r = _info({**harness_env, **_config(tmp_path, body)})
    _assert_user_error(r, 2, "config.json", needle)


def test_config_json_that_is_a_folder(tmp_path, harness_env):
    d = tmp_path / "configs" / "resnet50" / "Offline" / "config.json"
    d.mkdir(parents=True)
    r = _info({**harness_env, "MLPERF_CONFIGS_DIR": str(tmp_path / "configs")})
    _assert_user_error(r, 2, "config.json", "Is a directory")


# --- systems/known/*.json and MLPERF_FAKE_SYSTEM --------------------------------------------------

@pytest.mark.parametrize("entry,needle", [
    ({"system_id": "X", "gpu_names": ["NVIDIA X"], "pci_ids": [9013], "counts": [1]}, "'pci_ids' must be a list of strings"),
    ({"system_id": "X", "gpu_names": "NVIDIA X", "counts": [1]}, "'gpu_names' must be a list of strings"),
    ({"system_id": "X", "gpu_names": ["NVIDIA X"], "counts": "12"}, "'counts' must be a list of GPU counts"),
    ({"system_id": "", "gpu_names": ["NVIDIA X"], "counts": [1]}, "'system_id' must be a name of 1 to 64 letters"),
    ({"system_id": "X", "gpu_names": ["NVIDIA X"], "count": [1]}, "unknown key 'count'"),
    ({"system_id": "X", "counts": [1]}, "needs 'gpu_names' or 'pci_ids'"),
])
def test_known_system_file_errors(tmp_path, harness_env, entry, needle):
    (tmp_path / "known").mkdir()
    (tmp_path / "known" / "x.json").write_text(json.dumps(entry))
    env = {**harness_env, "MLPERF_SYSTEMS_DIR": str(tmp_path), "MLPERF_FAKE_SYSTEM": json.dumps({"gpus": [H200]})}
    _assert_user_error(_info(env), 2, "known/x.json", needle)


def test_known_system_file_with_bad_json(tmp_path, harness_env):
    (tmp_path / "known").mkdir()
    (tmp_path / "known" / "x.json").write_text('{"system_id": "X" "counts": [1]}')
    env = {**harness_env, "MLPERF_SYSTEMS_DIR": str(tmp_path), "MLPERF_FAKE_SYSTEM": json.dumps({"gpus": [H200]})}
    _assert_user_error(_info(env), 2, "known/x.json:1", "bad JSON")


def test_a_user_file_adds_a_gpu_count_the_builtin_class_lacks(tmp_path, harness_env):
    """3x H200: the error says to add the count in a known/*.json file, and that file is then used."""
    env = {**harness_env, "MLPERF_FAKE_SYSTEM": json.dumps({"gpus": [H200] * 3}), "MLPERF_SYSTEMS_DIR": str(tmp_path)}
    r = _info(env)
    _assert_user_error(r, 2, "3x H200-SXM-141GB", "systems/known/H200-SXM-141GB.json", '"counts": [3]')
    (tmp_path / "known").mkdir()
    (tmp_path / "known" / "H200-SXM-141GB.json").write_text(json.dumps(
        {"system_id": "H200-SXM-141GB", "pci_ids": ["0x2335"], "arch": "Hopper", "counts": [3]}))
    r = _info(env)
    assert r.returncode == 0, r.stderr
    assert "system id: H200-SXM-141GBx3" in r.stdout and "scaled from the 1-GPU block to 3 GPUs" in r.stdout


def test_mixed_gpu_types_name_both(harness_env):
    r = _info({**harness_env, "MLPERF_FAKE_SYSTEM": json.dumps({"gpus": [H200, L4, L4]})})
    _assert_user_error(r, 2, "mixed GPU types: 1x H200-SXM-141GB + 2x L4", "CUDA_VISIBLE_DEVICES")
    assert "matches no" not in r.stderr


@pytest.mark.parametrize("fake,needle", [
    ("[1]", "expected a JSON object"),
    ('{"gpus": {"name": "x"}}', "'gpus' must be a list"),
    ('{"gpus": [{"nam": "x"}]}', "unknown key 'nam'"),
    ('{"gpus": [{"name": "x"}]}', "needs pci_id"),
    ('{"cpu": {"vendor": "a", "model_name": "b", "cores": "2"}}', "'cpu.cores' must be an integer"),
    ('{"gpu": []}', "unknown key 'gpu'"),
    ("{not json", "not valid JSON"),
])
def test_fake_system_of_the_wrong_shape(harness_env, fake, needle):
    _assert_user_error(_info({**harness_env, "MLPERF_FAKE_SYSTEM": fake}), 2, "MLPERF_FAKE_SYSTEM", needle)


# --- flags -----------------------------------------------------------------------------------------

def test_empty_scenarios_is_not_all(harness_env):
    _assert_user_error(_info(harness_env, scenario=""), 2, "--scenarios is empty")


def test_no_benchmark_fix_line_names_the_right_variable(harness_env):
    r = run_main("--action=run_harness", env=harness_env)
    _assert_user_error(r, 2, "no benchmark given", 'make run_harness RUN_ARGS="--benchmarks=resnet50"')
    assert "BENCHMARKS=" not in r.stderr                     # run_harness ignores BENCHMARKS
    r = run_main("--action=download_data", env=harness_env)
    _assert_user_error(r, 2, "make download_data BENCHMARKS=resnet50")


def test_missing_tiny_data_fix_lines_name_the_tiny_variant(tmp_path):
    env = {"MLPERF_BUILD_DIR": str(tmp_path / "b"), "MLPERF_SCRATCH_PATH": str(tmp_path / "s")}
    r = run_main("--action=preprocess_data", "--benchmarks=resnet50", "--model_variant=tiny", env=env)
    _assert_user_error(r, 3, "val_map", "make download_data BENCHMARKS=resnet50 MODEL_VARIANT=tiny")
    r = run_main("--action=generate_engines", "--benchmarks=resnet50", "--model_variant=tiny", "--scenarios=Offline",
                 env=env)
    _assert_user_error(r, 3, "model not found", "make download_model BENCHMARKS=resnet50 MODEL_VARIANT=tiny")


def test_failed_make_run_harness_prints_no_earlier_table(tiny_resnet, tmp_path):
    """The table comes from this invocation's metadata: a run that fails before running prints the
    error alone (no earlier run's table, no second error)."""
    ok = subprocess.run(["make", "-s", "run_harness", "RUN_ARGS=--benchmarks=resnet50 --model_variant=tiny "
                         "--scenarios=SingleStream --min_duration=200 --min_query_count=8 --max_query_count=8"],
                        cwd=REPO, env={**_env(), **tiny_resnet}, capture_output=True, text=True, timeout=600)
    assert ok.returncode == 0 and "SingleStream" in ok.stdout and "Results of this invocation" in ok.stdout, ok.stderr
    bad = subprocess.run(["make", "-s", "run_harness", "RUN_ARGS=--benchmarks=resnet50 --model_variant=tiny "
                          "--scenarios=SingleStream"], cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={**_env(), **tiny_resnet, "MLPERF_SCRATCH_PATH": str(tmp_path / "empty")})
    assert bad.returncode != 0 and "Error 3" in bad.stderr, bad.stdout + bad.stderr    # make's own code is 2
    assert "Results" not in bad.stdout and "SingleStream" not in bad.stdout, bad.stdout
    assert bad.stderr.count("error:") == 1 and "MODEL_VARIANT=tiny" in bad.stderr, bad.stderr


def _env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}


# --- preprocessed data -----------------------------------------------------------------------------

@pytest.fixture()
def scratch_copy(tiny_resnet, tmp_path):
    """A private copy of the tiny ResNet50 scratch folder (models, val_map, preprocessed .npy)."""
    src = Path(tiny_resnet["MLPERF_SCRATCH_PATH"])
    dst = tmp_path / "scratch"
    for sub in ("models/resnet50", "data/imagenet", "preprocessed_data/imagenet"):
        shutil.copytree(src / sub, dst / sub)
    npy = next((dst / "preprocessed_data" / "imagenet" / "tiny").glob("*.npy"))
    return {**tiny_resnet, "MLPERF_SCRATCH_PATH": str(dst), "MLPERF_BUILD_DIR": str(tmp_path / "build")}, npy


def _run_tiny(env, tmp_path):
    return run_main("--action=run_harness", "--benchmarks=resnet50", "--model_variant=tiny", "--scenarios=Offline",
                    "--min_duration=100", "--min_query_count=1", f"--log_dir={tmp_path / 'logs'}", env=env)


@pytest.mark.parametrize("damage,needle", [
    (lambda a: a[:10], "holds 10 images but the val_map lists 512"),
    (lambda a: a.astype(np.float32), "dtype float32, expected uint8"),
    (lambda a: a[:, :, :32], "shape (512, 3, 32, 64), expected (N, 3, 64, 64)"),
])
def test_preprocessed_npy_that_does_not_match(scratch_copy, tmp_path, damage, needle):
    env, npy = scratch_copy
    np.save(npy, damage(np.load(npy)))
    r = _run_tiny(env, tmp_path)
    _assert_user_error(r, 3, str(npy), needle, "make preprocess_data BENCHMARKS=resnet50 MODEL_VARIANT=tiny")
    assert not list((tmp_path / "logs").rglob("*.partial"))


def test_load_array_names_truncated_and_pickled_files(tmp_path):
    from code.common.fileio import load_array

    good = tmp_path / "a.npy"
    np.save(good, np.zeros((4, 3), np.int32))
    assert load_array(good, "fix", dtype=np.int32, shape=(None, 3)).shape == (4, 3)
    good.write_bytes(good.read_bytes()[:100])
    with pytest.raises(MissingDataError, match="not a readable .npy array") as e:
        load_array(good, "make preprocess_data")
    assert e.value.fix == "make preprocess_data" and e.value.exit_code == 3
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(MissingDataError, match="not a readable"):
        load_array(tmp_path / "o.npy", "fix")
    with pytest.raises(MissingDataError, match="not found"):
        load_array(tmp_path / "missing.npy", "fix")


def test_malformed_val_map_line(tmp_path):
    from code.resnet50.dataset import read_val_map

    (tmp_path / "val_map.txt").write_text("ILSVRC2012_val_00000001.JPEG 65\nILSVRC2012_val_00000002.JPEG\n")
    with pytest.raises(MissingDataError, match=r"val_map.txt:2: expected"):
        read_val_map(tmp_path / "val_map.txt", "make download_data BENCHMARKS=resnet50")

