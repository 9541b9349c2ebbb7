"""3D-UNet actions: KiTS19 data, preprocessing, model, engines, QSL, the sliding-window Processor, DICE."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from code.common import paths, progress
from code.common.backends import EngineSpec, backend_class, get_backend
from code.common.backends.base import ModelSource
from code.common.benchmark import Benchmark, Processor
from code.common.engines import get_or_build
from code.common.errors import MissingDataError
from code.common.fileio import staged_dir, write_json
from code.unet3d import SPEC, constants as K, dataset, model, sliding_window
from code.unet3d.accuracy import score


class UNet3DBenchmark(Benchmark):
    spec = SPEC

    # --- locations -----------------------------------------------------------------------------
    @property
    def roi(self) -> int:
        return model.TINY_ROI if self.tiny else model.REAL_ROI

    @property
    def cases(self) -> tuple[str, ...]:
        return dataset.TINY_CASES if self.tiny else K.INFERENCE_CASES

    @property
    def raw_dir(self) -> Path:
        """KiTS19's data/ folder layout: <raw>/case_XXXXX/{imaging,segmentation}.nii.gz."""
        if self.settings.data_dir and not self.tiny:
            return Path(self.settings.data_dir).expanduser()
        base = paths.data_dir("kits19", self.settings.model_variant)
        return base if self.tiny else base / "data"

    @property
    def preprocessed(self) -> Path:
        return paths.preprocessed_dir("kits19", self.settings.model_variant)

    # --- model and data ------------------------------------------------------------------------
    def download_model(self) -> None:
        if self.tiny:
            model.build_tiny(self.model_dir)
        else:
            model.download_real(self.model_dir, with_torch=backend_class(self.settings.backend).runs_modules)

    def download_data(self) -> None:
        from code.unet3d import download

        if self.tiny:
            rng = np.random.default_rng(model.TINY_SEED)
            for case, (shape, spacing) in zip(dataset.TINY_CASES, dataset.TINY_SPECS):
                image, label, sp = dataset.synthetic_case(rng, shape, spacing)
                dataset.write_case(self.raw_dir, case, image, label, sp)
            print(f"[download_data] {len(dataset.TINY_CASES)} synthetic KiTS19-format cases -> {self.raw_dir}")
            return
        if self.settings.data_dir:
            for note in download.verify_local(self.raw_dir):
                print(f"[download_data] note: {note}")
            print(f"[download_data] using the KiTS19 cases in {self.raw_dir}")
            return
        download.fetch_cases(self.raw_dir)
        print(f"[download_data] {len(K.INFERENCE_CASES)} KiTS19 cases -> {self.raw_dir}")

    def preprocess_data(self) -> None:
        from code.unet3d.download import where_to_put

        fix = self.fix("download_data") if self.tiny else where_to_put(self.raw_dir)
        dataset.check_raw(self.raw_dir, self.cases, fix)
        manifest = {"cases": list(self.cases), "roi": self.roi, "raw": dataset.raw_fingerprint(self.raw_dir, self.cases),
                    "ground_truth": "torch-reference" if self.tiny else "kits19"}
        if self.tiny:
            manifest["model"] = _fingerprint(self.model_dir / model.TINY_WEIGHTS, self.fix("download_model"))
        out = self.preprocessed
        if dataset.is_current(out, manifest):
            print(f"[preprocess_data] {out} is up to date ({len(self.cases)} cases)")
            return
        out.parent.mkdir(parents=True, exist_ok=True)
        with staged_dir(out) as stage, progress.bar(len(self.cases), "preprocess", "case") as bar:
            if self.tiny:
                auxes = self._preprocess_tiny(stage, bar)
            else:
                auxes = dataset.preprocess_all(self.raw_dir, self.cases, self.roi, stage, bar.update)
            dataset.write_files_pkl(stage, self.cases, auxes)
            write_json(stage / dataset.MANIFEST, manifest)
        print(f"[preprocess_data] {len(self.cases)} cases -> {out}")
        if not self.tiny:
            bad = dataset.verify_md5(out, self.cases)
            if bad:
                print(f"[preprocess_data] note: {len(bad)}/{len(self.cases)} preprocessed files differ from the "
                      f"reference's meta/checksum_inference.json (e.g. {bad[0]}). Those md5s are of numpy 1.x pickles; "
                      "numpy >= 2 writes 'numpy._core.multiarray' where numpy 1 wrote 'numpy.core.multiarray', so the "
                      "bytes differ even for equal arrays. The accuracy run is what counts.")
            else:
                print("[preprocess_data] all preprocessed files match the reference's checksum_inference.json")

    def _preprocess_tiny(self, stage: Path, bar) -> dict:
        """The same preprocessing; then the label is replaced by the torch reference's prediction."""
        reference = self._torch_reference()
        auxes = {}
        for case in self.cases:
            image, _, aux = dataset.preprocess_case(self.raw_dir, case, self.roi)
            dataset.write_case_outputs(stage, image, reference(image)[None], aux)
            auxes[case] = aux
            bar.update()
        return auxes

    def _torch_reference(self):
        """Tiny ground truth: the fp32 torch model's own sliding-window segmentation (so a faithful
        pipeline scores DICE 1.0; anything less is a pipeline error)."""
        import torch

        net = model.load_tiny_torch(self.model_dir)

        def infer(x):
            with torch.inference_mode():
                return net(torch.from_numpy(x)).numpy()

        return lambda image: sliding_window.segment(image, infer, self.roi, 8)

    # --- engines -------------------------------------------------------------------------------
    @property
    def patch_batch(self) -> int:
        return int(self.settings.unet3d_patch_batch_size)

    def engine_spec(self, device_id: int = 0) -> EngineSpec:
        r = self.roi
        return self.engine_spec_for("unet3d", self.patch_batch, {model.INPUT: (-1, 1, r, r, r)}, device_id)

    def onnx_path(self) -> Path:
        return self.model_file(model.ONNX_NAME)

    def model_source(self) -> ModelSource:
        return ModelSource(self.onnx_path, module_factory="code.unet3d.model:eager_factory",
                           module_dir=self.model_dir, fix=self.fix("download_model"))

    def generate_engines(self) -> dict[str, str]:
        s = self.settings
        self.onnx_path()
        path = get_or_build(get_backend(s.backend), self.model_source(), self.engine_spec(), system_id=s.system_id,
                            benchmark="unet3d", scenario=s.scenario)
        return {"unet3d": str(path)}

    # --- run -----------------------------------------------------------------------------------
    def make_qsl(self) -> dataset.KiTSQSL:
        self.qsl = dataset.KiTSQSL(self.preprocessed, self.roi, self.settings.performance_sample_count or 0,
                                   self.fix("preprocess_data"))
        return self.qsl

    def make_processors(self, qsl, engines) -> list[Processor]:
        backend = get_backend(self.settings.backend)
        return [UNet3DProcessor(backend.load(engines["unet3d"], spec), qsl, self.roi, self.patch_batch,
                                self.settings.batch_size(), cores) for spec, cores in self.worker_specs()]

    def accuracy(self, accuracy_log: str, out_dir: str) -> dict:
        d = dataset.read_files_pkl(self.preprocessed, self.fix("preprocess_data"))
        cases = list(d["file_list"])
        shapes = {c: tuple(d["cases"][c]["image_shape"]) for c in cases}
        fix = self.fix("preprocess_data")

        def labels(case):
            return dataset.load_volume(self.preprocessed / f"{case}.pkl", shapes[case], self.roi, fix)[1][0]

        target = self.settings.round_entry().accuracy_min["DICE"]
        return score(accuracy_log, cases, shapes, labels, Path(out_dir) / "accuracy.txt", target, tiny=self.tiny)


