"""mAP from mlperf_log_accuracy.json with pycocotools, as the reference's recommended scorer
(vision/classification_and_detection/tools/accuracy-coco.py, run with ``--coco-dir <data>/val2017_safe`` and
no inverse label map) computes it: per sample float32 rows (qsl_idx, ymin, xmin, ymax, xmax, score, COCO
category id) with coordinates in [0, 1] of the original image; scaled by the annotation's height and width, the
first entry of a repeated qsl_idx counts, an image without boxes still counts, and COCOeval (bbox) over the
images seen gives stats[0]. That is exactly RetinaNet's accuracy-openimages.py arithmetic, so the decoding and
COCOeval, and ``score`` writing accuracy.txt (COCOeval's summary and the ``mAP=<percent>%`` line the submission
checker reads), are ``code.retinanet.accuracy``'s: one implementation for both."""
from __future__ import annotations

from code.retinanet.accuracy import coco_map, detections, read_log, score

__all__ = ["coco_map", "detections", "read_log", "score"]
