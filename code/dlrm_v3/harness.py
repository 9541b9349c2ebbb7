"""DLRM-v3 actions: the streaming data set and its tiny twin, the HSTU model, the engine, QSL, Processor and
NE / accuracy / GAUC.

Engine: the whole model as an eager torch module (``--backend=pytorch``; the pytorch backend's eager factory,
``code.dlrm_v3.model:eager_factory``): jagged histories and 1e9-row tables leave no ONNX worth exporting.
Answers (main.py of the reference): accuracy mode [ts_idx, query_idx, predictions, labels, weights, n], performance
mode [ts_idx, query_idx, predictions]. The two layouts differ, so TEST01's byte comparison cannot hold; the checker
asks TEST08 of dlrm-v3 (models_TEST08, not models_TEST01), which matches answers on (ts_idx, query_idx).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from code.common import paths
from code.common.backends import get_backend
from code.common.backends.base import ModelSource
from code.common.benchmark import Benchmark, Processor
from code.common.engines import get_or_build
from code.common.errors import HarnessError
from code.dlrm_v3 import SPEC, constants as K, dataset

ENGINE = "hstu"


class DLRMv3Benchmark(Benchmark):
    spec = SPEC

    # --- locations -----------------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        if self.settings.data_dir and not self.tiny:
            return Path(self.settings.data_dir).expanduser()
        return paths.data_dir("dlrm_v3", self.settings.model_variant)

    @property
    def layout(self) -> dict:
        return K.TINY_DATA if self.tiny else K.SAMPLED

    def config(self):
        from code.dlrm_v3 import model

        return model.read_config(self.model_dir, self.fix("download_model"))

    def streaming(self) -> dataset.Streaming:
        cfg = self.config()
        fix = self.fix("download_data") if self.tiny or not self.settings.data_dir else (
            f"put the sampled streaming set ({', '.join(K.INDEX_FILES)}, 0.csv under {K.SAMPLED['prefix']}) in "
            f"{self.data_dir}, or run make download_data BENCHMARKS=dlrm_v3")
        return dataset.Streaming(self.data_dir, self.layout, fix, cfg.max_uih_len, cfg.max_num_candidates_inference)

    # --- model and data ------------------------------------------------------------------------
    def download_model(self) -> None:
        from code.dlrm_v3 import model

        if self.tiny:
            _, p = model.build_tiny(self.model_dir)
            print(f"[download_model] tiny HSTU ({K.TINY['num_layers']} STU layers, dim {K.TINY['transducer_dim']}, "
                  f"seed {K.TINY_SEED}) -> {p}")
            return
        if model.real_checkpoint(self.model_dir) is not None:
            print(f"[download_model] {model.real_checkpoint(self.model_dir)} is already here")
            return
        from code.common.llm import download as dl

        print(f"[download_model] the dlrm-v3 checkpoint (~1 TB) -> {self.model_dir} (official command: "
              f"{dl.r2_command(K.CHECKPOINT_URI, self.model_dir)})")
        dl.r2_download(K.CHECKPOINT_URI, self.model_dir)

    def download_data(self) -> None:
        if self.tiny:
            self._make_tiny_data()
            return
        d = self.data_dir / K.SAMPLED["prefix"]
        if all((d / n).is_file() for n in K.INDEX_FILES):
            print(f"[download_data] {d} is already here")
            return
        from code.common.llm import download as dl

        print(f"[download_data] the sampled dlrm-v3 streaming set -> {self.data_dir} (official command: "
              f"{dl.r2_command(K.DATASET_URI, self.data_dir)}; to generate the whole set instead: "
              f"{K.DATA_GENERATION})")
        dl.r2_download(K.DATASET_URI, self.data_dir)

    def _make_tiny_data(self) -> None:
        """Seeded users, histories and candidates in the reference's layout; the candidates' ratings of the
        inference timestamps follow the tiny model's own decisions (rating >= 4 where its probability is >= 0.5
        after its output bias is centred on this data, K.TINY_LABEL_FLIP of them flipped)."""
        import torch

        from code.dlrm_v3 import model

        net = model.load(self.model_dir, self.fix("download_model"))
        cfg = net.cfg
        lines, requests = dataset.tiny_users()
        L = K.TINY_DATA
        for ts in range(L["train_ts"], L["total_ts"]):          # placeholder ratings, replaced below
            for u in requests[ts]:
                n = len(dataset._ints(lines[u][4 * (ts + 2)]))
                lines[u][1 + 4 * (ts + 2)] = ",".join(["1"] * n)
        dataset.write_streaming(self.data_dir, lines, requests, L)
        data = dataset.Streaming(self.data_dir, L, self.fix("download_data"), cfg.max_uih_len,
                                 cfg.max_num_candidates_inference)
        samples = [data.read(t, q) for t, n in enumerate(data.counts()) for q in range(n)]
        feeds = dataset.pack(samples, cfg.action_weights)
        probs = model.predict(net, feeds)
        real = [p[:s.cand_ids.shape[0]] for p, s in zip(probs, samples)]
        logit = np.log(np.clip(np.concatenate(real), 1e-6, 1 - 1e-6)) - np.log1p(-np.clip(np.concatenate(real),
                                                                                           1e-6, 1 - 1e-6))
        shift = float(np.median(logit))
        with torch.no_grad():
            net._multitask_module._prediction_module[-1].bias -= shift
        model.save(net, self.model_dir)
        probs = model.predict(net, feeds)
        rng = np.random.default_rng(K.TINY_SEED + 1)
        for p, s in zip(probs, samples):
            lab = (p[:s.cand_ids.shape[0]] >= 0.5) ^ (rng.random(s.cand_ids.shape[0]) < K.TINY_LABEL_FLIP)
            dataset.set_candidate_ratings(lines, L["train_ts"] + s.ts_idx, requests[L["train_ts"] + s.ts_idx][
                s.query_idx], lab.astype(np.int64), K.TINY_SEED)
        dataset.write_streaming(self.data_dir, lines, requests, L)
        print(f"[download_data] tiny synthetic streaming set ({L['num_users']} users, {L['total_ts']} timestamps, "
              f"{len(samples)} inference requests) -> {self.data_dir / L['prefix']}")

    def preprocess_data(self) -> None:
        """Nothing to write: the QSL reads the reference's files; check they parse."""
        data = self.streaming()
        counts = data.counts()
        data.read(0, 0)
        print(f"[preprocess_data] {sum(counts)} inference requests over {len(counts)} timestamps in {data.dir}")

    # --- engines -------------------------------------------------------------------------------
    def engine_spec(self, device_id: int = 0):
        shapes = {n: (-1,) for n in ("user_id",)} | {n: (-1, -1) for n in ("uih_ids", "uih_actions", "cand_ids")} \
            | {"lengths": (-1, 2)}
        return self.engine_spec_for(ENGINE, self.settings.batch_size(), shapes, device_id,
                                    extra={"fix": self.fix("download_model")})

    def model_source(self) -> ModelSource:
        def no_onnx():
            raise HarnessError("dlrm-v3 has no ONNX export (jagged sequences, 1e9-row tables)",
                               "use --backend=pytorch")
        return ModelSource(no_onnx, module_factory="code.dlrm_v3.model:eager_factory", module_dir=self.model_dir,
                           fix=self.fix("download_model"))

    def generate_engines(self) -> dict[str, str]:
        s = self.settings
        if not (self.model_dir / "config.json").is_file() and not self.tiny:
            from code.dlrm_v3 import model

            model.read_config(self.model_dir, self.fix("download_model"))
        path = get_or_build(get_backend(s.backend), self.model_source(), self.engine_spec(), system_id=s.system_id,
                            benchmark="dlrm_v3", scenario=s.scenario)
        return {ENGINE: str(path)}

    # --- run -----------------------------------------------------------------------------------
    def make_qsl(self) -> dataset.StreamingQSL:
        self.qsl = dataset.StreamingQSL(self.streaming(), self.settings.performance_sample_count or 0)
        return self.qsl

    def offline_order_key(self, qsl):
        """Offline: the one big query sorted by history length, then candidates, before it is cut into batches, so a
        batch pads (dataset.pack: the power of two above its longest row) to near its own rows' lengths."""
        def key(i: int) -> tuple[int, int]:
            s = qsl.sample(i)
            return s.uih_ids.shape[0], s.cand_ids.shape[0]
        return key

    def full_answers(self) -> bool:
        return self.test_mode == "AccuracyOnly"

    def make_processors(self, qsl, engines) -> list[Processor]:
        backend = get_backend(self.settings.backend)
        cfg = self.config()
        # TEST ONLY (--plant_prediction_shift): performance-mode answers drift from the accuracy run's (TEST08)
        shift = 0.0 if self.full_answers() else float(getattr(self.control, "plant_prediction_shift", 0.0) or 0.0)
        return [HSTUProcessor(backend.load(engines[ENGINE], spec), qsl, self.settings.batch_size(), cfg.action_weights,
                              self.full_answers(), cores, shift) for spec, cores in self.worker_specs()]

    def accuracy(self, accuracy_log: str, out_dir: str) -> dict:
        from code.dlrm_v3.accuracy import score

        qsl = dataset.StreamingQSL(self.streaming())
        index = {qsl.pair(i): i for i in range(qsl.total_count)}

        def labels(t: int, q: int) -> np.ndarray:
            if (t, q) not in index:
                raise HarnessError(f"accuracy log: request ({t}, {q}) is not in the data set",
                                   "rerun the accuracy test (--test_mode=AccuracyOnly)")
            return qsl.read(index[(t, q)]).labels

        targets = dict(self.settings.round_entry().accuracy_min)
        return score(accuracy_log, Path(out_dir) / "accuracy.txt", targets, labels, tiny=self.tiny)


