"""RetinaNet actions: data, model, engines, QSL, processors and accuracy."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from code.common import paths, progress
from code.common.backends import EngineSpec, backend_class, get_backend
from code.common.backends.base import ModelSource
from code.common.benchmark import Benchmark, Processor
from code.common.engines import get_or_build
from code.common.errors import RunError
from code.common.fileio import staged_path, write_json
from code.retinanet import SPEC, model
from code.retinanet.accuracy import score
from code.retinanet.dataset import (ANNOTATIONS, IMAGES, OpenImagesQSL, decode, download_openimages,
                                    preprocess_all, read_annotations, synthetic_image, to_model_input)

TINY_IMAGES = 100                # the accuracy runs cover every one: the fewest mAP needs to mean something
# Tiny ground truth: per image, the torch reference's detections scoring at least this; the first
# TINY_GT_PER_IMAGE are boxes to find, the rest crowd boxes (ignored), so no image needs more than
# COCOeval's maxDets=100 and every detection scoring TINY_GT_SCORE or more is a hit: a faithful
# pipeline scores ~100% mAP.
TINY_GT_SCORE = 0.2
TINY_GT_PER_IMAGE = 20


class RetinaNetBenchmark(Benchmark):
    spec = SPEC

    # --- locations ---------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return model.input_size(self.settings.model_variant)

    @property
    def data_root(self) -> Path:
        if self.settings.data_dir:
            return Path(self.settings.data_dir)
        return paths.data_dir("openimages", self.settings.model_variant)

    @property
    def annotations_path(self) -> Path:
        return self.data_root / ANNOTATIONS

    @property
    def pre_dir(self) -> Path:
        return paths.preprocessed_dir("openimages", self.settings.model_variant) / f"{self.size}x{self.size}_fp32"

    @property
    def postprocess(self) -> str:
        p = self.settings.retinanet_postprocess
        return ("host" if backend_class(self.settings.backend).static_shapes else "model") if p == "auto" else p

    def annotations(self) -> dict:
        return read_annotations(self.annotations_path, self.fix("download_data"))

    # --- data and model ----------------------------------------------------------------------
    def download_model(self) -> None:
        if self.tiny:
            model.build_tiny(self.model_dir)
        else:
            model.download_real(self.model_dir, with_checkpoint=backend_class(self.settings.backend).runs_modules)

    def download_data(self) -> None:
        if self.tiny:
            self._make_tiny_data()
            return
        download_openimages(self.data_root, _dataset_size())

    def _make_tiny_data(self) -> None:
        """Seeded synthetic images at their own sizes (192-400 px a side) and COCO-format annotations
        whose boxes are the fp32 torch reference's own top detections on them (preprocessed exactly
        as the pipeline does), so a faithful harness scores ~100% mAP and any pipeline error (a
        wrong box order or scale, a dropped or shifted sample) scores far less."""
        import torch
        from PIL import Image

        if not (self.model_dir / model.TINY_WEIGHTS).exists():
            model.build_tiny(self.model_dir)
        net = model.load_torch(self.model_dir, "tiny")
        img_dir = self.data_root / IMAGES
        img_dir.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(model.TINY_SEED + 3)
        images, anns, pending = [], [], []
        s = self.size

        def label(batch) -> None:       # the torch reference on a batch of images, in order
            out = net([torch.from_numpy(x) for _, x in batch])
            for (n, _), d in zip(batch, out):
                h, w = images[n]["height"], images[n]["width"]
                keep = (d["scores"] >= TINY_GT_SCORE).nonzero().flatten()
                for rank, k in enumerate(keep.tolist()):
                    x0, y0, x1, y1 = (float(v) for v in d["boxes"][k])
                    bbox = [x0 / s * w, y0 / s * h, (x1 - x0) / s * w, (y1 - y0) / s * h]
                    # past the first TINY_GT_PER_IMAGE: a crowd box, which COCOeval ignores (a
                    # detection on it is neither a hit nor a false positive)
                    anns.append({"id": len(anns) + 1, "image_id": n + 1, "category_id": int(d["labels"][k]),
                                 "bbox": bbox, "area": bbox[2] * bbox[3], "iscrowd": int(rank >= TINY_GT_PER_IMAGE)})

        from code.common.backends.pytorch import one_thread

        # the tiny detector's small convolutions on one thread (code.common.backends.pytorch.one_thread)
        with progress.bar(TINY_IMAGES, "tiny images", "image") as bar, torch.inference_mode(), one_thread():
            for n in range(TINY_IMAGES):
                img, _ = synthetic_image(rng)
                name = f"{model.TINY_SEED:08x}{n:08x}.jpg"
                with staged_path(img_dir / name, suffix=".jpg") as tmp:
                    Image.fromarray(img).save(tmp, format="JPEG", quality=95)
                rgb = decode(img_dir / name)          # what preprocessing will read
                images.append({"id": n + 1, "file_name": name, "height": rgb.shape[0], "width": rgb.shape[1],
                               "license": None, "coco_url": None})
                pending.append((n, to_model_input(rgb, s)))
                if len(pending) == 16 or n == TINY_IMAGES - 1:
                    label(pending)
                    pending = []
                bar.update()
        from code.retinanet.dataset import MLPERF_CLASSES

        write_json(self.annotations_path, {
            "info": {"dataset": "openimages_mlperf tiny (synthetic)", "version": "tiny",
                     "ground_truth": f"fp32 torch reference detections, score >= {TINY_GT_SCORE}, "
                                     f"<= {TINY_GT_PER_IMAGE} per image"},
            "licenses": [], "categories": [{"id": i, "name": c, "supercategory": None}
                                           for i, c in enumerate(MLPERF_CLASSES)],
            "images": images, "annotations": anns})
        print(f"[download_data] {TINY_IMAGES} tiny images ({len(anns)} ground-truth boxes) and {self.annotations_path}")

    def preprocess_data(self) -> None:
        images = self.annotations()["images"]
        fix = self.fix("download_data") if self.tiny else (
            f"put the OpenImages validation JPEGs in {self.data_root / IMAGES} ({self.fix('download_data')}), "
            f"then {self.fix('preprocess_data')}")
        n = preprocess_all(self.data_root / IMAGES, images, self.size, self.pre_dir, fix)
        print(f"[preprocess_data] {len(images)} images ({n} written) -> {self.pre_dir}")

    # --- engines -----------------------------------------------------------------------------
    def engine_spec(self, device_id: int = 0) -> EngineSpec:
        name = "retinanet-head" if self.postprocess == "host" else "retinanet"
        return self.engine_spec_for(name, 1, {model.INPUT: (1, 3, self.size, self.size)}, device_id,  # batch 1 graph
                                    extra={"postprocess": self.postprocess, "variant": self.settings.model_variant})

    def onnx_path(self) -> Path:
        full = self.model_file(model.ONNX_NAME)
        if self.postprocess != "host":
            return full
        head = self.model_dir / model.HEADLESS_NAME
        if not head.exists() or head.stat().st_mtime_ns < full.stat().st_mtime_ns:
            model.cut_headless(full, head)
        return head

    def generate_engines(self) -> dict[str, str]:
        s = self.settings
        src = ModelSource(self.onnx_path, module_factory="code.retinanet.model:eager_factory",
                          module_dir=self.model_dir, fix=self.fix("download_model"))
        path = get_or_build(get_backend(s.backend), src, self.engine_spec(), system_id=s.system_id,
                            benchmark="retinanet", scenario=s.scenario)
        return {"retinanet": str(path)}

    # --- run -------------------------------------------------------------------------------------
    def make_qsl(self) -> OpenImagesQSL:
        images = self.annotations()["images"]
        perf = self.settings.performance_sample_count or 64
        self.qsl = OpenImagesQSL(self.pre_dir, images, perf, self.size, self.fix("preprocess_data"))
        return self.qsl

    def make_processors(self, qsl, engines) -> list[Processor]:
        backend = get_backend(self.settings.backend)
        return [RetinaNetProcessor(backend.load(engines["retinanet"], spec), qsl, self.settings.batch_size(), self.size,
                                   model.HostPostprocess(self.size) if self.postprocess == "host" else None, cores)
                for spec, cores in self.worker_specs()]

    def accuracy(self, accuracy_log: str, out_dir: str) -> dict:
        entry = self.settings.round_entry()
        return score(accuracy_log, self.annotations(), Path(out_dir) / "accuracy.txt", entry.accuracy_min["mAP"],
                     tiny=self.tiny)


def detection_rows(idx: int, boxes, scores, labels, size: int) -> np.ndarray:
    """One sample's response as the reference's PostProcessOpenImagesRetinanet writes it: per box
    float32 (idx, ymin, xmin, ymax, xmax, score, label), coordinates divided by the input size,
    stopping at the first score below 0.05 and after 300 boxes. NaN or infinite values: RunError."""
    scores = np.asarray(scores, dtype=np.float32).reshape(-1)
    below = np.flatnonzero(scores < model.SCORE_THRESH)
    n = min(int(below[0]) if len(below) else len(scores), model.DETECTIONS_PER_IMG)
    b = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)[:n]
    out = np.empty((n, 7), dtype=np.float32)
    out[:, 0] = idx
    out[:, 1], out[:, 2], out[:, 3], out[:, 4] = b[:, 1] / size, b[:, 0] / size, b[:, 3] / size, b[:, 2] / size
    out[:, 5] = scores[:n]
    out[:, 6] = np.asarray(labels).reshape(-1)[:n]
    if not np.isfinite(out).all():
        raise RunError(f"the engine returned NaN or infinite detections for sample {idx}",
                       "rebuild the engine (--force_rebuild) and check the model and preprocessed data "
                       "(make preprocess_data BENCHMARKS=retinanet)")
    return out.reshape(-1)


class RetinaNetProcessor(Processor):
    """Samples -> detection rows (``detection_rows``), one engine call per image (the MLPerf graph
    takes one image); with a head-only engine the host postprocessing runs in between."""

    def __init__(self, engine, qsl: OpenImagesQSL, batch_size: int, size: int, post=None,
                 cores: tuple[int, ...] | None = None):
        self.engine, self.qsl, self.batch_size, self.size, self.post, self.cores = engine, qsl, batch_size, size, post, cores
        self.input = engine.input_names[0] if getattr(engine, "input_names", None) else model.INPUT

    def detect(self, x: np.ndarray):
        r = self.engine.infer({self.input: x})
        if self.post is not None:
            return self.post(r[model.HEAD_OUTPUTS[0]], r[model.HEAD_OUTPUTS[1]])
        return r[model.OUTPUTS[0]], r[model.OUTPUTS[1]], r[model.OUTPUTS[2]]

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        return [detection_rows(i, *self.detect(self.qsl.sample(i)), self.size) for i in indices]

    def warmup(self) -> None:
        self.detect(np.zeros((1, 3, self.size, self.size), np.float32))


def _dataset_size() -> int:
    """The MLPerf image count, from the round table (any round that has RetinaNet)."""
    from code.common import rounds

    for r in reversed(list(rounds.ROUNDS.values())):
        for e in r.entries("retinanet"):
            return e.dataset_size
    raise RunError("no round lists retinanet", "report this")
