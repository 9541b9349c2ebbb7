"""3D-UNet tiny variant end to end: real LoadGen, real ONNX Runtime (and torch) engines, no mocks.

The tiny set is six synthetic KiTS19-format cases of different raw shapes and voxel spacings, so
resampling (up and down, and none), edge padding, cropping and stride padding all run; preprocessed,
they are 32^3 to 32x64x32 volumes of 1 to 4 patches of 32^3. Their ground truth is the fp32 torch
model's own sliding-window prediction, so a faithful pipeline scores DICE 1.0.
"""
from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO, harness_runs, metadata_under, offline_samples, run_main, tensorrt_accuracy_run

BASE = ("--benchmarks=3d-unet", "--model_variant=tiny")
CASES = 6


@pytest.fixture(scope="module")
def perf_runs(tiny_unet3d, tmp_path_factory) -> dict[str, dict]:
    return harness_runs(tiny_unet3d, tmp_path_factory.mktemp("u3d_perf"), BASE, ("Offline", offline_samples(20)),
                        ("SingleStream", ("--min_duration=1000", "--min_query_count=66")))


@pytest.fixture(scope="module")
def accuracy_runs(tiny_unet3d, tmp_path_factory) -> dict[str, dict]:
    return harness_runs(tiny_unet3d, tmp_path_factory.mktemp("u3d_acc"), BASE, ("Offline,SingleStream", ()),
                        mode="AccuracyOnly")


def _detail(m: dict) -> dict:
    kv = {}
    for line in (Path(m["log_dir"]) / "mlperf_log_detail.txt").read_text().splitlines():
        if line.startswith(":::MLLOG"):
            e = json.loads(line[len(":::MLLOG"):])
            kv[e["key"]] = e["value"]
    return kv


@pytest.mark.parametrize("scenario", ["Offline", "SingleStream"])
def test_unet3d_performance_runs(perf_runs, scenario):
    m = perf_runs[scenario]
    assert m["status"] == "ok", m["error"]
    assert m["result_validity"] == "VALID", m["invalid_reasons"]
    assert m["metric_value"] > 0 and m["loadgen_errors"] == []
    assert m["benchmark"] == "unet3d" and m["loadgen_model"] == "3d-unet"
    assert not list(Path(m["log_dir"]).parent.glob("*.partial"))


@pytest.mark.parametrize("scenario", ["Offline", "SingleStream"])
def test_unet3d_equal_issue_mode_in_effect(perf_runs, scenario):
    """LoadGen's built-in mlperf.conf sets sample_concatenate_permutation (equal-issue mode) for
    3d-unet and the whole set as the performance samples: the detail log shows both in effect, and
    every case is issued equally often (the sample count is padded to a multiple of the set)."""
    kv = _detail(perf_runs[scenario])
    assert kv["requested_sample_concatenate_permutation"] is True
    assert kv["effective_sample_concatenate_permutation"] is True
    assert kv["effective_performance_sample_count"] == CASES
    samples = perf_runs[scenario]["completed_samples"]
    assert samples % CASES == 0 and samples >= 20, samples
    if scenario == "Offline":       # the one query of 20 is padded up to whole permutations of the set
        assert kv["effective_samples_per_query"] == 20 and samples == 24, (kv["effective_samples_per_query"], samples)


def test_unet3d_patch_batch_is_a_config_key(perf_runs):
    m = perf_runs["Offline"]
    assert m["settings"]["unet3d_patch_batch_size"] == 8
    assert m["sources"]["unet3d_patch_batch_size"].startswith("configs/unet3d/Offline/config.json")
    assert m["settings"]["gpu_batch_size"] == 1
    assert Path(m["engines"]["unet3d"]).name == "unet3d-b8-fp32.onnx"


@pytest.mark.parametrize("scenario", ["Offline", "SingleStream"])
def test_unet3d_accuracy_runs(accuracy_runs, scenario):
    from code.common.results.accuracy_text import values

    m = accuracy_runs[scenario]
    assert m["status"] == "ok", m["error"]
    acc = m["accuracy"]["metrics"]
    assert acc["cases"] == CASES and acc["DICE"] >= 0.9999, acc
    text = (Path(m["log_dir"]) / "accuracy.txt").read_text()
    # the submission checker's DICE pattern (submission_checker/constants.py ACC_PATTERN["DICE"])
    hit = re.match(r"Accuracy\:\s*mean\s*=\s*([\d\.]+).*", text.splitlines()[0])
    assert hit and abs(float(hit.group(1)) - acc["DICE"]) < 1e-5
    assert values(text, ["DICE"])["DICE"] == float(hit.group(1))


