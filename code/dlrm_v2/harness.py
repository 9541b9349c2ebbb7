"""DLRM-v2 actions: the multi-hot Criteo day-23 set, its query trace, the DCNv2 model, engines, QSL,
the Processor and ROC AUC.

Engines: ``--backend=pytorch`` runs the whole model as an eager torch module (tables as CPU
EmbeddingBags, on the GPU, row-wise sharded over the GPUs, or in host memory: ``dlrm_embedding_sharding``).
``tensorrt`` and ``onnxruntime`` run an ONNX of the dense part (bottom MLP + DCNv2 interaction + top MLP
+ sigmoid) fed by the pooled embeddings, which the Processor looks up in torch (the same tables and
placements); a TensorRT engine holding 40M-row tables is not worth building. On a CPU system the
default backend is onnxruntime (that split path); ``--backend=pytorch`` runs the whole model in torch.
One copy of the tables per process, shared by its workers.
"""
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
from code.common.fileio import staged_dir
from code.dlrm_v2 import SPEC, constants as K, dataset, model
from code.dlrm_v2.accuracy import score


def where_to_put(data_dir: Path) -> str:
    return (f"put {', '.join(K.DATA_FILES)} (the multi-hot Criteo day 23, built from the Criteo 1TB raw day_23 "
            f"with the training reference's materialize_synthetic_multihot_dataset.py: {K.TRAINING_REFERENCE}) in "
            f"{data_dir}, or pass --data_dir=<folder with them>; or run make download_data BENCHMARKS=dlrm_v2 "
            f"(the MLCommons R2 copy)")


