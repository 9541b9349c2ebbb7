"""DLRM-v2 bad input: one line of cause naming the file, the fixing command, exit 3, nothing
half-written left behind. Also the real downloads (the R2 checkpoint and day-23 set) against fixture
files served from 127.0.0.1 through $MLPERF_DOWNLOAD_MIRROR, and the disk-space check before them."""
from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from code.common.errors import HarnessError, MissingDataError
from tests.conftest import no_partials, private_scratch, run_main
from tests.test_cli_errors import _assert_user_error

TINY = ("--benchmarks=dlrm_v2", "--model_variant=tiny", "--round=v5.1")
FIX_DATA = "make download_data BENCHMARKS=dlrm_v2 MODEL_VARIANT=tiny"
FIX_PRE = "make preprocess_data BENCHMARKS=dlrm_v2 MODEL_VARIANT=tiny"


@pytest.fixture()
def scratch(tiny_dlrm, tmp_path):
    """A private copy of the tiny scratch folder (model, day-23 files, trace)."""
    return private_scratch(tiny_dlrm, tmp_path, ("models/dlrm_v2", "data/criteo", "preprocessed_data/criteo"))


def _data(root: Path) -> Path:
    return root / "data" / "criteo" / "tiny"


def _rewrite_sparse(path: Path, feature: int, row: int, col: int, value: int) -> None:
    with np.load(path) as z:
        arrays = {k: z[k].copy() for k in z.files}
    arrays[str(feature)][row, col] = value
    np.savez(path, **arrays)


def test_sparse_index_beyond_its_table(scratch):
    env, root = scratch
    from code.dlrm_v2 import model

    rows = model.tiny_config().num_embeddings[3]
    _rewrite_sparse(_data(root) / "day_23_sparse_multi_hot.npz", 3, 17, 1, rows)
    shutil.rmtree(root / "preprocessed_data")
    r = run_main("--action=preprocess_data", *TINY, env=env)
    _assert_user_error(r, 3, "day_23_sparse_multi_hot.npz: sparse feature 3 row 17 has index "
                       f"{rows}, beyond its table of {rows} rows", FIX_DATA)
    assert not (root / "preprocessed_data" / "criteo" / "tiny").exists()
    no_partials(root)


def test_data_changed_after_preprocess_is_caught_before_the_run(scratch):
    env, root = scratch
    _rewrite_sparse(_data(root) / "day_23_sparse_multi_hot.npz", 0, 0, 0, -1)
    r = run_main("--action=run_harness", *TINY, "--scenarios=Offline", "--test_mode=AccuracyOnly", env=env)
    _assert_user_error(r, 3, "the query trace is not of the day-23 files", FIX_PRE)
    r = run_main("--action=preprocess_data", *TINY, env=env)
    _assert_user_error(r, 3, "sparse feature 0 row 0 has index -1", FIX_DATA)


def test_qsl_load_checks_indices(scratch, monkeypatch):
    """The QSL checks what it loads too (a file swapped under a run)."""
    env, root = scratch
    from code.dlrm_v2 import dataset, model

    cfg = model.tiny_config()
    _rewrite_sparse(_data(root) / "day_23_sparse_multi_hot.npz", 20, 300, 99, 10**6)
    day = dataset.Day23(_data(root), cfg.num_embeddings, cfg.multi_hot, "FIX")
    offsets = dataset.query_offsets(day.rows)
    qsl = dataset.CriteoQSL(day, offsets, 0)
    q = int(np.searchsorted(offsets, 300, side="right") - 1)
    qsl.load([q - 1] if q else [])
    with pytest.raises(MissingDataError, match="sparse feature 20 row 300 has index 1000000, beyond its table"):
        qsl.load([q])


@pytest.mark.parametrize("damage,needle", [
    (lambda d: np.save(d / "day_23_dense.npy", np.load(d / "day_23_dense.npy")[:, :12]),
     "day_23_dense.npy: dense features of shape (32767, 12), expected (rows, 13)"),
    (lambda d: np.save(d / "day_23_dense.npy", np.load(d / "day_23_dense.npy").astype(np.float64)),
     "day_23_dense.npy: dtype float64, expected float32"),
    (lambda d: np.save(d / "day_23_labels.npy", np.load(d / "day_23_labels.npy")[:-1]),
     "day_23_labels.npy: shape (32766, 1), expected (32767, 1)"),
    (lambda d: (d / "day_23_labels.npy").unlink(), "day_23_labels.npy not found in"),
], ids=["dense_width", "dense_dtype", "labels_rows", "labels_missing"])
def test_day23_file_of_the_wrong_shape_or_missing(scratch, damage, needle):
    env, root = scratch
    damage(_data(root))
    shutil.rmtree(root / "preprocessed_data")
    r = run_main("--action=preprocess_data", *TINY, env=env)
    _assert_user_error(r, 3, needle, FIX_DATA)
    assert not (root / "preprocessed_data" / "criteo" / "tiny").exists()
    no_partials(root)


def test_compressed_or_short_sparse_archive(scratch):
    env, root = scratch
    p = _data(root) / "day_23_sparse_multi_hot.npz"
    with np.load(p) as z:
        arrays = {k: z[k] for k in z.files}
    np.savez_compressed(p, **arrays)
    r = run_main("--action=preprocess_data", *TINY, env=env)
    _assert_user_error(r, 3, "member 0.npy is compressed", FIX_DATA)
    del arrays["25"]
    np.savez(p, **arrays)
    from code.dlrm_v2 import dataset, model

    cfg = model.tiny_config()
    with pytest.raises(MissingDataError, match="member 25.npy missing"):
        dataset.Day23(_data(root), cfg.num_embeddings, cfg.multi_hot, FIX_DATA)


