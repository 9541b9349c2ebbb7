"""Fetching Llama-3.1-405B-Instruct (MLPerf Inference language/llama3.1-405b) data and model.

Data: the processed evaluation pickle (8,313 rows) and, with ``include_calibration``, the 512-row calibration
pickle from the public MLCommons R2 bucket (each .uri names the file itself), md5-checked against the pins below
(github.com/mlcommons/r2-infra inference/metadata/llama3-1-405b-*.md5 at commit 5d77ea6e) and by content; or from
local copies (``--data_dir``). A pickle is unpickled (which can run code) only once its md5 is the official one.

Model: meta-llama/Llama-3.1-405B-Instruct from Hugging Face (gated: Meta's license and HF_TOKEN), safetensors,
configs and tokenizer, each file checked against the Hub's sha256 / blob id; the reference README's checkout commit
is the 8B model's, so no revision is pinned and the one resolved is recorded. MLCommons members may instead use the
members-only R2 copy (``llama3-1-405b-instruct.uri``) with the official script; a folder it filled is verified
offline against the md5 list pinned beside this module (r2-infra llama3-1/metadata/llama3-1-405b-instruct.md5 at
the same commit, without Meta's original/ checkpoints, which the harness does not load).
"""
from __future__ import annotations

from pathlib import Path

from code.common.errors import MissingDataError
from code.common.fileio import read_dataframe
from code.common.llm import download as dl
from code.llama3_1_405b.dataset import CALIBRATION_PKL, DATASET_PKL, METRICS

BENCHMARK = "llama3.1-405b"
FIX_MODEL = f"make download_model BENCHMARKS={BENCHMARK}"
FIX_DATA = f"make download_data BENCHMARKS={BENCHMARK}"
TAG = f"[{BENCHMARK}]"

_META = "https://inference.mlcommons-storage.org/metadata"
DATASET_URI = f"{_META}/llama3-1-405b-dataset-8313.uri"
CALIBRATION_URI = f"{_META}/llama3-1-405b-calibration-dataset-512.uri"
DATA_BASE = "https://inference.mlcommons-storage.org/llama3.1_405b"
DATASET_MD5 = "25d9f2085bbcacb07554cd7f4af303c9"
CALIBRATION_MD5 = "c5f0b704fc4a94129a7ff2cd2c248932"
SAMPLES = 8313
DATA_RECORD = "download.json"

MODEL_REPO = "meta-llama/Llama-3.1-405B-Instruct"
MODEL_FILES = ["config.json", "generation_config.json", "model.safetensors.index.json", "model-*-of-*.safetensors",
               "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "LICENSE", "USE_POLICY.md"]
MEMBERS_URI = "https://llama3-1.mlcommons-storage.org/metadata/llama3-1-405b-instruct.uri"   # members only
MEMBERS_PAGE = "https://llama3-1.mlcommons.org"
MEMBERS_LIST = "llama3-1-405b-instruct.md5"
MEMBERS_PINS = Path(__file__).with_name(MEMBERS_LIST)
COMPLETE = "download.json"


def members_md5() -> dict[str, str]:
    return {p: m for m, p in dl.parse_md5_list(MEMBERS_PINS.read_text(), str(MEMBERS_PINS))}


# --- data ------------------------------------------------------------------------------------------

def check_dataset(path: Path, fix: str = FIX_DATA, name: str | None = None, samples: int | None = None):
    """The evaluation pickle by content: SAMPLES rows with non-empty ``tok_input`` token lists, ``gt_output``
    and a ``metric`` of METRICS. Returns the DataFrame."""
    import numbers

    name = name or Path(path).name
    df = read_dataframe(Path(path), fix, ("tok_input", "gt_output", "metric"), name)
    want = SAMPLES if samples is None else samples
    if want and len(df) != want:
        raise MissingDataError(f"{name} holds {len(df)} rows, expected {want}", fix)
    for i, (tok, metric) in enumerate(zip(df["tok_input"], df["metric"])):
        if metric not in METRICS:
            raise MissingDataError(f"{name}: row {i}: metric {metric!r} is none of {', '.join(METRICS)}", fix)
        try:
            ok = len(tok) > 0 and isinstance(tok[0], numbers.Integral)
        except Exception:  # noqa: BLE001 - any non-sequence cell
            ok = False
        if not ok:
            raise MissingDataError(f"{name}: row {i}: tok_input is not a non-empty list of token ids", fix)
    return df


def check_calibration(path: Path, fix: str = FIX_DATA, name: str | None = None):
    """The calibration pickle: a non-empty DataFrame with the columns the harness reads (its md5 pins it)."""
    return dl.nonempty_frame(path, fix, name, ("tok_input",))


def files(include_calibration: bool) -> list[dl.DataFile]:
    return dl.with_calibration(dl.DataFile(DATASET_PKL, DATASET_URI, DATASET_MD5, check_dataset),
                               dl.DataFile(CALIBRATION_PKL, CALIBRATION_URI, CALIBRATION_MD5, check_calibration),
                               include_calibration)


def download_data(dest_dir: Path, data_dir: str | None = None, log=print, include_calibration: bool = False) -> Path:
    """The evaluation pickle (and with ``include_calibration`` the calibration one) into ``dest_dir``: from
    ``data_dir`` (a folder holding them, also in a ``llama3.1_405b/`` subfolder, or the pickle itself), else a copy
    already there with the right md5, else MLCommons R2; ``dest_dir/download.json`` records what was verified."""
    dl.data_files(dest_dir, files(include_calibration), data_dir, data_base=DATA_BASE, benchmark=BENCHMARK,
                  fix=FIX_DATA, record=DATA_RECORD, subfolders=("llama3.1_405b",), log=log)
    return Path(dest_dir) / DATASET_PKL


# --- model -----------------------------------------------------------------------------------------

def check_model(dest: Path, fix: str = FIX_MODEL) -> dict:
    return dl.check_hf_checkpoint(dest, "llama", "Llama-3.1-405B-Instruct", fix)


def _members_fix(dest: Path) -> str:
    return (f"accept Meta's Llama 3.1 license at {dl.hf_page(MODEL_REPO)} and set HF_TOKEN=<read token>, then "
            f"{FIX_MODEL}; or, as an MLCommons member (request access at {MEMBERS_PAGE}), run "
            f"{dl.r2_command(MEMBERS_URI, dest)}, then {FIX_MODEL} verifies and uses that folder")


def download_model(dest: Path, log=print) -> Path:
    """meta-llama/Llama-3.1-405B-Instruct (safetensors, ~810 GB) into ``dest`` through hf_snapshot, or the members'
    R2 copy verified against the pinned list; ``dest/download.json`` is written last. A complete folder is reused."""
    verify = dl.members_verifier(MEMBERS_LIST, members_md5(), MODEL_FILES, MEMBERS_URI, FIX_MODEL, TAG)
    return dl.gated_model(dest, repo=MODEL_REPO, files=MODEL_FILES, revision=None, complete=COMPLETE,
                          members_list=MEMBERS_LIST, verify_members=verify, check=check_model,
                          members_fix=_members_fix, fix=FIX_MODEL, tag=TAG, log=log)
