"""CNN/DailyMail as the GPT-J reference reads it (``language/gpt-j/dataset.py``).

``cnn_eval.json`` is a JSON list of {"instruction", "input", "output"}; each prompt is the Alpaca
``prompt_input`` template filled with the instruction and the article, tokenized alone (no padding)
and truncated to ``max_length`` tokens (1919 for the real model: 2048 context - 128 new - 1).
The tiny dataset is written in the same format, from seeded synthetic articles; its reference
summary is the article's first two sentences ("lead-2", the CNN/DM baseline).
"""
from __future__ import annotations

import json
from pathlib import Path

from code.common.fileio import write_text

INSTRUCTION = "Summarize the following news article:"
PROMPT_INPUT = ("Below is an instruction that describes a task, paired with an input that provides further context. "
                "Write a response that appropriately completes the request.\n\n"
                "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:")
CNN_EVAL = "cnn_eval.json"
REAL_MAX_LENGTH = 1919


def prompt(example: dict) -> str:
    return PROMPT_INPUT.format_map(example)


def read(path: Path, fix: str) -> list[dict]:
    from code.common.llm.harness import read_records

    return read_records(path, fix, ("instruction", "input", "output"), "cnn_eval.json")


def tokenize(tokenizer, records: list[dict], max_length: int) -> list[list[int]]:
    """One prompt at a time, as the reference does (truncation on the right to max_length)."""
    return [tokenizer(prompt(r), truncation=True, max_length=max_length)["input_ids"] for r in records]


def make_tiny(out_dir: Path, n: int, seed: int, targets=None) -> Path:
    import numpy as np

    from code.common.llm.tiny import TextGen

    g = TextGen(seed)
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        sentences = [g.sentence() for _ in range(int(rng.integers(2, 14)))]
        out = targets[i] if targets is not None else " ".join(sentences[:2])
        records.append({"instruction": INSTRUCTION, "input": " ".join(sentences), "output": out})
    path = Path(out_dir) / CNN_EVAL
    write_text(path, json.dumps(records, indent=4, ensure_ascii=False))
    return path
