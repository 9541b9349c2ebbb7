"""ROUGE as the MLPerf LLM references compute it (GPT-J ``evaluation.py``, Llama2-70B / Mixtral
``evaluate-accuracy.py``):

- predictions are the output token ids decoded with ``skip_special_tokens=True``;
- ``postprocess_text``: strip, then one sentence per line (``nltk.sent_tokenize``; it only matters
  for rougeLsum);
- ``evaluate``'s "rouge" metric with ``use_stemmer=True, use_aggregator=False`` is rouge-score's
  ``RougeScorer`` F-measure per sample; the reported value is ``round(mean * 100, 4)``.

The references download nltk's punkt model. Offline, when punkt is not installed, sentences are
split by nltk's Punkt algorithm with default parameters (no trained abbreviations): rouge1/2/L
do not depend on line breaks, rougeLsum may differ slightly; ``sentence_splitter()`` says which ran
and accuracy.txt records it.
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


@functools.lru_cache(maxsize=1)
def _splitter():
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return "nltk.sent_tokenize (punkt)", nltk.sent_tokenize
    except LookupError:
        from nltk.tokenize.punkt import PunktSentenceTokenizer

        return "nltk Punkt, untrained (punkt data not installed)", PunktSentenceTokenizer().tokenize


def sentence_splitter() -> str:
    return _splitter()[0]


def postprocess_text(preds: Sequence[str], targets: Sequence[str]) -> tuple[list[str], list[str]]:
    split = _splitter()[1]
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
