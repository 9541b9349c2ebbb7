"""The GPT-OSS-120B data as the reference reads it (``language/gpt-oss-120b``: run_mlperf.py,
utils/tokenization.py load_tokenized_dataset, eval_mlperf_accuracy.py, eval_accuracy.py).

MLCommons ships DataFrames (Parquet; the reference also takes a pickle) whose prompts are already token ids in the
harmony chat format (system header with ``Reasoning: high|low``, the question as a user message, then
``<|start|>assistant``): the column ``tok_input`` (before v4.0) or ``input_tokens`` (v4.0 on), read in that order.
Scoring reads ``dataset`` (the sub-dataset, lower-cased: ``aime25``, ``gpqa_diamond``, ``livecodebench_v6``;
the first of the scorer families its name contains picks the scorer) and ``ground_truth``.

* ``acc/acc_eval_ref.parquet``: 4,395 accuracy samples (AIME25 30 x 8, GPQA-Diamond 198 x 5, LiveCodeBench-v6
  1,055 x 3, reasoning effort high); the score weighs each sub-dataset by 1 / its repeats (REPEATS).
* ``perf/perf_eval_ref.parquet``: 6,396 performance samples (reasoning effort low).

The tiny set has the same files and columns: seeded synthetic AIME25-like (integer) and GPQA-Diamond-like
(letters A-D) questions in the harmony format over the shared tiny tokenizer, with the harmony markers as special
tokens; it has no LiveCodeBench part (its programs are judged by running LiveCodeBench's tests, which this
harness does not do). The performance file holds the same questions with ``Reasoning: low``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from code.common.errors import MissingDataError

ACCURACY_FILE = "acc/acc_eval_ref.parquet"
PERFORMANCE_FILE = "perf/perf_eval_ref.parquet"
COMPLIANCE_GPQA_FILE = "acc/acc_eval_compliance_gpqa.parquet"     # TEST07's set
CALIBRATION_FILE = "acc/calibration_unique_sampled1024.parquet"
TOKEN_COLUMNS = ("tok_input", "input_tokens")       # load_tokenized_dataset's order
# eval_mlperf_accuracy.py DATASET_REPEATS: a dataset's questions appear this many times in the accuracy set
REPEATS = {"aime25": 8, "gpqa_diamond": 5, "livecodebench_v6": 3}
FAMILIES = ("aime", "gpqa", "livecodebench")        # what the real sets hold (eval_accuracy.py scorer keys)

# the harmony format (openai-harmony's rendering of a system + user conversation, generation prompt last)
HARMONY_SYSTEM = ("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
                  "Knowledge cutoff: 2024-06\nCurrent date: 2025-09-30\n\nReasoning: {effort}\n\n"
                  "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>")
HARMONY_USER = "<|start|>user<|message|>{question}<|end|><|start|>assistant"
EFFORT = {"accuracy": "high", "performance": "low"}

TINY_FAMILIES = ("aime25", "gpqa_diamond")
# the harmony markers as special tokens of the tiny tokenizer; a channel header is one token, and a final channel
# opening with a letter too, so that a random model emits them whole (the reference's extraction reads the final
# channel only where its header is in the text, and that header is a special token: a scorer that drops special
# tokens reads another answer)
TINY_SPECIALS = ("<|start|>", "<|end|>", "<|message|>", "<|return|>",
                 "<|channel|>analysis<|message|>", "<|channel|>final<|message|>")
TINY_FINALS = tuple(f"<|channel|>final<|message|>{c} " for c in "ABCD")
# whole answers as single tokens of the tiny vocabulary (as DeepSeek-R1's tiny set has them)
TINY_ANSWERS = tuple(f"Answer: {c} " for c in "ABCD0123456789")


def harmony_prompt(question: str, effort: str) -> str:
    """The prompt text a harmony renderer makes of one user question at ``effort`` (high | low)."""
    return HARMONY_SYSTEM.format(effort=effort) + HARMONY_USER.format(question=question)


def token_column(df) -> str:
    for c in TOKEN_COLUMNS:
        if c in df.columns:
            return c
    raise KeyError("input_tokens")


def read(path: Path, fix: str, columns: Sequence[str] = ("dataset", "ground_truth")):
    """A reference DataFrame (Parquet, or a pickle) holding ``columns`` and a token column; a missing or unreadable
    file or a missing column is a one-line MissingDataError naming it, with ``fix``."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise MissingDataError(f"dataset not found: {path}", fix)
    if path.suffix != ".parquet":
        from code.common.fileio import read_dataframe

        df = read_dataframe(path, fix, columns)
    else:
        try:
            df = pd.read_parquet(path)
        except Exception as e:  # noqa: BLE001 - any unreadable file is the same user error
            raise MissingDataError(f"{path}: not a readable Parquet file ({type(e).__name__}: "
                                   f"{str(e).splitlines()[0][:120] if str(e) else ''})", fix) from None
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise MissingDataError(f"{path}: no column(s) {', '.join(missing)} (has {', '.join(map(str, df.columns))})",
                                   fix)
    try:
        token_column(df)
    except KeyError:
        raise MissingDataError(f"{path}: no token column ({' or '.join(TOKEN_COLUMNS)}; has "
                               f"{', '.join(map(str, df.columns))})", fix) from None
    return df


def prompts_of(df, path: Path, fix: str) -> list[list[int]]:
    """The token ids of every row (a missing one is an error, as in load_tokenized_dataset)."""
    col = token_column(df)
    out = []
    for i, x in enumerate(df[col]):
        if x is None or (isinstance(x, float) and x != x):
            raise MissingDataError(f"{path}: row {i} has no {col}", fix)
        out.append([int(t) for t in x])
    return out


def tiny_samples(n: int, seed: int) -> list[dict]:
    """``n`` seeded questions, the tiny families in turn, each with a provisional ground truth (download_data
    replaces it with what the reference's extraction reads in plain generate's answer)."""
    import numpy as np

    from code.common.llm.tiny import TextGen

    g = TextGen(seed)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        fam = TINY_FAMILIES[i % len(TINY_FAMILIES)]
        q = g.paragraph(int(rng.integers(1, 3)))
        if fam == "aime25":
            text = f"{q} Put your final answer within \\boxed{{}}."
            truth = str(int(rng.integers(0, 1000)))
        else:
            options = "\n".join(f"({c}) {g.sentence(3, 7)}" for c in "ABCD")
            text = f"{q}\n{options}\nAnswer with the letter of the right option."
            truth = "ABCD"[int(rng.integers(4))]
        out.append({"dataset": fam, "question": text, "ground_truth": truth})
    return out


def write(path: Path, samples: Sequence[dict], tokenizer, effort: str) -> Path:
    """The samples as the reference's DataFrame (Parquet): the harmony prompt's text and token ids beside them."""
    import pandas as pd

    from code.common.fileio import staged_path

    rows = []
    for s in samples:
        text = harmony_prompt(s["question"], effort)
        rows.append({**s, "text_input": text, "input_tokens": [int(t) for t in tokenizer(text)["input_ids"]]})
    with staged_path(Path(path), suffix=".parquet") as tmp:
        pd.DataFrame(rows, columns=["dataset", "question", "ground_truth", "text_input", "input_tokens"]).to_parquet(tmp)
    return Path(path)