def _preprocessed():
    from code.common import paths

    d = paths.preprocessed_dir("kits19", "tiny")
    files = pickle.loads((d / "preprocessed_files.pkl").read_bytes())
    vols = {c: pickle.loads((d / f"{c}.pkl").read_bytes()) for c in files["file_list"]}
    return files, vols


def _log_predictions(m: dict, files: dict) -> dict[str, np.ndarray]:
    out = {}
    for e in json.loads((Path(m["log_dir"]) / "mlperf_log_accuracy.json").read_text()):
        case = files["file_list"][e["qsl_idx"]]
        out[case] = np.frombuffer(bytes.fromhex(e["data"]), np.uint8).reshape(files["cases"][case]["image_shape"][1:])
    return out


def _plain_torch_reference(net, image: np.ndarray, roi: int) -> np.ndarray:
    """Written apart from the harness: the reference's loops, one patch at a time, torch only."""
    import torch
    from scipy.signal import windows

    g = windows.gaussian(roi, 0.125 * roi)
    k = np.cbrt(np.outer(np.outer(g, g), g).reshape(roi, roi, roi))
    k = torch.from_numpy((k / k.max()).astype(np.float32))
    x = torch.from_numpy(image[None])                    # (1, 1, D, H, W)
    result = torch.zeros((1, 3, *image.shape[1:]))
    norm = torch.zeros_like(result)
    stride = roi // 2
    dims = image.shape[1:]
    with torch.inference_mode():
        for i in range(0, dims[0] - roi + 1, stride):
            for j in range(0, dims[1] - roi + 1, stride):
                for l in range(0, dims[2] - roi + 1, stride):
                    sl = (..., slice(i, i + roi), slice(j, j + roi), slice(l, l + roi))
                    result[sl] += net(x[sl]) * k
                    norm[sl] += k
    return torch.argmax(result / norm, dim=1)[0].numpy().astype(np.uint8)


def _dice(pred, gt):
    ks = []
    for c in (1, 2):
        p, t = pred == c, gt == c
        ks.append((2 * np.sum(p & t) + 1e-6) / (np.sum(p) + np.sum(t) + 1e-6))
    return float(np.mean(ks))


def test_unet3d_fidelity_harness_vs_plain_torch(accuracy_runs, tiny_unet3d):
    """The ORT engine behind LoadGen vs a plain torch sliding window of the same weights: mean DICE
    equal to 4 significant digits and >= 99.9% of voxels identical."""
    from code.common import paths
    from code.unet3d import model

    files, vols = _preprocessed()
    got = _log_predictions(accuracy_runs["Offline"], files)
    net = model.load_tiny_torch(paths.models_dir("unet3d", "tiny"))
    same = total = 0
    d_h, d_r = [], []
    for case, (image, label) in vols.items():
        ref = _plain_torch_reference(net, image, model.TINY_ROI)
        same += int(np.sum(ref == got[case]))
        total += ref.size
        d_h.append(_dice(got[case], label[0]))
        d_r.append(_dice(ref, label[0]))
        assert len(np.unique(ref)) == 3, f"{case}: the reference predicts {np.unique(ref)}: a vacuous check"
    print(f"[fidelity] unet3d: {same}/{total} voxels identical ({same / total:.6f}); mean DICE harness "
          f"{np.mean(d_h):.6f}, plain torch {np.mean(d_r):.6f}")
    assert same / total >= 0.999, same / total
    assert f"{np.mean(d_h):.4g}" == f"{np.mean(d_r):.4g}", (np.mean(d_h), np.mean(d_r))
    assert f"{accuracy_runs['Offline']['accuracy']['metrics']['DICE']:.4g}" == f"{np.mean(d_r):.4g}"


def test_unet3d_singlestream_and_offline_agree(accuracy_runs):
    files, _ = _preprocessed()
    a = _log_predictions(accuracy_runs["Offline"], files)
    b = _log_predictions(accuracy_runs["SingleStream"], files)
    assert all(np.array_equal(a[c], b[c]) for c in files["file_list"])


def test_unet3d_pytorch_backend(tiny_unet3d, tmp_path):
    """--backend=pytorch runs the same weights eagerly: the same segmentation as the ground truth."""
    r = run_main("--action=run_harness", *BASE, "--scenarios=Offline", "--backend=pytorch", "--test_mode=AccuracyOnly",
                 f"--log_dir={tmp_path}", env=tiny_unet3d)
    assert r.returncode == 0, r.stdout + r.stderr
    [m] = metadata_under(tmp_path)
    assert m["backend"] == "pytorch" and m["system_name"].endswith("_PyT")
    assert m["accuracy"]["metrics"]["DICE"] >= 0.99999


