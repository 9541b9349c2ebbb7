"""Synthetic seeded data: raw uint8 "readings", their float32 preprocessing, labels, and the QSL.

Labels are the fp32 model's own predictions on the preprocessed vectors, so a faithful pipeline scores
100% top-1; vectors whose top two logits lie closer than MARGIN are not drawn, so no backend's
rounding can flip a label.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from code.common.benchmark import QSL
from code.common.errors import MissingDataError
from code.toybench import model

SAMPLES = 64
MARGIN = 0.05
SCALE = 64.0


def preprocess(raw: np.ndarray) -> np.ndarray:
    """uint8 readings -> centred float32 vectors, the form the model takes."""
    return np.ascontiguousarray((raw.astype(np.float32) - 127.5) / SCALE)


def synthesize(n: int = SAMPLES) -> tuple[np.ndarray, np.ndarray]:
    """(raw uint8 (n, FEATURES), int64 labels): seeded draws, keeping those with a clear top-1."""
    rng = np.random.default_rng(model.SEED + 1)
    raws, labels = [], []
    while len(raws) < n:
        raw = rng.integers(0, 256, size=(n, model.FEATURES), dtype=np.uint8)
        z = np.sort(model.logits(preprocess(raw)), axis=1)
        keep = z[:, -1] - z[:, -2] > MARGIN
        raws.extend(raw[keep])
        labels.extend(np.argmax(model.logits(preprocess(raw[keep])), axis=1))
    return np.stack(raws[:n]), np.asarray(labels[:n], dtype=np.int64)


def read_labels(path: Path, fix: str) -> np.ndarray:
    """One integer label per line."""
    if not path.is_file():
        raise MissingDataError(f"labels not found: {path}", fix)
    return np.asarray([int(v) for v in path.read_text().split()], dtype=np.int64)


class ToyQSL(QSL):
    """The preprocessed vectors (all in memory: 4 KB); ``load`` keeps LoadGen's performance set contiguous."""

    def __init__(self, vectors_file: Path, labels: np.ndarray, performance_count: int, fix: str):
        from code.common.fileio import load_array

        self.vectors = load_array(vectors_file, fix, dtype=np.float32, shape=(len(labels), model.FEATURES))
        self.labels = labels
        self.total_count = len(self.vectors)
        self.performance_count = min(performance_count, self.total_count)
        self.loaded: np.ndarray | None = None
        self.slot: dict[int, int] = {}

    def load(self, indices: Sequence[int]) -> None:
        idx = np.asarray(sorted(set(indices)), dtype=np.int64)
        self.loaded = np.ascontiguousarray(self.vectors[idx])
        self.slot = {int(i): n for n, i in enumerate(idx)}

    def unload(self, indices: Sequence[int]) -> None:
        self.loaded, self.slot = None, {}

    def batch(self, indices: Sequence[int]) -> np.ndarray:
        return np.ascontiguousarray(self.loaded[[self.slot[i] for i in indices]])
