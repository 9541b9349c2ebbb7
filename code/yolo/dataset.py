"""COCO val2017 "safe" subset (MLPerf YOLO): annotations, download, letterbox preprocessing and the QSL.

Layout, as the MLCommons R2 copy (``YOLO-COCO2017-dataset.uri`` -> inference.mlcommons-storage.org/coco_safe)
unpacks: ``<data>/val2017_safe/<file_name>.jpg`` (1,525 images) and
``<data>/val2017_safe/annotations/instances_val2017.json``; the official accuracy script
(``tools/accuracy-coco.py --coco-dir <data>/val2017_safe``) reads the same file. Sample i is the i-th entry
of the annotation file's "images" list (yolo_loadgen.py's ``Coco``: "image order needs to match the JSON for
correct qsl_idx mapping").

Preprocessing is ultralytics' predict path (yolo_loadgen.py's ``model.predict(img_path)``): cv2 decode (BGR,
EXIF orientation applied), ``LetterBox(new_shape=(S, S), auto=False, scaleup=True, center=True,
padding_value=114, interpolation=cv2.INTER_LINEAR)``: r = min(S/h, S/w), resized to (max(round(w r), 1),
max(round(h r), 1)) with cv2.resize (only when the size changes), padding split as top = round(dh/2 - 0.1),
bottom = round(dh/2 + 0.1) (and left/right alike) with cv2.copyMakeBorder in (114, 114, 114); then BGR -> RGB,
HWC -> CHW, float32 / 255 (``Predictor.preprocess``). Stored as one uint8 (3, S, S) RGB ``.npy`` per image (the
division happens per batch: 4x less disk than float32).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from code.common.errors import MissingDataError
from code.retinanet.dataset import OpenImagesQSL, write_missing

IMAGES = "val2017_safe"
ANNOTATIONS = "val2017_safe/annotations/instances_val2017.json"
PAD_VALUE = 114
# MLCommons R2 metadata for the reference's downloads (mlcommons/mlperf-automations
# script/get-dataset-mlperf-inference-yolo-coco2017-filtered-dataset and script/get-ml-model-yolov11, variation
# r2-downloader); md5s pinned from github.com/mlcommons/r2-infra inference/metadata/YOLO-COCO2017-dataset.md5
# (commit 4fee9227) and YOLO-model.md5 (commit e51edb74). r2_download checks every one of the 1,525 images against
# the fetched list as well.
DATA_URI = "https://inference.mlcommons-storage.org/metadata/YOLO-COCO2017-dataset.uri"
DATA_PINS = {ANNOTATIONS: "d4f75ac5dfaf9822bc80e20d1d4b5bb5"}
MODEL_URI = "https://inference.mlcommons-storage.org/metadata/YOLO-model.uri"
MODEL_PINS = {"yolo11l.pt": "92001a3126d6ebf548c1762038698214"}
# yolo_loadgen.py COCO_80_TO_91: class index 0..79 -> COCO category id
COCO_80_TO_91 = (
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32, 33, 34,
    35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63,
    64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90)


def read_annotations(path: Path, fix: str) -> dict:
    """The COCO annotation file; missing, unreadable or without images/annotations: an error with ``fix``."""
    if not path.is_file():
        raise MissingDataError(f"COCO annotations not found: {path}", fix)
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise MissingDataError(f"{path}: not a readable COCO annotation file ({str(e).splitlines()[0][:100]})",
                               fix) from None
    if not isinstance(d, dict) or not d.get("images") or "annotations" not in d:
        raise MissingDataError(f"{path}: no images/annotations (not a COCO annotation file)", fix)
    return d


# --- preprocessing -----------------------------------------------------------------------------------

def decode_bgr(path: Path, fix: str) -> np.ndarray:
    """BGR uint8 HWC as ultralytics' imread gives it (cv2.imdecode, IMREAD_COLOR)."""
    import cv2

    img = cv2.imdecode(np.fromfile(str(path), np.uint8), cv2.IMREAD_COLOR) if Path(path).is_file() else None
    if img is None:
        raise MissingDataError(f"{path}: {'not a readable image' if Path(path).exists() else 'no such file'}", fix)
    return img


