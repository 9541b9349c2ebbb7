"""The processed OpenORCA set as the Llama2-70B reference reads it (``language/llama2-70b/dataset.py``).

The pickle is a pandas DataFrame; the harness uses ``tok_input`` (the prompt's token ids, as the
reference tokenized them: ``input`` = the Llama-2 chat template over ``system_prompt`` and
``question``) and ``output`` (the reference answer ROUGE is computed against). The tiny dataset is
a DataFrame with the same columns, built from seeded synthetic text and the tiny tokenizer.
"""
from __future__ import annotations

from pathlib import Path


DATASET_PKL = "open_orca_gpt4_tokenized_llama.sampled_24576.pkl"
PROMPT_SYSTEM = "<s>[INST] <<SYS>>\n{}\n<</SYS>>\n\n{} [/INST]"
PROMPT_NO_SYSTEM = "<s>[INST] {} [/INST]"
COLUMNS = ("id", "system_prompt", "question", "output", "input", "tok_input", "tok_output", "origin",
           "tok_input_length", "tok_output_length")


def format_prompt(system_prompt: str, question: str) -> str:
    return PROMPT_SYSTEM.format(system_prompt, question) if system_prompt else PROMPT_NO_SYSTEM.format(question)


def read(path: Path, fix: str):
    from code.common.fileio import read_dataframe

    return read_dataframe(path, fix, ("tok_input", "output"))


def make_tiny(out_dir: Path, tokenizer, n: int, seed: int, targets=None) -> Path:
    import numpy as np
    import pandas as pd

    from code.common.fileio import staged_path
    from code.common.llm.tiny import TextGen

    g = TextGen(seed)
    rng = np.random.default_rng(seed)
    systems = ["", "You are a helpful assistant.", "You are an AI assistant. Answer briefly.",
               "Think step by step and justify your answer."]
    rows = []
    for i in range(n):
        sp = systems[i % len(systems)]
        q = g.paragraph(int(rng.integers(1, 9)))
        out = g.paragraph(int(rng.integers(1, 4)))
        if targets is not None:
            out = targets[i]
        text = format_prompt(sp, q)
        tok_in = tokenizer(text, add_special_tokens=False)["input_ids"]
        tok_out = tokenizer(out, add_special_tokens=False)["input_ids"]
        rows.append({"id": f"{['cot', 'flan', 'niv', 't0'][i % 4]}.{i}", "system_prompt": sp, "question": q,
                     "output": out, "input": text, "tok_input": tok_in, "tok_output": tok_out,
                     "origin": ["cot", "flan", "niv", "t0"][i % 4], "tok_input_length": len(tok_in),
                     "tok_output_length": len(tok_out)})
    path = Path(out_dir) / DATASET_PKL
    with staged_path(path, suffix=".pkl") as tmp:
        pd.DataFrame(rows, columns=list(COLUMNS)).to_pickle(tmp)
    return path
