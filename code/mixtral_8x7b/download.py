"""Fetching Mixtral-8x7B (MLPerf Inference language/mixtral-8x7b) model and data.

Model: the MLCommons copy of mistralai/Mixtral-8x7B-Instruct-v0.1 (commit a60832cb, the one the
reference README says must be used), from the public MLCommons R2 bucket via the .uri/.md5 metadata
the official mlc-r2-downloader.sh uses; all 46 files (39 safetensors shards, index, configs,
tokenizer) md5-checked against the list pinned below; then checked to be a loadable Hugging Face
Mixtral folder. ``download.json`` (written last) marks it complete; a complete folder is reused.

Data: the preprocessed 15,000-sample validation pickle (5,000 each of OpenOrca, GSM8K and MBXP),
and with ``include_calibration`` the calibration pickle, from the same public bucket (md5-checked;
if the R2 metadata cannot be fetched, the plain file URL the README gives for wget is tried),
or from a local copy (``--data_dir``). The pickles are unpickled (which can run code) only once
their md5 is the official one, then checked by content.
"""
from __future__ import annotations

from pathlib import Path

from code.common.fileio import read_dataframe
from code.common.errors import MissingDataError
from code.common.llm import download as dl

BENCHMARK = "mixtral-8x7b"
FIX_MODEL = f"make download_model BENCHMARKS={BENCHMARK}"
FIX_DATA = f"make download_data BENCHMARKS={BENCHMARK}"
TAG = f"[{BENCHMARK}]"

# --- pins ------------------------------------------------------------------------------------------
# From github.com/mlcommons/r2-infra inference/metadata/ (commit 5d77ea6ed10dd821cd34000ea6c000ae54fa306b,
# files last changed 2025-10-08).
CHECKPOINT_URI = "https://inference.mlcommons-storage.org/metadata/mixtral-8x7b-model-checkpoint.uri"
# mixtral-8x7b-model-checkpoint.md5; its .uri points at
# https://inference.mlcommons-storage.org/mixtral_8x7b/mixtral-8x7b-instruct-v0.1 (about 93 GB, bf16).
CHECKPOINT_MD5 = {
    "config.json": "caf1f79c62614103eb3e448611fec18d",
    "generation_config.json": "ad8a8a777d85abb8983ad6673ff356bd",
    "model-00001-of-00039.safetensors": "590375c0ed9120b9f02be7b4ba3dcdaa",
    "model-00002-of-00039.safetensors": "3ef8698a1718f4f9d6d33fd33bfa4325",
    "model-00003-of-00039.safetensors": "a81b0665c84734cf7ddbecec3cce6724",
    "model-00004-of-00039.safetensors": "3ed84c9de8f7cafda1a600d61878b667",
    "model-00005-of-00039.safetensors": "c640ca853d3c541bef5d1de1ce3756e7",
    "model-00006-of-00039.safetensors": "6937b52c111af1c67aafc2518779dbd5",
    "model-00007-of-00039.safetensors": "4efa19505efedb02cd759f71bc3f21c4",
    "model-00008-of-00039.safetensors": "2afa9a2b4d4e28a941bb48bfb1cd06d9",
    "model-00009-of-00039.safetensors": "39deffe4fe7c14a5c4bdbe947b61aab8",
    "model-00010-of-00039.safetensors": "90288866b54cd536e6f27dd3e5d6b403",
    "model-00011-of-00039.safetensors": "9b10e791faee8069d250bafd58583352",
    "model-00012-of-00039.safetensors": "fa783a2f55764fc79b5f90860d0acf4e",
    "model-00013-of-00039.safetensors": "2337ff236888cb038a5063a64a49a680",
    "model-00014-of-00039.safetensors": "9240cbf8b588b1d7f161961f5df0293f",
    "model-00015-of-00039.safetensors": "f9d9b8c64ae14fbe1531df74596ff531",
    "model-00016-of-00039.safetensors": "5465d734c5ec47dec36e13677587cd9a",
    "model-00017-of-00039.safetensors": "bd891775d0e7df8dbbcf1e74aa67a296",
    "model-00018-of-00039.safetensors": "81251e9f4693bf2b13df213e3a014cc2",
    "model-00019-of-00039.safetensors": "412e2e986251a172db9e4cc793b6374a",
    "model-00020-of-00039.safetensors": "76a44fa375a724d43119adb2bc278f9f",
    "model-00021-of-00039.safetensors": "ef1fe0e2683716fbbfc57278e4f27cd1",
    "model-00022-of-00039.safetensors": "d89c301fd96de667d843df2db480fd8c",
    "model-00023-of-00039.safetensors": "1bcc0007ba617a764c9871cfe223486c",
    "model-00024-of-00039.safetensors": "c98ca50fcf3dda9a45378a9e5c5a0a5b",
    "model-00025-of-00039.safetensors": "072a582404d50f34366fcdb3d3d99ad6",
    "model-00026-of-00039.safetensors": "86a262a02e1ce4812e760d605bbc1157",
    "model-00027-of-00039.safetensors": "41bf13f2af2a320dd4b124d359ff9e28",
    "model-00028-of-00039.safetensors": "28562dca1299c767481cb407dd98c528",
    "model-00029-of-00039.safetensors": "e9ec0022f17ce4414eabd21ff91bfcad",
    "model-00030-of-00039.safetensors": "30a0869ec3a0bb17f8d640a3f21a6466",
    "model-00031-of-00039.safetensors": "1f7435e450f01d293f047f70cddf7eac",
    "model-00032-of-00039.safetensors": "2f30284b7779d1d8c6fe6e72dba9d551",
    "model-00033-of-00039.safetensors": "ab2cb7fa4a41202258ca63fdd3adf665",
    "model-00034-of-00039.safetensors": "96a9d5ca27cc57c8a4a23591cb91cab4",
    "model-00035-of-00039.safetensors": "d71d7f1daa7773611afd9e0ff32f070b",
    "model-00036-of-00039.safetensors": "8b8fa5cdb6d0438e3ea5ce7ecd638f1c",
    "model-00037-of-00039.safetensors": "62b515c2ee6174181844a137a8795aa5",
    "model-00038-of-00039.safetensors": "18916fb1c5b983077d014eb3996c84d2",
    "model-00039-of-00039.safetensors": "1614bcd36f0c6de9ab2ad4c8ab5e1255",
    "model.safetensors.index.json": "16d883012db6a560462970616039427e",
    "special_tokens_map.json": "15f7a943faa91a794f38dd81a212cb01",
    "tokenizer.json": "4a6b786f5208cc4483958db65ce71f67",
    "tokenizer.model": "37974873eb68a7ab30c4912fc36264ae",
    "tokenizer_config.json": "171ae265003968bfc08c0d21e7191567",
}
COMPLETE = "download.json"            # written last into the model folder

