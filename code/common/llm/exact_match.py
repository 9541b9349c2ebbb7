"""Exact-match answer extraction and judging for the reasoning benchmarks (DeepSeek-R1 and GPT-OSS-120B).

Both references score a generated text by the family of the dataset its sample comes from (the first family
whose key the dataset's lower-cased name contains, in the order of ``FAMILIES``):

  gpqa          a letter A-D          mmlu_pro / mmlu   a letter A-J (``mmlu`` alone: GPT-OSS only)
  math500       the last ``\\boxed{...}``, judged by PRM800K's grader (``math_grader``)
  aime          an integer 0-999 from the last ``\\boxed{n}``, else the last ``Answer: n``
  livecodebench a python code block, judged by running the question's LiveCodeBench tests (``livecodebench``,
                through the ``code_judge`` that ``score`` is given)

The two references differ where the output formats differ: GPT-OSS answers in the harmony format, so its letters
and code come from the ``<|channel|>final<|message|>`` section first (markdown bold removed), with the
DeepSeek-R1 rules as the fallback over the whole text. The rules here are written from the references'
language/deepseek-r1/eval_accuracy.py and language/gpt-oss-120b/eval_accuracy.py (mlcommons/inference
b66003e), and tests/test_exact_match.py runs those scripts' own functions on the same texts and compares.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping

# "plain": DeepSeek-R1's rules over the whole text; "harmony": GPT-OSS-120B's, the final channel first
DIALECTS = ("plain", "harmony")

# family key -> (kind, last option letter); matched as a substring of the dataset name, in this order
FAMILIES: dict[str, dict[str, tuple[str, str]]] = {
    "plain": {"gpqa": ("choice", "D"), "mmlu_pro": ("choice", "J"), "math500": ("boxed", ""),
                    "aime": ("aime", ""), "livecodebench": ("code", "")},
}
FAMILIES["harmony"] = {**FAMILIES["plain"], "mmlu": ("choice", "J")}

_OPTIONS = "ABCDEFGHIJ"


class NotJudgedHere(Exception):
    """A LiveCodeBench answer with no code judge to run its tests (``score``'s ``code_judge``)."""


def family_key(dataset: str, dialect: str) -> str:
    """The family (a key of FAMILIES) a dataset name belongs to; ValueError for none (the references fail too)."""
    name = str(dataset).lower()
    for key in FAMILIES[dialect]:
        if key in name:
            return key
    raise ValueError(f"no {dialect} scorer for dataset {dataset!r}")


def family(dataset: str, dialect: str) -> tuple[str, str]:
    return FAMILIES[dialect][family_key(dataset, dialect)]


def text_of(x: Any) -> str:
    """The references' reading of a cell: missing (None or NaN) is empty; anything else its stripped str."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return str(x).strip()


def harmony_final(text: str) -> str:
    """The final channel of a harmony-format answer (tolerating junk between ``final`` and ``<|message|>``),
    else the whole text."""
    text = text_of(text)
    m = re.search(r"<\|channel\|>final[^<]*<\|message\|>(.*?)(?:<\|return\|>|$)", text, re.DOTALL)
    return m.group(1).strip() if m else text


def _unescape(text: str) -> str:
    return text.replace("\\n", "\n").replace("\\'", "'")


def _unwrap_list(text: str) -> str:
    """An answer that arrived as a printed one-item list (``['B']``)."""
    if text.startswith(("['", '["')) and text.endswith(("']", '"]')):
        return text[2:-2].strip()
    return text


def _answer_marker(text: str, last: str) -> str | None:
    """The letter after the last ANSWER / FINAL ANSWER (an optional ``:`` or ``=``, optional parentheses)."""
    hits = list(re.finditer(rf"\b(?:ANSWER|FINAL\s*ANSWER)\b\s*[:=]?\s*(?:\(?\s*([A-{last}])\s*\)?)(?:\s*$|[^A-Za-z])",
                            text, re.IGNORECASE))
    return hits[-1].group(1).upper() if hits else None


def _lone_letter(text: str, last: str) -> str | None:
    hits = list(re.finditer(rf"\b([A-{last}])\b", text, re.IGNORECASE))
    return hits[-1].group(1).upper() if hits else None


def choice(text: Any, last: str, dialect: str) -> str | None:
    """The chosen letter (A..``last``), upper-case, or None."""
    text = text_of(text)
    if not text:
        return None
    if dialect == "plain":
        body = _unescape(_unwrap_list(text))
        found = _answer_marker(body, last)
        if found is None and last == "J":
            found = _lone_letter(body, last)
        return found
    final = _unescape(_unwrap_list(re.sub(r"\*\*([^*]+)\*\*", r"\1", harmony_final(text))))
    m = re.match(rf"^[^a-zA-Z]*([A-{last}])(?:[^a-zA-Z]|$)", final.strip(), re.IGNORECASE)
    if m:                                          # the final channel opens with the letter
        return m.group(1).upper()
    m = re.search(rf"\b(?:Answer|ANSWER)\s*[:.]?\s*([A-{last}])\b", final, re.IGNORECASE)
    if m:                                          # the first "Answer: X" of the final channel
        return m.group(1).upper()
    found = _answer_marker(_unescape(text), last)  # the DeepSeek-R1 rule over the whole text
    if found is None and last == "J":
        found = _lone_letter(final, last)
    return found


def boxed(text: Any) -> str | None:
    """The content of the last ``\\boxed{...}`` (braces balanced), stripped; None when absent or unclosed."""
    text = text_of(text)
    start = text.rfind("\\boxed{")
    if not text or start < 0:
        return None
    depth = 0
    for i in range(start + len("\\boxed{"), len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            if depth == 0:
                return text[start + len("\\boxed{"):i].strip()
            depth -= 1
    return None


def aime(text: Any) -> int | None:
    """0-999 from the last ``\\boxed{n}``, else from the last ``Answer: n`` (not followed by a point)."""
    text = text_of(text)
    if not text:
        return None
    hits = list(re.finditer(r"\\boxed{\s*(\d+)\s*}", text))
    if not hits:
        hits = list(re.finditer(r"Answer:\s*(\d+)(?!\.)\b", text, re.IGNORECASE | re.MULTILINE))
    if not hits:
        return None
    value = int(hits[-1].group(1))
    return value if 0 <= value <= 999 else None


def _blocks(text: str, plain: bool) -> str | None:
    """The last python-tagged code block, else (``plain``) the last block of any tag, its py/python tag line cut."""
    hits = list(re.finditer(r"```python(.*?)```", text, re.DOTALL))
    if hits:
        return hits[-1].group(1).strip()
    if plain:
        hits = list(re.finditer(r"```(.*?)```", text, re.DOTALL))
        if hits:
            return re.sub(r"^(?:python|py)\s*\n", "", hits[-1].group(1).strip(), flags=re.IGNORECASE)
    return None


def code(text: Any, dialect: str) -> str | None:
    text = text_of(text)
    if not text:
        return None
    if dialect == "plain":                    # the first python block
        m = re.search(r"```python(.*?)```", text, re.DOTALL)
        return m.group(1).strip() if m else None
    final = harmony_final(text)
    if final != text:
        found = _blocks(final, plain=True)
        if found is not None:
            return found
    return _blocks(text, plain=True)


def extract(dataset: str, output: Any, dialect: str):
    """The answer a reference reads from ``output`` for a sample of ``dataset``."""
    kind, last = family(dataset, dialect)
    if kind == "choice":
        return choice(output, last, dialect)
    if kind == "boxed":
        return boxed(output)
    if kind == "aime":
        return aime(output)
    return code(output, dialect)


def judge(dataset: str, parsed, truth: Any, dialect: str) -> bool:
    """Whether ``parsed`` (from ``extract``) is right. A missing answer or ground truth is wrong."""
    kind, last = family(dataset, dialect)
    if parsed is None or truth is None or (isinstance(truth, float) and math.isnan(truth)):
        return False
    if kind == "choice":
        if not parsed or not truth:
            return False
        return parsed.upper() in _OPTIONS[:_OPTIONS.index(last) + 1] and parsed.upper() == str(truth).upper()
    if kind == "aime":
        try:
            return int(parsed) == int(truth)
        except (TypeError, ValueError):
            return False
    if kind == "boxed":
        from code.common.llm import math_grader

        return math_grader.judge(parsed, truth)
    raise NotJudgedHere(f"{dataset}: LiveCodeBench answers are judged by running their tests (score's code_judge)")


def score(datasets, outputs, truths, dialect: str, repeats: Mapping[str, int] | None = None,
          code_judge: Callable[[list[tuple[str, str]]], list[bool]] | None = None) -> dict[str, Any]:
    """The reference's exact_match over every sample: 100 for a right answer, 0 otherwise, averaged (a sample
    without an answer counts 0). Also each family's share right and how many answers were found.

    ``code_judge`` judges the LiveCodeBench answers, all at once: [(code, question id)] -> [passed]
    (``livecodebench.Judge``); NotJudgedHere when there are some and no judge.

    ``repeats`` ({lower-cased dataset name: n}, GPT-OSS-120B's eval_mlperf_accuracy.py DATASET_REPEATS): each
    dataset's samples weigh 1/n (a name not in it: 1), i.e. 100 x sum(right_d / n_d) / sum(samples_d / n_d), as
    the reference scores a set that holds each question n_d times."""
    from collections import Counter

    right, found, seen = Counter(), Counter(), Counter()
    by_name, right_name = Counter(), Counter()
    code_items: list[tuple[str, str, str, str]] = []      # (family, dataset name, code, question id)
    for ds, out, truth in zip(datasets, outputs, truths):
        key = family_key(ds, dialect)
        seen[key] += 1
        by_name[str(ds).lower()] += 1
        parsed = extract(ds, out, dialect)
        if parsed is None:
            continue
        found[key] += 1
        if family(ds, dialect)[0] == "code":
            if text_of(truth):                   # the reference skips a sample without a question id (0)
                code_items.append((key, str(ds).lower(), parsed, text_of(truth)))
            continue
        ok = judge(ds, parsed, truth, dialect)
        right[key] += ok
        right_name[str(ds).lower()] += ok
    if code_items:
        if code_judge is None:
            raise NotJudgedHere(f"{len(code_items)} LiveCodeBench answer(s) and no code judge to run their tests")
        for (key, name, _, _), ok in zip(code_items, code_judge([(c, q) for _, _, c, q in code_items])):
            right[key] += bool(ok)
            right_name[name] += bool(ok)
    n = sum(seen.values())
    if repeats is None:
        em = 100.0 * sum(right.values()) / n if n else 0.0
    else:
        top = sum(right_name[d] / repeats.get(d, 1) for d in by_name)
        bottom = sum(by_name[d] / repeats.get(d, 1) for d in by_name)
        em = 100.0 * top / bottom if bottom else 0.0
    return {"exact_match": em, "samples": n,
            "families": {k: {"samples": seen[k], "answered": found[k], "right": right[k]} for k in seen}}

