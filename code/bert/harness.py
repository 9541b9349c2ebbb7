"""BERT actions: SQuAD data, features, model, engines, QSL, the seqlen-aware Processor, F1."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from code.bert import SPEC, dataset, model, squad
from code.common import paths
from code.common.backends import EngineSpec, backend_class, get_backend
from code.common.backends.base import ModelSource
from code.common.benchmark import Benchmark, Processor
from code.common.engines import get_or_build
from code.common.errors import MissingDataError

NEG = -10000.0     # logit emitted past a feature's true length (accuracy-squad.py pads with the same value)


def buckets(step: int, max_len: int = squad.MAX_SEQ) -> tuple[int, ...]:
    """Bucket lengths step, 2*step, ..., max_len (max_len always last)."""
    out = list(range(step, max_len, step)) + [max_len]
    return tuple(sorted(set(out)))


class BertBenchmark(Benchmark):
    spec = SPEC

    # --- locations ---------------------------------------------------------------------------
    @property
    def squad_path(self) -> Path:
        if self.settings.data_dir and not self.tiny:
            return Path(self.settings.data_dir).expanduser() / dataset.SQUAD_NAME
        return paths.data_dir("squad", self.settings.model_variant) / dataset.SQUAD_NAME

    @property
    def preprocessed(self) -> Path:
        return paths.preprocessed_dir("squad", self.settings.model_variant)

    # --- model and data ----------------------------------------------------------------------
    def download_model(self) -> None:
        if self.tiny:
            model.build_tiny(self.model_dir, dataset.tiny_vocab())
        else:
            model.download_real(self.model_dir, with_torch=backend_class(self.settings.backend).runs_modules)

    def download_data(self) -> None:
        if self.tiny:
            self._make_tiny_data()
            return
        if self.settings.data_dir:
            dataset.read_squad(self.squad_path, self._where_to_put())
            print(f"[download_data] using {self.squad_path}")
            return
        dataset.download_squad(self.squad_path.parent)
        dataset.read_squad(self.squad_path, self.fix("download_data"))

    def _where_to_put(self) -> str:
        return (f"put the SQuAD v1.1 dev set at {self.squad_path} (from {dataset.SQUAD_URL}), or run "
                f"make download_data BENCHMARKS=bert without --data_dir")

    def _make_tiny_data(self) -> None:
        """Synthetic SQuAD-format questions; each question's first answer is the fp32 torch reference's
        own best span (features at 384 tokens, ``torch_logits``, this package's post-processing), the
        planted span second: a faithful pipeline scores F1 100 and any error (a shifted sample, a wrong
        token map, a window dropped) scores far less."""
        from code.common.fileio import write_json

        fix = self.fix("download_model")
        vocab = model.read_vocab(self.model_dir, fix)
        if not (self.model_dir / model.TINY_WEIGHTS).is_file():
            raise MissingDataError(f"model not found: {self.model_dir / model.TINY_WEIGHTS} (the tiny ground truth "
                                   "is its prediction)", fix)
        data = dataset.tiny_squad_planted()
        examples = squad.read_examples(data)
        features = squad.convert(examples, dataset.tokenizer(vocab))
        preds = squad.predict(examples, features, torch_logits(model.load_tiny_torch(self.model_dir), features))
        for art in data["data"]:
            for para in art["paragraphs"]:
                for qa in para["qas"]:
                    text = preds[qa["id"]]
                    at = para["context"].find(text) if text and text != "empty" else -1
                    if at >= 0:
                        qa["answers"].insert(0, {"text": text, "answer_start": at})
        write_json(self.squad_path, data)
        print(f"[download_data] {len(examples)} tiny questions ({len(features)} features) -> {self.squad_path}")

    def preprocess_data(self) -> None:
        fix = self.fix("download_data") if self.tiny or not self.settings.data_dir else self._where_to_put()
        vocab = model.read_vocab(self.model_dir, self.fix("download_model"))
        if not self.squad_path.is_file():
            raise MissingDataError(f"SQuAD file not found: {self.squad_path}", fix)
        manifest = {"squad": dataset.fingerprint(self.squad_path), "vocab": dataset.fingerprint(vocab),
                    "max_seq": squad.MAX_SEQ, "doc_stride": squad.DOC_STRIDE, "max_query": squad.MAX_QUERY}
        out = self.preprocessed
        if dataset.is_current(out, manifest):
            print(f"[preprocess_data] {out} is up to date")
            return
        _, examples = dataset.read_squad(self.squad_path, fix)
        features = squad.convert(examples, dataset.tokenizer(vocab))
        dataset.write_preprocessed(out, examples, features, manifest)
        print(f"[preprocess_data] {len(examples)} questions -> {len(features)} features -> {out}")
        want = self._dataset_size()
        if not self.tiny and want and len(features) != want:
            print(f"[preprocess_data] note: {len(features)} features, the round table expects {want} "
                  "(is this the SQuAD v1.1 dev set and the reference's vocab.txt?)")

    def _dataset_size(self) -> int:
        try:
            return int(self.settings.round_entry().dataset_size)
        except Exception:  # noqa: BLE001 - no round entry: nothing to compare against
            return 0

    # --- engines -----------------------------------------------------------------------------
    @property
    def seqlen_batching(self) -> str:
        return self.settings.bert_seqlen_batching

    def bucket_lengths(self) -> tuple[int, ...]:
        if self.seqlen_batching == "padded":
            return (squad.MAX_SEQ,)
        return buckets(int(self.settings.bert_bucket_step))

    def engine_spec(self, device_id: int = 0, seq: int = -1) -> EngineSpec:
        s = self.settings
        return self.engine_spec_for("bert" if seq < 0 else f"bert-s{seq}", max(1, s.batch_size()),
                                    {n: (-1, seq if seq > 0 else squad.MAX_SEQ) for n in model.INPUTS}, device_id,
                                    extra={"variant": s.model_variant})

    def onnx_path(self) -> Path:
        return self.model_file(model.ONNX_NAME)

    def _engine_lengths(self) -> tuple[int, ...]:
        """TensorRT: one engine per bucket (its profile fixes the sequence length; the harness's
        TensorRT profiles vary the batch only). A static-length ONNX (the MLPerf export fixes 384)
        has one bucket, its own length."""
        static = model.onnx_seq_dim(self.onnx_path())
        return (static,) if static else self.bucket_lengths()

    def generate_engines(self) -> dict[str, str]:
        s = self.settings
        self.onnx_path()
        backend = get_backend(s.backend)
        src = ModelSource(self.onnx_path, module_factory="code.bert.model:eager_factory", module_dir=self.model_dir,
                          fix=self.fix("download_model"))
        if not backend.static_shapes:          # one engine for every length; else one per length bucket
            return {"bert": str(get_or_build(backend, src, self.engine_spec(), system_id=s.system_id,
                                             benchmark="bert", scenario=s.scenario))}
        return {f"bert-s{L}": str(get_or_build(backend, src, self.engine_spec(seq=L), system_id=s.system_id,
                                               benchmark="bert", scenario=s.scenario))
                for L in self._engine_lengths()}

    # --- run ---------------------------------------------------------------------------------
    def make_qsl(self) -> dataset.SquadQSL:
        self.qsl = dataset.SquadQSL(self.preprocessed, self.settings.performance_sample_count or 0,
                                    self.fix("preprocess_data"))
        return self.qsl

    def make_processors(self, qsl, engines: Mapping[str, str]) -> list[Processor]:
        backend = get_backend(self.settings.backend)
        out = []
        for spec, cores in self.worker_specs():
            if "bert" in engines:
                eng = backend.load(engines["bert"], spec)
                static = _static_len(eng)
                lengths = (static,) if static else self.bucket_lengths()
                by_len = {L: eng for L in lengths}
            else:
                by_len = {}
                for name, path in sorted(engines.items()):
                    L = int(name.split("-s", 1)[1])
                    by_len[L] = backend.load(path, dataclasses.replace(
                        spec, name=name, input_shapes={n: (-1, L) for n in model.INPUTS}))
            out.append(BertProcessor(by_len, qsl, self.settings.batch_size(), self.seqlen_batching, cores))
        return out

    def offline_order_key(self, qsl):
        """bucketed: the Offline query is sorted by true length before it is cut into batches, so a batch
        is (nearly) one bucket and pads little; padded: LoadGen's order (every batch runs at 384 anyway)."""
        if self.seqlen_batching != "bucketed":
            return None
        lens = qsl.seq_len
        return lambda i: int(lens[i])

    def accuracy(self, accuracy_log: str, out_dir: str) -> dict:
        from code.bert.accuracy import score

        examples, features = dataset.load_meta(self.preprocessed, self.fix("preprocess_data"))
        target = self.settings.round_entry().accuracy_min["F1"]
        return score(accuracy_log, examples, features, Path(out_dir) / "accuracy.txt", target, tiny=self.tiny)


def _static_len(engine) -> int | None:
    """The engine's fixed sequence length (an ONNX Runtime session of the 384-token MLPerf export), or None."""
    sess = getattr(engine, "session", None)
    if sess is None:
        return None
    for i in sess.get_inputs():
        if i.name == model.INPUTS[0] and len(i.shape) == 2 and isinstance(i.shape[1], int):
            return int(i.shape[1])
    return None


class BertProcessor(Processor):
    """Features -> (384, 2) float32 start/end logits each (the reference's response bytes).

    ``padded``: the batch runs as one engine call at 384 tokens; the logits are the engine's at every
    position, padding included, as the reference emits them.

    ``bucketed`` (NVIDIA-style seqlen-aware batching): the batch is sorted by true length and split
    into sub-batches by bucket (the smallest bucket length >= the feature's length); each sub-batch
    runs padded only to its bucket, on that bucket's engine. Attention masks the padding, so the
    logits of real tokens are those of a 384-token run (up to float rounding). Positions past a
    feature's true length are emitted as -10000 (the value accuracy-squad.py pads short outputs
    with): they are never inside the window's doc tokens, so they never enter the n-best either way.
    """

    def __init__(self, engines: Mapping[int, object], qsl: dataset.SquadQSL, batch_size: int, mode: str,
                 cores: tuple[int, ...] | None = None):
        self.engines = dict(sorted(engines.items()))
        self.lengths = np.array(sorted(self.engines), np.int32)
        self.qsl, self.batch_size, self.mode, self.cores = qsl, max(1, batch_size), mode, cores

    def _run(self, rows: np.ndarray, L: int) -> tuple[np.ndarray, np.ndarray]:
        q = self.qsl
        feeds = {"input_ids": q.input_ids[rows, :L].astype(np.int64), "input_mask": q.input_mask[rows, :L].astype(np.int64),
                 "segment_ids": q.segment_ids[rows, :L].astype(np.int64)}
        r = self.engines[L].infer(feeds)
        return r[model.OUTPUTS[0]], r[model.OUTPUTS[1]]

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        idx = np.asarray(indices, dtype=np.int64)
        out: list[np.ndarray | None] = [None] * len(idx)
        if self.mode == "padded" or len(self.lengths) == 1:
            L = int(self.lengths[-1])
            for b in range(0, len(idx), self.batch_size):
                start, end = self._run(idx[b:b + self.batch_size], L)
                for k in range(start.shape[0]):
                    r = np.empty((squad.MAX_SEQ, 2), np.float32)
                    r[:L, 0], r[:L, 1] = start[k], end[k]
                    r[L:] = NEG
                    out[b + k] = r
            return out  # type: ignore[return-value]
        lens = self.qsl.seq_len[idx]
        order = np.argsort(lens, kind="stable")
        bucket_of = self.lengths[np.searchsorted(self.lengths, lens[order])]
        pos = 0
        while pos < len(order):
            L = int(bucket_of[pos])
            stop = pos
            while stop < len(order) and bucket_of[stop] == L and stop - pos < self.batch_size:
                stop += 1
            sel = order[pos:stop]
            start, end = self._run(idx[sel], L)
            for k, j in enumerate(sel):
                n = int(lens[j])
                r = np.full((squad.MAX_SEQ, 2), NEG, np.float32)
                r[:n, 0], r[:n, 1] = start[k, :n], end[k, :n]
                out[int(j)] = r
            pos = stop
        return out  # type: ignore[return-value]

    def warmup(self) -> None:
        """One call per (bucket, batch size 1 and full) so no first call of a shape is timed."""
        rows = np.zeros(self.batch_size, np.int64)
        for L in self.engines:
            for b in sorted({1, self.batch_size}):
                self._run(rows[:b], L)


def torch_logits(net, features: Sequence[squad.Feature], batch: int = 16) -> dict[int, tuple[list, list]]:
    """The plain fp32 torch reference: the features at 384 tokens, ``batch`` at a time (attention
    masks the padding) -> feature index -> logits."""
    import torch

    arr = dataset.features_arrays(features)
    out = {}
    with torch.inference_mode():
        for i in range(0, len(features), batch):
            t = {k: torch.from_numpy(arr[k][i:i + batch].astype(np.int64)) for k in ("input_ids", "input_mask", "segment_ids")}
            o = net(input_ids=t["input_ids"], attention_mask=t["input_mask"], token_type_ids=t["segment_ids"],
                    return_dict=True)
            for k in range(o.start_logits.shape[0]):
                out[i + k] = (o.start_logits[k].double().tolist(), o.end_logits[k].double().tolist())
    return out