def letterbox(img: np.ndarray, size: int) -> np.ndarray:
    """ultralytics LetterBox(new_shape=(size, size), auto=False) on an HWC uint8 image (module docstring)."""
    import cv2

    h, w = img.shape[:2]
    r = min(size / h, size / w)
    new_w, new_h = max(round(w * r), 1), max(round(h * r), 1)
    dw, dh = (size - new_w) / 2, (size - new_h) / 2
    if (w, h) != (new_w, new_h):
        img = cv2.resize(img, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    top, bottom, left, right = round(dh - 0.1), round(dh + 0.1), round(dw - 0.1), round(dw + 0.1)
    return cv2.copyMakeBorder(img, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(PAD_VALUE,) * 3)


def to_stored(bgr: np.ndarray, size: int) -> np.ndarray:
    """Letterboxed, RGB, CHW uint8: what is stored per image."""
    return np.ascontiguousarray(letterbox(bgr, size)[..., ::-1].transpose(2, 0, 1))


def to_model_input(stored: np.ndarray) -> np.ndarray:
    """Stored uint8 (..., 3, S, S) -> float32 in [0, 1] (Predictor.preprocess: float(), / 255)."""
    return stored.astype(np.float32) / np.float32(255.0)


def check_preprocessed(path: Path, size: int, fix: str, mmap: bool = True) -> np.ndarray:
    from code.common.fileio import load_array

    return load_array(path, fix, dtype=np.uint8, shape=(3, size, size), mmap=mmap)


def preprocess_all(image_dir: Path, images: Sequence[dict], size: int, out_dir: Path, fix: str) -> int:
    """Write every missing or damaged ``<file_name>.npy`` (RetinaNet's loop); returns how many were written. An
    image whose decoded size is not the annotation's height x width is an error (boxes are scaled by the
    annotation's)."""
    def convert(im: dict) -> np.ndarray:
        bgr = decode_bgr(image_dir / im["file_name"], fix)
        if bgr.shape[:2] != (im["height"], im["width"]):
            raise MissingDataError(f"{im['file_name']} decodes to {bgr.shape[1]}x{bgr.shape[0]}, the annotations say "
                                   f"{im['width']}x{im['height']}", fix)
        return to_stored(bgr, size)

    return write_missing(image_dir, images, out_dir, fix, lambda dest: check_preprocessed(dest, size, fix), convert,
                         "COCO")


# --- QSL ---------------------------------------------------------------------------------------------

class CocoQSL(OpenImagesQSL):
    """RetinaNet's per-image ``.npy`` QSL holding uint8 (3, S, S) arrays; ``batch`` gives the float32 model input.
    ``shapes[i]`` is image i's original (height, width), which the post-processing scales boxes back to."""

    def __init__(self, pre_dir: Path, images: Sequence[dict], performance_count: int, size: int, fix: str):
        super().__init__(pre_dir, images, performance_count, size, fix)
        self.shapes = [(int(im["height"]), int(im["width"])) for im in images]

    def _check(self, path: Path, mmap: bool = True) -> np.ndarray:
        return check_preprocessed(path, self.size, self.fix, mmap)

    def batch(self, indices: Sequence[int]) -> np.ndarray:
        return to_model_input(np.stack([self.loaded[i] for i in indices]))


# --- the real downloads: MLCommons R2 -------------------------------------------------------------------

def download_coco_safe(root: Path, expected_images: int, log=print) -> Path:
    """The MLCommons COCO safe subset into ``root`` (every listed file md5-checked; resumable), then the
    annotation file checked to list ``expected_images`` images, all present."""
    from code.common.llm import download as dl

    fix = "make download_data BENCHMARKS=yolo"
    dl.r2_download(DATA_URI, root, log=log, expect_md5=DATA_PINS)
    ann = read_annotations(root / ANNOTATIONS, fix)
    n = len(ann["images"])
    if n != expected_images:
        raise MissingDataError(f"{root / ANNOTATIONS} lists {n} images, not the MLPerf {expected_images}",
                               f"delete {root} and rerun {fix}")
    missing = [im["file_name"] for im in ann["images"] if not (root / IMAGES / im["file_name"]).is_file()]
    if missing:
        raise MissingDataError(f"{len(missing)} listed images are not in {root / IMAGES} (e.g. {missing[0]})",
                               f"rerun {fix}")
    log(f"[download_data] {n} images and {root / ANNOTATIONS}")
    return root / ANNOTATIONS


def download_checkpoint(model_dir: Path, log=print) -> Path:
    """yolo11l.pt from the MLCommons R2 copy (md5-checked against the pin and the fetched list)."""
    from code.common.llm import download as dl

    dl.r2_download(MODEL_URI, model_dir, log=log, expect_md5=MODEL_PINS, include=lambda p: p in MODEL_PINS)
    return Path(model_dir) / "yolo11l.pt"
