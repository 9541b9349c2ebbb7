"""ROUGE as the MLPerf LLM references compute it (GPT-J ``evaluation.py``, Llama2-70B / Mixtral
``evaluate-accuracy.py``, Llama3.1-8B ``evaluation.py``):

- predictions are the output token ids decoded with ``skip_special_tokens=True``;
- ``postprocess_text``: strip, then one sentence per line (``nltk.sent_tokenize``; it only matters
  for rougeLsum);
- ``evaluate``'s "rouge" metric with ``use_stemmer=True, use_aggregator=False`` is rouge-score's
  ``RougeScorer`` F-measure per sample; the reported value is ``round(mean * 100, 4)``.

Sentences are split as ``nltk.sent_tokenize`` splits them: NLTK's trained Punkt model, ``punkt_tab``
(english), the one the references ``nltk.download``. The scorer loads it from one folder of ours,
``nltk_data_dir()`` ($MLPERF_SCRATCH_PATH/nltk_data), which ``make download_data`` fills the way NLTK's
downloader does (``code.common.llm.download.download_punkt_tab``). Another program (an official
evaluator) loads the same model with ``NLTK_DATA=<nltk_data_dir()>``. Without it the split falls back
to Punkt with default parameters (no trained abbreviations): rouge1/2/L do not depend on line breaks,
rougeLsum may differ, and the score is unofficial (``unofficial_reasons``).

The tiny variant has its own folder (``nltk_data_dir("tiny")``): a punkt_tab trained locally on
synthetic text by the tiny ``download_data`` (no network), marked tiny in its record.
"""
from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
PUNKT = "punkt_tab"
LANGUAGE = "english"
RECORD = "punkt_tab.json"          # in nltk_data_dir(): what was installed, from where, verified how


def nltk_data_dir(variant: str = "reference") -> Path:
    """The NLTK data folder the scorer loads punkt_tab from: $MLPERF_SCRATCH_PATH/nltk_data (the tiny
    variant: .../nltk_data/tiny). Point NLTK_DATA at it to have any NLTK program load the same model."""
    from code.common import paths

    base = paths.scratch_path() / "nltk_data"
    return base / "tiny" if variant == "tiny" else base


def punkt_dir(data_dir: Path) -> Path:
    """Where punkt_tab unzips inside an NLTK data folder (the index's subdir "tokenizers" / the package id)."""
    return Path(data_dir) / "tokenizers" / PUNKT


@dataclasses.dataclass(frozen=True)
class Splitter:
    name: str                       # as accuracy.txt says it
    trained: bool                   # a punkt_tab model was loaded (else untrained Punkt)
    record: dict                    # the install record (empty when none)
    split: Callable[[str], list[str]]


def load_punkt(data_dir: Path, lang_dir: Path | None = None):
    """punkt_tab's english model from ``data_dir`` only, loaded as ``nltk.sent_tokenize`` loads it
    (``nltk.data.find`` of tokenizers/punkt_tab/english/, then ``load_punkt_params``; ``lang_dir``: that
    model folder itself, e.g. a staged one): a PunktSentenceTokenizer, or LookupError when it is not
    there. NLTK reads model files only inside its data path, so ``data_dir`` is on ``nltk.data.path``
    while the files are read."""
    import nltk.data
    from nltk.tokenize.punkt import PunktSentenceTokenizer, load_punkt_params

    root = str(Path(data_dir).resolve())
    added = root not in nltk.data.path
    if added:
        nltk.data.path.append(root)
    try:
        found = nltk.data.FileSystemPathPointer(str(Path(lang_dir).resolve())) if lang_dir is not None else \
            nltk.data.find(f"tokenizers/{PUNKT}/{LANGUAGE}/", paths=[root])
        return PunktSentenceTokenizer(load_punkt_params(found))
    finally:
        if added:
            nltk.data.path.remove(root)


def read_record(data_dir: Path) -> dict:
    try:
        rec = json.loads((Path(data_dir) / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def _stamp(data_dir: Path) -> tuple:
    """What changes when a download or a hand placement changes the folder (the cache key)."""
    out = []
    for p in (Path(data_dir) / RECORD, punkt_dir(data_dir) / LANGUAGE):
        try:
            out.append(p.stat().st_mtime_ns)
        except OSError:
            out.append(None)
    return tuple(out)


@functools.lru_cache(maxsize=8)
def _splitter(data_dir: str, stamp: tuple) -> Splitter:
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    rec = read_record(Path(data_dir))
    try:
        tok = load_punkt(Path(data_dir))
    except (LookupError, OSError, ValueError):    # PermissionError (NLTK's path check) is an OSError
        return Splitter(f"nltk Punkt, untrained (NLTK {PUNKT} not installed in {data_dir})", False, rec,
                        PunktSentenceTokenizer().tokenize)
    if rec.get("variant") == "tiny":
        what = f"tiny {PUNKT}, trained locally on synthetic text (not NLTK's)"
    elif rec.get("sha256") or rec.get("md5"):
        what = f"NLTK {PUNKT} ({rec.get('sha256') and 'sha256 ' + rec['sha256'][:12] or 'md5 ' + rec['md5']})"
    else:
        what = f"NLTK {PUNKT} (placed by hand, no download record)"
    return Splitter(f"nltk.sent_tokenize, {what}, from {data_dir}", True, rec, tok.tokenize)


def splitter(variant: str = "reference") -> Splitter:
    d = nltk_data_dir(variant)
    return _splitter(str(d), _stamp(d))


def sentence_splitter(variant: str = "reference") -> str:
    return splitter(variant).name


def unofficial_reasons(variant: str, fix: str) -> list[str]:
    """Why a rougeLsum scored now is not the official one ([] when it is). ``fix``: the command that
    installs punkt_tab (``make download_data BENCHMARKS=<bench>``). The tiny variant is never official
    and never judged against an official target: [] (its splitter is the tiny punkt_tab)."""
    if variant == "tiny" or splitter(variant).trained:
        return []
    return [f"rougeLsum used an untrained sentence splitter (NLTK {PUNKT} missing); run {fix}"]


def postprocess_text(preds: Sequence[str], targets: Sequence[str], variant: str = "reference"
                     ) -> tuple[list[str], list[str]]:
    split = splitter(variant).split
    preds = ["\n".join(split(p.strip())) for p in preds]
    targets = ["\n".join(split(t.strip())) for t in targets]
    return preds, targets


def rouge(preds: Sequence[str], targets: Sequence[str]) -> dict[str, float]:
    """{rouge1, rouge2, rougeL, rougeLsum}: mean F-measure x 100, rounded to 4 decimals (postprocessed inputs)."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    per = {k: [] for k in ROUGE_TYPES}
    for p, t in zip(preds, targets):
        s = scorer.score(t, p)
        for k in ROUGE_TYPES:
            per[k].append(s[k].fmeasure)
    return {k: round(float(np.mean(v)) * 100, 4) if v else 0.0 for k, v in per.items()}