DATA_BASE = "https://inference.mlcommons-storage.org/mixtral_8x7b"   # what both dataset .uri files hold
DATASET_URI = "https://inference.mlcommons-storage.org/metadata/mixtral-8x7b-validation-dataset.uri"
DATASET_PKL = "09292024_mixtral_15k_mintoken2_v1.pkl"
DATASET_MD5 = "ded6c711288c9bbca02929855557b8c1"
CALIBRATION_URI = "https://inference.mlcommons-storage.org/metadata/mixtral-8x7b-calibration-dataset.uri"
CALIBRATION_PKL = "2024.06.06_mixtral_15k_calibration_v4.pkl"
CALIBRATION_MD5 = "75067c9fe5cb5baef216a4b124c61df1"
SAMPLES = 15000
PER_DATASET = {"OpenOrca": 5000, "GSM8K": 5000, "MBXP": 5000}
REQUIRED_COLUMNS = ("dataset", "id", "input", "gt_output", "tok_input")   # tok_stop_sequence: optional
CALIBRATION_COLUMNS = ("input", "tok_input")
DATA_RECORD = "download.json"         # written last into the data folder


# --- model -----------------------------------------------------------------------------------------

def check_checkpoint(dest: Path, fix: str = FIX_MODEL) -> dict:
    """``dest`` is a loadable Mixtral folder (model_type mixtral, every shard, a tokenizer)."""
    return dl.check_hf_checkpoint(dest, "mixtral", "Mixtral-8x7B checkpoint", fix)


def download_model(dest: Path, log=print) -> Path:
    """The MLCommons Mixtral-8x7B-Instruct-v0.1 checkpoint into ``dest``: every file of
    CHECKPOINT_MD5 from R2 (a file already there is reused when its md5 matches, an interrupted one
    resumes), checked to be a loadable HF Mixtral folder; ``dest/download.json`` is written last.
    A folder whose record exists and checks is reused. When the R2 metadata cannot be fetched but
    ``dest`` already holds every file (e.g. filled by the official script), they are verified
    offline against the pinned md5s instead."""
    return dl.r2_checkpoint(dest, CHECKPOINT_URI, CHECKPOINT_MD5, check=check_checkpoint, record=COMPLETE, fix=FIX_MODEL,
                            tag=TAG, log=log, describe=lambda cfg: {
                                "files_md5": dict(sorted(CHECKPOINT_MD5.items())), "model_type": cfg.get("model_type"),
                                "torch_dtype": cfg.get("torch_dtype", cfg.get("dtype")),
                                "num_local_experts": cfg.get("num_local_experts")})