def test_unet3d_tensorrt_backend(tiny_unet3d, tmp_path):
    m = tensorrt_accuracy_run(tiny_unet3d, BASE, tmp_path)
    assert m["accuracy"]["metrics"]["DICE"] >= 0.999


def test_unet3d_names_variants_and_rounds(tiny_unet3d):
    """--benchmarks=3d-unet and its aliases resolve; 99 / 99.9 take the round table's DICE targets
    (0.86170 x 0.99 / x 0.999) and separate log folders; every round v5.0..v6.1 files 3d-unet-99/99.9
    with edge SingleStream/Offline (datacenter Offline in v5.x)."""
    from code.common import rounds
    from code.main import plan

    for alias in ("3d-unet", "3dunet", "unet3d-kits19", "3d-unet-kits19", "unet3d"):
        _, [s] = plan(["--action=info", f"--benchmarks={alias}", "--scenarios=Offline"])
        assert s.benchmark == "unet3d" and s.loadgen_model == "3d-unet"
    _, [s99] = plan(["--action=info", "--benchmarks=3d-unet", "--scenarios=Offline"])
    _, [s999] = plan(["--action=info", "--benchmarks=3d-unet", "--scenarios=Offline", "--accuracy_target=99.9"])
    assert s99.round_entry().name == "3d-unet-99" and s999.round_entry().name == "3d-unet-99.9"
    assert s99.round_entry().accuracy_min["DICE"] == pytest.approx(0.86170 * 0.99)
    assert s999.round_entry().accuracy_min["DICE"] == pytest.approx(0.86170 * 0.999)
    assert s99.log_name == "unet3d" and s999.log_name == "unet3d-99.9"
    for v in ("v5.0", "v5.1", "v6.0", "v6.1"):
        rnd = rounds.current(v)
        for name in ("3d-unet-99", "3d-unet-99.9"):
            e = rnd.benchmarks[name]
            assert e.benchmark == "unet3d" and e.loadgen_model == "3d-unet" and e.dataset_size == 43
            assert set(e.edge_scenarios) == {"SingleStream", "Offline"}
            assert e.performance_sample_count == 43 and e.compliance_tests == ("TEST01",) and e.test01_sampling_target == 64
            if v.startswith("v5"):
                assert tuple(e.datacenter_scenarios) == ("Offline",)


def test_unet3d_engine_reused_and_rebuilt_for_patch_batch(tiny_unet3d):
    args = ("--action=generate_engines", *BASE, "--scenarios=Offline")
    run_main(*args, env=tiny_unet3d, check=True)
    r = run_main(*args, env=tiny_unet3d, check=True)
    assert "[engine] reuse" in r.stdout and "[engine] build" not in r.stdout
    r = run_main(*args, "--unet3d_patch_batch_size=2", env=tiny_unet3d, check=True)
    assert "unet3d-b2-fp32.onnx" in r.stdout


def test_unet3d_preprocess_is_cached(tiny_unet3d):
    r = run_main("--action=preprocess_data", *BASE, env=tiny_unet3d, check=True)
    assert "is up to date" in r.stdout


# --- the official scripts (MLPERF_INFERENCE_DIR) ------------------------------------------------------
REF = "vision/medical_imaging/3d-unet-kits19"
# accuracy_kits.py was written for pandas < 2 (DataFrame.append, float() of a one-row Series); this shim
# adds those two back and runs the unmodified script.
SHIM = """
import runpy, sys
import pandas as pd
if not hasattr(pd.DataFrame, "append"):
    pd.DataFrame.append = lambda self, other, ignore_index=False: pd.concat([self, pd.DataFrame([other])],
                                                                           ignore_index=ignore_index)
def _float(self):
    if len(self) != 1:
        raise TypeError("float() of a Series needs one element")
    return float(self.iloc[0])
pd.Series.__float__ = _float
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _inference_dir() -> Path:
    """The official tree's root (tests.conftest.official_root skips with the reason when it is absent)."""
    from tests.conftest import official_root

    return official_root(REF, "accuracy_kits.py").parents[3]


