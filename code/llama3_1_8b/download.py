"""Fetching Llama-3.1-8B-Instruct (MLPerf Inference language/llama3.1-8b) data and model.

Data: the preprocessed CNN/DailyMail JSON files the reference README points at, from the public
MLCommons R2 bucket (the .uri/.md5 metadata the official mlc-r2-downloader.sh uses; if that
metadata cannot be fetched, the file's plain URL in the same folder is tried), md5-checked against
the pins below and checked by content: ``cnn_eval.json`` (datacenter, 13,368 articles) and
``sample_cnn_eval_5000.json`` (edge, 5,000), plus ``cnn_dailymail_calibration.json`` with
``include_calibration``; or local copies (``--data_dir``).

Model: meta-llama/Llama-3.1-8B-Instruct from Hugging Face at the revision the reference README
pins (gated: Meta's license must be accepted and HF_TOKEN set), safetensors weights, configs and
tokenizer only, each file checked against the Hub's sha256 / blob id. MLCommons members may instead
use the members-only R2 copy (Cloudflare Access login) with the official script; a folder it filled
is verified offline against the md5 list pinned below.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from code.common import fileio
from code.common.errors import HarnessError, MissingDataError
from code.common.llm import download as dl

BENCHMARK = "llama3.1-8b"
FIX_MODEL = f"make download_model BENCHMARKS={BENCHMARK}"
FIX_DATA = f"make download_data BENCHMARKS={BENCHMARK}"
TAG = f"[{BENCHMARK}]"

# --- data pins ---------------------------------------------------------------------------------------
# From github.com/mlcommons/r2-infra inference/metadata/llama3-1-8b-*.{uri,md5} (commit
# 5d77ea6ed10dd821cd34000ea6c000ae54fa306b, files last changed 2025-10-08); every .uri holds DATA_BASE.
DATA_BASE = "https://inference.mlcommons-storage.org/llama3.1_8b/datasets"
_META = "https://inference.mlcommons-storage.org/metadata"
DATASETS = {   # category: (.uri, file, md5, samples)
    "datacenter": (f"{_META}/llama3-1-8b-cnn-eval.uri", "cnn_eval.json", "c41c613c17794d117899fdcdeeadbe3c", 13368),
    "edge": (f"{_META}/llama3-1-8b-sample-cnn-eval-5000.uri", "sample_cnn_eval_5000.json",
             "b9d994f8a8431c89f57b38d33b94a00d", 5000),
}
# 1000 articles of cnn_dailymail 3.0.0 train (calibration/CNNDailyMail/calibration-list.txt, written by
# the reference's prepare-calibration.py); the count is not enforced (md5 pins the file).
CALIBRATION = (f"{_META}/llama3-1-8b-cnn-dailymail-calibration.uri", "cnn_dailymail_calibration.json",
               "706268fffad9bc1d93be9b29261116d7", None)
CATEGORIES = ("both", "datacenter", "edge")
# What the reference's dataset.py reads. Its download_cnndm.py also writes "instruction" (the prompt
# template); it is not required here, since no reader uses it and the md5 pins the file anyway.
REQUIRED_KEYS = ("input", "tok_input", "output")
DATA_RECORD = "download.json"          # written last into the data folder

# --- model pins --------------------------------------------------------------------------------------
MODEL_REPO = "meta-llama/Llama-3.1-8B-Instruct"
MODEL_REVISION = "be673f326cab4cd22ccfef76109faf68e41aa5f1"     # language/llama3.1-8b/README.md
MODEL_FILES = ["config.json", "generation_config.json", "model.safetensors.index.json", "model-*-of-*.safetensors",
               "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "LICENSE", "USE_POLICY.md"]
MEMBERS_URI = "https://llama3-1.mlcommons-storage.org/metadata/llama3-1-8b-instruct.uri"   # members only
MEMBERS_PAGE = "https://llama3-1.mlcommons.org"
MEMBERS_LIST = "llama3-1-8b-instruct.md5"      # what mlc-r2-downloader.sh leaves in the folder
# github.com/mlcommons/r2-infra llama3-1/metadata/llama3-1-8b-instruct.md5 (same commit); the .uri
# points at https://llama3-1.mlcommons-storage.org/data/inference/Llama-3.1-8B-Instruct. Only the
# files matching MODEL_FILES are verified (original/ holds Meta's own-format copy, not used).
MEMBERS_MD5 = {
    ".gitattributes": "a859f8a89685747ffd4171b870540c41",
    "LICENSE": "ec3a84cddd347089328bd0cc41bcae79",
    "NOTICE": "d073ffb5b20833e1987e73cf45dd069d",
    "README.md": "bad00baca9c95ec86fb12e7fc019f7d4",
    "USE_POLICY.md": "4c11d3625eebde6cce27d38416950633",
    "config.json": "3cd5831d379b509d53afade0e24c36e9",
    "generation_config.json": "99bc2c9e900a6630caf5229648d0cfc0",
    "model-00001-of-00004.safetensors": "b903f07029c0d75fe4acf712794ed687",
    "model-00002-of-00004.safetensors": "349fbd03b1d89f990f84f6b7fc028231",
    "model-00003-of-00004.safetensors": "f3788976f7e781e837bce0bf5d9c6850",
    "model-00004-of-00004.safetensors": "df2e75d8f0b94d8d651e8be75f9a8c7e",
    "model.safetensors.index.json": "b0f1d45ab1be77e4326454bebfaadc28",
    "original/consolidated.00.pth": "052e8a2d30d952b097163eb3f56cf9d3",
    "original/params.json": "b1fa8bedb515f79e326bd31609e75f8c",
    "original/tokenizer.model": "08292403f8b173e7524d7fba7bbbd2d3",
    "special_tokens_map.json": "ff9bb51206c5b33aa9385a1a371294b6",
    "tokenizer.json": "3ff6b653d22a2676f3a03bd7b5d7ff88",
    "tokenizer_config.json": "221aad9c0aca0a7abe2ea6108eae267d",
}
COMPLETE = "download.json"


# --- data --------------------------------------------------------------------------------------------

def check_dataset(path: Path, samples: int | None, fix: str = FIX_DATA, name: str | None = None) -> list:
    """``path`` is a JSON list of ``samples`` records (any count when None), each with
    REQUIRED_KEYS: ``input`` and ``output`` strings, ``tok_input`` a non-empty list of token ids
    (what the reference's dataset.py reads with pandas.read_json). Returns the records."""
    path = Path(path)
    name = name or path.name
    if not path.is_file():
        raise MissingDataError(f"{path} not found", fix)
    data = fileio.read_json(path, fix, expect=list)
    if samples is not None and len(data) != samples:
        raise MissingDataError(f"{name} holds {len(data)} samples, expected {samples}", fix)
    if not data:
        raise MissingDataError(f"{name} holds no samples", fix)
    for i, x in enumerate(data):
        if not isinstance(x, dict):
            raise MissingDataError(f"{name}: entry {i} is a {type(x).__name__}, not an object", fix)
        missing = [k for k in REQUIRED_KEYS if k not in x]
        if missing:
            raise MissingDataError(f"{name}: entry {i} has no {', '.join(missing)} (has {', '.join(x)})", fix)
        if not isinstance(x["input"], str) or not isinstance(x["output"], str):
            raise MissingDataError(f"{name}: entry {i}: input and output must be strings", fix)
        tok = x["tok_input"]
        if not isinstance(tok, list) or not tok or not all(type(t) is int for t in tok):
            raise MissingDataError(f"{name}: entry {i}: tok_input is not a non-empty list of token ids", fix)
    return data


def _wanted(category: str, include_calibration: bool) -> list[tuple[str, tuple]]:
    if category == "auto":
        category = "both"
    if category not in CATEGORIES:
        raise HarnessError(f"unknown category {category!r} for {BENCHMARK} data",
                           f"use one of {', '.join(CATEGORIES)}")
    out = [(c, DATASETS[c]) for c in ("datacenter", "edge") if category in ("both", c)]
    if include_calibration:
        out.append(("calibration", CALIBRATION))
    return out


def _local_source(data_dir: str, name: str) -> Path | None:
    d = Path(data_dir).expanduser()
    if d.is_file():
        return d if d.name == name else None
    for folder in (d, d / "datasets", d / "llama3.1_8b" / "datasets"):
        if (folder / name).is_file():
            return folder / name
    return None


def _fetch(uri: str, name: str, md5: str, samples, dest_dir: Path, log) -> str:
    return dl.r2_data_file(uri, name, md5, dest_dir, data_base=DATA_BASE, tag=TAG, log=log,
                           check=lambda p: check_dataset(p, samples, FIX_DATA, name))


def _record(dest_dir: Path, updates: dict) -> None:
    dl.merge_record(dest_dir / DATA_RECORD, BENCHMARK, updates, FIX_DATA)


def download_data(dest_dir: Path, data_dir: str | None = None, log=print, category: str = "both",
                  include_calibration: bool = False) -> dict[str, Path]:
    """The CNN/DailyMail JSON file(s) of ``category`` ("both", "datacenter": cnn_eval.json, "edge":
    sample_cnn_eval_5000.json; "auto" means both) into ``dest_dir``, plus the calibration file with
    ``include_calibration``; each md5-checked against its pin and checked by content
    (check_dataset). Returns {"datacenter"/"edge"/"calibration": path} for the files prepared.

    From ``data_dir`` (a folder holding either or both files, or one file itself) when given: an
    explicit category's file must be there; with "both" the files present are used (at least one),
    and a missing one is left for a download without --data_dir (the calibration file, when asked
    for and absent, is fetched from R2). Else from MLCommons R2; a file already in ``dest_dir``
    with the right md5 is reused. ``dest_dir/download.json`` records what was verified."""
    dest_dir = Path(dest_dir)
    wanted = _wanted(category, include_calibration)
    out: dict[str, Path] = {}
    done = {}
    skipped = []
    for cat, (uri, name, md5, samples) in wanted:
        final = dest_dir / name
        if data_dir:
            fix = (f"point --data_dir at a folder holding the MLCommons {name} "
                   f"({dl.r2_command(uri, '<folder>')}), or drop --data_dir to download it")
            src = _local_source(data_dir, name)
            if src is not None:
                got = fileio.md5_file(src)
                if got != md5:
                    raise MissingDataError(f"{src}: md5 {got}, expected {md5} (not the official file)", fix)
                check_dataset(src, samples, fix, name)
                if src.resolve() != final.resolve():
                    with fileio.staged_path(final) as tmp:
                        shutil.copyfile(src, tmp)
                log(f"{TAG} {name}: md5 ok, content ok, from {src}")
                done[name] = {"md5": md5, "samples": samples, "source": f"local copy {src}"}
                out[cat] = final
                continue
            if cat != "calibration":
                if category in ("datacenter", "edge"):
                    raise MissingDataError(f"{name} ({cat}) not found in {data_dir}", fix)
                skipped.append((cat, name, fix))
                continue
            log(f"{TAG} {name} not in {data_dir}: fetching it from MLCommons R2")
        if final.is_file() and fileio.md5_file(final) == md5:
            log(f"{TAG} {name} present, md5 ok: {final}")
        else:
            done[name] = {"md5": md5, "samples": samples, "source": _fetch(uri, name, md5, samples, dest_dir, log)}
        out[cat] = final
    if skipped and not any(c in out for c in ("datacenter", "edge")):
        names = " or ".join(n for _, n, _ in skipped)
        raise MissingDataError(f"neither {names} found in {data_dir}", skipped[0][2])
    for cat, name, _ in skipped:
        log(f"{TAG} {name} ({cat}) not in {data_dir}: not prepared; {FIX_DATA} without --data_dir fetches it")
    if done:
        _record(dest_dir, done)
    return out


# --- model -------------------------------------------------------------------------------------------

def check_model(dest: Path, fix: str = FIX_MODEL) -> dict:
    """``dest`` is a loadable Llama folder (model_type llama, every shard the index names, a tokenizer)."""
    return dl.check_hf_checkpoint(dest, "llama", "Llama-3.1-8B-Instruct", fix)


def _members_fix(dest: Path) -> str:
    return (f"accept Meta's Llama 3.1 license at {dl.hf_page(MODEL_REPO)} and set HF_TOKEN=<read token> "
            f"(export HF_TOKEN=hf_...), then {FIX_MODEL}; or, as an MLCommons member (request access at "
            f"{MEMBERS_PAGE}), run {dl.r2_command(MEMBERS_URI, dest)} (or `mlcr get,ml-model,llama3,_mlc,_8b,"
            f"_r2-downloader --outdirname={dest} -j`), then {FIX_MODEL} verifies and uses that folder")


def download_model(dest: Path, log=print) -> Path:
    """meta-llama/Llama-3.1-8B-Instruct at MODEL_REVISION (safetensors, ~16 GB) into ``dest`` via
    hf_snapshot (every file checked against the Hub's sha256 / blob id, the commit recorded); or,
    when ``dest`` holds the members-only MLCommons R2 copy (its llama3-1-8b-instruct.md5 list),
    that copy verified against MEMBERS_MD5. ``dest/download.json`` is written last, once the
    folder checks (model_type llama, every shard, a tokenizer). A complete folder is reused."""
    verify = dl.members_verifier(MEMBERS_LIST, MEMBERS_MD5, MODEL_FILES, MEMBERS_URI, FIX_MODEL, TAG)
    return dl.gated_model(dest, repo=MODEL_REPO, files=MODEL_FILES, revision=MODEL_REVISION, complete=COMPLETE,
                          members_list=MEMBERS_LIST, verify_members=verify, check=check_model,
                          members_fix=_members_fix, fix=FIX_MODEL, tag=TAG, log=log)
