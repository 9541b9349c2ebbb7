"""GSM8K exact-match accuracy as the MLPerf Mixtral-8x7B reference scores it
(``language/mixtral-8x7b/evaluate-accuracy.py``):

- the decoded prediction is cut at its first ``"\\nQ:"`` (the model starting a new few-shot question);
- the answer is the first number after the last ``"The answer is"`` when that phrase is present and a
  number follows it, else the last number anywhere in the (cut) text;
- a number is ``-?[\\d,]*\\.?\\d+`` (optional minus, thousands commas, decimal point); commas are
  removed, then prediction and ground truth (``gt_output``) are compared as floats;
- a prediction without a number is wrong but stays in the denominator (counted in ``no_answer``).

The ground truth is parsed as the reference does (``float`` of the string as given, no comma
removal): a ground truth that is not a plain number never matches.
"""
from __future__ import annotations

import re
from typing import Sequence

from code.common.errors import HarnessError

DELIMITER = "The answer is"
CONTINUATION = "\nQ:"

_NUMBER = re.compile(r"-?[\d,]*\.?\d+")
_FIX = "regenerate the Mixtral dataset: make preprocess_data BENCHMARKS=mixtral_8x7b"


def find_numbers(text: str) -> list[str]:
    """Every number in ``text`` in order (possibly negative, with thousands commas and a decimal part)."""
    return _NUMBER.findall(text)


def find_number(text: str, delimiter: str = DELIMITER) -> str:
    """The number that answers: the first after the last ``delimiter`` if any follows it, else the
    last number in ``text``; "" when there is none. Commas are kept (see ``extract_answer``)."""
    if delimiter in text:
        after = find_numbers(text.rsplit(delimiter, 1)[-1])
        if after:
            return after[0]
    numbers = find_numbers(text)
    return numbers[-1] if numbers else ""


def _as_float(s) -> float | None:
    try:
        return float(s)
    except (TypeError, ValueError, OverflowError):
        return None


def extract_answer(prediction: str) -> str:
    """The reference's whole extraction: cut at the first "\\nQ:", ``find_number``, commas removed."""
    return find_number(prediction.split(CONTINUATION, 1)[0]).replace(",", "")


def is_correct(prediction: str, ground_truth: str) -> bool:
    got = _as_float(extract_answer(prediction))
    return got is not None and got == _as_float(ground_truth)


def score(predictions: Sequence[str], ground_truths: Sequence[str]) -> dict:
    """GSM8K accuracy of decoded ``predictions`` against ``ground_truths`` (the dataset's
    ``gt_output``), in the same order.

    Returns ``{"gsm8k": 100*correct/total, "correct", "total", "no_answer"}``. With no samples the
    reference divides by zero (ZeroDivisionError); here ``gsm8k`` is 0.0 instead.
    """
    predictions, ground_truths = list(predictions), list(ground_truths)
    if len(predictions) != len(ground_truths):
        raise HarnessError(f"GSM8K: {len(predictions)} predictions for {len(ground_truths)} ground truths",
                           _FIX)
    for i, p in enumerate(predictions):
        if not isinstance(p, str):
            raise HarnessError(f"GSM8K prediction {i} is a {type(p).__name__}, not decoded text",
                               "decode the output tokens to text before scoring")
    correct = no_answer = 0
    for pred, gt in zip(predictions, ground_truths):
        got = _as_float(extract_answer(pred))
        if got is None:
            no_answer += 1
            continue
        correct += got == _as_float(gt)
    total = len(predictions)
    return {"gsm8k": 100.0 * correct / total if total else 0.0, "correct": correct, "total": total,
            "no_answer": no_answer}
