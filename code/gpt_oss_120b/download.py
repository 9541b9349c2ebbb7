"""Fetching GPT-OSS-120B (MLPerf Inference language/gpt-oss-120b) model and data.

The reference's README downloads both with the MLCommons R2 downloader (``mlcr get-ml-model-gpt-oss,_mlc,
_r2-downloader`` / ``mlcr get-dataset-mlperf-inference-gpt-oss,_mlc,_r2-downloader``), that is
``bash <(curl -s https://raw.githubusercontent.com/mlcommons/r2-downloader/refs/heads/main/mlc-r2-downloader.sh)
https://inference.mlcommons-storage.org/metadata/gpt-oss-{model,data}.uri``. Done here in Python
(``code.common.llm.download``), with the same .uri/.md5 metadata.

Model: the MLCommons copy of openai/gpt-oss-120b (revision b5c939de, MXFP4 experts, ~65 GB). Its md5 list
(pinned in ``gpt-oss-model.md5`` beside this module: github.com/mlcommons/r2-infra
inference/metadata/gpt-oss-model.md5 at commit e51edb74) names the Hugging Face folder ``gpt-oss-120b/`` and,
inside it, the ``original/`` and ``metal/`` copies of the same weights for other runtimes; only the Hugging Face
files are fetched (HF_FILES), each md5-checked, into ``<dest>/gpt-oss-120b``, then checked to be a loadable
``gpt_oss`` folder. ``download.json`` (written last, in ``dest``) marks it complete; a complete folder is reused.

Data: ``acc/acc_eval_ref.parquet`` (4,395 rows), ``perf/perf_eval_ref.parquet`` (6,396 rows) and TEST07's
``acc/acc_eval_compliance_gpqa.parquet`` (990 GPQA rows; md5 from the same list at commit 22d16223), plus with
``include_calibration`` the 1,024-row calibration set, from the ``gpt-oss_data`` folder (md5s pinned from r2-infra
inference/metadata/gpt-oss-data.md5 at commit 621a58a4; if the R2 metadata cannot be fetched, the plain file URL
in the same folder is tried), or from a local copy (``--data_dir``: a folder holding ``acc/`` and ``perf/``).
"""
from __future__ import annotations

from pathlib import Path

from code.common.errors import MissingDataError
from code.common.llm import download as dl
from code.gpt_oss_120b.dataset import (ACCURACY_FILE, CALIBRATION_FILE, COMPLIANCE_GPQA_FILE, FAMILIES,
                                       PERFORMANCE_FILE, prompts_of, read)

BENCHMARK = "gpt-oss-120b"
FIX_MODEL = f"make download_model BENCHMARKS={BENCHMARK}"
FIX_DATA = f"make download_data BENCHMARKS={BENCHMARK}"
TAG = f"[{BENCHMARK}]"

_META = "https://inference.mlcommons-storage.org/metadata"
CHECKPOINT_URI = f"{_META}/gpt-oss-model.uri"     # -> https://inference.mlcommons-storage.org/gpt-oss_model
CHECKPOINT_LIST = Path(__file__).with_name("gpt-oss-model.md5")
FOLDER = "gpt-oss-120b"                            # the Hugging Face folder inside the R2 listing
COMPLETE = "download.json"

DATA_URI = f"{_META}/gpt-oss-data.uri"
DATA_BASE = "https://inference.mlcommons-storage.org/gpt-oss_data"
ACCURACY_MD5 = "29d35424fc8d31461e73a7766446480e"
PERFORMANCE_MD5 = "e4cd6cef6dd975f3e50c85b3279b358b"
CALIBRATION_MD5 = "3455fea2a2afceb69bdabace1ea90714"
COMPLIANCE_MD5 = "e35e6bc6d7343df1930501bb61e61260"   # gpt-oss-data.md5 at r2-infra commit 22d16223
COMPLIANCE_SAMPLES = 990                           # compliance/TEST07/gpt-oss-120b/audit.config min_query_count
ACCURACY_SAMPLES = 4395                            # checker accuracy-sample-count, mlperf.conf's override
PERFORMANCE_SAMPLES = 6396                         # checker dataset-size / performance-sample-count
DATA_RECORD = "download.json"


def checkpoint_md5() -> dict[str, str]:
    """{path: md5} of the pinned list's Hugging Face files (``gpt-oss-120b/...``, not its original/ and metal/)."""
    pins = dl.parse_md5_list(CHECKPOINT_LIST.read_text(), str(CHECKPOINT_LIST))
    return {p: m for m, p in pins if p.startswith(FOLDER + "/") and p.split("/")[1] not in ("original", "metal")}


# --- model -----------------------------------------------------------------------------------------

