"""3D-UNet bad input: one line of cause naming the file, the fixing command, exit 3 (data) or 4 (run),
nothing half-written left behind. Also the real downloads (KiTS19 cases, the Zenodo model) against
fixture files served from 127.0.0.1 through $MLPERF_DOWNLOAD_MIRROR, with the pinned checksums
swapped for the fixtures' own."""
from __future__ import annotations

import hashlib
import json
import pickle
import shutil

import numpy as np
import pytest

from code.common.errors import HarnessError, RunError
from tests.conftest import metadata_under, no_partials, private_scratch, run_main
from tests.test_cli_errors import _assert_user_error

TINY = ("--benchmarks=3d-unet", "--model_variant=tiny")
FIX_PRE = "make preprocess_data BENCHMARKS=unet3d MODEL_VARIANT=tiny"


@pytest.fixture()
def scratch(tiny_unet3d, tmp_path):
    """A private copy of the tiny scratch folder (model, raw cases, preprocessed volumes)."""
    return private_scratch(tiny_unet3d, tmp_path, ("models/unet3d", "data/kits19", "preprocessed_data/kits19"))


# --- raw KiTS19 cases ---------------------------------------------------------------------------
@pytest.mark.parametrize("damage,needle", [
    (lambda case: (case / "imaging.nii.gz").unlink(), "case_00003: imaging.nii.gz missing"),
    (lambda case: shutil.rmtree(case), "case_00003: case folder missing"),
])
def test_case_folder_without_imaging(scratch, damage, needle):
    env, root = scratch
    shutil.rmtree(root / "preprocessed_data")
    damage(root / "data" / "kits19" / "tiny" / "case_00003")
    r = run_main("--action=preprocess_data", *TINY, env=env)
    _assert_user_error(r, 3, needle, "make download_data BENCHMARKS=unet3d MODEL_VARIANT=tiny")
    assert not (root / "preprocessed_data" / "kits19" / "tiny").exists()
    no_partials(root)


def test_real_local_folder_without_imaging_says_where_to_put_it(tmp_path, harness_env):
    (tmp_path / "kits" / "case_00000").mkdir(parents=True)
    env = {**harness_env, "MLPERF_SCRATCH_PATH": str(tmp_path / "scratch")}
    r = run_main("--action=download_data", "--benchmarks=3d-unet", f"--data_dir={tmp_path / 'kits'}", env=env)
    _assert_user_error(r, 3, "case_00000: imaging.nii.gz missing", f"{tmp_path / 'kits'}/case_XXXXX/imaging.nii.gz",
                       "starter_code.get_imaging", "case_00400")
    r = run_main("--action=preprocess_data", "--benchmarks=3d-unet", f"--data_dir={tmp_path / 'kits'}", env=env)
    _assert_user_error(r, 3, "imaging.nii.gz missing", "put the KiTS19 files")
    assert not (tmp_path / "scratch" / "preprocessed_data").exists()


# --- preprocessed volumes -----------------------------------------------------------------------
@pytest.mark.parametrize("damage,needle", [
    (lambda img, lab: [img.astype(np.float64), lab], "image dtype float64, expected float32"),
    (lambda img, lab: [img, lab.astype(np.int32)], "label dtype int32, expected uint8"),
    (lambda img, lab: [img[:, :, :, :16], lab[:, :, :, :16]], "image shape (1, 32, 32, 16), expected (1, 32, 32, 48)"),
    (lambda img, lab: "not a volume", "not a preprocessed [image, label] pickle"),
])
def test_preprocessed_volume_of_the_wrong_dtype_or_shape(scratch, tmp_path, damage, needle):
    env, root = scratch
    pkl = root / "preprocessed_data" / "kits19" / "tiny" / "case_00003.pkl"
    img, lab = pickle.loads(pkl.read_bytes())
    pkl.write_bytes(pickle.dumps(damage(img, lab)))
    r = run_main("--action=run_harness", *TINY, "--scenarios=Offline", "--min_duration=1", "--min_query_count=1",
                 f"--log_dir={tmp_path / 'logs'}", env=env)
    _assert_user_error(r, 3, str(pkl), needle, FIX_PRE)
    no_partials(tmp_path / "logs")
    assert not metadata_under(tmp_path / "logs") or all(m["status"] == "error" for m in metadata_under(tmp_path / "logs"))


def test_missing_preprocessed_files_pkl(scratch, tmp_path):
    env, root = scratch
    (root / "preprocessed_data" / "kits19" / "tiny" / "preprocessed_files.pkl").unlink()
    r = run_main("--action=run_harness", *TINY, "--scenarios=SingleStream", "--min_duration=1", "--min_query_count=1",
                 f"--log_dir={tmp_path / 'logs'}", env=env)
    _assert_user_error(r, 3, "preprocessed_files.pkl", FIX_PRE)