def test_real_local_folder_without_the_files_says_where_to_put_them(tmp_path, harness_env):
    (tmp_path / "criteo").mkdir()
    env = {**harness_env, "MLPERF_SCRATCH_PATH": str(tmp_path / "scratch")}
    r = run_main("--action=download_data", "--benchmarks=dlrm_v2", "--round=v5.1",
                 f"--data_dir={tmp_path / 'criteo'}", env=env)
    _assert_user_error(r, 3, "day_23_dense.npy not found in", f"in {tmp_path / 'criteo'}", "--data_dir",
                       "materialize_synthetic_multihot_dataset.py", "recommendation_v2/torchrec_dlrm")


def test_missing_tiny_model_names_download_model(tmp_path, harness_env):
    env = {**harness_env, "MLPERF_SCRATCH_PATH": str(tmp_path / "scratch")}
    r = run_main("--action=download_data", *TINY, env=env)
    _assert_user_error(r, 3, "dlrm_config.json", "make download_model BENCHMARKS=dlrm_v2 MODEL_VARIANT=tiny")


# --- real downloads: R2 protocol against a local server ------------------------------------------------
def _settings(tmp_path, monkeypatch, *extra):
    monkeypatch.setenv("MLPERF_SCRATCH_PATH", str(tmp_path / "scratch"))
    monkeypatch.setenv("MLPERF_BUILD_DIR", str(tmp_path / "build"))
    from code.dlrm_v2.harness import DLRMBenchmark
    from code.main import plan

    return DLRMBenchmark(plan(["--action=download_model", "--benchmarks=dlrm_v2", "--round=v5.1", *extra])[1][0])


def test_real_checkpoint_download_verified_after_a_disk_check(mirror, tmp_path, monkeypatch):
    from code.dlrm_v2 import constants as K, model

    files = {".snapshot_metadata": b"manifest", "0/model/t_cat_0": b"\x00" * 1000, "0/model/dense": b"\x01" * 10}
    mirror.add_r2(K.MODEL_URI, "https://r2.example.org/dlrm-v2/model_weights", files)
    bench = _settings(tmp_path, monkeypatch)
    free = {"n": 10 * 10**9}
    monkeypatch.setattr(model.shutil, "disk_usage", lambda p: type("U", (), {"free": free["n"]})())
    with pytest.raises(HarnessError) as e:
        bench.download_model()
    assert "not enough disk space for the DLRM-v2 checkpoint in" in e.value.cause
    assert str(bench.model_dir) in e.value.cause and "10.0 GB free, 102.3 GB needed" in e.value.cause
    assert "\n" not in e.value.cause and not (bench.model_dir / model.REAL_CHECKPOINT_DIR).exists()
    free["n"] = 200 * 10**9
    bench.download_model()
    dest = bench.model_dir / model.REAL_CHECKPOINT_DIR
    assert (dest / "0/model/t_cat_0").read_bytes() == files["0/model/t_cat_0"]
    assert (dest / "dlrm-v2-model-weights.md5").is_file()
    assert model.read_config(bench.model_dir, "") == model.REAL
    no_partials(tmp_path)


def test_real_checkpoint_without_torchsnapshot_says_what_to_install(tmp_path, monkeypatch):
    import sys

    from code.dlrm_v2 import model

    (tmp_path / model.REAL_CHECKPOINT_DIR).mkdir()
    (tmp_path / model.REAL_CHECKPOINT_DIR / ".snapshot_metadata").write_text("{}")
    model.write_config(tmp_path, model.tiny_config())
    monkeypatch.setitem(sys.modules, "torchsnapshot", None)        # not importable
    with pytest.raises(HarnessError) as e:
        model.load_torch(tmp_path, "FIX")
    assert "torchsnapshot" in e.value.cause and "torchsnapshot==0.1.0" in e.value.fix


def test_real_dataset_download_then_checked(mirror, tmp_path, monkeypatch):
    """The R2 preprocessed set (here 51 rows in a subfolder) is fetched verified, then read as day 23."""
    import io

    from code.dlrm_v2 import constants as K

    rng = np.random.default_rng(0)
    n = 51

    def npy(a):
        b = io.BytesIO()
        np.save(b, a)
        return b.getvalue()

    z = io.BytesIO()
    np.savez(z, **{str(k): rng.integers(0, min(r, 1000), (n, h), dtype=np.int64).astype(np.int32)
                   for k, (r, h) in enumerate(zip(K.NUM_EMBEDDINGS, K.MULTI_HOT_SIZES))})
    files = {"multihot/day_23_dense.npy": npy(rng.random((n, 13), dtype=np.float32)),
             "multihot/day_23_labels.npy": npy(rng.integers(0, 2, (n, 1), dtype=np.int64).astype(np.int32)),
             "multihot/day_23_sparse_multi_hot.npz": z.getvalue()}
    mirror.add_r2(K.DATASET_URI, "https://r2.example.org/dlrm-v2/data", files)
    monkeypatch.setattr(K, "DATASET_BYTES", 10_000)
    bench = _settings(tmp_path, monkeypatch)
    bench.download_data()
    day = bench.day23()
    assert day.dir == bench.data_dir / "multihot" and day.total_rows == n and day.rows == 26
    bench.preprocess_data()
    assert (bench.preprocessed / K.TRACE_FILE).read_text() == "0, 26, 26\n"
    no_partials(tmp_path)
    assert zipfile.is_zipfile(day.dir / K.SPARSE_FILE)