# --- data ------------------------------------------------------------------------------------------

def _check_tokens(df, name: str, fix: str) -> None:
    import numbers

    for i, t in enumerate(df["tok_input"]):
        try:
            ok = len(t) > 0 and isinstance(t[0], numbers.Integral)
        except Exception:
            ok = False
        if not ok:
            raise MissingDataError(f"{name}: row {i}: tok_input is not a non-empty list of token ids", fix)


def check_dataset(path: Path, fix: str = FIX_DATA, name: str | None = None):
    """The validation pickle by content; returns the DataFrame. Checked: a pandas DataFrame of
    SAMPLES rows with REQUIRED_COLUMNS, ``dataset`` values exactly PER_DATASET (5,000 each of
    OpenOrca, GSM8K, MBXP), MBXP ids ``<lang>_<entry_point>`` (what the scorer splits), non-empty
    ``tok_input`` token lists, string ``input``. Unpickling runs code: call it only on a file whose
    md5 was checked (download_data does; the harness calls it on the file it put in place)."""
    path = Path(path)
    name = name or path.name
    if not path.is_file():
        raise MissingDataError(f"{path} not found", fix)
    df = read_dataframe(path, fix, REQUIRED_COLUMNS, name)
    if len(df) != SAMPLES:
        raise MissingDataError(f"{name} holds {len(df)} rows, expected {SAMPLES}", fix)
    counts = {str(k): int(v) for k, v in df["dataset"].value_counts().items()}
    if counts != PER_DATASET:
        got = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        want = ", ".join(f"{k} {v}" for k, v in sorted(PER_DATASET.items()))
        raise MissingDataError(f"{name}: dataset mix is {got}, expected {want}", fix)
    for i, (ds, sid) in enumerate(zip(df["dataset"], df["id"])):
        if ds == "MBXP":
            lang, _, entry = str(sid).partition("_")
            if not lang or not entry:
                raise MissingDataError(f"{name}: row {i}: MBXP id {sid!r} is not <lang>_<entry_point>", fix)
    bad = next((i for i, x in enumerate(df["input"]) if not isinstance(x, str)), None)
    if bad is not None:
        raise MissingDataError(f"{name}: row {bad}: input is not a string", fix)
    _check_tokens(df, name, fix)
    return df


def check_calibration(path: Path, fix: str = FIX_DATA, name: str | None = None):
    """The calibration pickle: a non-empty DataFrame with the columns the harness reads (its md5 pins it)."""
    df = dl.nonempty_frame(path, fix, name, CALIBRATION_COLUMNS)
    _check_tokens(df, name or Path(path).name, fix)
    return df


def files(include_calibration: bool) -> list[dl.DataFile]:
    return dl.with_calibration(dl.DataFile(DATASET_PKL, DATASET_URI, DATASET_MD5, check_dataset),
                               dl.DataFile(CALIBRATION_PKL, CALIBRATION_URI, CALIBRATION_MD5, check_calibration),
                               include_calibration)


def download_data(dest_dir: Path, data_dir: str | None = None, log=print, include_calibration: bool = False) -> Path:
    """``dest_dir/09292024_mixtral_15k_mintoken2_v1.pkl`` (md5 DATASET_MD5, content per
    check_dataset), plus with ``include_calibration`` ``2024.06.06_mixtral_15k_calibration_v4.pkl``
    (md5 CALIBRATION_MD5). From ``data_dir`` (a folder holding the pickle(s), also in a
    ``mixtral_8x7b/`` subfolder, or the validation pickle itself) when given, checked then copied;
    else from MLCommons R2. A file already in ``dest_dir`` with the right md5 is reused.
    ``dest_dir/download.json`` records what was verified. Returns the validation pickle's path."""
    dl.data_files(dest_dir, files(include_calibration), data_dir, data_base=DATA_BASE, benchmark=BENCHMARK, fix=FIX_DATA,
                  record=DATA_RECORD, subfolders=("mixtral_8x7b",), log=log)
    return Path(dest_dir) / DATASET_PKL
