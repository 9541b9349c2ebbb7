"""ImageNet validation data: val_map, MLPerf preprocessing, and the QSL.

Preprocessing is the MLPerf reference's (vision/classification_and_detection/python: imagenet.py reads
with cv2.imread, dataset.py pre_process_vgg) step for step, with the same library: BGR -> RGB, the short
side resized to int(100 * crop / 87.5) (256 for 224) and the long side to int(short * long / short_side),
both truncated, with cv2.INTER_AREA; centre crop at int((side - crop) / 2); subtract the channel means
(123.68, 116.78, 103.94), NCHW float32. tests/test_reference_resnet50.py compares the arrays with the
reference's own. Preprocessed images are stored
as one uint8 NCHW array (mean subtraction happens when the QSL loads samples), so the real set is
7.5 GB instead of 30 GB.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from code.common.benchmark import QSL
from code.common.errors import MissingDataError

MEANS = np.array([123.68, 116.78, 103.94], dtype=np.float32).reshape(1, 3, 1, 1)


def read_val_map(path: Path, fix: str = "make download_data BENCHMARKS=resnet50") -> tuple[list[str], np.ndarray]:
    """``<file name> <label>`` per line; a missing file or a malformed line is an error with ``fix``."""
    if not path.exists():
        raise MissingDataError(f"val_map not found: {path}", fix)
    names, labels = [], []
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
            raise MissingDataError(f"{path}:{n}: expected '<image file> <label>', found {line[:60]!r}", fix)
        names.append(parts[0])
        labels.append(int(parts[1]))
    return names, np.array(labels, dtype=np.int64)


def preprocess_image(path: Path, crop: int) -> np.ndarray:
    """One image -> uint8 CHW (crop x crop), before mean subtraction (which, done in float32 at QSL load,
    gives the reference's float32 array exactly). A file cv2 cannot decode: MissingDataError."""
    import cv2

    img = cv2.imread(str(path)) if Path(path).is_file() else None  # BGR, 3 channels, EXIF orientation applied
    if img is None:
        why = "not a readable image" if Path(path).exists() else "no such file"
        raise MissingDataError(f"{path}: {why}", "put the original JPEG there, then make "
                               "preprocess_data BENCHMARKS=resnet50")
    img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    h, w = img.shape[:2]
    short = int(100.0 * crop / 87.5)                  # resize_with_aspectratio, scale=87.5
    nw, nh = (short, int(short * h / w)) if h > w else (int(short * w / h), short)
    img = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_AREA)
    top, left = int((nh - crop) / 2), int((nw - crop) / 2)      # center_crop
    return np.ascontiguousarray(img[top:top + crop, left:left + crop].transpose(2, 0, 1))


def preprocess_all(image_dir: Path, names: Sequence[str], crop: int, out_file: Path, log=print,
                   fix: str | None = None) -> None:
    from code.common.fileio import staged_path

    missing = [n for n in names[:10] if not (image_dir / n).exists()]
    if missing:
        raise MissingDataError(f"ImageNet images missing in {image_dir} (e.g. {missing[0]})",
                               fix or f"put the ILSVRC2012 validation JPEGs in {image_dir}, then make preprocess_data "
                               "BENCHMARKS=resnet50")
    from code.common import progress

    with staged_path(out_file, suffix=".npy") as tmp, progress.bar(len(names), "preprocess", "image") as bar:
        arr = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8, shape=(len(names), 3, crop, crop))
        for i, n in enumerate(names):
            arr[i] = preprocess_image(image_dir / n, crop)
            bar.update()
            if i and i % 5000 == 0 and not progress.enabled():
                log(f"[preprocess] {i}/{len(names)}")
        arr.flush()
        del arr


class ImageNetQSL(QSL):
    """Holds the loaded performance samples as float32 NCHW, mean-subtracted.

    ``load``/``unload`` run on LoadGen's thread before/after a test; ``batch`` is called by workers
    afterwards and only reads.
    """

    def __init__(self, images_file: Path, labels: np.ndarray, performance_count: int, crop: int,
                 fix: str = "make preprocess_data BENCHMARKS=resnet50"):
        from code.common.fileio import load_array

        self.images = load_array(images_file, fix, dtype=np.uint8, shape=(None, 3, crop, crop), mmap=True)
        if len(self.images) != len(labels):    # a stale or partial set would score against the wrong labels
            raise MissingDataError(f"{images_file} holds {len(self.images)} images but the val_map lists "
                                   f"{len(labels)}", fix)
        self.labels = labels
        self.total_count = len(self.images)
        self.performance_count = min(performance_count, self.total_count)
        self.loaded: np.ndarray | None = None
        self.slot: dict[int, int] = {}

    def load(self, indices: Sequence[int]) -> None:
        idx = np.asarray(sorted(set(indices)), dtype=np.int64)
        self.loaded = np.ascontiguousarray(self.images[idx].astype(np.float32) - MEANS)
        self.slot = {int(i): n for n, i in enumerate(idx)}

    def unload(self, indices: Sequence[int]) -> None:
        self.loaded, self.slot = None, {}

    def batch(self, indices: Sequence[int]) -> np.ndarray:
        slots = [self.slot[i] for i in indices]
        if len(slots) > 1 and slots[-1] - slots[0] == len(slots) - 1 and slots == sorted(slots):
            return self.loaded[slots[0]:slots[-1] + 1]   # contiguous: no copy
        return self.loaded[slots]