# The official scripts run from a temporary working directory and write nothing beside themselves (in CI
# the official tree is read-only); the reference's preprocessing comparison is in test_reference_unet3d.py.
OFFICIAL_ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def test_unet3d_accuracy_equals_official_accuracy_kits(accuracy_runs, tiny_unet3d, tmp_path):
    """The official accuracy_kits.py on the same accuracy log and our preprocessed folder (the
    reference's layout: preprocessed_files.pkl, nifti/<case>/segmentation.nii.gz) prints the same
    mean DICE as ours."""
    from code.common import paths

    ref = _inference_dir() / REF
    m = accuracy_runs["Offline"]
    r = subprocess.run([sys.executable, "-c", SHIM, str(ref / "accuracy_kits.py"),
                        "--log_file", str(Path(m["log_dir"]) / "mlperf_log_accuracy.json"),
                        "--preprocessed_data_dir", str(paths.preprocessed_dir("kits19", "tiny")),
                        "--postprocessed_data_dir", str(tmp_path / "post"), "--num_proc", "2"],
                       cwd=tmp_path, env=OFFICIAL_ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("Accuracy:"))
    ours = (Path(m["log_dir"]) / "accuracy.txt").read_text().splitlines()[0]
    print(f"FIGURE unet3d accuracy official {line!r} ours {ours!r} (tiny Offline accuracy log)")
    assert line == ours
    import csv

    rows = {row["case"]: row for row in csv.DictReader((tmp_path / "post" / "summary.csv").open())}
    assert float(rows["mean"]["composite"]) == pytest.approx(m["accuracy"]["metrics"]["DICE"], abs=1e-6)


def test_unet3d_sliding_window_equals_reference_inference_utils(tmp_path):
    """Our Gaussian kernel, patch order and finalize equal inference_utils.py's (scipy.signal.gaussian,
    which it imports, moved to scipy.signal.windows in current scipy: aliased for the import)."""
    ref = _inference_dir() / REF
    work = tmp_path / "work"
    work.mkdir()
    (work / "meta").symlink_to(ref / "meta")
    code = f"""
import sys, numpy as np, scipy.signal
from scipy.signal import windows
if not hasattr(scipy.signal, "gaussian"):
    scipy.signal.gaussian = windows.gaussian
sys.path.insert(0, {str(ref)!r})
import os; os.chdir({str(work)!r})            # global_vars.py reads meta/ from the working directory
import inference_utils as iu
from code.unet3d import sliding_window as sw
assert np.array_equal(iu.gaussian_kernel(128, 16.0).astype(np.float32), sw.gaussian_patch(128))
img = np.zeros((1, 1, 192, 256, 128), np.float32)
assert list(iu.get_slice_for_sliding_window(img, [128] * 3, 0.5)) == sw.positions((192, 256, 128), 128)
rng = np.random.default_rng(0)
vol = rng.normal(size=(1, 64, 96, 64)).astype(np.float32)
w = rng.normal(size=(3,)).astype(np.float32)
infer = lambda x: np.concatenate([x * w[0], x * w[1], -x * w[2]], axis=1)
res, nmap, patch = iu.prepare_arrays(vol[None], [32] * 3)
for i, j, k in iu.get_slice_for_sliding_window(vol[None], [32] * 3, 0.5):
    sl = (..., slice(i, i + 32), slice(j, j + 32), slice(k, k + 32))
    res[sl] += infer(vol[None][sl]) * patch
    nmap[sl] += patch
want = iu.finalize(res, nmap)[0, 0]
got = sw.segment(vol, infer, 32, 5)
assert want.shape == got.shape and np.mean(want == got) > 0.9999, np.mean(want == got)
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                       env={**OFFICIAL_ENV, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def test_unet3d_real_preprocessing_path_in_processes(tmp_path):
    """The real variant's preprocess_all (128^3 ROI, worker processes) writes the reference layout with
    the same arrays preprocess_case gives, every edge a multiple of 64 and >= 128."""
    from code.unet3d import dataset

    rng = np.random.default_rng(3)
    cases = ["case_00000", "case_00003"]
    for case, (shape, sp) in zip(cases, (((50, 150, 170), (2.5, 0.8, 0.8)), ((90, 100, 120), (1.6, 1.2, 1.2)))):
        image, label, spacing = dataset.synthetic_case(rng, shape, sp)
        dataset.write_case(tmp_path / "raw", case, image, label, spacing)
    (tmp_path / "out").mkdir()
    aux = dataset.preprocess_all(tmp_path / "raw", cases, 128, tmp_path / "out")
    dataset.write_files_pkl(tmp_path / "out", cases, aux)
    files = pickle.loads((tmp_path / "out" / "preprocessed_files.pkl").read_bytes())
    assert files["file_list"] == cases
    for case in cases:
        image, label, _ = dataset.preprocess_case(tmp_path / "raw", case, 128)
        got_i, got_l = pickle.loads((tmp_path / "out" / f"{case}.pkl").read_bytes())
        assert np.array_equal(got_i, image) and np.array_equal(got_l, label)
        assert tuple(files["cases"][case]["image_shape"]) == image.shape
        assert all(s % 64 == 0 and s >= 128 for s in image.shape[1:])
        assert (tmp_path / "out" / "nifti" / case / "segmentation.nii.gz").is_file()
