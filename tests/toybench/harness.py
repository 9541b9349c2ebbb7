"""Toybench actions: data, model, engine, QSL, processors and accuracy, through the same framework
calls as the real benchmarks (paths, engines.get_or_build, the backend the settings name)."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from code.common import paths
from code.common.backends import EngineSpec, get_backend
from code.common.backends.base import ModelSource
from code.common.benchmark import Benchmark, Processor
from code.common.engines import get_or_build
from code.common.fileio import load_array, staged_path, write_text
from code.toybench import SPEC, model
from code.toybench.accuracy import score
from code.toybench.dataset import ToyQSL, preprocess, read_labels, synthesize


class ToyBenchmark(Benchmark):
    spec = SPEC

    # --- locations ---------------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        s = self.settings
        return Path(s.data_dir) if s.data_dir else paths.data_dir(SPEC.name, s.model_variant)

    @property
    def raw_file(self) -> Path:
        return self.data_dir / "readings_uint8.npy"

    @property
    def labels_file(self) -> Path:
        return self.data_dir / "labels.txt"

    @property
    def preprocessed(self) -> Path:
        return paths.preprocessed_dir(SPEC.name, self.settings.model_variant) / "vectors_fp32.npy"

    # --- data and model: nothing to fetch, everything is built from the seed ------------------
    def download_model(self) -> None:
        model.build(self.model_dir)

    def download_data(self) -> None:
        raw, labels = synthesize()
        with staged_path(self.raw_file, suffix=".npy") as tmp, open(tmp, "wb") as f:
            np.save(f, raw)       # a file object: np.save would add ".npy" to the staged name
        write_text(self.labels_file, "".join(f"{v}\n" for v in labels))
        print(f"[download_data] {len(raw)} toybench vectors -> {self.raw_file}, labels -> {self.labels_file}")

    def preprocess_data(self) -> None:
        raw = load_array(self.raw_file, self.fix("download_data"), dtype=np.uint8, shape=(None, model.FEATURES))
        with staged_path(self.preprocessed, suffix=".npy") as tmp, open(tmp, "wb") as f:
            np.save(f, preprocess(raw))
        print(f"[preprocess_data] {len(raw)} vectors -> {self.preprocessed}")

    # --- engines -----------------------------------------------------------------------------
    def engine_spec(self, device_id: int = 0) -> EngineSpec:
        return self.engine_spec_for(SPEC.name, self.settings.batch_size(), {model.INPUT: (-1, model.FEATURES)}, device_id)

    def onnx_path(self) -> Path:
        return self.model_file(model.ONNX_NAME)

    def generate_engines(self) -> dict[str, str]:
        s = self.settings
        path = get_or_build(get_backend(s.backend), ModelSource(self.onnx_path, fix=self.fix("download_model")),
                            self.engine_spec(), system_id=s.system_id, benchmark=SPEC.name, scenario=s.scenario)
        return {SPEC.name: str(path)}

    # --- run -------------------------------------------------------------------------------------
    def make_qsl(self) -> ToyQSL:
        labels = read_labels(self.labels_file, self.fix("download_data"))
        return ToyQSL(self.preprocessed, labels, self.settings.performance_sample_count or len(labels),
                      self.fix("preprocess_data"))

    def make_processors(self, qsl: ToyQSL, engines: Mapping[str, str]) -> list[Processor]:
        backend = get_backend(self.settings.backend)
        return [ToyProcessor(backend.load(engines[SPEC.name], spec), qsl, spec.batch_size, cores)
                for spec, cores in self.worker_specs()]

    def accuracy(self, accuracy_log: str, out_dir: str) -> dict:
        labels = read_labels(self.labels_file, self.fix("download_data"))
        target = self.settings.round_entry().accuracy_min["acc"]
        return score(accuracy_log, labels, Path(out_dir) / "accuracy.txt", target, tiny=self.tiny)


class ToyProcessor(Processor):
    """Batches -> int32 labels, one 4-byte array per sample (what the scorer decodes)."""

    def __init__(self, engine, qsl: ToyQSL, batch_size: int, cores: tuple[int, ...] | None = None):
        self.engine, self.qsl, self.batch_size, self.cores = engine, qsl, batch_size, cores

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        out = self.engine.infer({model.INPUT: self.qsl.batch(indices)})[model.OUTPUTS[0]]
        labels = np.asarray(out).reshape(-1).astype(np.int32)
        return [labels[i:i + 1] for i in range(len(indices))]

    def warmup(self) -> None:
        self.engine.infer({model.INPUT: np.zeros((self.batch_size, model.FEATURES), np.float32)})