def check_checkpoint(dest: Path, fix: str = FIX_MODEL) -> dict:
    """``dest`` is a loadable GPT-OSS folder (model_type gpt_oss, every shard, a tokenizer)."""
    return dl.check_hf_checkpoint(dest, "gpt_oss", "GPT-OSS-120B checkpoint", fix)


def download_model(dest: Path, log=print) -> Path:
    """The MLCommons GPT-OSS-120B checkpoint into ``dest/gpt-oss-120b`` (every pinned Hugging Face file from R2,
    md5-checked; one already there with the right md5 is reused, an interrupted one resumes), then checked as a
    loadable folder; ``dest/download.json`` is written last. Returns the Hugging Face folder."""
    pins = checkpoint_md5()
    dl.r2_checkpoint(dest, CHECKPOINT_URI, pins, check=lambda d: check_checkpoint(Path(d) / FOLDER), record=COMPLETE,
                     fix=FIX_MODEL, tag=TAG, log=log, describe=lambda cfg: {
                         "files": len(pins), "md5_list": CHECKPOINT_LIST.name, "folder": FOLDER,
                         "model_type": cfg.get("model_type"), "num_local_experts": cfg.get("num_local_experts"),
                         "quantization": (cfg.get("quantization_config") or {}).get("quant_method")})
    return Path(dest) / FOLDER


# --- data ------------------------------------------------------------------------------------------

def _check_set(path: Path, fix: str, name: str, samples: int, truth: bool):
    df = read(path, fix, ("dataset", "ground_truth") if truth else ("dataset",))
    if samples and len(df) != samples:
        raise MissingDataError(f"{name} holds {len(df)} rows, expected {samples}", fix)
    for i, ds in enumerate(df["dataset"]):
        if not any(f in str(ds).lower() for f in FAMILIES):
            raise MissingDataError(f"{name}: row {i}: dataset {ds!r} is none of {', '.join(FAMILIES)}", fix)
    prompts_of(df, path, fix)
    return df


def check_accuracy_set(path: Path, fix: str = FIX_DATA, name: str | None = None):
    """The accuracy set by content: ACCURACY_SAMPLES rows, a scorer family in every ``dataset``, a ground truth
    column, token ids in every row."""
    return _check_set(path, fix, name or Path(path).name, ACCURACY_SAMPLES, True)


def check_performance_set(path: Path, fix: str = FIX_DATA, name: str | None = None):
    return _check_set(path, fix, name or Path(path).name, PERFORMANCE_SAMPLES, False)


def check_compliance_set(path: Path, fix: str = FIX_DATA, name: str | None = None):
    """TEST07's set: COMPLIANCE_SAMPLES GPQA rows with a ground truth and token ids."""
    df = _check_set(path, fix, name or Path(path).name, COMPLIANCE_SAMPLES, True)
    other = sorted({str(d) for d in df["dataset"] if "gpqa" not in str(d).lower()})
    if other:
        raise MissingDataError(f"{name or Path(path).name}: TEST07's set holds only GPQA questions, not {other[0]!r}",
                               fix)
    return df


def check_calibration(path: Path, fix: str = FIX_DATA, name: str | None = None):
    df = read(path, fix, ())
    if len(df) == 0:
        raise MissingDataError(f"{name or Path(path).name} holds no rows", fix)
    return df


def files(include_calibration: bool) -> list[dl.DataFile]:
    out = [dl.DataFile(ACCURACY_FILE, DATA_URI, ACCURACY_MD5, check_accuracy_set),
           dl.DataFile(PERFORMANCE_FILE, DATA_URI, PERFORMANCE_MD5, check_performance_set),
           dl.DataFile(COMPLIANCE_GPQA_FILE, DATA_URI, COMPLIANCE_MD5, check_compliance_set, main=False)]
    if include_calibration:
        out.append(dl.DataFile(CALIBRATION_FILE, DATA_URI, CALIBRATION_MD5, check_calibration, main=False))
    return out


def download_data(dest_dir: Path, data_dir: str | None = None, log=print, include_calibration: bool = False) -> Path:
    """``dest_dir/acc/acc_eval_ref.parquet`` and ``dest_dir/perf/perf_eval_ref.parquet`` (md5 and content checked),
    plus with ``include_calibration`` the calibration set. From ``data_dir`` (a folder holding ``acc/`` and
    ``perf/``, or the files themselves) when given, checked then copied; else from MLCommons R2. A file already in
    ``dest_dir`` with the right md5 is reused. ``dest_dir/download.json`` records what was verified. Returns the
    accuracy set's path."""
    dl.data_files(dest_dir, files(include_calibration), data_dir, data_base=DATA_BASE, benchmark=BENCHMARK,
                  fix=FIX_DATA, record=DATA_RECORD, subfolders=("gpt-oss_data", "gpt_oss_120b"), log=log)
    return Path(dest_dir) / ACCURACY_FILE