class DLRMBenchmark(Benchmark):
    spec = SPEC

    # --- locations -----------------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        if self.settings.data_dir and not self.tiny:
            return Path(self.settings.data_dir).expanduser()
        return paths.data_dir("criteo", self.settings.model_variant)

    @property
    def preprocessed(self) -> Path:
        return paths.preprocessed_dir("criteo", self.settings.model_variant)

    def data_fix(self) -> str:
        return self.fix("download_data") if self.tiny or not self.settings.data_dir else where_to_put(self.data_dir)

    def config(self) -> model.DLRMConfig:
        return model.read_config(self.model_dir, self.fix("download_model")) if self.tiny else model.REAL

    def files_dir(self) -> Path:
        """The folder holding the three day-23 files (the R2 copy may put them one level down)."""
        d = self.data_dir
        if (d / K.DENSE_FILE).is_file() or not d.is_dir():
            return d
        hits = sorted(p.parent for p in d.rglob(K.DENSE_FILE))
        return hits[0] if hits else d

    def day23(self) -> dataset.Day23:
        cfg = self.config()
        return dataset.Day23(self.files_dir(), cfg.num_embeddings, cfg.multi_hot, self.data_fix())

    # --- model and data ------------------------------------------------------------------------
    def download_model(self) -> None:
        if self.tiny:
            cfg = model.tiny_config()
            dense, sparse = dataset.tiny_features(cfg.num_embeddings, cfg.multi_hot)
            p = model.build_tiny(self.model_dir, dataset.features_of(dense, sparse))
            print(f"[download_model] tiny DCNv2 (26 tables of {min(cfg.num_embeddings)}-{max(cfg.num_embeddings)} "
                  f"rows, dim {cfg.dim}) -> {p}")
            return
        model.download_real(self.model_dir)

    def download_data(self) -> None:
        if self.tiny:
            import torch

            fix = self.fix("download_model")
            net = model.load_torch(self.model_dir, fix)
            cfg = net.cfg
            dense, sparse = dataset.tiny_features(cfg.num_embeddings, cfg.multi_hot)
            d, sp = dataset.features_of(dense, sparse)
            with torch.inference_mode(), model.small_job_threads():
                probs = np.concatenate([net(torch.from_numpy(d[s:s + 4096]), torch.from_numpy(sp[s:s + 4096])).numpy()
                                        for s in range(0, len(d), 4096)])
            dataset.write_day23(self.data_dir, dense, sparse, dataset.tiny_labels(probs))
            print(f"[download_data] synthetic multi-hot Criteo day 23 ({len(d)} rows, "
                  f"{dataset.validation_rows(len(d))} validation items) -> {self.data_dir}")
            return
        if self.settings.data_dir:
            day = self.day23()
            print(f"[download_data] using the multi-hot Criteo day 23 in {day.dir} ({day.total_rows} rows)")
            return
        if (self.data_dir / "dlrm-v2-preprocessed-dataset.md5").is_file() and \
                all((self.files_dir() / n).is_file() for n in K.DATA_FILES):
            print(f"[download_data] {self.data_dir} is already downloaded and verified")
            return
        from code.common.llm import download as dl

        have = sum(p.stat().st_size for p in self.data_dir.rglob("*") if p.is_file()) if self.data_dir.exists() else 0
        model.check_disk(self.data_dir, max(0, K.DATASET_BYTES - have) + K.DISK_MARGIN_BYTES,
                         "the multi-hot Criteo day 23")
        print(f"[download_data] multi-hot Criteo day 23 (~{K.DATASET_BYTES / 1e9:.0f} GB) -> {self.data_dir} "
              f"(official command: {dl.r2_command(K.DATASET_URI, self.data_dir)})")
        dl.r2_download(K.DATASET_URI, self.data_dir)
        day = self.day23()
        print(f"[download_data] {day.total_rows} rows in {day.dir}")

    def preprocess_data(self) -> None:
        """Check the day-23 files (widths, dtypes, every validation index within its table) and write
        the reference's query trace for the validation half."""
        day = self.day23()
        cfg = self.config()
        manifest = self.manifest(day)
        out = self.preprocessed
        if dataset.is_current(out, manifest):
            print(f"[preprocess_data] {out} is up to date")
            return
        with progress.bar(len(cfg.num_embeddings), "check indices", "table") as bar:
            day.check_indices(progress=bar.update)
        offsets = dataset.query_offsets(day.rows)
        out.parent.mkdir(parents=True, exist_ok=True)
        with staged_dir(out) as stage:
            dataset.write_trace(stage / K.TRACE_FILE, offsets)
            dataset.write_manifest(stage, manifest)
        print(f"[preprocess_data] {day.rows} validation items in {len(offsets) - 1} queries -> {out / K.TRACE_FILE}")

    def manifest(self, day: dataset.Day23) -> dict:
        """What the trace was written from: the files (size, mtime), the table sizes, the aggregation."""
        cfg = self.config()
        return {"files": day.fingerprint(), "validation_rows": day.rows, "num_embeddings": list(cfg.num_embeddings),
                "multi_hot": list(cfg.multi_hot), "seed": K.QUANTILE_SEED, "quantile": list(K.QUANTILE),
                "dir": str(day.dir)}

    def offsets(self) -> np.ndarray:
        fix = self.fix("preprocess_data")
        offs = dataset.read_trace(self.preprocessed / K.TRACE_FILE, fix)
        return offs

    # --- engines -------------------------------------------------------------------------------
    @property
    def full_model(self) -> bool:
        """The whole model in one torch engine (pytorch); else the dense-part ONNX + torch lookups."""
        return backend_class(self.settings.backend).runs_modules

    def shard_devices(self) -> list[str]:
        """Where the tables go: all the GPUs (row-wise shards), ["cpu"] (host tables on a GPU system), or
        [] (the worker's own device)."""
        s = self.settings
        gpus = s.system.gpu_count if s.system.accelerator == "gpu" else 0
        mode = s.dlrm_embedding_sharding
        if gpus and (mode == "row" or (mode == "auto" and gpus > 1)):
            return [f"cuda:{i}" for i in range(gpus)]
        if gpus and mode == "host":
            return ["cpu"]
        return []

    def max_items(self) -> int:
        return self.settings.batch_size() * max(K.QUANTILE)

    def engine_spec(self, device_id: int = 0) -> EngineSpec:
        cfg = self.config()
        hot = sum(cfg.multi_hot)
        if self.full_model:
            shapes = {"dense": (-1, cfg.num_dense), "sparse": (-1, hot)}
            extra = {"shard_devices": self.shard_devices(), "fix": self.fix("download_model")}
        else:
            shapes = {"dense": (-1, cfg.num_dense), "pooled": (-1, len(cfg.num_embeddings), cfg.dim)}
            extra = {}
        return self.engine_spec_for("dlrm" if self.full_model else "dlrm_dense", self.max_items(), shapes, device_id,
                                    profile_batch_sizes=(1, 200, self.max_items()), extra=extra)

    def onnx_path(self) -> Path:
        return model.export_dense_onnx(self.model_dir, self.fix("download_model"))

    def model_source(self) -> ModelSource:
        if self.full_model:
            return ModelSource(self.onnx_path, module_factory="code.dlrm_v2.model:eager_factory",
                               module_dir=self.model_dir, fix=self.fix("download_model"))
        return ModelSource(self.onnx_path, fix=self.fix("download_model"))

    def generate_engines(self) -> dict[str, str]:
        s = self.settings
        model.read_config(self.model_dir, self.fix("download_model"))
        name = "dlrm" if self.full_model else "dlrm_dense"
        path = get_or_build(get_backend(s.backend), self.model_source(), self.engine_spec(), system_id=s.system_id,
                            benchmark="dlrm_v2", scenario=s.scenario)
        return {name: str(path)}

    # --- run -----------------------------------------------------------------------------------
    def make_qsl(self) -> dataset.CriteoQSL:
        offsets = self.offsets()
        day = self.day23()
        if not dataset.is_current(self.preprocessed, self.manifest(day)):
            raise MissingDataError(f"{self.preprocessed}: the query trace is not of the day-23 files in {day.dir} "
                                   "(they changed since preprocess_data, or it never ran)", self.fix("preprocess_data"))
        self.qsl = dataset.CriteoQSL(day, offsets, self.settings.performance_sample_count or 0)
        return self.qsl

    def lookup_tables(self, device_id: int):
        """The torch tables the dense-part engines are fed from: one copy per process and placement."""
        s = self.settings
        devices = self.shard_devices() or ([f"cuda:{device_id}"] if s.system.accelerator == "gpu" else ["cpu"])
        return model.shared_embeddings(self.model_dir, devices, self.fix("download_model")).embeddings

    def make_processors(self, qsl, engines) -> list[Processor]:
        backend = get_backend(self.settings.backend)
        out = []
        for spec, cores in self.worker_specs():
            if self.full_model:
                eng = backend.load(engines["dlrm"], spec)
                out.append(DLRMProcessor(eng, qsl, self.settings.batch_size(), cores))
            else:
                eng = backend.load(engines["dlrm_dense"], spec)
                out.append(DLRMProcessor(eng, qsl, self.settings.batch_size(), cores,
                                         tables=self.lookup_tables(spec.device_id), threads=spec.intra_op_threads))
        return out

    def accuracy(self, accuracy_log: str, out_dir: str) -> dict:
        offsets = self.offsets()
        day = self.day23()

        def labels_of(s: int, e: int) -> np.ndarray:
            return np.asarray(day.labels[s:e]).reshape(-1).astype(np.float32)

        target = self.settings.round_entry().accuracy_min["AUC"]
        return score(accuracy_log, offsets, labels_of, Path(out_dir) / "accuracy.txt", target, tiny=self.tiny)


