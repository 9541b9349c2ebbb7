"""Llama3.1-405B's scores as ``language/llama3.1-405b/evaluate-accuracy.py`` computes them (written from its rules;
tests/test_llama3_1_405b.py runs the script on the same log).

Each sample, after the reference's postprocessing (strip, one sentence per line), is scored by its row's metric:

- ``rouge``: rouge-score's ROUGE-L F-measure (Porter stemmer) x 100;
- ``niah_em``: the UUIDs in the answer and in the prediction are paired in order; each pair scores the share of the
  answer UUID's characters found anywhere in the predicted one; the sum over pairs is divided by the number of
  predicted UUIDs, x 100, rounded to 2 decimals (0 when the prediction holds none);
- ``qa_em``: the prediction's text after its last ``"Answer: "`` (all of it when there is none) scores 100 when it
  is a substring of the answer, or when one of the answer's ``|``-separated alternatives, whitespace removed and
  lower-cased, is a substring of it treated the same way; else 0.

The reported ``rougeL`` is the mean over the rouge rows and ``exact_match`` the mean over the niah_em and qa_em rows
(pandas' column means skip the other rows), beside gen_len (characters of the postprocessed predictions), gen_num,
gen_tok_len and tokens_per_sample (gen_tok_len / gen_num, rounded to 1 decimal).
"""
from __future__ import annotations

import re
from typing import Sequence

_UUID = re.compile(r"[\w]{8}-[\w]{4}-[\w]{4}-[\w]{4}-[\w]{12}")


def niah_em(answer: str, pred: str) -> float:
    want, got = _UUID.findall(answer), _UUID.findall(pred)
    if not got:
        return 0.0
    total = 0.0
    for p, a in zip(got, want):
        total += sum(ch.lower() in p.lower() for ch in a) / len(a)
    return round(total / len(got) * 100, 2)


def qa_em(answer: str, pred: str) -> float:
    tail = pred[pred.rfind("Answer: ") + len("Answer: "):] if "Answer: " in pred else pred
    if tail in answer:
        return 100.0
    squeeze = re.sub(r"\s+", "", tail).lower()
    return 100.0 if any(re.sub(r"\s+", "", alt).lower() in squeeze for alt in answer.split("|")) else 0.0


def score(preds: Sequence[str], targets: Sequence[str], metrics: Sequence[str], token_counts: Sequence[int]) -> dict:
    """The reference's result dict over postprocessed ``preds`` / ``targets``."""
    import numpy as np
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    rouge, em = [], []
    for p, t, m in zip(preds, targets, metrics):
        if m == "rouge":
            rouge.append(100 * scorer.score(t, p)["rougeL"].fmeasure)
        elif m == "niah_em":
            em.append(niah_em(t, p))
        else:
            em.append(qa_em(t, p))
    out: dict = {}
    if rouge:
        out["rougeL"] = float(np.mean(rouge))
    if em:
        out["exact_match"] = float(np.mean(em))
    n, toks = len(preds), int(sum(token_counts))
    out.update({"gen_len": int(sum(len(p) for p in preds)), "gen_num": n, "gen_tok_len": toks,
                "tokens_per_sample": round(toks / n, 1) if n else 0.0})
    return out
