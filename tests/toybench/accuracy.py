"""Top-1 accuracy from mlperf_log_accuracy.json, written as the classification benchmarks' accuracy.txt
(``accuracy=...%, good=..., total=...``: the line the submission checker's "acc" pattern reads)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from code.common.fileio import write_text
from code.common.results.loadgen_logs import first_answers


def score(accuracy_log: str | Path, labels: np.ndarray, out: Path, target: float, tiny: bool) -> dict:
    """``target``: the round's minimum top-1 in percent; the tiny variant is judged by the test (100%)."""
    preds = {i: int(a[0]) for i, a in first_answers(accuracy_log, np.int32).items()}
    good = sum(1 for i, p in preds.items() if p == labels[i])
    total = len(preds)
    acc = 100.0 * good / max(1, total)
    passed = None if tiny else acc >= target
    text = f"accuracy={acc:.3f}%, good={good}, total={total}\n"
    text += ("note: tiny variant; labels are the fp32 model's predictions (100% = faithful pipeline)\n" if tiny
             else f"{'PASS' if passed else 'FAIL'}: top1 {acc:.3f}% vs target >= {target:.3f}%\n")
    write_text(out, text)
    return {"metrics": {"acc": round(acc, 4), "good": good, "total": total}, "passed": passed, "text": text}
