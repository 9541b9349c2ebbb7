"""Fetching Llama-2-70B (MLPerf Inference language/llama2-70b) data and model.

Data: the processed OpenOrca pickle the reference README points at, from the public MLCommons R2
bucket (the .uri/.md5 metadata the official mlc-r2-downloader.sh uses; the .pkl.gz files are
md5-checked), gunzipped and checked (md5, 24576 rows, the columns the reference reads); or a local
copy (``--data_dir``, .pkl or .pkl.gz).

Model: meta-llama/Llama-2-70b-chat-hf from Hugging Face (gated: Meta's license must be accepted and
HF_TOKEN set), safetensors weights only, each file checked against the Hub's sha256. MLCommons
members may instead use the members-only R2 copy (Cloudflare Access login) with the official
script; a folder it filled is verified against the md5 list it leaves there.
"""
from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

from code.common import fileio
from code.common.fileio import read_dataframe
from code.common.errors import HarnessError, MissingDataError
from code.common.llm import download as dl

BENCHMARK = "llama2-70b"
FIX_MODEL = f"make download_model BENCHMARKS={BENCHMARK}"
FIX_DATA = f"make download_data BENCHMARKS={BENCHMARK}"

DATASET_URI = "https://inference.mlcommons-storage.org/metadata/llama-2-70b-open-orca-dataset.uri"
DATASET_PKL = "open_orca_gpt4_tokenized_llama.sampled_24576.pkl"
CALIBRATION_PKL = "open_orca_gpt4_tokenized_llama.calibration_1000.pkl"
SAMPLES = 24576
CALIBRATION_SAMPLES = 1000
REQUIRED_COLUMNS = ("input", "tok_input", "output")
# md5 of the UNZIPPED sampled_24576.pkl. Not published by MLCommons (neither the inference repo nor
# the R2 metadata have it): it comes from submitter READMEs (Intel-HabanaLabs: "The md5sum of
# generated dataset file should be 5fe8be0a7ce5c3c9a028674fd24b00d5", and a second submitter's
# config "dataset_md5sum"), i.e. it is the file the reference's processorca.py produced.
DATASET_MD5 = "5fe8be0a7ce5c3c9a028674fd24b00d5"
# md5 of the .pkl.gz files as MLCommons lists them: github.com/mlcommons/r2-infra
# inference/metadata/llama-2-70b-open-orca-dataset.md5 (commit 5d77ea6ed10dd821cd34000ea6c000ae54fa306b,
# last changed 2025-10-08); the .uri points at https://inference.mlcommons-storage.org/open_orca. The
# same folder also holds reference_impl_gpu_bs32_fp32_output.pkl.gz and mlperf_log_accuracy.json
# (the reference's outputs), which are not needed here and not fetched.
GZ_MD5 = {
    DATASET_PKL + ".gz": "c247a315b9328365f66d2c2585b35cd4",
    CALIBRATION_PKL + ".gz": "d04917e08afb675640c9d7a5bb9b5e2a",
}
DATA_RECORD = "download.json"

MODEL_REPO = "meta-llama/Llama-2-70b-chat-hf"
MODEL_FILES = ["config.json", "generation_config.json", "model.safetensors.index.json", "model-*-of-*.safetensors",
               "tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json",
               "LICENSE.txt", "USE_POLICY.md"]
MEMBERS_URI = "https://llama2.mlcommons-storage.org/metadata/llama-2-70b-chat-hf.uri"   # members only
MEMBERS_LIST = "llama-2-70b-chat-hf.md5"     # what mlc-r2-downloader.sh leaves in the folder
COMPLETE = "download.json"


# --- data ------------------------------------------------------------------------------------------

