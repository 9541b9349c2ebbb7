"""Per-sample timestamps as the SUT saw them: what ``make report`` draws latency histograms,
percentile curves, throughput over time and TTFT/TPOT distributions from.

LoadGen's own logs hold only percentiles (mlperf_log_detail.txt) unless its trace is on, and the trace
is too large for full-length runs. So the SUTs record, per sample, when it reached the SUT
(``issue_queries``), when its first token existed (LLMs) and when it was handed back
(``QuerySamplesComplete``). These are SUT-side figures: LoadGen's latencies start at its own
scheduled issue time, so they are the same or a little longer; the report draws LoadGen's
percentiles next to them.

Cost on the hot path: one ``time.monotonic()`` and one ``list.append`` per batch (per sample for
LLMs), no lock (``list.append`` is atomic under the GIL). Memory: a tuple per batch; expanded to
arrays only by ``save``. Times are ``time.monotonic()`` seconds; the saved file holds them relative
to the first issue.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

FILE = "sample_timeline.npz"


class Timeline:
    """Thread-safe recorder: any worker thread may call ``batch`` / ``sample`` at any time."""

    def __init__(self) -> None:
        self._batches: list[tuple] = []     # (issued: float | list[float], done: float, n)
        self._samples: list[tuple] = []     # (issued, first, done, tokens): LLM samples

    def batch(self, issued: float | Sequence[float], done: float, n: int) -> None:
        """``n`` samples completed at ``done``; ``issued`` is one time for all or one per sample."""
        self._batches.append((issued, done, n))

    def sample(self, issued: float, first: float, done: float, tokens: int) -> None:
        self._samples.append((issued, first, done, tokens))

    def __len__(self) -> int:
        return sum(b[2] for b in self._batches) + len(self._samples)

    def arrays(self) -> dict[str, np.ndarray]:
        """issue_s, done_s (and first_s, tokens for LLM samples), sorted by completion, relative to
        the first issue."""
        if self._samples:
            a = np.array(self._samples, dtype=np.float64).reshape(-1, 4)
            out = {"issue_s": a[:, 0], "first_s": a[:, 1], "done_s": a[:, 2], "tokens": a[:, 3].astype(np.int32)}
        else:
            issue, done = [], []
            for issued, d, n in list(self._batches):
                issue.extend([issued] * n if isinstance(issued, (int, float)) else issued)
                done.extend([d] * n)
            out = {"issue_s": np.array(issue, dtype=np.float64), "done_s": np.array(done, dtype=np.float64)}
        if out["issue_s"].size:
            t0 = out["issue_s"].min()
            order = np.argsort(out["done_s"], kind="stable")
            out = {k: (v[order] - t0 if k.endswith("_s") else v[order]) for k, v in out.items()}
        return out

    def save(self, folder: str | Path) -> dict | None:
        """Write ``sample_timeline.npz`` (staged, then renamed) and return its summary for metadata.json;
        None when nothing completed."""
        arrays = self.arrays()
        n = int(arrays["issue_s"].size)
        if not n:
            return None
        folder = Path(folder)
        tmp = folder / f".{FILE}.partial.npz"
        np.savez_compressed(tmp, **arrays)
        tmp.replace(folder / FILE)
        return {"file": FILE, "samples": n, "source": "SUT (issue_queries to QuerySamplesComplete)",
                "span_s": round(float(arrays["done_s"].max()), 6)}


def load(folder: str | Path) -> dict[str, np.ndarray] | None:
    """A run folder's timeline arrays, or None when it has none (runs from before it existed)."""
    p = Path(folder) / FILE
    if not p.exists():
        return None
    with np.load(p) as z:
        return {k: z[k] for k in z.files}