# --- segmentation outputs -------------------------------------------------------------------------
def _bench(env, monkeypatch):
    from code.common.benchmarks import implementation
    from code.main import plan

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    _, [s] = plan(["--action=run_harness", *TINY, "--scenarios=Offline"])
    return implementation(s.spec)(s)


@pytest.mark.parametrize("make,needle", [
    (lambda lab: lab[:, :-1].tobytes(), "holds 31744 bytes, expected 32768 = 32x32x32 uint8 labels (wrong shape)"),
    (lambda lab: lab.astype(np.int32).tobytes(), "holds 131072 bytes, expected 32768 = 32x32x32 uint8 labels (4-byte values?)"),
    (lambda lab: (lab.astype(np.uint8) + 7).tobytes(), "holds value 9, not a class label 0..2"),
])
def test_segmentation_output_of_the_wrong_shape_or_dtype(scratch, tmp_path, monkeypatch, make, needle):
    env, root = scratch
    bench = _bench(env, monkeypatch)
    files = pickle.loads((root / "preprocessed_data" / "kits19" / "tiny" / "preprocessed_files.pkl").read_bytes())
    entries = []
    for i, case in enumerate(files["file_list"]):
        _, lab = pickle.loads((root / "preprocessed_data" / "kits19" / "tiny" / f"{case}.pkl").read_bytes())
        data = make(lab[0]) if i == 0 else lab[0].tobytes()
        entries.append({"seq_id": i, "qsl_idx": i, "data": data.hex().upper(), "token_count": 0})
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps(entries))
    with pytest.raises(RunError) as e:
        bench.accuracy(str(log), str(tmp_path))
    assert needle in e.value.cause and "case_00000 (qsl_idx 0)" in e.value.cause, e.value.cause
    assert "--test_mode=AccuracyOnly" in e.value.fix and e.value.exit_code == 4
    assert not (tmp_path / "accuracy.txt").exists()


def test_engine_output_of_the_wrong_shape_fails_the_batch():
    from code.unet3d import sliding_window

    vol = np.zeros((1, 32, 32, 48), np.float32)
    with pytest.raises(ValueError, match=r"returned \(2, 3, 16, 32, 32\) for 2 patches; expected \(2, 3, 32, 32, 32\)"):
        sliding_window.segment(vol, lambda x: np.zeros((len(x), 3, 16, 32, 32), np.float32), 32, 2)
    with pytest.raises(ValueError, match="each edge >= 32 and a multiple of 16"):
        sliding_window.segment(np.zeros((1, 32, 32, 40), np.float32), lambda x: x, 32, 2)


# --- real downloads against a local mirror ----------------------------------------------------------
def _blob_id(b: bytes) -> str:
    return hashlib.sha1(f"blob {len(b)}\0".encode() + b).hexdigest()


def _kits_fixture(mirror, monkeypatch, cases=("case_00000", "case_00185")):
    from code.unet3d import constants as K

    files = {}
    tree = []
    for n, c in enumerate(cases):
        img = bytes([n + 1]) * (300_000 + n)
        seg = bytes([n + 7]) * (20_000 + n)
        files[c] = (img, seg)
        mirror.routes[f"/raw.githubusercontent.com/neheller/kits19/{K.KITS19_COMMIT}/data/{c}/segmentation.nii.gz"] = seg
        mirror.routes[f"/huggingface.co/datasets/{K.HF_IMAGING_REPO}/resolve/main/images/{c}.nii.gz"] = img
        tree.append({"type": "file", "path": f"images/{c}.nii.gz", "size": len(img), "oid": _blob_id(img),
                     "lfs": {"oid": hashlib.sha256(img).hexdigest(), "size": len(img), "pointerSize": 134}})
    tree.append({"type": "file", "path": "images/README.md", "size": 3, "oid": "x"})
    mirror.routes[f"/huggingface.co/api/datasets/{K.HF_IMAGING_REPO}/tree/main/images"] = json.dumps(tree).encode()
    monkeypatch.setattr(K, "SEGMENTATION_BLOBS", {c: (_blob_id(s), len(s)) for c, (_, s) in files.items()})
    return files