def _md5_gunzip(src: Path, final: Path, want_md5: str | None, check) -> str:
    """Decompress ``src`` (or copy it, if not gzip) into a staged file; verify its md5 and
    ``check(tmp)`` before it is renamed to ``final``. Returns the md5."""
    h = hashlib.md5()
    with fileio.staged_path(final) as tmp:
        with open(src, "rb") as probe:
            gz = probe.read(2) == b"\x1f\x8b"
        try:
            with (gzip.open(src, "rb") if gz else open(src, "rb")) as fin, open(tmp, "wb") as fout:
                for b in iter(lambda: fin.read(1 << 20), b""):
                    h.update(b)
                    fout.write(b)
        except (OSError, EOFError) as e:
            if getattr(e, "errno", None):
                raise
            raise MissingDataError(f"{src}: corrupt gzip file ({e})", f"delete it, then {FIX_DATA}") from None
        got = h.hexdigest()
        if want_md5 and got != want_md5:
            raise MissingDataError(f"{final.name} from {src}: md5 {got}, expected {want_md5} (file discarded)",
                                   f"replace {src} with the MLCommons file ({FIX_DATA}, or "
                                   f"{dl.r2_command(DATASET_URI, final.parent)})")
        check(tmp)
    return got


def check_pickle(path: Path, rows: int, fix: str = FIX_DATA, name: str | None = None):
    """``path`` unpickles (pandas.read_pickle) to a DataFrame with ``rows`` rows and the columns
    REQUIRED_COLUMNS. Only call it on a file whose md5 was checked: unpickling runs code."""
    name = name or Path(path).name
    df = read_dataframe(path, fix, REQUIRED_COLUMNS, name)
    if len(df) != rows:
        raise MissingDataError(f"{name} holds {len(df)} rows, expected {rows}", fix)
    return df


def _local_source(data_dir: str, name: str) -> Path | None:
    d = Path(data_dir).expanduser()
    if d.is_file():
        return d if d.name in (name, name + ".gz") else None
    for folder in (d, d / "open_orca"):
        for n in (name, name + ".gz"):
            if (folder / n).is_file():
                return folder / n
    return None


def download_data(dest_dir: Path, data_dir: str | None = None, log=print) -> Path:
    """``dest_dir/open_orca_gpt4_tokenized_llama.sampled_24576.pkl``, md5-checked against
    DATASET_MD5 and checked for SAMPLES rows with REQUIRED_COLUMNS; plus the 1000-row calibration
    pickle when available (optional: a problem with it is only a warning).

    From ``data_dir`` (a folder holding the .pkl or .pkl.gz, also in an ``open_orca/`` subfolder as
    the R2 downloader names it, or the file itself) when given; else from MLCommons R2 (the .pkl.gz
    files, md5-checked, are kept in ``dest_dir`` so a re-run does not fetch them again)."""
    dest_dir = Path(dest_dir)
    final = dest_dir / DATASET_PKL
    fix_local = f"point --data_dir at a folder holding {DATASET_PKL}[.gz] from MLCommons, or drop --data_dir to download it"

    def check_main(p: Path, fix=FIX_DATA):
        check_pickle(p, SAMPLES, fix, DATASET_PKL)

    def check_cal(p: Path):
        check_pickle(p, CALIBRATION_SAMPLES, FIX_DATA, CALIBRATION_PKL)

    if data_dir:
        src = _local_source(data_dir, DATASET_PKL)
        if src is None:
            raise MissingDataError(f"{DATASET_PKL}[.gz] not found in {data_dir}", fix_local)
        if src.resolve() == final.resolve():
            if fileio.md5_file(final) != DATASET_MD5:
                raise MissingDataError(f"{final}: md5 is not {DATASET_MD5}", fix_local)
            check_main(final, fix_local)
        else:
            _md5_gunzip(src, final, DATASET_MD5, lambda p: check_main(p, fix_local))
        log(f"[llama2-70b] {DATASET_PKL}: {SAMPLES} rows, md5 {DATASET_MD5} ok, from {src}")
        cal = _local_source(data_dir, CALIBRATION_PKL)
        if cal is not None and cal.resolve() != (dest_dir / CALIBRATION_PKL).resolve():
            _optional(lambda: _md5_gunzip(cal, dest_dir / CALIBRATION_PKL, None, check_cal), log)
        return final

    if final.is_file() and fileio.md5_file(final) == DATASET_MD5:
        log(f"[llama2-70b] {DATASET_PKL} present, md5 ok: {final}")
        return final
    gz = dl.r2_download(DATASET_URI, dest_dir, log=log, include=lambda p: p in GZ_MD5, expect_md5=GZ_MD5)
    by_name = {p.name: p for p in gz}
    main_md5 = _md5_gunzip(by_name[DATASET_PKL + ".gz"], final, DATASET_MD5, check_main)
    cal_gz = by_name.get(CALIBRATION_PKL + ".gz")
    if cal_gz is not None:
        _optional(lambda: _md5_gunzip(cal_gz, dest_dir / CALIBRATION_PKL, None, check_cal), log)
    fileio.write_json(dest_dir / DATA_RECORD, {
        "source": "mlcommons-r2", "uri": DATASET_URI, "gz_md5": GZ_MD5,
        "files": {DATASET_PKL: {"md5": main_md5, "rows": SAMPLES, "md5_source": "submitter READMEs"}}})
    log(f"[llama2-70b] {DATASET_PKL}: {SAMPLES} rows, md5 {main_md5} ok -> {final}")
    return final