class UNet3DProcessor(Processor):
    """One sample = one volume: its sliding-window segmentation, D*H*W uint8 labels (the reference's
    response bytes). ``patch_batch`` patches go to the engine per call."""

    def __init__(self, engine, qsl: dataset.KiTSQSL, roi: int, patch_batch: int, batch_size: int = 1,
                 cores: tuple[int, ...] | None = None):
        self.engine, self.qsl, self.roi, self.patch_batch = engine, qsl, roi, patch_batch
        self.batch_size, self.cores = batch_size, cores

    def infer(self, x: np.ndarray) -> np.ndarray:
        return self.engine.infer({model.INPUT: x})[model.OUTPUT]

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        return [sliding_window.segment(self.qsl.volume(i), self.infer, self.roi, self.patch_batch).reshape(-1)
                for i in indices]

    def warmup(self) -> None:
        """One engine call per patch-batch size the set will use (ORT plans, and TensorRT may pick a
        profile, per input shape: a cold first call per size made --fast's warm-up measure the tiny
        set 30% slow), and the importance-weight sums of every volume shape (cached per shape)."""
        r = self.roi
        shapes = sorted({tuple(v.shape[1:]) for v in self.qsl.images})
        sizes = {self.patch_batch}
        for shape in shapes:
            n = len(sliding_window.positions(shape, r))
            sizes.add(min(n, self.patch_batch) if n < self.patch_batch else (n % self.patch_batch or self.patch_batch))
        for b in sorted(sizes):
            for _ in range(2):
                self.infer(np.zeros((b, 1, r, r, r), np.float32))
        if len(shapes) <= 8:           # the cache's size: a real set's 43 maps would be gigabytes
            for shape in shapes:
                sliding_window.norm_map(shape, r)


def _fingerprint(p: Path, fix: str) -> list:
    if not p.is_file():
        raise MissingDataError(f"model not found: {p} (the tiny ground truth is its prediction)", fix)
    st = p.stat()
    return [st.st_size, st.st_mtime_ns]
