"""RetinaNet bad input: missing annotations, NaN detections (processor and accuracy), a damaged
preprocessed .npy. Each: one-line cause, the fixing command, exit code != 0, nothing staged."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from code.common.errors import MissingDataError, RunError
from tests.conftest import run_main

BASE = ("--benchmarks=retinanet", "--model_variant=tiny", "--round=v6.0")


def _one_line_error(r, *needles):
    out = r.stdout + r.stderr
    assert r.returncode not in (0, 1), out
    assert "Traceback" not in out, out
    err = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert err, out
    for n in needles:
        assert n in out, (n, out)
    return out


def test_retinanet_missing_annotations(tmp_path):
    env = {"MLPERF_SCRATCH_PATH": str(tmp_path / "scratch"), "MLPERF_BUILD_DIR": str(tmp_path / "build")}
    r = run_main("--action=preprocess_data", "--benchmarks=retinanet", env=env)
    out = _one_line_error(r, "OpenImages annotations not found", "fix: make download_data BENCHMARKS=retinanet")
    assert r.returncode == 3, out
    assert not (tmp_path / "scratch" / "preprocessed_data").exists()


def test_retinanet_bad_annotations_file(tmp_path):
    from code.retinanet.dataset import read_annotations

    p = tmp_path / "openimages-mlperf.json"
    p.write_text('{"images": [')
    with pytest.raises(MissingDataError, match="not a readable COCO annotation file") as e:
        read_annotations(p, "make download_data BENCHMARKS=retinanet")
    assert e.value.fix == "make download_data BENCHMARKS=retinanet" and "\n" not in e.value.cause


def test_retinanet_nan_in_accuracy_log_is_caught(tiny_retinanet, tmp_path, monkeypatch):
    """A detection log with NaN: the accuracy step refuses it, names the sample, writes nothing."""
    for k, v in tiny_retinanet.items():
        monkeypatch.setenv(k, v)
    from code.common.benchmarks import implementation
    from code.main import plan

    _, [s] = plan(["--action=run_harness", *BASE, "--scenarios=Offline"])
    bench = implementation(s.spec)(s)
    good = np.array([[0, 0.1, 0.1, 0.5, 0.5, 0.9, 3]], np.float32)
    bad = good.copy()
    bad[0, 2] = np.nan
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps([{"seq_id": 0, "qsl_idx": 0, "data": good.tobytes().hex()},
                               {"seq_id": 1, "qsl_idx": 1, "data": bad.tobytes().hex()}]))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(RunError, match="sample 1 holds NaN") as e:
        bench.accuracy(str(log), str(out))
    assert e.value.fix and "\n" not in e.value.cause
    assert list(out.iterdir()) == []          # no accuracy.txt, no staging file


def test_retinanet_nan_from_engine_is_caught_by_processor(tmp_path):
    from code.retinanet.harness import RetinaNetProcessor

    class Engine:
        input_names = ("images",)

        def infer(self, feeds):
            return {"boxes": np.array([[1, 2, 3, np.nan]], np.float32), "scores": np.array([0.9], np.float32),
                    "labels": np.array([1])}

    class QSL:
        def sample(self, i):
            return np.zeros((1, 3, 8, 8), np.float32)

    p = RetinaNetProcessor(Engine(), QSL(), 1, 8)
    with pytest.raises(RunError, match="NaN or infinite detections for sample 4") as e:
        p.process([4])
    assert "make preprocess_data BENCHMARKS=retinanet" in e.value.fix


def test_retinanet_damaged_preprocessed_npy(tiny_retinanet, tmp_path):
    """One truncated .npy in a scratch that otherwise links to the tiny set: the run stops before
    LoadGen with the file and the fix named; the run folder is not left half-written."""
    real = Path(tiny_retinanet["MLPERF_SCRATCH_PATH"])
    scratch = tmp_path / "scratch"
    (scratch / "models").mkdir(parents=True)
    os.symlink(real / "models" / "retinanet", scratch / "models" / "retinanet")
    (scratch / "data").mkdir()
    os.symlink(real / "data" / "openimages", scratch / "data" / "openimages")
    src = real / "preprocessed_data" / "openimages" / "tiny" / "256x256_fp32"
    dst = scratch / "preprocessed_data" / "openimages" / "tiny" / "256x256_fp32"
    dst.mkdir(parents=True)
    files = sorted(src.iterdir())
    for f in files[1:]:
        os.symlink(f, dst / f.name)
    (dst / files[0].name).write_bytes(files[0].read_bytes()[:5000])      # truncated
    env = {"MLPERF_SCRATCH_PATH": str(scratch), "MLPERF_BUILD_DIR": str(tmp_path / "build")}
    r = run_main("--action=run_harness", *BASE, "--scenarios=SingleStream", "--min_duration=500",
                 "--min_query_count=8", env=env)
    out = _one_line_error(r, files[0].name, "not a readable .npy array",
                          "fix: make preprocess_data BENCHMARKS=retinanet MODEL_VARIANT=tiny")
    logs = tmp_path / "build" / "logs"
    assert not list(logs.rglob("*.partial")), out
    # the fix works: preprocess_data rewrites the damaged file only
    r = run_main("--action=preprocess_data", "--benchmarks=retinanet", "--model_variant=tiny", env=env, check=True)
    assert "(1 written)" in r.stdout


def test_retinanet_real_checkpoint_missing_names_the_download(tmp_path):
    """The PyTorch path's checkpoint is looked up under its file name; absent, the error names the file and the
    download command (this once raised NameError: the name it read had been removed)."""
    from code.retinanet.model import PTH_NAME, real_torch_model

    with pytest.raises(MissingDataError) as e:
        real_torch_model(tmp_path)
    assert str(tmp_path / PTH_NAME) in e.value.cause and "download_model BENCHMARKS=retinanet" in e.value.fix
