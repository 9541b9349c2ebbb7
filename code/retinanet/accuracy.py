"""mAP from mlperf_log_accuracy.json with pycocotools, as the reference's accuracy-openimages.py
computes it: each sample's data is float32 (image index, ymin, xmin, ymax, xmax, score, label) per
box with coordinates in [0, 1]; boxes are scaled by the image's height and width from the
annotations, the first entry of a repeated qsl_idx counts, an image without boxes still counts
(its ground truth is missed), labels are category ids as they are (no inverse map), and COCOeval
(bbox) over the images seen gives stats[0]. accuracy.txt holds COCOeval's summary and the
``mAP=<percent>%`` line the submission checker reads."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np

from code.common.errors import RunError
from code.common.fileio import write_text
from code.common.results.loadgen_logs import read_accuracy_entries


def read_log(accuracy_log: str | Path) -> list[dict]:
    return read_accuracy_entries(accuracy_log)


def detections(entries: list[dict], images: list[dict]) -> tuple[list[dict], set[int], dict[int, np.ndarray]]:
    """(pycocotools detections, image ids seen, qsl_idx -> (n, 7) rows). NaN/inf or a wrong-sized
    entry is an error naming the sample."""
    fix = "rerun the accuracy test (--test_mode=AccuracyOnly); if it repeats, check the engine (--force_rebuild)"
    dets, seen_ids, rows = [], set(), {}
    for e in entries:
        idx = int(e["qsl_idx"])
        if idx in rows:
            continue
        if not 0 <= idx < len(images):
            raise RunError(f"accuracy log sample {idx} is outside the {len(images)} annotated images",
                           "score it against the annotations it was run with")
        data = np.frombuffer(bytes.fromhex(e["data"]), np.float32)
        if len(data) % 7:
            raise RunError(f"accuracy log sample {idx}: {len(data)} floats, not 7 per box", fix)
        data = data.reshape(-1, 7)
        if not np.isfinite(data).all():
            raise RunError(f"accuracy log sample {idx} holds NaN or infinite values in its detections", fix)
        rows[idx] = data
        image = images[idx]
        seen_ids.add(image["id"])
        h, w = image["height"], image["width"]
        for _, ymin, xmin, ymax, xmax, score, label in data:
            ymin, xmin, ymax, xmax = ymin * h, xmin * w, ymax * h, xmax * w
            dets.append({"image_id": image["id"], "category_id": int(label), "score": float(score),
                         "bbox": [float(xmin), float(ymin), float(xmax - xmin), float(ymax - ymin)]})
    return dets, seen_ids, rows


def coco_map(annotations: dict, dets: list[dict], image_ids: set[int]) -> tuple[float, str]:
    """(stats[0], COCOeval's printed summary)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        gt = COCO()
        gt.dataset = annotations
        gt.createIndex()
        if not dets:
            return 0.0, "no detections\n"
        dt = gt.loadRes(dets)
        ev = COCOeval(gt, dt, iouType="bbox")
        ev.params.imgIds = list(image_ids)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    summary = "\n".join(ln for ln in buf.getvalue().splitlines() if ln.startswith(" Average")) + "\n"
    return float(ev.stats[0]), summary


def score(accuracy_log: str | Path, annotations: dict, out: Path, target: float, tiny: bool = False) -> dict:
    """``target``: the round's minimum mAP in percent (the checker's "mAP")."""
    entries = read_log(accuracy_log)
    dets, ids, _ = detections(entries, annotations["images"])
    m, summary = coco_map(annotations, dets, ids)
    pct = 100.0 * m
    passed = None if tiny else pct >= target
    text = summary + f"mAP={pct:.3f}%\n"
    text += f"images={len(ids)}, detections={len(dets)}\n"
    if tiny:
        text += ("note: tiny variant; the ground truth is the fp32 torch reference's own top detections "
                 "(~100% = faithful pipeline)\n")
    else:
        text += f"{'PASS' if passed else 'FAIL'}: mAP {pct:.3f}% vs target >= {target:.3f}%\n"
    write_text(out, text)
    return {"metrics": {"mAP": round(pct, 6), "images": len(ids), "detections": len(dets)}, "passed": passed,
            "text": text}
