"""Whisper actions: model and data, the log-mel preprocessing, the QSL, the decoding Processor, WER accuracy.

The run path is the harness's batching SUT (``code.common.harness.sut``): Offline hands the query's samples to the
workers in batches of ``gpu_batch_size``; each batch is one ``model.Decoder.decode`` call (encoder once, greedy
steps over the KV cache). Each answer is completed to LoadGen with its token count (``Processor.token_counts``):
whisper's mlperf.conf sets ``use_token_latencies`` and the checker reads ``result_tokens_per_second``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from code.common import paths, progress
from code.common.benchmark import Benchmark, Processor
from code.common.errors import MissingDataError
from code.common.fileio import read_json, staged_dir, write_json
from code.whisper import SPEC, dataset, features, model

TINY_SOURCES = 8                     # synthetic speaker-chapters of the tiny set (3-9 clips each, repacked)
TINY_CALIBRATION = 6                 # tiny samples the build calibrates answer lengths on


class WhisperBenchmark(Benchmark):
    spec = SPEC

    # --- locations -----------------------------------------------------------------------------------------
    @property
    def data_root(self) -> Path:
        """The folder holding dev-all-repack.json and dev-all-repack/ (--data_dir for an existing one)."""
        if self.settings.data_dir and not self.tiny:
            return Path(self.settings.data_dir).expanduser()
        root = paths.data_dir("librispeech", self.settings.model_variant)
        if self.tiny:
            return root
        mlc = root.with_name("whisper_mlcommons")           # the R2 preprocessed set: its manifest's own folder
        rec = mlc / "download.json"
        if rec.is_file():
            return mlc / Path(read_json(rec, self.fix("download_data")).get("manifest", dataset.MANIFEST)).parent
        return root

    @property
    def preprocessed(self) -> Path:
        return paths.preprocessed_dir("whisper", self.settings.model_variant)

    @property
    def checkpoint(self) -> Path:
        if self.tiny:
            return self.model_dir
        from code.whisper.download import find_checkpoint

        return find_checkpoint(self.model_dir) or self.model_dir

    def manifest(self) -> list[dict]:
        return dataset.read_manifest(self.data_root / dataset.MANIFEST, self.fix("download_data"))

    def max_new_tokens(self) -> int:
        return model.TINY_MAX_NEW_TOKENS if self.tiny else model.MAX_NEW_TOKENS

    def min_new_tokens(self) -> int:
        """The tiny model asks for 2 tokens (an answer and its end): LoadGen's token accounting rejects fewer."""
        return 2 if self.tiny else 0

    # --- model and data ------------------------------------------------------------------------------------
    def download_model(self) -> None:
        if self.tiny:
            feats = self._tiny_calibration()
            rec = model.build_tiny(self.model_dir, feats)
            print(f"[download_model] tiny Whisper ({rec['parameters']:,} parameters, median answer "
                  f"{rec['median_tokens']:g} tokens) -> {self.model_dir}")
            return
        from code.whisper import download

        found = download.download_model(self.model_dir)
        print(f"[download_model] whisper-large-v3 -> {found}")

    def _tiny_calibration(self) -> list[np.ndarray]:
        """Features of the first tiny samples (the data is written first when missing: the build needs audio)."""
        if not (self.data_root / dataset.MANIFEST).is_file():
            self.download_data()
        ents = self.manifest()[:TINY_CALIBRATION]
        return [features.log_mel(self._audio(e)) for e in ents]

    def download_data(self) -> None:
        if self.tiny:
            ents = dataset.write_tiny_set(self.data_root, TINY_SOURCES, model.TINY_SEED)
            print(f"[download_data] {len(ents)} synthetic LibriSpeech-format samples -> {self.data_root}")
            return
        if self.settings.data_dir:
            ents = self.manifest()
            print(f"[download_data] using {len(ents)} samples of {self.data_root / dataset.MANIFEST}")
            return
        from code.whisper import download

        root = paths.data_dir("librispeech", self.settings.model_variant)
        if self.settings.values.get("whisper_data_source") == "mlcommons":
            download.download_preprocessed(root.with_name("whisper_mlcommons"))
        else:
            download.download_data(root)

    def _audio(self, entry: dict) -> np.ndarray:
        return dataset.read_audio(self.data_root / entry["files"][0]["fname"], self.fix("download_data"))

    def preprocess_data(self) -> None:
        """Features of every sample (features.log_mel) into ``features.npy``, in manifest order."""
        ents = self.manifest()
        mpath = self.data_root / dataset.MANIFEST
        record = {"manifest": str(mpath), "samples": len(ents), "mtime_ns": mpath.stat().st_mtime_ns,
                  "n_mels": features.N_MELS}
        out = self.preprocessed
        done = out / dataset.PRE_MANIFEST
        if done.is_file() and read_json(done, self.fix("preprocess_data")) == record:
            print(f"[preprocess_data] {out} is up to date ({len(ents)} samples)")
            return
        out.parent.mkdir(parents=True, exist_ok=True)
        with staged_dir(out) as stage, progress.bar(len(ents), "log-mel", "sample") as bar:
            arr = np.lib.format.open_memmap(stage / dataset.FEATURES, mode="w+", dtype=np.float32,
                                            shape=(len(ents), features.N_MELS, features.N_FRAMES))
            for i, e in enumerate(ents):
                arr[i] = features.log_mel(self._audio(e))
                bar.update()
            arr.flush()
            del arr
            write_json(stage / dataset.PRE_MANIFEST, record)
        print(f"[preprocess_data] {len(ents)} samples -> {out / dataset.FEATURES}")

    # --- engines ------------------------------------------------------------------------------------------------
    def generate_engines(self) -> dict[str, str]:
        """No engine is built: the transformers model is loaded by each worker (model.load)."""
        ck = self.checkpoint
        if not (ck / "config.json").is_file():
            raise MissingDataError(f"model not found: {ck / 'config.json'}", self.fix("download_model"))
        return {"whisper": str(ck)}

    def device(self, device_id: int) -> str:
        return f"cuda:{device_id}" if self.settings.system.accelerator == "gpu" else "cpu"

    # --- run ----------------------------------------------------------------------------------------------------
    def make_qsl(self) -> dataset.WhisperQSL:
        self.qsl = dataset.WhisperQSL(self.preprocessed, self.settings.performance_sample_count or 0,
                                      self.fix("preprocess_data"))
        return self.qsl

    def make_decoder(self, folder: str | Path, device_id: int = 0) -> model.Decoder:
        m, tok = model.load(Path(folder), self.settings.precision, self.device(device_id))
        return model.Decoder(m, tok, self.max_new_tokens(), self.min_new_tokens())

    def make_processors(self, qsl, engines) -> list[Processor]:
        slices = self.cpu_slices() or [None] * len(self.workers())
        return [WhisperProcessor(self.make_decoder(engines["whisper"], dev), qsl, self.settings.batch_size(), cores,
                                 self.intra_op_threads())
                for dev, cores in zip(self.workers(), slices)]

    def accuracy(self, accuracy_log: str, out_dir: str) -> dict:
        from code.whisper.accuracy import score

        target = self.settings.round_entry().accuracy_min["ACCURACY"]
        return score(accuracy_log, [e["transcript"] for e in self.manifest()], Path(out_dir) / "accuracy.txt", target)


class WhisperProcessor(Processor):
    """One batch of samples -> one Decoder.decode call. ``token_counts`` holds the last batch's token counts (the
    SUT reads them right after ``process`` returns, on the same worker thread)."""

    def __init__(self, decoder: model.Decoder, qsl: dataset.WhisperQSL, batch_size: int,
                 cores: tuple[int, ...] | None = None, threads: int = 0):
        self.decoder, self.qsl, self.batch_size, self.cores, self.threads = decoder, qsl, batch_size, cores, threads
        self.token_counts: list[int] | None = None

    def thread_init(self) -> None:
        super().thread_init()
        if self.threads and self.decoder.device.type == "cpu":
            import torch

            torch.set_num_threads(self.threads)

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        answers, counts = self.decoder.decode(self.qsl.batch(indices))
        self.token_counts = counts
        return answers

    def warmup(self) -> None:
        self.decoder.decode(self.qsl.batch([0] * min(self.batch_size, 2)))
