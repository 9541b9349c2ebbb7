"""The DeepSeek-R1 evaluation set as the reference reads it (``language/deepseek-r1``: run_mlperf.py,
mlperf/utils.py, utils/tokenization.py, eval_accuracy.py).

``mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl`` is a pickled pandas DataFrame of 4,388 rows; the reference
reads ``text_input`` (the question, sent as one user message), ``dataset`` (the sub-dataset: its lower-cased
name contains gpqa, mmlu_pro, math500, aime or livecodebench, which picks the scorer) and ``ground_truth`` (the
answer letter, the answer, the AIME integer, or the LiveCodeBench question id), with ``gt_output`` accepted in
its place as the reference does. A prompt's token ids are the tokenizer's chat template applied to
``[{"role": "user", "content": text_input}]`` with the generation prompt, truncated at 32,768 tokens
(StandardTokenizer.tokenize_prompts); vLLM and SGLang get the text and apply the same template.

The tiny set has the same columns: seeded synthetic questions of the three families scored here (GPQA letters
A-D, MMLU-Pro letters A-J, AIME integers) over the shared tiny tokenizer, with a DeepSeek-R1-shaped chat
template (``<｜User｜>`` / ``<｜Assistant｜><think>``) in the tiny checkpoint.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from code.common.errors import MissingDataError

DATASET_PKL = "mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl"
CALIBRATION_PKL = "mlperf_deepseek_r1_calibration_dataset_500_fp8_eval.pkl"
MAX_PROMPT_TOKENS = 32 * 1024            # StandardTokenizer.DEFAULT_MAX_LENGTH
REQUIRED = ("text_input", "dataset")
TINY_FAMILIES = ("gpqa", "mmlu_pro", "aime")
# the real template's shape (deepseek-ai/DeepSeek-R1 tokenizer_config.json): BOS, "<｜User｜>" + question,
# "<｜Assistant｜><think>\n" as the generation prompt
TINY_SPECIALS = ("<｜User｜>", "<｜Assistant｜>")
# whole answers as single tokens of the tiny vocabulary (the answer marker, the option or digit, a space): a random
# model rarely spells "Answer: C" token by token, but emits these, so the reference's extraction finds answers
TINY_ANSWERS = tuple(f"Answer: {c} " for c in "ABCDEFGHIJ0123456789")
TINY_ADDED = ("<think>", "</think>", *TINY_ANSWERS)
TINY_CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}<｜User｜>{{ m['content'] }}"
                      "{% elif m['role'] == 'assistant' %}<｜Assistant｜>{{ m['content'] }}{{ eos_token }}{% endif %}"
                      "{% endfor %}{% if add_generation_prompt %}<｜Assistant｜><think>\n{% endif %}")


def truth_column(df) -> str:
    """``ground_truth``, else ``gt_output`` (the reference's order)."""
    for c in ("ground_truth", "gt_output"):
        if c in df.columns:
            return c
    raise KeyError("ground_truth")


def read(path: Path, fix: str):
    from code.common.fileio import read_dataframe

    df = read_dataframe(path, fix, REQUIRED)
    try:
        truth_column(df)
    except KeyError:
        raise MissingDataError(f"{path}: no ground_truth (or gt_output) column", fix) from None
    return df


def chat_prompt(tokenizer, text: str) -> list[int]:
    """The reference's prompt: the chat template over one user message, with the generation prompt."""
    ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                        max_length=MAX_PROMPT_TOKENS, truncation=True, tokenize=True)
    if hasattr(ids, "keys"):                           # transformers may hand back a BatchEncoding
        ids = ids["input_ids"]
    return [int(t) for t in ids]


def tiny_samples(n: int, seed: int) -> list[dict]:
    """``n`` seeded questions, the tiny families in turn, each with a provisional ground truth (download_data
    replaces it with what plain generate's answer reads as)."""
    import numpy as np

    from code.common.llm.tiny import TextGen

    g = TextGen(seed)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        fam = TINY_FAMILIES[i % len(TINY_FAMILIES)]
        q = g.paragraph(int(rng.integers(1, 4)))
        if fam == "aime":
            text = f"{q} Return your final answer as Answer: <integer from 0 to 999>."
            truth = str(int(rng.integers(0, 1000)))
        else:
            letters = "ABCD" if fam == "gpqa" else "ABCDEFGHIJ"
            options = "\n".join(f"{c}) {g.sentence(3, 7)}" for c in letters)
            text = f"{q}\n{options}\nAnswer with the letter of the right option as ANSWER: <letter>."
            truth = letters[int(rng.integers(len(letters)))]
        out.append({"dataset": f"{fam}_tiny", "question": q, "text_input": text, "ground_truth": truth})
    return out


def write(path: Path, samples: Sequence[dict]) -> Path:
    """The samples as the reference's DataFrame, pickled and staged."""
    import pandas as pd

    from code.common.fileio import staged_path

    with staged_path(Path(path), suffix=".pkl") as tmp:
        pd.DataFrame(list(samples), columns=["dataset", "question", "text_input", "ground_truth"]).to_pickle(tmp)
    return Path(path)