def _optional(fn, log) -> None:
    try:
        fn()
    except HarnessError as e:
        log(f"[llama2-70b] warning: calibration set not prepared ({e.cause}); only calibration needs it")


# --- model -----------------------------------------------------------------------------------------

def check_model(dest: Path, fix: str = FIX_MODEL) -> dict:
    """config.json (model_type llama), model.safetensors.index.json whose every shard exists and is
    non-empty, and a tokenizer. Returns the config."""
    return dl.check_hf_checkpoint(dest, "llama", "Llama-2-70B", fix, read_config=False)


def _members_fix(dest: Path) -> str:
    return (f"accept Meta's license at {dl.hf_page(MODEL_REPO)} and set HF_TOKEN=<read token>, then {FIX_MODEL}; "
            f"or, as an MLCommons member (agree at https://llama2.mlcommons.org), run "
            f"{dl.r2_command(MEMBERS_URI, dest)} (or `mlcr get,ml-model,llama2-70b,_pytorch,_r2-downloader,_70b,_mlc "
            f"--outdirname={dest} -j`), then {FIX_MODEL} verifies and uses that folder")


def _verify_members_copy(dest: Path, log) -> dict:
    """A folder filled by the official R2 script: the files we need, checked against its md5 list."""
    listing = dest / MEMBERS_LIST
    entries = dl.parse_md5_list(listing.read_text(), str(listing))
    from fnmatch import fnmatch

    need = [(m, p) for m, p in entries if any(fnmatch(p, pat) for pat in MODEL_FILES)]
    if not need:
        raise MissingDataError(f"{listing} lists none of the model files", _members_fix(dest))
    dl.verify_md5_list(dest, need, f"re-run {dl.r2_command(MEMBERS_URI, dest)} to resume, then {FIX_MODEL}")
    log(f"[llama2-70b] {len(need)} files verified against {listing.name} (MLCommons R2 copy)")
    return {"source": "mlcommons-r2 (members)", "uri": MEMBERS_URI, "verified_md5": {p: m for m, p in need}}


def download_model(dest: Path, log=print) -> Path:
    """meta-llama/Llama-2-70b-chat-hf (safetensors, ~130 GB) into ``dest`` via hf_snapshot (every file
    checked against the Hub's sha256, the commit recorded), or, when ``dest`` holds the members-only
    MLCommons R2 copy (its llama-2-70b-chat-hf.md5 list), that copy verified. ``dest/download.json``
    is written last, after the safetensors index's shards are all found."""
    return dl.gated_model(dest, repo=MODEL_REPO, files=MODEL_FILES, revision=None, complete=COMPLETE,
                          members_list=MEMBERS_LIST, verify_members=_verify_members_copy, check=check_model,
                          members_fix=_members_fix, fix=FIX_MODEL, tag="[llama2-70b]", log=log)
