"""Fetching DeepSeek-R1 (MLPerf Inference language/deepseek-r1) model and data.

Model: the MLCommons copy of deepseek-ai/DeepSeek-R1 (revision 56d4cbbb, fp8, 163 safetensors shards, about
690 GB) from the public MLCommons R2 bucket via the .uri/.md5 metadata the official mlc-r2-downloader.sh uses;
every file md5-checked against the list pinned in ``deepseek-r1.md5`` beside this module (a copy of
github.com/mlcommons/r2-infra inference/metadata/deepseek-r1.md5 at commit 5d77ea6e, last changed 2026-07-20);
then checked to be a loadable Hugging Face DeepSeek-V3 folder. ``download.json`` (written last) marks it
complete; a complete folder is reused.

Data: the preprocessed evaluation pickle (4,388 rows) and, with ``include_calibration``, the 500-row
calibration pickle, from the same bucket's ``deepseek-r1-datasets-fp8-eval`` folder (md5-checked; if the R2
metadata cannot be fetched, the plain file URL in the same folder is tried), or from a local copy
(``--data_dir``). A pickle is unpickled (which can run code) only once its md5 is the official one.
"""
from __future__ import annotations

from pathlib import Path

from code.common.errors import MissingDataError
from code.common.fileio import read_dataframe
from code.common.llm import download as dl
from code.deepseek_r1.dataset import CALIBRATION_PKL, DATASET_PKL, truth_column

BENCHMARK = "deepseek-r1"
FIX_MODEL = f"make download_model BENCHMARKS={BENCHMARK}"
FIX_DATA = f"make download_data BENCHMARKS={BENCHMARK}"
TAG = f"[{BENCHMARK}]"

_META = "https://inference.mlcommons-storage.org/metadata"
CHECKPOINT_URI = f"{_META}/deepseek-r1.uri"       # -> https://inference.mlcommons-storage.org/deepseek_r1/models/DeepSeek-R1
CHECKPOINT_LIST = Path(__file__).with_name("deepseek-r1.md5")
COMPLETE = "download.json"

# r2-infra inference/metadata/deepseek-r1-datasets-fp8-eval.{uri,md5} (same commit)
DATA_URI = f"{_META}/deepseek-r1-datasets-fp8-eval.uri"
DATA_BASE = "https://inference.mlcommons-storage.org/deepseek_r1/datasets"
DATASET_MD5 = "994a30e4787831b8c8f6e44da7de67fe"
CALIBRATION_MD5 = "3f652e0b96b9342ebfe98c00593a5a4e"
SAMPLES = 4388
FAMILIES = ("gpqa", "mmlu_pro", "math500", "aime", "livecodebench")
DATA_RECORD = "download.json"


def checkpoint_md5() -> dict[str, str]:
    """{path: md5} of the pinned checkpoint list."""
    return {p: m for m, p in dl.parse_md5_list(CHECKPOINT_LIST.read_text(), str(CHECKPOINT_LIST))}


# --- model -----------------------------------------------------------------------------------------

def check_checkpoint(dest: Path, fix: str = FIX_MODEL) -> dict:
    """``dest`` is a loadable DeepSeek-V3-architecture folder (model_type deepseek_v3, every shard, a tokenizer)."""
    return dl.check_hf_checkpoint(dest, "deepseek_v3", "DeepSeek-R1 checkpoint", fix)


def download_model(dest: Path, log=print) -> Path:
    """The MLCommons DeepSeek-R1 checkpoint into ``dest``: every file of the pinned list from R2 (a file already
    there is reused when its md5 matches, an interrupted one resumes), then checked as a loadable folder;
    ``dest/download.json`` is written last. When the R2 metadata cannot be fetched but ``dest`` already holds
    every file (filled by the official script), they are verified offline against the pinned md5s instead."""
    pins = checkpoint_md5()
    return dl.r2_checkpoint(dest, CHECKPOINT_URI, pins, check=check_checkpoint, record=COMPLETE, fix=FIX_MODEL, tag=TAG,
                            log=log, describe=lambda cfg: {
                                "files": len(pins), "md5_list": CHECKPOINT_LIST.name, "model_type": cfg.get("model_type"),
                                "n_routed_experts": cfg.get("n_routed_experts"),
                                "quantization": (cfg.get("quantization_config") or {}).get("quant_method")})


# --- data ------------------------------------------------------------------------------------------

def check_dataset(path: Path, fix: str = FIX_DATA, name: str | None = None, samples: int | None = None):
    """The evaluation pickle by content: a DataFrame of SAMPLES rows with ``text_input`` strings, a
    ``dataset`` column whose every value names one of FAMILIES, and a ground truth column. Returns it."""
    path = Path(path)
    name = name or path.name
    df = read_dataframe(path, fix, ("text_input", "dataset"), name)
    want = SAMPLES if samples is None else samples
    if want and len(df) != want:
        raise MissingDataError(f"{name} holds {len(df)} rows, expected {want}", fix)
    try:
        truth_column(df)
    except KeyError:
        raise MissingDataError(f"{name}: no ground_truth (or gt_output) column", fix) from None
    for i, (ds, text) in enumerate(zip(df["dataset"], df["text_input"])):
        if not any(f in str(ds).lower() for f in FAMILIES):
            raise MissingDataError(f"{name}: row {i}: dataset {ds!r} is none of {', '.join(FAMILIES)}", fix)
        if not isinstance(text, str) or not text:
            raise MissingDataError(f"{name}: row {i}: text_input is not a non-empty string", fix)
    return df


def check_calibration(path: Path, fix: str = FIX_DATA, name: str | None = None):
    """The calibration pickle: a non-empty DataFrame with the columns the harness reads (its md5 pins it)."""
    return dl.nonempty_frame(path, fix, name, ("text_input",))


def files(include_calibration: bool) -> list[dl.DataFile]:
    return dl.with_calibration(dl.DataFile(DATASET_PKL, DATA_URI, DATASET_MD5, check_dataset),
                               dl.DataFile(CALIBRATION_PKL, DATA_URI, CALIBRATION_MD5, check_calibration),
                               include_calibration)


def download_data(dest_dir: Path, data_dir: str | None = None, log=print, include_calibration: bool = False) -> Path:
    """``dest_dir/mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl`` (md5 DATASET_MD5, content per check_dataset),
    plus with ``include_calibration`` the calibration pickle (md5 CALIBRATION_MD5). From ``data_dir`` (a
    folder holding the pickle(s), also in a ``deepseek_r1/`` or ``datasets/`` subfolder, or the evaluation
    pickle itself) when given, checked then copied; else from MLCommons R2. A file already in ``dest_dir``
    with the right md5 is reused. ``dest_dir/download.json`` records what was verified. Returns the
    evaluation pickle's path."""
    dl.data_files(dest_dir, files(include_calibration), data_dir, data_base=DATA_BASE, benchmark=BENCHMARK,
                  fix=FIX_DATA, record=DATA_RECORD, subfolders=("deepseek_r1", "datasets"), log=log)
    return Path(dest_dir) / DATASET_PKL