class HSTUProcessor(Processor):
    """A batch = up to ``batch_size`` requests padded into one engine call; one answer per request."""

    def __init__(self, engine, qsl: dataset.StreamingQSL, batch_size: int, action_weights, full: bool,
                 cores: tuple[int, ...] | None = None, plant_shift: float = 0.0):
        self.engine, self.qsl, self.batch_size, self.cores = engine, qsl, batch_size, cores
        self.action_weights, self.full, self.plant_shift = tuple(action_weights), full, plant_shift

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        samples = [self.qsl.sample(i) for i in indices]
        probs = self.engine.infer(dataset.pack(samples, self.action_weights))[self.engine.output_names[0]]
        out = []
        for p, s in zip(probs, samples):
            n = s.cand_ids.shape[0]
            head = np.asarray([s.ts_idx, s.query_idx], np.float32)
            pred = p[:n].astype(np.float32)
            if self.plant_shift:
                pred = np.clip(pred + np.float32(self.plant_shift), 0, 1).astype(np.float32)
            parts = [head, pred]
            if self.full:
                parts += [s.labels, s.weights, np.asarray([n], np.float32)]
            out.append(np.ascontiguousarray(np.concatenate(parts)))
        return out

    def warmup(self) -> None:
        n = min(self.qsl.total_count, self.batch_size)
        for _ in range(2):
            self.engine.infer(dataset.pack([self.qsl.sample(i) for i in range(n)], self.action_weights))
