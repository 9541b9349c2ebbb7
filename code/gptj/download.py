"""Fetching GPT-J (MLPerf Inference language/gpt-j) model and data.

Model: the MLPerf fine-tuned CNN/DailyMail checkpoint (the README's "use the fine-tuned
checkpoint"), from the public MLCommons R2 bucket via the .uri/.md5 metadata the official
mlc-r2-downloader.sh uses, every file md5-checked; then the tokenizer files of
EleutherAI/gpt-j-6B (the tokenizer the reference SUT and evaluation.py load) from Hugging Face at a
resolved commit, so the folder loads with ``AutoTokenizer.from_pretrained`` alone.

Data: ``cnn_eval.json`` exactly as the reference download_cnndm.py writes it: a JSON list of
``{"instruction": "Summarize the following news article:", "input": article, "output":
highlights}`` for the 13368 rows of cnn_dailymail 3.0.0 "validation", ``indent=4,
ensure_ascii=False``. Built from the Hub's parquet files of abisee/cnn_dailymail (the dataset the
reference's ``load_dataset("cnn_dailymail", "3.0.0")`` resolves to), or copied from ``--data_dir``.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from code.common import fileio
from code.common.errors import HarnessError, MissingDataError
from code.common.llm import download as dl

BENCHMARK = "gptj"
FIX_MODEL = f"make download_model BENCHMARKS={BENCHMARK}"
FIX_DATA = f"make download_data BENCHMARKS={BENCHMARK}"

CHECKPOINT_URI = "https://inference.mlcommons-storage.org/metadata/gpt-j-model-checkpoint.uri"
# The checkpoint's file list, pinned from github.com/mlcommons/r2-infra
# inference/metadata/gpt-j-model-checkpoint.md5 (commit 5d77ea6ed10dd821cd34000ea6c000ae54fa306b,
# file last changed 2025-10-08). The .uri there points at
# https://inference.mlcommons-storage.org/gpt-j/checkpoint-final (about 25 GB, fp32, 3 .bin shards).
CHECKPOINT_MD5 = {
    "README.md": "03063eb354bd7d3cc1e2846a9d2fb87f",
    "tokenizer_config.json": "04b97791420d35946866969497319147",
    "pytorch_model-00003-of-00003.bin": "43dec250d3b8bf2447ce627e5d6a5339",
    "pytorch_model-00002-of-00003.bin": "55ca89d791b65fe2c6769d6f0ddca783",
    "generation_config.json": "6bc47803cbe40672a5884df92090e3b6",
    "special_tokens_map.json": "6d363e9825a4feb89a3c32dfe036d722",
    "merges.txt": "75a37753dd7a28a2c5df80c28bf06e4e",
    "config.json": "82b1b65105da74c01fa4ea537a452979",
    "vocab.json": "bfe120ed87c2489c38daf0ebcf0bd64b",
    "added_tokens.json": "ca7e2d07705a39856dbcca4244508bcf",
    "pytorch_model.bin.index.json": "d7a2ecdb707c22e253c56248bd04c112",
    "pytorch_model-00001-of-00003.bin": "ea3dbd2d8810c1132b3e29df6cbdf4e0",
    "trainer_state.json": "f3d3fb5c2ab359e46c76723b66bc62df",
}
TOKENIZER_REPO = "EleutherAI/gpt-j-6B"
TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json",
                   "added_tokens.json", "tokenizer.json")
VOCAB_FILES = ("vocab.json", "merges.txt", "added_tokens.json")   # these define the token ids
COMPLETE = "download.json"        # written last into the model folder

CNN_REPO = "abisee/cnn_dailymail"
CNN_CONFIG = "3.0.0"
CNN_SPLIT = "validation"
CNN_EVAL = "cnn_eval.json"
VALIDATION_SAMPLES = 13368
INSTRUCTION = "Summarize the following news article:"
KEYS = ["instruction", "input", "output"]
DATA_RECORD = "cnn_eval.download.json"


# --- model -----------------------------------------------------------------------------------------

def check_checkpoint(dest: Path) -> dict:
    """A loadable Hugging Face GPT-J folder: config.json with model_type gptj, every weight shard its
    index names (or a single weight file), a tokenizer. Returns the config."""
    return dl.check_hf_checkpoint(dest, "gptj", "GPT-J checkpoint", FIX_MODEL,
                                  tokenizer=(("vocab.json", "merges.txt"), ("tokenizer.json",)))


def _add_tokenizer(dest: Path, log) -> dict:
    """EleutherAI/gpt-j-6B's tokenizer files beside the checkpoint. Files the checkpoint lacks are
    added; files it has are kept (they are md5-verified MLCommons files). tokenizer.json (the fast
    tokenizer) is added only when the checkpoint's vocabulary files are byte-identical to the
    Hub's, so fast and slow tokenizers cannot disagree. Returns what was done, for the record."""
    stage = dest.parent / f".{dest.name}.tokenizer"
    try:
        dl.hf_snapshot(TOKENIZER_REPO, stage, allow_patterns=list(TOKENIZER_FILES), record="download.json",
                       rerun=FIX_MODEL, log=log)
    except HarnessError as e:
        if (dest / "vocab.json").is_file() and (dest / "merges.txt").is_file():
            log(f"[gptj] warning: {TOKENIZER_REPO} tokenizer not fetched ({e.cause}); using the checkpoint's own "
                f"tokenizer files (re-run `{FIX_MODEL}` online to add tokenizer.json)")
            return {"repo": TOKENIZER_REPO, "error": e.cause}
        raise
    rec = json.loads((stage / "download.json").read_text())
    same = {n: _same(stage / n, dest / n) for n in TOKENIZER_FILES if (stage / n).is_file() and (dest / n).is_file()}
    vocab_same = all(same.get(n, True) for n in VOCAB_FILES)
    added, kept = [], []
    for n in TOKENIZER_FILES:
        src = stage / n
        if not src.is_file():
            continue
        if (dest / n).is_file():
            kept.append(n)
            if not same[n]:
                log(f"[gptj] note: {n} of the checkpoint differs from {TOKENIZER_REPO}'s; keeping the checkpoint's")
            continue
        if n == "tokenizer.json" and not vocab_same:
            log(f"[gptj] warning: the checkpoint's vocabulary differs from {TOKENIZER_REPO}'s: tokenizer.json not added")
            continue
        with fileio.staged_path(dest / n) as tmp:
            shutil.copyfile(src, tmp)
        added.append(n)
    shutil.rmtree(stage, ignore_errors=True)
    return {"repo": TOKENIZER_REPO, "revision": rec.get("revision"), "added": added, "kept_from_checkpoint": kept,
            "identical": sorted(n for n, s in same.items() if s), "vocab_identical": vocab_same}


