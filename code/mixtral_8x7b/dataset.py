"""The Mixtral-8x7B validation set as the reference reads it (``language/mixtral-8x7b/dataset.py`` and
``evaluate-accuracy.py``): a pickled pandas DataFrame of 15,000 rows, 5,000 each of three
sub-datasets (column ``dataset``):

- ``OpenOrca``: ``gt_output`` is the reference answer (ROUGE);
- ``GSM8K``: ``gt_output`` is the final number (exact match after the reference's extraction);
- ``MBXP``: ``id`` is ``<language>_<entry point>``, ``gt_output`` the test code the generated
  function must pass; generation stops after ``tok_stop_sequence`` ("\\n```\\n", token ids
  13 13940 28832 13 for Mixtral's tokenizer).

The harness reads ``tok_input`` (the prompt's token ids, Mixtral's ``[INST]`` template already
applied), ``dataset``, ``id``, ``gt_output`` and ``tok_stop_sequence``.

The tiny set has the same columns and all three kinds, built from seeded synthetic text, the shared
tiny tokenizer, small GSM8K-style word problems with a final number, and small functions with tests
in the MBXP languages (Python, JavaScript, C++, PHP, Ruby, TypeScript) whose ``ref_output`` passes them.
"""
from __future__ import annotations

from pathlib import Path

from code.common.errors import MissingDataError

DATASET_PKL = "09292024_mixtral_15k_mintoken2_v1.pkl"
KINDS = ("OpenOrca", "GSM8K", "MBXP")
MBXP_STOP = (13, 13940, 28832, 13)         # "\n```\n" in Mixtral's tokenizer (the reference's StopAfterSequence)
COLUMNS = ("dataset", "id", "question", "input", "ref_output", "gt_output", "tok_input", "tok_ref_output",
           "stop_sequence", "tok_stop_sequence", "tok_input_len", "tok_ref_output_len")
PROMPT = "<s> [INST] {} [/INST]"
GSM8K_INSTRUCTION = ("As an expert problem solver solve step by step the following mathematical questions.\n\n"
                     "Q: {}\nA:")
MBXP_INSTRUCTION = "Complete the following code. Be concise, don't output anything that isn't necessary.\n{}"


def read(path: Path, fix: str):
    from code.common.fileio import read_dataframe

    df = read_dataframe(path, fix, ("dataset", "id", "tok_input", "gt_output"))
    odd = sorted(set(map(str, df["dataset"])) - set(KINDS))
    if odd:
        raise MissingDataError(f"{path}: unknown sub-dataset(s) {', '.join(odd)} (expected {', '.join(KINDS)})", fix)
    return df


def stops(df) -> list[list[int]]:
    """The stop sequence of each sample: MBXP rows stop after theirs (the dataset's ``tok_stop_sequence``,
    else the reference's constant); the others end at the EOS only."""
    has = "tok_stop_sequence" in df.columns
    out = []
    for kind, seq in zip(df["dataset"], df["tok_stop_sequence"] if has else [None] * len(df)):
        out.append([int(t) for t in (seq if seq is not None and len(seq) else MBXP_STOP)] if kind == "MBXP" else [])
    return out


