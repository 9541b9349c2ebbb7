"""NE, accuracy and GAUC of mlperf_log_accuracy.json, as the reference's accuracy.py computes them (torchrec's
NE / Accuracy / GAUC metric computations over every logged answer, batch 1, lifetime values).

An accuracy-mode answer is float32 [ts_idx, query_idx, predictions (n), labels (n), weights (n), n]; the first
answer of a repeated qsl_idx counts. Definitions (torchrec.metrics, lifetime):
  NE       = sum(w * CE(label, clamp(pred, eta, 1 - eta))) / (pos * H(pos / (pos + neg)))   in log2, eta = 1e-12,
             pos = sum(w * label), neg = sum(w * (1 - label)) (the ratio's base cancels)
  accuracy = sum(w * ((pred >= 0.5) == label)) / sum(w)
  GAUC     = mean over requests of the request's AUC (rank form, candidates sorted by prediction, descending),
             a request counting only when its labels are mixed and its predictions not all equal; tied
             predictions are ranked in log order here, in torch.argsort's order by torchrec (no half credit)
accuracy.txt carries the lines the checker reads (``metric/lifetime_ne/rating: <value>`` ...) and the verdict.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from code.common.errors import RunError
from code.common.fileio import write_text
from code.common.results.loadgen_logs import read_accuracy_entries
from code.dlrm_v3 import constants as K

FIX = "rerun the accuracy test (--test_mode=AccuracyOnly); if it repeats, check the engine (--force_rebuild)"
ETA = 1e-12


def parse(data: np.ndarray) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray]:
    """(ts_idx, query_idx, predictions, labels, weights) of an accuracy-mode answer."""
    n = int(data[-1])
    if data.size != 3 + 3 * n:
        raise RunError(f"an answer of {data.size} floats: expected 3 + 3 x {n} (its candidate count)", FIX)
    return int(data[0]), int(data[1]), data[2:2 + n], data[2 + n:2 + 2 * n], data[2 + 2 * n:2 + 3 * n]


def answers(entries: list[dict]) -> list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
    seen, out = set(), []
    for e in entries:
        if e["qsl_idx"] in seen:
            continue
        seen.add(e["qsl_idx"])
        out.append(parse(np.frombuffer(bytes.fromhex(e["data"]), np.float32)))
    return out


def group_auc(pred: np.ndarray, label: np.ndarray) -> float | None:
    """torchrec's gauc of one request (None: skipped, its labels all one class or its predictions all equal)."""
    n, pos = pred.shape[0], float(label.sum())
    if not (1 <= pos < n) or np.all(pred == pred[0]):
        return None
    order = np.argsort(-pred.astype(np.float64), kind="stable")
    rank = np.arange(n, 0, -1, dtype=np.float64)            # n for the highest prediction
    num = float((label[order] * rank).sum()) - pos * (pos + 1) / 2
    return num / (pos * (n - pos) + 1e-10)


def metrics(items: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]) -> dict[str, float]:
    if not items:
        raise RunError("accuracy log: no answers", FIX)
    p = np.concatenate([i[2] for i in items]).astype(np.float64)
    y = np.concatenate([i[3] for i in items]).astype(np.float64)
    w = np.concatenate([i[4] for i in items]).astype(np.float64)
    if not np.isfinite(p).all():
        raise RunError("accuracy log: a non-finite click probability", FIX)
    pc = np.clip(p, ETA, 1 - ETA)
    ce = float(np.sum(-w * (y * np.log2(pc) + (1 - y) * np.log2(1 - pc))))
    pos, neg = float(np.sum(w * y)), float(np.sum(w * (1 - y)))
    mean = min(max(pos / (pos + neg), ETA), 1 - ETA)
    ne = ce / (-pos * np.log2(mean) - neg * np.log2(1 - mean))
    acc = float(np.sum(w * ((p >= 0.5) == (y > 0)))) / float(np.sum(w))
    aucs = [a for a in (group_auc(i[2], i[3]) for i in items) if a is not None]
    gauc = (sum(aucs) + 1e-9) / (len(aucs) + 2e-9)
    return {"DLRM_NE": float(ne), "DLRM_ACC": acc, "DLRM_AUC": float(gauc), "requests": len(items),
            "candidates": int(p.size), "gauc_requests": len(aucs)}


def score(accuracy_log: str | Path, out: Path, targets: dict[str, float], check_labels=None,
          tiny: bool = False) -> dict:
    """``targets``: the round's minimums (DLRM_NE, DLRM_ACC, DLRM_AUC); ``check_labels(ts_idx, query_idx)``:
    the data set's labels of that request, compared with the logged ones."""
    items = answers(read_accuracy_entries(accuracy_log))
    if check_labels is not None:
        for t, q, _, lab, _ in items:
            want = check_labels(t, q)
            if want.shape != lab.shape or not np.array_equal(want.astype(np.float32), lab):
                raise RunError(f"accuracy log: the labels of request ({t}, {q}) are not the data set's", FIX)
    m = metrics(items)
    passed = all(m[k] >= v for k, v in targets.items())
    text = "".join(f"{K.METRIC_LINES[k]}: {m[k]:.6f}\n" for k in ("DLRM_NE", "DLRM_ACC", "DLRM_AUC"))
    text += f"requests={m['requests']}, candidates={m['candidates']}, gauc_requests={m['gauc_requests']}\n"
    if tiny:
        text += "note: tiny variant; labels are the tiny model's own decisions at 0.5 with a seeded share flipped\n"
    text += ("PASS" if passed else "FAIL") + ": " + ", ".join(
        f"{k} {m[k]:.5f} vs >= {v:.5f}" for k, v in targets.items()) + "\n"
    write_text(out, text)
    return {"metrics": {k: round(v, 6) if isinstance(v, float) else v for k, v in m.items()}, "passed": passed,
            "text": text}
