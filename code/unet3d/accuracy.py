"""Mean composite DICE (kidney, tumour) from mlperf_log_accuracy.json, as the reference's accuracy_kits.py.

Each log entry holds one case's segmentation, D*H*W uint8 labels (C order, the preprocessed
volume's shape from preprocessed_files.pkl). Per case and class c in (kidney=1, tumour=2):
DICE = (2|P∩T| + 1e-6) / (|P| + |T| + 1e-6) against the preprocessed ground truth; composite = the
mean of the two; the reported figures are the means over cases (a NaN counts as 0, as the
reference's summary does). accuracy.txt's first line is the reference's own output line, which the
submission checker's DICE pattern reads: ``Accuracy: mean = 0.86170, kidney = 0.9347, tumor = 0.7887``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from code.common.errors import RunError
from code.common.fileio import write_text
from code.common.results.loadgen_logs import read_accuracy_entries

FIX = "rerun with --test_mode=AccuracyOnly (each result must be the case's D*H*W uint8 labels)"


def dice(pred: np.ndarray, gt: np.ndarray) -> tuple[float, float]:
    out = []
    for c in (1, 2):
        p, t = pred == c, gt == c
        inter = float(np.count_nonzero(p & t))
        out.append((2.0 * inter + 1e-6) / (float(np.count_nonzero(p)) + float(np.count_nonzero(t)) + 1e-6))
    return out[0], out[1]


def read_log(accuracy_log: str | Path, cases: list[str], shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    """case -> (D, H, W) uint8 prediction; a result of the wrong size or with values outside 0..2 is a
    one-line RunError naming the entry (the output was not this benchmark's uint8 segmentation)."""
    entries = read_accuracy_entries(accuracy_log, FIX)
    out: dict[str, np.ndarray] = {}
    for e in entries:
        idx = int(e["qsl_idx"])
        if not 0 <= idx < len(cases):
            raise RunError(f"{accuracy_log}: qsl_idx {idx} is outside the {len(cases)} cases", FIX)
        case = cases[idx]
        if case in out:
            continue
        shape = tuple(int(s) for s in shapes[case])[-3:]
        data = bytes.fromhex(e["data"])
        want = int(np.prod(shape))
        if len(data) != want:
            kind = f"{len(data) // want}-byte values?" if len(data) % want == 0 and len(data) > want else "wrong shape"
            raise RunError(f"{accuracy_log}: {case} (qsl_idx {idx}) holds {len(data)} bytes, expected {want} = "
                           f"{'x'.join(map(str, shape))} uint8 labels ({kind})", FIX)
        pred = np.frombuffer(data, np.uint8).reshape(shape)
        if int(pred.max(initial=0)) > 2:
            raise RunError(f"{accuracy_log}: {case} (qsl_idx {idx}) holds value {int(pred.max())}, not a class label "
                           "0..2 (not a uint8 segmentation)", FIX)
        out[case] = pred
    return out


def score(accuracy_log: str | Path, cases: list[str], shapes: dict[str, tuple], labels, out: Path,
          target: float, tiny: bool = False) -> dict:
    """``labels(case)`` -> (D, H, W) ground truth; ``target``: the round's minimum mean DICE."""
    preds = read_log(accuracy_log, cases, shapes)      # everything is checked before anything is written
    rows = []
    for case in cases:
        if case not in preds:
            continue
        k, t = dice(preds[case], labels(case))
        rows.append((case, k, t, (k + t) / 2))
    arr = np.nan_to_num(np.array([r[1:] for r in rows], dtype=np.float64)) if rows else np.zeros((1, 3))
    kidney, tumor, mean = (float(x) for x in arr.mean(axis=0))
    text = f"Accuracy: mean = {mean:.5f}, kidney = {kidney:.4f}, tumor = {tumor:.4f}\n"
    text += f"cases={len(rows)}, total={len(cases)}\n"
    passed = None if tiny else mean >= target
    if tiny:
        text += ("note: tiny variant; the ground truth is the fp32 torch reference's own sliding-window "
                 "prediction (1.00000 = faithful pipeline)\n")
    else:
        text += f"{'PASS' if passed else 'FAIL'}: mean DICE {mean:.5f} vs target >= {target:.5f}\n"
    text += "".join(f"{c}: kidney = {k:.6f}, tumor = {t:.6f}, composite = {m:.6f}\n" for c, k, t, m in rows)
    write_text(out, text)
    return {"metrics": {"DICE": round(mean, 6), "kidney": round(kidney, 6), "tumor": round(tumor, 6),
                        "cases": len(rows)}, "passed": passed, "text": text}