# --- the tiny set -------------------------------------------------------------------------------------
# (language, entry point, prompt code, solution, test code): small functions and tests in each language,
# written the way MBXP's are (the test calls the function and fails by exit code / exception).
MBXP_TINY = (
    ("python", "add_two", "def add_two(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n",
     "def add_two(a, b):\n    return a + b\n",
     "\ndef check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"),
    ("python", "is_even", "def is_even(n):\n    \"\"\"True when n is even.\"\"\"\n",
     "def is_even(n):\n    return n % 2 == 0\n",
     "\ndef check(candidate):\n    assert candidate(4) is True\n    assert candidate(7) is False\n"),
    ("python", "max_of_list", "def max_of_list(xs):\n    \"\"\"The largest element of xs.\"\"\"\n",
     "def max_of_list(xs):\n    return max(xs)\n",
     "\ndef check(candidate):\n    assert candidate([3, 9, 2]) == 9\n"),
    ("javascript", "addTwo", "/**\n * Return the sum of a and b.\n */\nconst addTwo = function (a, b) {\n",
     "const addTwo = function (a, b) {\n  return a + b;\n};\n",
     "\nconst assert = require('node:assert');\nassert.deepEqual(addTwo(2, 3), 5);\n"),
    ("javascript", "reverseString", "/**\n * Reverse a string.\n */\nconst reverseString = function (s) {\n",
     "const reverseString = function (s) {\n  return s.split('').reverse().join('');\n};\n",
     "\nconst assert = require('node:assert');\nassert.deepEqual(reverseString('abc'), 'cba');\n"),
    ("cpp", "addTwo", "#include <bits/stdc++.h>\nusing namespace std;\n// Return the sum of a and b.\nint addTwo(int a, int b) {\n",
     "#include <bits/stdc++.h>\nusing namespace std;\nint addTwo(int a, int b) {\n    return a + b;\n}\n",
     "\nint main() {\n    if (addTwo(2, 3) != 5) { return 1; }\n    return 0;\n}\n"),
    ("php", "addTwo", "<?php\n/**\n * Return the sum of a and b.\n */\nfunction addTwo($a, $b) {\n",
     "<?php\nfunction addTwo($a, $b) {\n    return $a + $b;\n}\n",
     "\nfunction compare($x, $y) { return $x == $y; }\nif (!compare(addTwo(2, 3), 5)) { throw new Exception(\"Test failed!\"); }\n"),
    ("ruby", "add_two", "# Return the sum of a and b.\ndef add_two(a, b)\n",
     "def add_two(a, b)\n  a + b\nend\n",
     "\nraise 'Test failed!' unless add_two(2, 3) == 5\n"),
    ("typescript", "addTwo", "/**\n * Return the sum of a and b.\n */\nfunction addTwo(a: number, b: number): number {\n",
     "function addTwo(a: number, b: number): number {\n  return a + b;\n}\n",
     "\ndeclare var require: any;\nconst assert = require('assert');\nassert.deepEqual(addTwo(2, 3), 5);\n"),
)


def tiny_samples(n: int, seed: int) -> list[dict]:
    """``n`` seeded samples, the three kinds in turn (OpenOrca, GSM8K, MBXP)."""
    import numpy as np

    from code.common.llm.tiny import TextGen

    g = TextGen(seed)
    rng = np.random.default_rng(seed)
    systems = ["", "You are a helpful assistant.", "You are an AI assistant. Answer briefly."]
    out = []
    for i in range(n):
        kind = KINDS[i % 3]
        if kind == "OpenOrca":
            sp = systems[(i // 3) % len(systems)]
            q = g.paragraph(int(rng.integers(1, 7)))
            text = PROMPT.format(f"{sp}\n\n{q}" if sp else q)
            out.append({"dataset": kind, "id": f"orca.{i}", "question": q, "input": text,
                        "ref_output": g.paragraph(int(rng.integers(1, 3))), "gt_output": ""})
        elif kind == "GSM8K":
            a, b = int(rng.integers(2, 60)), int(rng.integers(2, 60))
            q = f"{g.sentence()} There are {a} {g.vocab[int(rng.integers(50))]}s and {b} more arrive. How many now?"
            out.append({"dataset": kind, "id": f"train.{i}", "question": q, "input": PROMPT.format(
                GSM8K_INSTRUCTION.format(q)), "ref_output": f"{a} + {b} = {a + b}. The answer is {a + b}.",
                "gt_output": str(a + b)})
        else:
            lang, entry, prompt_code, solution, test = MBXP_TINY[(i // 3) % len(MBXP_TINY)]
            fence = f"```{lang}\n{prompt_code}```"
            out.append({"dataset": kind, "id": f"{lang}_{entry}", "question": prompt_code,
                        "input": PROMPT.format(MBXP_INSTRUCTION.format(fence)), "ref_output": solution + "```\n",
                        "gt_output": test})
    return out


def write_tiny(out_dir: Path, tokenizer, samples: list[dict], stop: list[int]) -> Path:
    """The samples as the reference's DataFrame (every column), pickled and staged."""
    import pandas as pd

    from code.common.fileio import staged_path

    rows = []
    for s in samples:
        tok_in = tokenizer(s["input"], add_special_tokens=False)["input_ids"]
        tok_ref = tokenizer(s["ref_output"], add_special_tokens=False)["input_ids"]
        mbxp = s["dataset"] == "MBXP"
        rows.append({**s, "tok_input": tok_in, "tok_ref_output": tok_ref,
                     "stop_sequence": "\n```\n" if mbxp else "</s>", "tok_stop_sequence": list(stop) if mbxp else [2],
                     "tok_input_len": len(tok_in), "tok_ref_output_len": len(tok_ref)})
    path = Path(out_dir) / DATASET_PKL
    with staged_path(path, suffix=".pkl") as tmp:
        pd.DataFrame(rows, columns=list(COLUMNS)).to_pickle(tmp)
    return path