def _same(a: Path, b: Path) -> bool:
    return a.stat().st_size == b.stat().st_size and fileio.sha256_file(a) == fileio.sha256_file(b)


def download_model(dest: Path, log=print) -> Path:
    """The MLPerf fine-tuned GPT-J checkpoint into ``dest`` (R2, md5-verified), plus the tokenizer
    files of EleutherAI/gpt-j-6B; checked to be a loadable HF folder; ``dest/download.json``
    (written last) records the sources. A folder whose record exists and checks is reused."""
    dest = Path(dest)
    if dl.reuse_complete(dest, COMPLETE, check_checkpoint, "[gptj] checkpoint", log):
        return dest
    files = dl.r2_download(CHECKPOINT_URI, dest, log=log, expect_md5=CHECKPOINT_MD5)
    tokenizer = _add_tokenizer(dest, log)
    cfg = check_checkpoint(dest)
    fileio.write_json(dest / COMPLETE, {
        "source": "mlcommons-r2", "uri": CHECKPOINT_URI,
        "files_md5": {str(p.relative_to(dest)): CHECKPOINT_MD5.get(str(p.relative_to(dest))) for p in files},
        "tokenizer": tokenizer, "model_type": cfg.get("model_type"), "torch_dtype": cfg.get("torch_dtype"),
    })
    log(f"[gptj] fine-tuned checkpoint ({len(files)} files, md5-verified) + {TOKENIZER_REPO} tokenizer -> {dest}")
    return dest


# --- data ------------------------------------------------------------------------------------------

def check_cnn_eval(path: Path, fix: str = FIX_DATA) -> int:
    """``path`` is a cnn_eval.json of the reference's format with VALIDATION_SAMPLES entries."""
    path = Path(path)
    if not path.is_file():
        raise MissingDataError(f"{path} not found", fix)
    data = fileio.read_json(path, fix, expect=list)
    if len(data) != VALIDATION_SAMPLES:
        raise MissingDataError(f"{path} holds {len(data)} samples, expected {VALIDATION_SAMPLES} "
                               f"(cnn_dailymail {CNN_CONFIG} {CNN_SPLIT})", fix)
    for i, x in enumerate(data):
        if not isinstance(x, dict) or list(x) != KEYS or x["instruction"] != INSTRUCTION \
                or not isinstance(x["input"], str) or not isinstance(x["output"], str):
            raise MissingDataError(f"{path}: entry {i} is not {{\"instruction\": {INSTRUCTION!r}, \"input\": str, "
                                   f"\"output\": str}}", fix)
    return len(data)


def cnn_samples(articles, highlights) -> list[dict]:
    """The reference's preprocess_function: one dict per row, keys in this order."""
    return [{"instruction": INSTRUCTION, "input": a, "output": h} for a, h in zip(articles, highlights)]


