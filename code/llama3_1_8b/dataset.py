"""CNN/DailyMail as the Llama3.1-8B reference reads it (``language/llama3.1-8b/dataset.py``,
``download_cnndm.py``).

``cnn_eval.json`` (datacenter, 13,368 articles) and ``sample_cnn_eval_5000.json`` (edge, a seeded
5,000-article subset) are JSON lists of {"instruction": {"llama": template}, "input": article,
"tok_input": the prompt's token ids (the template filled with the article, Llama 3's tokenizer with
its ``<|begin_of_text|>``), "output": highlights}. The harness uses ``tok_input`` and ``output``.

The tiny files have the same format: seeded synthetic articles, the shared tiny tokenizer (its BOS
first, as Llama 3's tokenizer adds one), and the edge file a seeded subset of the datacenter one.
"""
from __future__ import annotations

import json
from pathlib import Path

from code.common.fileio import write_text

TEMPLATE = ("Summarize the following news article in 128 tokens. Please output the summary only, without any other "
            "text.\n\nArticle:\n{input}\n\nSummary:")
DATACENTER_JSON = "cnn_eval.json"
EDGE_JSON = "sample_cnn_eval_5000.json"


def file_for(edge: bool) -> str:
    return EDGE_JSON if edge else DATACENTER_JSON


def read(path: Path, fix: str) -> list[dict]:
    from code.common.llm.harness import read_records

    return read_records(path, fix, ("tok_input", "output"), path.name)


def make_tiny(out_dir: Path, tokenizer, n: int, edge_n: int, seed: int, targets=None) -> tuple[Path, Path, list[int]]:
    """Both tiny files; returns their paths and the datacenter indices the edge file holds (in its order)."""
    import numpy as np

    from code.common.llm.tiny import BOS, TextGen

    g = TextGen(seed)
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        sentences = [g.sentence() for _ in range(int(rng.integers(2, 12)))]
        article = " ".join(sentences)
        out = targets[i] if targets is not None else " ".join(sentences[:2])
        tok_in = [BOS] + tokenizer(TEMPLATE.format(input=article), add_special_tokens=False)["input_ids"]
        records.append({"instruction": {"llama": TEMPLATE}, "input": article, "tok_input": tok_in, "output": out})
    subset = [int(i) for i in np.random.default_rng(seed + 1).choice(n, size=edge_n, replace=False)]
    dc = Path(out_dir) / DATACENTER_JSON
    ed = Path(out_dir) / EDGE_JSON
    write_text(dc, json.dumps(records, indent=4, ensure_ascii=False))
    write_text(ed, json.dumps([records[i] for i in subset], indent=4, ensure_ascii=False))
    return dc, ed, subset
