"""ResNet50 actions: data, model, engines, QSL, processors and accuracy."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

import numpy as np

from code.common import calibration, paths, progress
from code.common.backends import EngineSpec, get_backend
from code.common.backends.base import ModelSource
from code.common.benchmark import Benchmark, Processor
from code.common.engines import get_or_build
from code.common.errors import MissingDataError
from code.common.fileio import download, staged_path, write_text
from code.resnet50 import SPEC, model
from code.resnet50.accuracy import score
from code.resnet50.dataset import MEANS, ImageNetQSL, preprocess_all, preprocess_image, read_val_map

VAL_MAP_URL = ("https://raw.githubusercontent.com/mlcommons/inference_results_v0.5/master/closed/NVIDIA/"
               "data_maps/imagenet/val_map.txt")
TINY_IMAGES = 512          # every accuracy run covers them all (1024 took 12 CPU-s a run here, of 2 cores)
# The official calibration list (500 ImageNet validation images), pinned to one mlcommons/inference commit;
# sha256 of the file at that commit (`git show <commit>:<path> | sha256sum`).
CAL_COMMIT = "b66003e10e2db4b8c36a448b0545ec90fcc6e9e9"
CAL_LIST = "cal_image_list_option_1.txt"
CAL_URL = f"https://raw.githubusercontent.com/mlcommons/inference/{CAL_COMMIT}/calibration/ImageNet/{CAL_LIST}"
CAL_SHA256 = "7662247d1d9407d6cb564268f64c5a4a6cf9f1a34fd2e6cdc3b94dcf278b3dc9"
TINY_CAL_IMAGES = 128      # the tiny variant calibrates on its first 128 images (a fixed slice of its own set)
CAL_BATCH = 16


class ResNet50Benchmark(Benchmark):
    spec = SPEC

    # --- locations ---------------------------------------------------------------------------
    @property
    def image_dir(self) -> Path:
        if self.settings.data_dir:
            return Path(self.settings.data_dir)
        return paths.data_dir("imagenet", self.settings.model_variant)

    @property
    def val_map(self) -> Path:
        if self.tiny:
            return paths.data_dir("imagenet", "tiny") / "val_map.txt"
        return paths.data_maps_dir() / "imagenet" / "val_map.txt"

    @property
    def cal_list(self) -> Path:
        """The calibration list: the official one (data_maps/imagenet/), or the tiny set's slice."""
        if self.tiny:
            return paths.data_dir("imagenet", "tiny") / "cal_image_list.txt"
        return paths.data_maps_dir() / "imagenet" / CAL_LIST

    @property
    def crop(self) -> int:
        return model.TINY_CROP if self.tiny else model.REAL_CROP

    @property
    def preprocessed(self) -> Path:
        return paths.preprocessed_dir("imagenet", self.settings.model_variant) / f"val_uint8_nchw_{self.crop}.npy"

    # --- data and model ----------------------------------------------------------------------
    def download_model(self) -> None:
        if self.tiny:
            model.build_tiny(self.model_dir)
        else:
            model.download_real(self.model_dir)

    def download_data(self) -> None:
        if self.tiny:
            self._make_tiny_data()
            return
        download(VAL_MAP_URL, self.val_map, check=check_val_map, fix="make download_data BENCHMARKS=resnet50")
        print(f"[download_data] {self.val_map}")
        if not (self.image_dir / "ILSVRC2012_val_00000001.JPEG").exists():
            print(f"[download_data] ImageNet is licensed: put the 50000 ILSVRC2012 validation JPEGs in {self.image_dir}")

    def _make_tiny_data(self) -> None:
        """Synthetic labelled images (seeded). Labels are the fp32 torch reference's predictions, so a
        correct harness scores 100% top-1 on the tiny set; anything less is a pipeline error."""
        import torch
        from PIL import Image

        if not (self.model_dir / "tiny_resnet50.pt").exists():
            model.build_tiny(self.model_dir)
        net = model.load_tiny_torch(self.model_dir)
        out_dir = paths.data_dir("imagenet", "tiny")
        out_dir.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(model.TINY_SEED)
        names = [f"ILSVRC2012_val_{i + 1:08d}.JPEG" for i in range(TINY_IMAGES)]
        batch, labels = [], []
        with progress.bar(len(names), "tiny images", "image") as bar:
            for n in names:
                img = model.synthetic_image(rng)
                with staged_path(out_dir / n, suffix=".jpg") as tmp:
                    Image.fromarray(img).save(tmp, format="JPEG", quality=95)
                batch.append(preprocess_image(out_dir / n, self.crop))
                bar.update()
        x = torch.from_numpy(np.stack(batch).astype(np.float32)) - torch.tensor([123.68, 116.78, 103.94]).view(1, 3, 1, 1)
        with torch.inference_mode():
            for s in range(0, len(x), 128):
                labels.extend((net(x[s:s + 128])[0] - 1).tolist())
        write_text(self.val_map, "".join(f"{n} {lab}\n" for n, lab in zip(names, labels)))
        write_text(self.cal_list, "".join(f"{n}\n" for n in names[:TINY_CAL_IMAGES]))
        print(f"[download_data] {TINY_IMAGES} tiny images, {self.val_map} and {self.cal_list}")

    def preprocess_data(self) -> None:
        names, _ = read_val_map(self.val_map, self.fix("download_data"))
        preprocess_all(self.image_dir, names, self.crop, self.preprocessed,
                       fix=self.fix("download_data") if self.tiny else None)
        print(f"[preprocess_data] {len(names)} images -> {self.preprocessed}")

    # --- engines -----------------------------------------------------------------------------
    def engine_spec(self, device_id: int = 0) -> EngineSpec:
        return self.engine_spec_for("resnet50", self.settings.batch_size(),
                                    {model.INPUT: (-1, 3, self.crop, self.crop)}, device_id)

    def onnx_path(self) -> Path:
        return self.model_file(model.ONNX_NAME)

    def generate_engines(self) -> dict[str, str]:
        s = self.settings
        source, spec = calibration.engine_source(self, "resnet50", ModelSource(self.onnx_path, fix=self.fix("download_model")),
                                                 self.engine_spec())
        path = get_or_build(get_backend(s.backend), source, spec, system_id=s.system_id, benchmark="resnet50",
                            scenario=s.scenario)
        return {"resnet50": str(path)}

    # --- quantization ----------------------------------------------------------------------------
    def calibration_recipes(self, precision: str) -> dict[str, calibration.Recipe]:
        """Every conv and the fc in int8 (per-channel weights, per-tensor activations), as NVIDIA's
        int8 ResNet50 engines run; the softmax and argmax stay float, as do the fc's logits."""
        if precision != "int8":
            return {}
        return {"resnet50": calibration.Recipe("int8", "minmax")}

    def calibration_set(self) -> calibration.CalibrationSet:
        if self.tiny:
            return calibration.CalibrationSet.from_list_file(f"tiny ImageNet slice (first {TINY_CAL_IMAGES} images)",
                                                             self.cal_list, self.fix("download_data"))
        if not self.cal_list.exists():
            download(CAL_URL, self.cal_list, sha256=CAL_SHA256, fix='make calibrate RUN_ARGS="--benchmarks=resnet50"')
        return calibration.CalibrationSet.from_list_file(f"ImageNet {CAL_LIST} (mlcommons/inference@{CAL_COMMIT[:7]})",
                                                         self.cal_list, f"delete {self.cal_list} and rerun make calibrate "
                                                         'RUN_ARGS="--benchmarks=resnet50" (it is fetched again)')

    def calibration_model(self, component: str) -> Path:
        return self.onnx_path()

    def calibration_feeds(self, component: str, cset: calibration.CalibrationSet):
        """Mean-subtracted float32 batches of the listed images, preprocessed as the evaluation set is.
        Every listed image must be there (checked before any is read)."""
        folder = Path(self.settings.calibration_dir or self.image_dir)
        missing = [n for n in cset.items if not (folder / n).is_file()]
        if missing:
            raise MissingDataError(f"{len(missing)} of the {len(cset.items)} calibration images listed in {cset.source} "
                                   f"are not in {folder} (e.g. {missing[0]})",
                                   f"put the ImageNet validation JPEGs in {folder}, or pass --calibration_dir=<folder "
                                   "holding them>" + ("" if not self.tiny else f" ({self.fix('download_data')})"))
        for i in range(0, len(cset.items), CAL_BATCH):
            x = np.stack([preprocess_image(folder / n, self.crop) for n in cset.items[i:i + CAL_BATCH]])
            yield {model.INPUT: x.astype(np.float32) - MEANS}

    # --- run -------------------------------------------------------------------------------------
    def make_qsl(self) -> ImageNetQSL:
        _, labels = read_val_map(self.val_map, self.fix("download_data"))
        perf = self.settings.performance_sample_count or 1024
        self.qsl = ImageNetQSL(self.preprocessed, labels, perf, self.crop, self.fix("preprocess_data"))
        return self.qsl

    def make_processors(self, qsl, engines) -> list[Processor]:
        backend = get_backend(self.settings.backend)
        return [ResNet50Processor(backend.load(engines["resnet50"], spec), qsl, spec.batch_size, cores)
                for spec, cores in self.worker_specs()]

    def accuracy(self, accuracy_log: str, out_dir: str) -> dict:
        _, labels = read_val_map(self.val_map, self.fix("download_data"))
        entry = self.settings.round_entry()
        return score(accuracy_log, labels, Path(out_dir) / "accuracy.txt", entry.accuracy_min["acc"], tiny=self.tiny)


