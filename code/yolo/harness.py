"""YOLO actions: data, model, engines, QSL, processors and accuracy."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from code.common import paths, progress
from code.common.backends import EngineSpec, get_backend
from code.common.backends.base import ModelSource
from code.common.benchmark import Benchmark, Processor
from code.common.engines import get_or_build
from code.common.errors import RunError
from code.common.fileio import staged_path, write_json
from code.yolo import SPEC, model
from code.yolo.accuracy import score
from code.yolo.dataset import (ANNOTATIONS, COCO_80_TO_91, IMAGES, CocoQSL, decode_bgr, download_checkpoint,
                               download_coco_safe, preprocess_all, read_annotations, to_model_input, to_stored)

TINY_IMAGES = 32                 # every accuracy run covers them all (half the round's 64 performance samples)
# Tiny ground truth: per image, the torch detector's detections scoring at least this; the first
# TINY_GT_PER_IMAGE are boxes to find, the rest crowd boxes (ignored by COCOeval), so a faithful pipeline
# scores ~100% mAP and a wrong box order, scale, letterbox offset or class map scores far less. Boxes wholly in
# the letterbox padding (clipped to zero width or height) are no ground truth: COCOeval matches nothing to them.
# The pipeline reports them as the reference does, so they stay false positives: ~94% mAP at TINY_SIZE 64.
TINY_GT_SCORE = 0.05
TINY_GT_PER_IMAGE = 20


class YoloBenchmark(Benchmark):
    spec = SPEC

    # --- locations ---------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return model.input_size(self.settings.model_variant)

    @property
    def data_root(self) -> Path:
        if self.settings.data_dir:
            return Path(self.settings.data_dir)
        return paths.data_dir("coco_safe", self.settings.model_variant)

    @property
    def pre_dir(self) -> Path:
        return paths.preprocessed_dir("coco_safe", self.settings.model_variant) / f"letterbox{self.size}_uint8"

    def annotations(self) -> dict:
        return read_annotations(self.data_root / ANNOTATIONS, self.fix("download_data"))

    # --- data and model ----------------------------------------------------------------------
    def download_model(self) -> None:
        if self.tiny:
            model.build_tiny(self.model_dir)
            return
        download_checkpoint(self.model_dir)
        model.export_real(self.model_dir)

    def download_data(self) -> None:
        if self.tiny:
            self._make_tiny_data()
            return
        download_coco_safe(self.data_root, _dataset_size())

    def _make_tiny_data(self) -> None:
        """Seeded synthetic images at their own sizes (RetinaNet's generator: 192-400 px a side, so every
        letterbox pads) and COCO annotations whose boxes are the fp32 torch detector's own detections on
        them (preprocessed and post-processed as the pipeline does), category ids through COCO_80_TO_91."""
        import torch
        from PIL import Image

        from code.retinanet.dataset import synthetic_image

        if not (self.model_dir / model.TINY_WEIGHTS).exists():
            model.build_tiny(self.model_dir)
        net = model.load_torch(self.model_dir, "tiny")
        img_dir = self.data_root / IMAGES
        img_dir.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(model.TINY_SEED + 3)
        images, anns, pending = [], [], []

        def label(batch) -> None:          # the torch detector on a batch of letterboxed images, in order
            out = net(torch.from_numpy(np.stack([x for _, x in batch])))
            for (n, _), o in zip(batch, out):
                h, w = images[n]["height"], images[n]["width"]
                boxes, scores, classes = model.postprocess(o, (h, w), self.size)
                solid = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
                for rank, k in enumerate(np.flatnonzero((scores >= TINY_GT_SCORE) & solid)):
                    x0, y0, x1, y1 = (float(v) for v in boxes[k])
                    bbox = [x0, y0, x1 - x0, y1 - y0]
                    # past the first TINY_GT_PER_IMAGE: a crowd box, which COCOeval ignores
                    anns.append({"id": len(anns) + 1, "image_id": n + 1, "category_id": COCO_80_TO_91[classes[k]],
                                 "bbox": bbox, "area": bbox[2] * bbox[3], "iscrowd": int(rank >= TINY_GT_PER_IMAGE)})

        with progress.bar(TINY_IMAGES, "tiny images", "image") as bar, torch.inference_mode(), model.one_thread():
            for n in range(TINY_IMAGES):
                img, _ = synthetic_image(rng)
                name = f"{model.TINY_SEED:08x}{n:08x}.jpg"
                with staged_path(img_dir / name, suffix=".jpg") as tmp:
                    Image.fromarray(img).save(tmp, format="JPEG", quality=95)
                bgr = decode_bgr(img_dir / name, self.fix("download_data"))     # what preprocessing will read
                images.append({"id": n + 1, "file_name": name, "height": bgr.shape[0], "width": bgr.shape[1],
                               "license": None, "coco_url": None})
                pending.append((n, to_model_input(to_stored(bgr, self.size))))
                if len(pending) == 16 or n == TINY_IMAGES - 1:
                    label(pending)
                    pending = []
                bar.update()
        write_json(self.data_root / ANNOTATIONS, {
            "info": {"dataset": "coco_safe tiny (synthetic)", "version": "tiny",
                     "ground_truth": f"fp32 torch detections, score >= {TINY_GT_SCORE}, <= {TINY_GT_PER_IMAGE} "
                                     "per image (the rest crowd)"},
            "licenses": [], "categories": [{"id": c, "name": f"coco{c}", "supercategory": None} for c in COCO_80_TO_91],
            "images": images, "annotations": anns})
        print(f"[download_data] {TINY_IMAGES} tiny images ({len(anns)} ground-truth boxes) and "
              f"{self.data_root / ANNOTATIONS}")

    def preprocess_data(self) -> None:
        images = self.annotations()["images"]
        fix = self.fix("download_data") if self.tiny else (
            f"put the COCO safe images in {self.data_root / IMAGES} ({self.fix('download_data')}), "
            f"then {self.fix('preprocess_data')}")
        n = preprocess_all(self.data_root / IMAGES, images, self.size, self.pre_dir, fix)
        print(f"[preprocess_data] {len(images)} images ({n} written) -> {self.pre_dir}")

    # --- engines -----------------------------------------------------------------------------
    def engine_spec(self, device_id: int = 0) -> EngineSpec:
        return self.engine_spec_for("yolo", self.settings.batch_size(), {model.INPUT: (-1, 3, self.size, self.size)},
                                    device_id, extra={"variant": self.settings.model_variant})

    def generate_engines(self) -> dict[str, str]:
        s = self.settings
        src = ModelSource(lambda: self.model_file(model.ONNX_NAME), module_factory="code.yolo.model:eager_factory",
                          module_dir=self.model_dir, fix=self.fix("download_model"))
        path = get_or_build(get_backend(s.backend), src, self.engine_spec(), system_id=s.system_id, benchmark="yolo",
                            scenario=s.scenario)
        return {"yolo": str(path)}

    # --- run -------------------------------------------------------------------------------------
    def make_qsl(self) -> CocoQSL:
        images = self.annotations()["images"]
        perf = self.settings.performance_sample_count or 64
        self.qsl = CocoQSL(self.pre_dir, images, perf, self.size, self.fix("preprocess_data"))
        return self.qsl

    def make_processors(self, qsl, engines) -> list[Processor]:
        backend = get_backend(self.settings.backend)
        return [YoloProcessor(backend.load(engines["yolo"], spec), qsl, spec.batch_size, self.size, cores)
                for spec, cores in self.worker_specs()]

    def accuracy(self, accuracy_log: str, out_dir: str) -> dict:
        entry = self.settings.round_entry()
        return score(accuracy_log, self.annotations(), Path(out_dir) / "accuracy.txt", entry.accuracy_min["mAP"],
                     tiny=self.tiny)


def detection_rows(idx: int, boxes, scores, classes, orig_hw: tuple[int, int]) -> np.ndarray:
    """One sample's response as yolo_loadgen.py packs it: per box float32 (idx, ymin/h, xmin/w, ymax/h,
    xmax/w, score, COCO category id), boxes in original-image pixels. NaN or infinite values: RunError."""
    h, w = orig_hw
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    out = np.empty((len(b), 7), dtype=np.float32)
    out[:, 0] = idx
    out[:, 1], out[:, 2], out[:, 3], out[:, 4] = b[:, 1] / h, b[:, 0] / w, b[:, 3] / h, b[:, 2] / w
    out[:, 5] = np.asarray(scores).reshape(-1)
    out[:, 6] = np.asarray(COCO_80_TO_91, dtype=np.float32)[np.asarray(classes, dtype=np.int64).reshape(-1)]
    if not np.isfinite(out).all():
        raise RunError(f"the engine returned NaN or infinite detections for sample {idx}",
                       "rebuild the engine (--force_rebuild) and check the model and preprocessed data "
                       "(make preprocess_data BENCHMARKS=yolo)")
    return out.reshape(-1)


class YoloProcessor(Processor):
    """Batches -> detection rows: the engine gives (B, 84, A) decoded boxes and scores; NMS and the scaling
    back to each original image run on the host (``model.postprocess_batch``)."""

    def __init__(self, engine, qsl: CocoQSL, batch_size: int, size: int, cores: tuple[int, ...] | None = None):
        self.engine, self.qsl, self.batch_size, self.size, self.cores = engine, qsl, batch_size, size, cores
        self.input = engine.input_names[0] if getattr(engine, "input_names", None) else model.INPUT

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        return self._rows(indices, self.engine.infer({self.input: self.qsl.batch(indices)})[model.OUTPUT],
                          [self.qsl.shapes[i] for i in indices])

    def _rows(self, indices: Sequence[int], out: np.ndarray, shapes: list[tuple[int, int]]) -> list[np.ndarray]:
        with model.one_thread():     # small torch ops: on two threads of a busy 2-core CPU 8x slower than on one
            dets = model.postprocess_batch(out, shapes, self.size)
        return [detection_rows(i, *d, hw) for i, d, hw in zip(indices, dets, shapes)]

    def warmup(self) -> None:
        """The whole of ``process`` once, before LoadGen's clock: the engine, and the host NMS, whose first call
        loads torchvision's ops (it imported all of torchvision before ``model._nms``: 1.5-7 s on this 2-core CPU,
        12-40% of a 12 s Offline run, the harness/raw ratio 0.85 of an earlier warmup that ran the engine alone)."""
        n, hw = self.batch_size, (self.size, self.size)
        self._rows(range(n), self.engine.infer({self.input: np.zeros((n, 3, *hw), np.float32)})[model.OUTPUT], [hw] * n)


def _dataset_size() -> int:
    """The MLPerf image count, from the round table."""
    from code.common import rounds

    for r in reversed(list(rounds.ROUNDS.values())):
        for e in r.entries("yolo"):
            return e.dataset_size
    raise RunError("no round lists yolo", "report this")
