"""The reasoning benchmarks' exact-match extraction (code/common/llm/exact_match.py, issue 30) against the official
scripts' own functions: language/deepseek-r1/eval_accuracy.py and language/gpt-oss-120b/eval_accuracy.py from
the shared official tree, run in their own process on the same texts. Every extracted answer and every verdict
(multiple choice, AIME) must be equal."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from code.common.llm import exact_match as em
from tests.conftest import official_root, run_official

SCRIPTS = {"plain": ("language", "deepseek-r1", "eval_accuracy.py"),      # DeepSeek-R1's rules
           "harmony": ("language", "gpt-oss-120b", "eval_accuracy.py")}

DRIVER = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("official_eval", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
out = []
for dataset, text, truth in json.load(open(sys.argv[2])):
    ev = mod.get_evaluator(dataset)
    parsed = ev["parse"](text)
    kind = next(k for k in mod.DATASET_EVALUATORS if k in dataset.lower())
    verdict = None
    if kind not in ("math500", "livecodebench"):
        verdict = bool(parsed is not None and truth is not None and ev["evaluate"](parsed, truth))
    out.append([parsed, verdict])
json.dump(out, open(sys.argv[3], "w"))
"""

FRAGMENTS = [
    "Let me think step by step.", "So the answer is", "Answer: C", "ANSWER: (b)", "Final Answer: D.", "final answer = J",
    "answer:a", "The answer is **B**.", "**Answer: E**", "I think (A) or (B)", "Therefore A", "answer: Z", "ANSWER:C1",
    "\\boxed{42}", "\\boxed{ 7 }", "\\boxed{1000}", "\\boxed{\\frac{1}{2}}", "\\boxed{x^{2}+1}", "\\boxed{unclosed",
    "Answer: 12", "Answer: 12.5", "Answer:  999", "answer: 007", "\\boxed{12} then Answer: 13",
    "```python\nprint(1)\n```", "```py\nx = 2\n```", "```\ndef f():\n    return 3\n```", "```python\na=1```",
    "['B']", '["D"]', "\\nAnswer: B", "it\\'s C", "E", "(F)", "g", "Option H is right", "I.", "J)",
    "<|channel|>analysis<|message|>Maybe Answer: A, or \\boxed{5}.<|end|>",
    "<|start|>assistant<|channel|>final<|message|>", "<|channel|>final 明<|message|>", "<|channel|>final537<|message|>",
    "<|return|>", "**C**", "**The final answer is B**", "\n", "  ", "Answer: B<|return|>trailing",
]
DATASETS = ["gpqa_diamond", "mmlu_pro", "math500", "aime1983", "livecodebench", "MMLU", "AIME25", "GPQA"]
TRUTHS = {"gpqa": ["A", "B", "C", "D", "c"], "mmlu": ["A", "E", "J", "B"], "aime": ["42", "7", "12", "999", 13, "x"]}


def cases() -> list[list]:
    """Seeded texts made of answer-like fragments (markers, boxes, letters, code blocks, harmony channels), with
    each dataset family's ground truths, plus the fragments alone."""
    rng = random.Random(20261204)
    texts = list(FRAGMENTS) + ["", " ".join(FRAGMENTS)]
    for _ in range(400):
        texts.append(rng.choice([" ", "\n", ""]).join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 6))))
    out = []
    for i, t in enumerate(texts):
        ds = DATASETS[i % len(DATASETS)]
        fam = next((k for k in TRUTHS if k in ds.lower()), None)
        out.append([ds, t, rng.choice(TRUTHS[fam]) if fam else "1/2"])
        out.append([DATASETS[(i + 3) % len(DATASETS)], t, "B"])
    return out


@pytest.mark.parametrize("dialect", em.DIALECTS)
def test_extraction_and_verdicts_equal_the_official_scripts(dialect, tmp_path):
    script = official_root(*SCRIPTS[dialect])
    data = [c for c in cases() if not (dialect == "plain" and c[0] == "MMLU")]   # no mmlu family there
    (tmp_path / "cases.json").write_text(json.dumps(data))
    (tmp_path / "driver.py").write_text(DRIVER)
    run_official([tmp_path / "driver.py", script, tmp_path / "cases.json", tmp_path / "out.json"], cwd=tmp_path)
    official = json.loads((tmp_path / "out.json").read_text())
    ours = []
    for ds, text, truth in data:
        parsed = em.extract(ds, text, dialect)
        kind = em.family(ds, dialect)[0]
        ours.append([parsed, None if kind in ("boxed", "code") else em.judge(ds, parsed, truth, dialect)])
    diff = [(d, o, t) for d, o, t in zip(data, official, ours) if o != t]
    assert not diff, f"{len(diff)} of {len(data)} differ, e.g. {diff[:3]}"
    found = sum(1 for p, _ in ours if p is not None)
    right = sum(1 for _, v in ours if v)
    assert found > len(data) // 3 and right > 20          # the texts exercise answers found and judged right
    print(f"FIGURE exact_match {dialect}: {len(data)} texts, {found} answers extracted, {right} judged right; "
          "equal to the official eval_accuracy.py on every one")


def test_families_and_what_is_not_judged_here():
    assert em.family("GPQA_diamond", "plain") == ("choice", "D")
    assert em.family("mmlu_pro_law", "harmony") == ("choice", "J")
    assert em.family("mmlu", "harmony") == ("choice", "J")
    with pytest.raises(ValueError, match="no plain scorer"):
        em.family("mmlu", "plain")
    assert em.judge("math500", "1/2", "\\frac12", "plain") is True       # PRM800K's grader (code.common.llm.math_grader)
    with pytest.raises(em.NotJudgedHere, match="LiveCodeBench"):
        em.judge("livecodebench", "print(1)", "q1", "harmony")
    assert em.extract("aime", "so \\boxed{1000}", "plain") is None          # out of AIME's range
    assert em.extract("gpqa", "<|channel|>final<|message|>**B**<|return|>", "harmony") == "B"
    assert em.extract("gpqa", "<|channel|>final<|message|>**B**<|return|>", "plain") is None
