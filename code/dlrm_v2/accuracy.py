"""ROC AUC from mlperf_log_accuracy.json, as the reference's tools/accuracy-dlrm.py computes it.

Each logged sample (one aggregated user query) is float32 pairs (click probability, label) per item,
the layout accuracy-dlrm.py reads by default (``reshape((query_length, 2))``, the log carrying the
ground truth); the first entry of a repeated qsl_idx counts. The score uses the log's predictions and
our own labels of the query's items (trace order), and checks the log's labels agree with them.
accuracy.txt carries the reference's line ``AUC=<percent>%, accuracy=..., good=..., total=..., queries=...``
(the submission checker reads ``AUC``) and the PASS/FAIL verdict against the round's target.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from code.common.errors import RunError
from code.common.fileio import write_text
from code.common.results.loadgen_logs import read_accuracy_entries

FIX = "rerun the accuracy test (--test_mode=AccuracyOnly); if it repeats, check the engine (--force_rebuild)"


def read_log(accuracy_log: str | Path) -> list[dict]:
    return read_accuracy_entries(accuracy_log)


def predictions(entries: list[dict], offsets: np.ndarray) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(qsl indices in log order, predictions, logged labels), items concatenated in that order."""
    seen, order, preds, labs = set(), [], [], []
    n = len(offsets) - 1
    for e in entries:
        idx = int(e["qsl_idx"])
        if idx in seen:
            continue
        seen.add(idx)
        if not 0 <= idx < n:
            raise RunError(f"accuracy log names sample {idx}; the set has {n} queries", FIX)
        data = np.frombuffer(bytes.fromhex(e["data"]), np.float32)
        items = int(offsets[idx + 1] - offsets[idx])
        if data.size != 2 * items:
            raise RunError(f"sample {idx}: {data.size} floats logged, expected {2 * items} "
                           f"(probability, label) for its {items} items", FIX)
        data = data.reshape(items, 2)
        if not np.isfinite(data[:, 0]).all():
            raise RunError(f"sample {idx}: non-finite click probability", FIX)
        order.append(idx)
        preds.append(data[:, 0])
        labs.append(data[:, 1])
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.float32))
    return order, cat(preds), cat(labs)


def score(accuracy_log: str | Path, offsets: np.ndarray, labels_of: Callable[[int, int], np.ndarray], out: Path,
          target: float, tiny: bool = False) -> dict:
    """``labels_of(start, end)``: the labels of items [start, end); ``target``: the round's AUC in percent."""
    from sklearn.metrics import roc_auc_score

    order, preds, logged = predictions(read_log(accuracy_log), offsets)
    targets = np.concatenate([labels_of(int(offsets[i]), int(offsets[i + 1])) for i in order]) if order \
        else np.zeros(0, np.float32)
    if targets.size and not np.array_equal(targets.astype(np.float32), logged):
        bad = int(np.argmax(targets.astype(np.float32) != logged))
        raise RunError(f"accuracy log: the label of item {bad} (in log order) is not the data set's", FIX)
    if len(np.unique(targets)) < 2:
        raise RunError(f"accuracy log: {len(order)} queries, labels of a single class: AUC is undefined",
                       "rerun the accuracy test over the whole set (--test_mode=AccuracyOnly)")
    auc = 100.0 * float(roc_auc_score(targets, preds))
    good = int((preds.round() == targets).sum())
    total = int(targets.size)
    passed = auc >= target
    text = (f"AUC={auc:.3f}%, accuracy={100.0 * good / total:.3f}%, good={good}, total={total}, "
            f"queries={len(order)}\n")
    if tiny:
        text += ("note: tiny variant; labels are drawn from the tiny model's own (calibrated) click "
                 "probabilities\n")
    text += f"{'PASS' if passed else 'FAIL'}: AUC {auc:.3f}% vs target >= {target:.3f}%\n"
    write_text(out, text)
    return {"metrics": {"AUC": round(auc, 6), "accuracy": round(100.0 * good / total, 6), "items": total,
                        "queries": len(order)}, "passed": passed, "text": text}
