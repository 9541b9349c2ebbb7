"""Running the MLCommons reference's LLM scripts (language/gpt-j, language/llama2-70b, ...) from the
read-only tree named by $MLPERF_INFERENCE_DIR, offline: for the comparison tests.

What the scripts need that cannot be had offline, and its stand-in (each written under a scratch
folder of the caller's, never inside the official tree):

* ``evaluate.load("rouge")`` downloads its metric script from the Hugging Face hub. The stand-in
  ``evaluate`` module's rouge metric does what that script does with the arguments the references
  pass (``use_stemmer=True, use_aggregator=False``): rouge-score's ``RougeScorer(rouge_types,
  use_stemmer)``, ``score(reference, prediction)`` per pair, the F-measures per type.
* ``datasets`` (imported by GPT-J's dataset.py, never called when the dataset is a local JSON):
  a stub whose loaders raise.
* NLTK's punkt_tab model (``nltk.download`` fails offline; ``nltk.sent_tokenize`` needs it): when
  punkt_tab is installed where NLTK looks ($NLTK_DATA), the script gets that same folder. When it is
  not, the script gets an empty punkt_tab, which is Punkt with no trained parameters, the splitter
  our rouge.py falls back to. rougeLsum (the only metric that reads the line breaks) then agrees
  by construction: comparisons must skip it (``rougelsum_comparable``).
* hub tokenizers: the caller passes the tiny local tokenizer folder through the script's own
  argument (``--checkpoint-path``), or, where the name is fixed in the code (GPT-J's
  "EleutherAI/gpt-j-6B"), as a folder of that relative name in the script's working directory.
"""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path

EVALUATE_STANDIN = '''\
"""Stand-in for `evaluate` (its "rouge" metric script downloads from the Hugging Face hub): the same
computation, rouge-score's RougeScorer F-measure per (reference, prediction) pair."""
from rouge_score import rouge_scorer


class _Rouge:
    def compute(self, predictions, references, rouge_types=None, use_aggregator=True, use_stemmer=False,
                tokenizer=None):
        assert not use_aggregator, "the MLPerf references score with use_aggregator=False"
        types = rouge_types or ["rouge1", "rouge2", "rougeL", "rougeLsum"]
        sc = rouge_scorer.RougeScorer(types, use_stemmer=use_stemmer, tokenizer=tokenizer)
        scores = [sc.score(r, p) for r, p in zip(references, predictions)]
        return {t: [s[t].fmeasure for s in scores] for t in types}


def load(name, *a, **k):
    assert name == "rouge", name
    return _Rouge()
'''

DATASETS_STUB = '''\
"""Stub for `datasets` (imported by the GPT-J reference; unused when the dataset is a local JSON file)."""


def load_dataset(*a, **k):
    raise RuntimeError("datasets stub: offline")


load_from_disk = load_dataset
'''

PUNKT_TAB_FILES = ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab")


def punkt_tab_installed() -> bool:
    """Whether NLTK (in this process, $NLTK_DATA included) finds the trained punkt_tab English model."""
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return True
    except LookupError:
        return False


def rougelsum_comparable() -> tuple[bool, str]:
    """(whether rougeLsum can be compared, why not): only when the official script and ours split
    sentences with the same trained punkt_tab."""
    if punkt_tab_installed():
        return True, ""
    return False, ("rougeLsum not compared: NLTK's punkt_tab is not installed ($NLTK_DATA), so both sides split "
                   "sentences with untrained Punkt and agree by construction (make download_data installs it)")


def reference_env(work: Path, *extra_paths: Path | str) -> dict:
    """Environment for an official LLM script: PYTHONPATH = the stand-ins (under ``work``) then
    ``extra_paths``; no bytecode written; the hub offline; NLTK_DATA as this process has it when
    punkt_tab is installed, else a folder under ``work`` with an empty punkt_tab (untrained Punkt)."""
    shim = Path(work) / "official_standins"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "evaluate.py").write_text(EVALUATE_STANDIN)
    (shim / "datasets.py").write_text(DATASETS_STUB)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shim), *map(str, extra_paths)]),
               PYTHONDONTWRITEBYTECODE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if not punkt_tab_installed():
        data = Path(work) / "nltk_data"
        punkt = data / "tokenizers" / "punkt_tab" / "english"
        punkt.mkdir(parents=True, exist_ok=True)
        for f in PUNKT_TAB_FILES:
            (punkt / f).write_text("")
        env["NLTK_DATA"] = str(data)
    return env


def parse_result_dict(text: str) -> dict:
    """The last ``{... 'rouge1': ...}`` dict an official LLM script printed (numpy scalars unwrapped)."""
    line = [ln for ln in text.splitlines() if ln.startswith("{") and "rouge1" in ln][-1]
    return ast.literal_eval(re.sub(r"np\.\w+\(([^)]*)\)", r"\1", line))


def sig4(x) -> str:
    """A number to 4 significant digits (how the comparisons are judged)."""
    return f"{float(x):.4g}"
