"""The reference's scores (``mlperf_inf_mm_q3vl/evaluation.py``), of which accuracy.txt reports the first as
``{"f1": ...}``, the field the checker reads as F1_HIERARCHICAL:

* category hierarchical F1: each answer's path and the truth's split on " > " (levels stripped); the matching
  levels are the longest common prefix; hP = matches / predicted levels, hR = matches / true levels, summed over
  every sample first (micro), F1 = 2 hP hR / (hP + hR).
* brand: the share of answers whose lower-cased, stripped brand has a rapidfuzz ratio > 90 with the truth's.
* is_secondhand: sklearn's binary F1.

An answer is read as the reference reads it, with pydantic (``ProductMetadata.model_validate_json``: exactly the
three fields, no others). One that does not validate counts as a path of as many padding levels as the truth has
(so it adds to both lengths and matches none) and a padding brand; its is_secondhand is drawn at random by the
reference (a seeded generator per chunk of the log), which this module leaves out: is_secondhand over unparsable
answers is not reported here (accuracy.txt holds the category score only, as the reference's does).
"""
from __future__ import annotations

from typing import Sequence

SEPARATOR = " > "
PRED_CATEGORY_PAD = "<|__PRED_CATEGORY_PAD__|>"
PRED_BRAND_PAD = "<|__PRED_BRAND_PAD__|>"


def _model():
    from pydantic import BaseModel, ConfigDict

    class ProductMetadata(BaseModel):
        model_config = ConfigDict(extra="forbid")
        category: str
        brand: str
        is_secondhand: bool

    return ProductMetadata


def parse(text: str):
    """(category, brand, is_secondhand) of one answer, or None where it does not validate."""
    from pydantic import ValidationError

    try:
        m = _model().model_validate_json(text)
    except ValidationError:
        return None
    return m.category, m.brand, m.is_secondhand


def hierarchical_components(pred: str, true: str) -> tuple[int, int, int]:
    p = [c.strip() for c in pred.split(SEPARATOR)]
    t = [c.strip() for c in true.split(SEPARATOR)]
    n = 0
    for a, b in zip(p, t):
        if a != b:
            break
        n += 1
    return n, len(p), len(t)


def hierarchical_f1(pairs: Sequence[tuple[str, str]]) -> float:
    inter = plen = tlen = 0
    for pred, true in pairs:
        i, a, b = hierarchical_components(pred, true)
        inter, plen, tlen = inter + i, plen + a, tlen + b
    hp = inter / plen if plen else 0.0
    hr = inter / tlen if tlen else 0.0
    return 0.0 if hp + hr == 0 else 2 * hp * hr / (hp + hr)


def brand_score(pairs: Sequence[tuple[str, str]]) -> float:
    from rapidfuzz import fuzz

    if not pairs:
        return 0.0
    return sum(fuzz.ratio(t.strip().lower(), p.strip().lower()) > 90 for p, t in pairs) / len(pairs)


def score(texts: Sequence[str], truths: Sequence[dict]) -> dict:
    """``texts``: the answers; ``truths``: each sample's ground_truth_category / _brand / _is_secondhand."""
    from sklearn.metrics import f1_score

    cats, brands, second = [], [], []
    bad = 0
    for text, t in zip(texts, truths):
        got = parse(text)
        true_cat = t["ground_truth_category"]
        if got is None:
            bad += 1
            cats.append((SEPARATOR.join([PRED_CATEGORY_PAD] * len(true_cat.split(SEPARATOR))), true_cat))
            brands.append((PRED_BRAND_PAD, t["ground_truth_brand"]))
            continue
        cats.append((got[0], true_cat))
        brands.append((got[1], t["ground_truth_brand"]))
        second.append((got[2], bool(t["ground_truth_is_secondhand"])))
    out = {"f1": hierarchical_f1(cats), "brand": brand_score(brands), "unparsable": bad, "num-samples": len(cats)}
    if second:
        out["is_secondhand_f1_parsed"] = float(f1_score([b for _, b in second], [a for a, _ in second],
                                                        zero_division=0.0))
    return out