class ResNet50Processor(Processor):
    """Batches -> int32 ImageNet labels (argmax - 1), one 4-byte array per sample, as LoadGen expects
    for the reference accuracy script."""

    def __init__(self, engine, qsl: ImageNetQSL, batch_size: int, cores: tuple[int, ...] | None = None):
        self.engine, self.qsl, self.batch_size, self.cores = engine, qsl, batch_size, cores

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        x = self.qsl.batch(indices)
        out = self.engine.infer({model.INPUT: x})[model.OUTPUTS[0]]
        labels = (np.asarray(out).reshape(-1) - 1).astype(np.int32)
        return [labels[i:i + 1] for i in range(len(indices))]

    def warmup(self) -> None:
        x = np.zeros((self.batch_size, 3, self.qsl.images.shape[2], self.qsl.images.shape[3]), np.float32)
        self.engine.infer({model.INPUT: x})


def check_val_map(path: Path) -> None:
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    pat = re.compile(r"^ILSVRC2012_val_\d{8}\.JPEG\s+\d+$")
    if len(lines) != 50000 or not all(pat.match(ln) for ln in lines):
        raise MissingDataError(f"downloaded val_map is not the 50000-line ImageNet map ({len(lines)} lines)",
                               "retry make download_data BENCHMARKS=resnet50")
