"""SQuAD v1.1 F1 / EM of an mlperf_log_accuracy.json, as the reference's accuracy-squad.py scores it.

Each log entry holds one feature's logits, float32 (seq, 2): start and end stacked per token (the
reference's onnxruntime_SUT output); shorter outputs are padded to 384 with -10000, as
accuracy-squad.py does. Post-processing and metrics: code.bert.squad (n-best 20, max answer 30
tokens, get_final_text, evaluate-v1.1). accuracy.txt's first line is evaluate-v1.1.py's own output,
``{"exact_match": 81.0, "f1": 88.3}``, which the submission checker's F1 pattern reads.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from code.bert import squad
from code.common.errors import RunError
from code.common.fileio import write_text
from code.common.results.loadgen_logs import read_accuracy_entries

FIX = "rerun with --test_mode=AccuracyOnly (each result must be a feature's (384, 2) float32 start/end logits)"


def read_log(accuracy_log: str | Path, n_features: int) -> dict[int, tuple[list, list]]:
    """feature index -> (start logits, end logits), 384 each; a malformed entry is a one-line RunError.
    A feature logged more than once counts with its last entry, as accuracy-squad.py's unique_id map keeps it."""
    entries = read_accuracy_entries(accuracy_log, FIX)
    out: dict[int, tuple[list, list]] = {}
    for e in entries:
        idx = int(e["qsl_idx"])
        if not 0 <= idx < n_features:
            raise RunError(f"{accuracy_log}: qsl_idx {idx} is outside the {n_features} features", FIX)
        data = bytes.fromhex(e["data"])
        if len(data) % 8 or not 0 < len(data) <= squad.MAX_SEQ * 8:
            raise RunError(f"{accuracy_log}: feature {idx} holds {len(data)} bytes, not (seq <= {squad.MAX_SEQ}, 2) "
                           "float32 logits", FIX)
        logits = np.frombuffer(data, np.float32).reshape(-1, 2)
        if not np.isfinite(logits).all():
            raise RunError(f"{accuracy_log}: feature {idx} holds NaN or infinite logits",
                           "rebuild the engine (--force_rebuild) and check the model")
        start = np.full(squad.MAX_SEQ, -10000.0)
        end = np.full(squad.MAX_SEQ, -10000.0)
        start[:len(logits)] = logits[:, 0]
        end[:len(logits)] = logits[:, 1]
        out[idx] = (start.tolist(), end.tolist())
    return out


def score(accuracy_log: str | Path, examples, features, out: Path, target: float, tiny: bool = False) -> dict:
    logits = read_log(accuracy_log, len(features))
    preds = squad.predict(examples, features, logits)
    m = squad.evaluate(examples, preds)
    text = json.dumps({"exact_match": m["exact_match"], "f1": m["f1"]}) + "\n"
    text += f"features={len(logits)}, total={len(features)}, questions={len(examples)}\n"
    passed = None if tiny else m["f1"] >= target
    if tiny:
        text += ("note: tiny variant; the ground truth is the fp32 torch reference's own best span per question "
                 "(100.0 = faithful pipeline)\n")
    else:
        text += f"{'PASS' if passed else 'FAIL'}: F1 {m['f1']:.3f} vs target >= {target:.3f}\n"
    write_text(out, text)
    return {"metrics": {"F1": round(m["f1"], 6), "exact_match": round(m["exact_match"], 6),
                        "features": len(logits), "questions": len(examples)},
            "passed": passed, "text": text}
