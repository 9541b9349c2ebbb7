"""Word error rate as the reference's speech2text/accuracy_eval.py computes it, reported as its accuracy metric.

Per log entry (every entry, repeats included, as the official script iterates them): the answer's int64 indices
into dataset.LABELS become text; the reference transcript is the manifest's, with the characters outside LABELS
dropped (its Manifest.parse_transcript). Both go through openai-whisper's ``EnglishTextNormalizer`` (the library
the reference imports), are split on whitespace, and aligned greedily: equal words match; else a run of up to 3
reference words whose concatenation is the hypothesis word (or the other way round) counts as one match; else a
substitution; the leftovers are deletions / insertions. The errors of a sample are the Levenshtein distance between
the two aligned lists (spaces removed); WER = all errors / all reference words, accuracy = (1 - WER) x 100.

accuracy.txt's first line is the reference's own output line, which the submission checker's ACCURACY pattern reads:
``Word Error Rate: 2.0671%, accuracy=97.9329%``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from code.common.errors import RunError
from code.common.fileio import write_text
from code.common.results.loadgen_logs import read_accuracy_entries
from code.whisper import dataset

FIX = "rerun with --test_mode=AccuracyOnly (each result must be the answer's int64 character indices)"


def normalizer():
    """openai-whisper's English normaliser (whisper/normalizers/english.py), the reference's."""
    from whisper.normalizers import EnglishTextNormalizer

    return EnglishTextNormalizer()


def levenshtein(a: Sequence, b: Sequence) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def _concat_match(ref: list[str], hyp: list[str], i: int, j: int) -> tuple[int, int] | None:
    """(reference words, hypothesis words) of a concatenation match at (i, j): k = 1..3, the k reference words
    joined tried before the k hypothesis words joined."""
    for k in range(1, 4):
        if i + k <= len(ref) and "".join(ref[i:i + k]) == hyp[j]:
            return k, 1
        if j + k <= len(hyp) and "".join(hyp[j:j + k]) == ref[i]:
            return 1, k
    return None


def sample_errors(hyp: list[str], ref: list[str]) -> tuple[int, int]:
    """(errors, reference words) of one sample, concatenations aligned first (see the module doc)."""
    ref_al, hyp_al = [], []
    i = j = 0
    while i < len(ref) and j < len(hyp):
        m = (1, 1) if ref[i] == hyp[j] else _concat_match(ref, hyp, i, j) or (1, 1)
        ref_al.append("".join(ref[i:i + m[0]]))
        hyp_al.append("".join(hyp[j:j + m[1]]))
        i, j = i + m[0], j + m[1]
    ref_al += ref[i:]
    hyp_al += hyp[j:]
    return levenshtein(ref_al, hyp_al), len(ref)


def wer(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[float, int, int]:
    norm = normalizer()
    errors = words = 0
    for h, r in zip(hypotheses, references, strict=True):
        e, n = sample_errors(norm(h).split(), norm(r).split())
        errors += e
        words += n
    return (errors / words if words else 0.0), errors, words


def read_log(accuracy_log: str | Path, count: int) -> list[tuple[int, str]]:
    """(qsl_idx, answer text) per entry, in log order."""
    out = []
    for e in read_accuracy_entries(accuracy_log, FIX):
        idx = int(e["qsl_idx"])
        if not 0 <= idx < count:
            raise RunError(f"{accuracy_log}: qsl_idx {idx} is outside the {count} samples", FIX)
        data = bytes.fromhex(e["data"])
        if len(data) % 8:
            raise RunError(f"{accuracy_log}: qsl_idx {idx} holds {len(data)} bytes, not int64 character indices", FIX)
        ids = np.frombuffer(data, np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= len(dataset.LABELS)):
            raise RunError(f"{accuracy_log}: qsl_idx {idx} holds value {int(ids.max())}, outside the "
                           f"{len(dataset.LABELS)} labels", FIX)
        out.append((idx, dataset.from_labels(ids)))
    return out


def score(accuracy_log: str | Path, transcripts: Sequence[str], out: Path, target: float) -> dict:
    """Score the log against the manifest's transcripts; write accuracy.txt (the reference's line first)."""
    entries = read_log(accuracy_log, len(transcripts))
    refs = [dataset.transcript_labels(transcripts[i]) for i, _ in entries]
    w, errors, words = wer([h for _, h in entries], refs)
    acc = (1 - w) * 100
    line = f"Word Error Rate: {w * 100}%, accuracy={acc}%"
    passed = acc >= target
    text = (f"{line}\n# {len(entries)} samples, {errors} word errors in {words} reference words; "
            f"target accuracy {target:.4f}: {'PASS' if passed else 'FAIL'}\n")
    write_text(out, text)
    return {"metrics": {"ACCURACY": acc, "WER": w * 100, "samples": len(entries)}, "passed": passed, "text": text}
