"""Fetching Qwen3-VL-235B-A22B (MLPerf Inference multimodal/qwen3-vl) model and data, as the reference names them
(README "Reference Implementation Specification"; schema.py ``Model`` and ``Dataset``), from the Hugging Face Hub at
the pinned commits. Every file is checked against the Hub's metadata of that commit (LFS files by sha256, others by
git blob id: ``code.common.llm.download.hf_snapshot``); the reference publishes no checksum list of its own. The
MLCommons R2 copies the reference's mlcr commands fetch (``get-ml-model-qwen3-vl,_r2-downloader``,
``get-dataset-mlperf-inference-shopify-catalogue,_r2-downloader``) name no URI or md5 list in the reference tree,
so they are not used here; a folder they filled is taken through ``--data_dir`` (data) or by placing it at the
checkpoint path (the model: checked as a loadable Qwen3-VL MoE folder).

* Model: Qwen/Qwen3-VL-235B-A22B-Instruct @ 710c13861be6c466e66de3f484069440b8f31389 (bf16, ~471 GB).
* Offline / Server data: Shopify/product-catalogue @ d5c517c509f5aca99053897ef1de797d6d7e5aa5, splits train + test
  (48,289 rows).
* Interactive data (v6.1): nvidia/Shopify-product-catalogue-8k @ 2bc8c6c4b6ebd27b880b0cba519cb45d09867045
  (8,000 rows).
"""
from __future__ import annotations

from pathlib import Path

from code.common.errors import MissingDataError
from code.common.llm import download as dl
from code.qwen3_vl import dataset

BENCHMARK = "qwen3-vl-235b-a22b"
FIX_MODEL = f"make download_model BENCHMARKS={BENCHMARK}"
FIX_DATA = f"make download_data BENCHMARKS={BENCHMARK}"
TAG = f"[{BENCHMARK}]"

MODEL_REPO = "Qwen/Qwen3-VL-235B-A22B-Instruct"
MODEL_REVISION = "710c13861be6c466e66de3f484069440b8f31389"
MODEL_FILES = ("*.json", "*.safetensors", "*.txt", "*.jinja")
DATA_REPO = "Shopify/product-catalogue"
DATA_REVISION = "d5c517c509f5aca99053897ef1de797d6d7e5aa5"
DATA_ROWS = 48289
DATA_8K_REPO = "nvidia/Shopify-product-catalogue-8k"
DATA_8K_REVISION = "2bc8c6c4b6ebd27b880b0cba519cb45d09867045"
DATA_8K_ROWS = 8000
RECORD = "download.json"


def check_checkpoint(dest: Path, fix: str = FIX_MODEL) -> dict:
    """A loadable Qwen3-VL MoE folder: config (model_type qwen3_vl_moe), every shard, tokenizer and processor files."""
    cfg = dl.check_hf_checkpoint(dest, "qwen3_vl_moe", "Qwen3-VL-235B-A22B checkpoint", fix)
    if not any((Path(dest) / n).is_file() for n in ("preprocessor_config.json", "processor_config.json")):
        raise MissingDataError(f"{dest}: no preprocessor_config.json (the image processor's settings)", fix)
    return cfg


def download_model(dest: Path, log=print) -> Path:
    dest = Path(dest)
    if dl.reuse_complete(dest, RECORD, check_checkpoint, f"{TAG} model", log):
        return dest
    dl.hf_snapshot(MODEL_REPO, dest, allow_patterns=list(MODEL_FILES), revision=MODEL_REVISION, record=RECORD,
                   rerun=FIX_MODEL, log=log)
    try:
        check_checkpoint(dest)
    except MissingDataError:
        (dest / RECORD).unlink(missing_ok=True)
        raise
    log(f"{TAG} {MODEL_REPO}@{MODEL_REVISION[:12]} verified -> {dest}")
    return dest


def check_data(folder: Path, rows: int, fix: str = FIX_DATA) -> int:
    """The train + test splits read as the reference reads them, ``rows`` rows (0: any), every column present."""
    n = len(dataset.read(Path(folder), fix, columns=(*dataset.TRUTH, "product_title")))
    if rows and n != rows:
        raise MissingDataError(f"{folder}: {n} rows in train + test, expected {rows}", fix)
    return n


def download_data(dest: Path, data_dir: str | None = None, *, interactive: bool = False, log=print) -> Path:
    """The catalogue's Parquet files into ``dest`` (or, with ``data_dir``, that folder checked in place)."""
    repo, rev, rows = (DATA_8K_REPO, DATA_8K_REVISION, DATA_8K_ROWS) if interactive else \
        (DATA_REPO, DATA_REVISION, DATA_ROWS)
    if data_dir:
        check_data(Path(data_dir), rows)
        return Path(data_dir)
    dest = Path(dest)
    if dl.reuse_complete(dest, RECORD, lambda d: check_data(d, rows), f"{TAG} data", log):
        return dest
    dl.hf_snapshot(repo, dest, allow_patterns=["*.parquet"], revision=rev, repo_type="dataset", record=RECORD,
                   rerun=FIX_DATA, log=log)
    try:
        n = check_data(dest, rows)
    except MissingDataError:
        (dest / RECORD).unlink(missing_ok=True)
        raise
    log(f"{TAG} {repo}@{rev[:12]}: {n} rows verified -> {dest}")
    return dest
