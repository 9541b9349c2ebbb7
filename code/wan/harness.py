"""Wan 2.2 actions: prompts and model, the QSL, the video Processor, VBench accuracy.

The run path is the harness's batching SUT (``code.common.harness.sut``). A batch of prompts is one WanPipeline
call with the reference's arguments (run_mlperf.py ``Model.issue_queries``): negative prompt, height, width,
frames, guidance 4.0 / 3.0, 20 steps. The reference re-seeds ``torch.Generator(device).manual_seed(42)`` for every
query, so every video starts from the same latent: the Processor draws that latent once (the same
``randn_tensor`` call WanPipeline.prepare_latents makes) or takes the dataset's fixed_latent.pt, and passes it as
``latents`` for each row, which is what lets a batch of several prompts give each the reference's video.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from code.common import paths
from code.common.benchmark import Benchmark, Processor
from code.common.errors import MissingDataError
from code.wan import SPEC, dataset, download, model
from code.wan.constants import (FPS, GUIDANCE_SCALE, GUIDANCE_SCALE_2, NEGATIVE_PROMPT, NUM_STEPS, REFERENCE_MAX_TOKENS,
                                SEED, TINY_MAX_TOKENS, TINY_SEED, geometry)


class WanBenchmark(Benchmark):
    spec = SPEC

    @property
    def variant(self) -> str:
        return self.settings.model_variant

    @property
    def raw_dir(self) -> Path:
        return paths.data_dir("wan", self.variant)

    @property
    def pre_dir(self) -> Path:
        return paths.preprocessed_dir("wan", self.variant)

    @property
    def pipeline_dir(self) -> Path:
        return self.model_dir / "pipeline"

    # --- model and data ------------------------------------------------------------------------------------
    def download_model(self) -> None:
        if self.tiny:
            seed_file = self.pipeline_dir / "SEED"
            if not (model.is_pipeline_dir(self.pipeline_dir) and seed_file.read_text().strip() == str(TINY_SEED)):
                model.save_tiny(self.pipeline_dir, TINY_SEED)
            print(f"[download_model] tiny Wan 2.2 (seed {TINY_SEED}) -> {self.pipeline_dir}")
        else:
            download.download_reference_model(self.pipeline_dir)

    def download_data(self) -> None:
        if self.tiny:
            dataset.write_tiny_set(self.raw_dir)
            print(f"[download_data] {len(dataset.TINY_FULL_INFO)} VBench prompts (tiny set) -> {self.raw_dir}")
            return
        from code.common.compliance.official import inference_dir

        self.raw_dir.mkdir(parents=True, exist_ok=True)
        download.fetch_prompts(self.raw_dir, self.settings.data_dir, inference_dir())
        download.fetch_full_info(self.raw_dir, self.settings.data_dir)
        download.fetch_fixed_latent(self.raw_dir, self.settings.data_dir)

    def preprocess_data(self) -> None:
        if self.tiny and not (self.raw_dir / "vbench_prompts.txt").is_file():
            self.download_data()
        latent = self.raw_dir / download.FIXED_LATENT
        rec = dataset.preprocess(self.raw_dir, self.pre_dir, latent if latent.is_file() else None)
        print(f"[preprocess_data] {len(rec['prompts'])} prompts -> {self.pre_dir / dataset.MANIFEST}")

    def generate_engines(self) -> dict[str, str]:
        """No engine is built: each worker loads the diffusers pipeline folder (model.load_pipeline)."""
        if self.tiny and not model.is_pipeline_dir(self.pipeline_dir):
            self.download_model()
        if not model.is_pipeline_dir(self.pipeline_dir):
            raise MissingDataError(f"Wan 2.2 pipeline not found in {self.pipeline_dir}", self.fix("download_model"))
        return {"pipeline": str(self.pipeline_dir)}

    def device(self, device_id: int) -> str:
        return f"cuda:{device_id}" if self.settings.system.accelerator == "gpu" else "cpu"

    # --- run ------------------------------------------------------------------------------------------------
    def data(self) -> dataset.WanData:
        d = dataset.WanData(self.pre_dir, self.fix("preprocess_data"))
        n = self.settings.values.get("wan_sample_count") or 0
        if n:
            d.prompts, d.vbench = d.prompts[:n], d.vbench[:n]
        return d

    def make_qsl(self) -> dataset.WanQSL:
        self.qsl = dataset.WanQSL(self.data(), self.settings.performance_sample_count or 0)
        return self.qsl

    def make_generator(self, folder: str, device_id: int = 0, data: dataset.WanData | None = None) -> "Generator":
        pipe = model.load_pipeline(folder, self.settings.precision, self.device(device_id))
        data = data or self.qsl.data
        return Generator(pipe, geometry(self.variant), TINY_MAX_TOKENS if self.tiny else REFERENCE_MAX_TOKENS,
                         data.fixed_latent)

    def make_processors(self, qsl, engines) -> list[Processor]:
        slices = self.cpu_slices() or [None] * len(self.workers())
        return [WanProcessor(self.make_generator(engines["pipeline"], dev, qsl.data), qsl.data,
                             self.settings.batch_size(), cores, self.intra_op_threads())
                for dev, cores in zip(self.workers(), slices)]

    def accuracy(self, accuracy_log: str, out_dir: str) -> dict:
        from code.wan.accuracy import evaluate

        entry = self.settings.round_entry()
        if not self.tiny:
            return self._official_accuracy(accuracy_log, Path(out_dir), entry)
        from code.wan import vbench

        ids = [int(i) for i in entry.extra_accuracy_files.get("videos", ())]
        return evaluate(accuracy_log, out_dir, vbench_info=self.data().vbench, shape=geometry(self.variant),
                        variant=self.variant, models=vbench.build_scorers(TINY_SEED), sample_ids=ids, entry=entry,
                        fps=FPS)

    def _official_accuracy(self, accuracy_log: str, out: Path, entry) -> dict:
        """The real model: the videos as the reference names them, scored by the reference's run_evaluation.py
        (VBench with its real DINO/CLIP/RAFT/AMT/Tag2Text checkpoints, the score a submission reports; code.wan.vbench,
        checked against vbench 0.1.5's own code, scores the tiny variant's random-weight scorers)."""
        from code.common.compliance.official import inference_dir
        from code.common.fileio import write_text
        from code.wan.accuracy import official_vbench, write_vbench_videos

        videos = out / "vbench_videos"
        ids = {int(i) for i in entry.extra_accuracy_files.get("videos", ())}
        n = write_vbench_videos(accuracy_log, videos, self.data().prompts, geometry(self.variant), ids, out / "videos")
        root = inference_dir()
        cmd = (f"python text_to_video/wan-2.2-t2v-a14b/run_evaluation.py --videos-path {videos} "
               f"--output-path {out / 'vbench_results'}")
        if root is None or not (root / "text_to_video/wan-2.2-t2v-a14b/submodules/VBench/evaluate.py").is_file():
            raise MissingDataError(f"{n} videos written to {videos}; scoring them needs the reference's VBench "
                                   "submodule (MLPERF_INFERENCE_DIR with text_to_video/wan-2.2-t2v-a14b/submodules/VBench)",
                                   f"git submodule update --init in the reference checkout, then: {cmd}")
        gpus = max(1, self.settings.system.gpu_count if self.settings.system.accelerator == "gpu" else 1)
        value, text = official_vbench(videos, out / "vbench_results", root, gpus)
        target = entry.accuracy_min["vbench_score"]
        passed = value >= target
        report = (f"Accuracy Results: {{'vbench_score': {value}}}\n"
                  f"Accuracy check: {'PASSED' if passed else 'FAILED'} (vbench_score={value:.4f} >= {target})\n"
                  f"Samples scored: {n}\n")
        write_text(out / "accuracy.txt", report)
        return {"metrics": {"vbench_score": value, "videos": n}, "passed": passed, "text": report + text}


class Generator:
    """One WanPipeline and the reference's call. ``generate(prompts)`` -> uint8 [n, F, H, W, 3]."""

    def __init__(self, pipe, shape: tuple[int, int, int], max_tokens: int, fixed_latent: str | None = None):
        import torch
        from diffusers.utils.torch_utils import randn_tensor

        self.pipe, self.max_tokens = pipe, max_tokens
        self.height, self.width, self.frames = shape
        dev = pipe._execution_device
        if fixed_latent:
            lat = torch.load(fixed_latent, map_location="cpu")
        else:       # WanPipeline.prepare_latents for one video, from a generator seeded as the reference seeds it
            t = (self.frames - 1) // pipe.vae_scale_factor_temporal + 1
            s = pipe.vae_scale_factor_spatial
            lat = randn_tensor((1, pipe.transformer.config.in_channels, t, self.height // s, self.width // s),
                               generator=torch.Generator(device=dev).manual_seed(SEED), device=dev,
                               dtype=torch.float32)
        self.latent = lat.to(device=dev, dtype=torch.float32)

    def generate(self, prompts: Sequence[str]) -> np.ndarray:
        import torch

        n = len(prompts)
        with torch.inference_mode():
            frames = self.pipe(prompt=list(prompts), negative_prompt=[NEGATIVE_PROMPT] * n, height=self.height,
                               width=self.width, num_frames=self.frames, guidance_scale=GUIDANCE_SCALE,
                               guidance_scale_2=GUIDANCE_SCALE_2, num_inference_steps=NUM_STEPS,
                               latents=self.latent.expand(n, *self.latent.shape[1:]).contiguous(),
                               max_sequence_length=self.max_tokens, output_type="np").frames
        return to_uint8(frames)


def to_uint8(frames) -> np.ndarray:
    """export_to_video's conversion of float frames in [0, 1]: ``(frame * 255).astype(np.uint8)``."""
    return np.ascontiguousarray((np.asarray(frames) * 255).astype(np.uint8))


class WanProcessor(Processor):
    """A batch of prompt indices -> one uint8 video [F, H, W, 3] per index. Owned by one SUT worker thread."""

    def __init__(self, generator: Generator, data: dataset.WanData, batch_size: int,
                 cores: tuple[int, ...] | None = None, threads: int = 0):
        self.generator, self.data, self.batch_size, self.cores, self.threads = generator, data, batch_size, cores, threads

    def thread_init(self) -> None:
        super().thread_init()
        self._torch_threads()

    def _torch_threads(self) -> None:
        """The config's cpu_threads for torch's CPU pool (process-wide). Also set at warmup: SingleStream runs the
        work inline on LoadGen's thread, where no worker thread_init runs (2 threads on this loaded 2-core machine
        made a tiny video take 4 s instead of 0.6)."""
        if self.threads and self.generator.pipe._execution_device.type == "cpu":
            import torch

            torch.set_num_threads(self.threads)

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        videos = self.generator.generate([self.data.prompts[i] for i in indices])
        return [videos[i] for i in range(len(indices))]

    def warmup(self) -> None:
        self._torch_threads()
        self.generator.generate(self.data.prompts[:1])