class DLRMProcessor(Processor):
    """A batch = up to ``batch_size`` user queries, their items concatenated into one engine call; each
    query's response is float32 (click probability, label) per item, the layout accuracy-dlrm.py reads."""

    def __init__(self, engine, qsl: dataset.CriteoQSL, batch_size: int, cores: tuple[int, ...] | None = None,
                 tables=None, threads: int = 0):
        self.engine, self.qsl, self.batch_size, self.cores = engine, qsl, batch_size, cores
        self.tables, self.threads = tables, threads

    def thread_init(self) -> None:
        """torch's intra-op thread count is per calling thread: the lookups get the engine's count."""
        super().thread_init()
        if self.tables is not None and self.threads:
            import torch

            torch.set_num_threads(self.threads)

    def lookup_device(self):
        return self.tables.devices[0] if hasattr(self.tables, "devices") else self.tables.tables[0].weight.device

    def probabilities(self, dense: np.ndarray, sparse: np.ndarray) -> np.ndarray:
        if self.tables is None:
            return self.engine.infer({"dense": dense, "sparse": sparse})[model.OUTPUT].reshape(-1)
        import torch

        with torch.inference_mode():
            pooled = self.tables(torch.from_numpy(sparse).to(self.lookup_device()))
            pooled = pooled.float().cpu().numpy()
        return self.engine.infer({"dense": dense, "pooled": pooled})[model.OUTPUT].reshape(-1)

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        parts = [self.qsl.sample(i) for i in indices]
        if len(parts) == 1:
            dense, sparse, _ = parts[0]
        else:
            dense = np.concatenate([p[0] for p in parts])
            sparse = np.concatenate([p[1] for p in parts])
        probs = self.probabilities(dense, sparse).astype(np.float32, copy=False)
        out, start = [], 0
        for _, _, labels in parts:
            n = labels.shape[0]
            out.append(np.ascontiguousarray(np.stack([probs[start:start + n], labels], 1).reshape(-1)))
            start += n
        return out

    def warmup(self) -> None:
        """One engine call at the largest and at a typical batch size (plans, allocator pools)."""
        dense, sparse, _ = self.qsl.day.gather(0, min(self.qsl.day.rows, 200))
        for n in sorted({dense.shape[0], min(self.qsl.day.rows, self.batch_size * 270)}):
            reps = -(-n // dense.shape[0])
            d = np.ascontiguousarray(np.tile(dense, (reps, 1))[:n])
            s = np.ascontiguousarray(np.tile(sparse, (reps, 1))[:n])
            for _ in range(2):
                self.probabilities(d, s)