def write_cnn_eval(path: Path, samples: list[dict]) -> None:
    """``json.dump(samples, f, indent=4, ensure_ascii=False)`` as download_cnndm.py does (simplejson
    there; for this data the stdlib's output is byte-identical), staged then renamed."""
    with fileio.staged_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(samples, f, indent=4, ensure_ascii=False)


def _read_parquet(paths: list[Path]) -> tuple[list[str], list[str]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise HarnessError("pyarrow is not installed (needed to read the cnn_dailymail parquet files)",
                           "pip install -r requirements.txt") from None
    articles, highlights = [], []
    for p in paths:
        try:
            t = pq.read_table(p, columns=["article", "highlights"])
        except Exception as e:
            raise MissingDataError(f"{p}: not a readable cnn_dailymail parquet file ({type(e).__name__}: "
                                   f"{str(e).splitlines()[0][:120] if str(e) else ''})", FIX_DATA) from None
        articles += t.column("article").to_pylist()
        highlights += t.column("highlights").to_pylist()
    return articles, highlights


def download_data(dest_dir: Path, data_dir: str | None = None, log=print) -> Path:
    """``dest_dir/cnn_eval.json``: from ``data_dir`` (a folder holding cnn_eval.json, or that file)
    checked and copied; else built from abisee/cnn_dailymail's 3.0.0 validation parquet file(s) at
    a resolved commit (each checked against the Hub's sha256), with exactly VALIDATION_SAMPLES rows.
    The commit and files are recorded in ``dest_dir/cnn_eval.download.json``."""
    dest_dir = Path(dest_dir)
    final = dest_dir / CNN_EVAL
    if data_dir:
        src = Path(data_dir).expanduser()
        if src.is_dir():
            src = src / CNN_EVAL
        fix = f"point --data_dir at a folder holding the reference {CNN_EVAL} (language/gpt-j/download_cnndm.py), " \
              f"or drop --data_dir to build it"
        check_cnn_eval(src, fix)
        _copy_as(src, final)
        log(f"[gptj] {CNN_EVAL}: {VALIDATION_SAMPLES} samples from {src}")
        return final
    if final.is_file() and (dest_dir / DATA_RECORD).is_file():
        try:
            check_cnn_eval(final)
            log(f"[gptj] {CNN_EVAL} present: {final}")
            return final
        except HarnessError:
            pass
    info = dl.hf_resolve(CNN_REPO, repo_type="dataset", rerun=FIX_DATA)
    want = sorted((s for s in info.siblings or []
                   if s.rfilename.startswith(f"{CNN_CONFIG}/{CNN_SPLIT}-") and s.rfilename.endswith(".parquet")),
                  key=lambda s: s.rfilename)
    if not want:
        raise MissingDataError(f"{CNN_REPO}@{info.sha[:12]} has no {CNN_CONFIG}/{CNN_SPLIT}-*.parquet file",
                               f"the dataset layout changed: check {dl.hf_page(CNN_REPO, 'dataset')}; or pass "
                               f"--data_dir=<folder with {CNN_EVAL}>")
    paths = [dl.hf_file(CNN_REPO, s.rfilename, s, revision=info.sha, repo_type="dataset", rerun=FIX_DATA)
             for s in want]
    articles, highlights = _read_parquet(paths)
    if len(articles) != VALIDATION_SAMPLES:
        raise MissingDataError(f"{CNN_REPO}@{info.sha[:12]} {CNN_CONFIG} {CNN_SPLIT} has {len(articles)} rows, "
                               f"expected {VALIDATION_SAMPLES}",
                               f"pass --data_dir=<folder with the reference {CNN_EVAL}> (language/gpt-j/download_cnndm.py)")
    if any(not isinstance(a, str) or not isinstance(h, str) for a, h in zip(articles, highlights)):
        raise MissingDataError(f"{CNN_REPO} {CNN_CONFIG} {CNN_SPLIT}: a row has no article or highlights",
                               f"pass --data_dir=<folder with the reference {CNN_EVAL}>")
    dest_dir.mkdir(parents=True, exist_ok=True)
    (dest_dir / DATA_RECORD).unlink(missing_ok=True)
    write_cnn_eval(final, cnn_samples(articles, highlights))
    fileio.write_json(dest_dir / DATA_RECORD, {
        "source": "huggingface", "repo": CNN_REPO, "repo_type": "dataset", "revision": info.sha,
        "config": CNN_CONFIG, "split": CNN_SPLIT, "files": [s.rfilename for s in want],
        "samples": len(articles), "sha256": fileio.sha256_file(final)})
    log(f"[gptj] {CNN_EVAL}: {len(articles)} samples from {CNN_REPO}@{info.sha[:12]} -> {final}")
    return final


def _copy_as(src: Path, final: Path) -> None:
    if src.resolve() == final.resolve():
        return
    with fileio.staged_path(final) as tmp:
        shutil.copyfile(src, tmp)
