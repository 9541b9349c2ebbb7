"""The Llama3.1-405B evaluation set as the reference reads it (``language/llama3.1-405b/dataset.py`` and
``evaluate-accuracy.py``): ``mlperf_llama3.1_405b_dataset_8313_processed_fp16_eval.pkl``, a pickled pandas DataFrame
of 8,313 rows. The harness reads ``tok_input`` (the prompt's token ids, Llama 3's chat template already applied),
``gt_output`` (the reference answer) and ``metric``, the scorer of the row: ``rouge`` (ROUGE-L), ``niah_em`` (RULER's
needle: the UUIDs of the answer) or ``qa_em`` (an answer, or ``|``-separated alternatives).

The tiny set has the same columns and all three metrics, built from seeded synthetic text over the shared tiny
tokenizer (its BOS first, as Llama 3's template starts with one): summaries, needle questions whose answer holds
UUIDs, and questions whose answer is a word.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from code.common.errors import MissingDataError

DATASET_PKL = "mlperf_llama3.1_405b_dataset_8313_processed_fp16_eval.pkl"
CALIBRATION_PKL = "mlperf_llama3.1_405b_calibration_dataset_512_processed_fp16_eval.pkl"
METRICS = ("rouge", "niah_em", "qa_em")
COLUMNS = ("dataset", "input", "tok_input", "tok_input_len", "gt_output", "metric")


def read(path: Path, fix: str):
    from code.common.fileio import read_dataframe

    df = read_dataframe(path, fix, ("tok_input", "gt_output", "metric"))
    odd = sorted(set(map(str, df["metric"])) - set(METRICS))
    if odd:
        raise MissingDataError(f"{path}: unknown metric(s) {', '.join(odd)} (expected {', '.join(METRICS)})", fix)
    return df


def tiny_samples(n: int, seed: int) -> list[dict]:
    """``n`` seeded samples, the three metrics in turn; the answers are provisional (download_data replaces those of
    rouge and qa_em rows with what plain generate's answer makes sensitive)."""
    import uuid

    import numpy as np

    from code.common.llm.tiny import TextGen

    g = TextGen(seed)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        metric = METRICS[i % 3]
        doc = g.paragraph(int(rng.integers(3, 10)))
        if metric == "rouge":
            q, a, ds = f"Write a one-paragraph summary of the report.\n\n{doc}", g.paragraph(2), "GovReport"
        elif metric == "niah_em":
            keys = [str(uuid.UUID(int=int(rng.integers(0, 2 ** 62)) << 64 | int(rng.integers(0, 2 ** 62))))
                    for _ in range(int(rng.integers(1, 3)))]
            q = f"{doc} One of the special magic uuids for {g.vocab[i % 50]} is: {keys[0]}. What is it?"
            a, ds = " ".join(keys), "niah_multikey"
        else:
            q, a, ds = f"{doc}\n\nQuestion: {g.sentence()} Answer:", g.vocab[int(rng.integers(50))], "qa_hotpot"
        out.append({"dataset": ds, "input": q, "gt_output": a, "metric": metric})
    return out


def write(path: Path, tokenizer, samples: Sequence[dict]) -> Path:
    """The samples as the reference's DataFrame (prompt token ids with the tiny BOS), pickled and staged."""
    import pandas as pd

    from code.common.fileio import staged_path
    from code.common.llm.tiny import BOS

    rows = []
    for s in samples:
        tok = [BOS] + tokenizer(s["input"], add_special_tokens=False)["input_ids"]
        rows.append({**s, "tok_input": tok, "tok_input_len": len(tok)})
    with staged_path(Path(path), suffix=".pkl") as tmp:
        pd.DataFrame(rows, columns=list(COLUMNS)).to_pickle(tmp)
    return Path(path)