def test_kits19_download_verifies_resumes_and_duplicates(mirror, monkeypatch, tmp_path):
    from code.unet3d import constants as K
    from code.unet3d.download import fetch_cases

    files = _kits_fixture(mirror, monkeypatch)
    raw = tmp_path / "data"
    img_route = f"/huggingface.co/datasets/{K.HF_IMAGING_REPO}/resolve/main/images/case_00185.nii.gz"
    mirror.modes[img_route] = "truncate"
    with pytest.raises(HarnessError, match="could not download") as e:
        fetch_cases(raw, ("case_00000", "case_00400"), log=lambda *_: None)
    assert e.value.exit_code == 3 and "put the KiTS19 files of the 43 inference cases at" in e.value.fix
    assert not (raw / "case_00185" / "imaging.nii.gz").exists()
    fetch_cases(raw, ("case_00000", "case_00400"), log=lambda *_: None)          # resumes the partial file
    assert mirror.ranges and mirror.ranges[-1] == f"bytes={len(files['case_00185'][0]) // 2}-"
    for c, src in (("case_00000", "case_00000"), ("case_00185", "case_00185"), ("case_00400", "case_00185")):
        assert (raw / c / "imaging.nii.gz").read_bytes() == files[src][0]
        assert (raw / c / "segmentation.nii.gz").read_bytes() == files[src][1]
    mirror.routes = {k: v for k, v in mirror.routes.items() if "/api/" in k}      # present + verified: no fetch
    fetch_cases(raw, ("case_00000", "case_00400"), log=lambda *_: None)
    no_partials(raw)


def test_kits19_download_wrong_checksums_leave_nothing(mirror, monkeypatch, tmp_path):
    from code.unet3d import constants as K
    from code.unet3d.download import fetch_cases

    _kits_fixture(mirror, monkeypatch, cases=("case_00000",))
    route = f"/huggingface.co/datasets/{K.HF_IMAGING_REPO}/resolve/main/images/case_00000.nii.gz"
    mirror.routes[route] = mirror.routes[route][:-1] + b"x"
    with pytest.raises(HarnessError, match="checksum mismatch.*sha256"):
        fetch_cases(tmp_path, ("case_00000",), log=lambda *_: None)
    assert not (tmp_path / "case_00000" / "imaging.nii.gz").exists()
    seg = f"/raw.githubusercontent.com/neheller/kits19/{K.KITS19_COMMIT}/data/case_00000/segmentation.nii.gz"
    shutil.rmtree(tmp_path / "case_00000")
    mirror.routes[seg] = b"not it"
    with pytest.raises(HarnessError, match="git blob id"):
        fetch_cases(tmp_path, ("case_00000",), log=lambda *_: None)
    assert not list((tmp_path / "case_00000").iterdir())


def test_kits19_index_unreachable_says_where_to_put_the_files(mirror, monkeypatch, tmp_path):
    from code.unet3d.download import fetch_cases

    files = _kits_fixture(mirror, monkeypatch, cases=("case_00000",))
    mirror.routes = {k: v for k, v in mirror.routes.items() if "/api/" not in k}
    with pytest.raises(HarnessError, match="imaging index") as e:
        fetch_cases(tmp_path, ("case_00000",), log=lambda *_: None)
    assert f"{tmp_path}/case_XXXXX/imaging.nii.gz" in e.value.fix and e.value.exit_code == 3
    assert (tmp_path / "case_00000" / "segmentation.nii.gz").read_bytes() == files["case_00000"][1]


def test_real_model_download_pinned_md5(mirror, tmp_path, monkeypatch):
    """The served fixture is not the real ONNX: under the shipped pin it is refused (one line, the fix
    names the URL and md5 to place it by hand); with the fixture's md5 pinned it is fetched; a corrupt
    copy under that pin is refused and nothing is left."""
    from code.unet3d import model
    from tests.conftest import route

    onnx = b"onnx-bytes" * 1000
    url, pin = model.DOWNLOADS[model.ONNX_NAME]
    mirror.routes[route(url)] = onnx
    with pytest.raises(HarnessError, match=f"md5 is not {pin}") as e:
        model.download_real(tmp_path, log=lambda *_: None)
    assert "\n" not in e.value.cause and url in e.value.fix and pin in e.value.fix
    monkeypatch.setitem(model.DOWNLOADS, model.ONNX_NAME, (url, hashlib.md5(onnx).hexdigest()))
    assert model.download_real(tmp_path, log=lambda *_: None).read_bytes() == onnx
    assert not [h for h in mirror.hits if "/api/" in h]                   # no record API lookup
    mirror.routes[route(url)] = onnx[:-1] + b"!"
    (tmp_path / model.ONNX_NAME).unlink()
    with pytest.raises(HarnessError, match="md5") as e:
        model.download_real(tmp_path, log=lambda *_: None)
    assert "\n" not in e.value.cause and not (tmp_path / model.ONNX_NAME).exists()
