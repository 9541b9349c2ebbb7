"""The SDXL denoising loop over four component engines, and the Processor that LoadGen's SUT drives.

It reproduces diffusers' StableDiffusionXLPipeline as the MLCommons reference calls it (prompt token
ids in, fixed latent, negative prompt, EulerDiscrete, 20 steps, guidance 8.0) step for step in
float32 numpy, so that only the engines' numerics differ from the reference:
  1. clip1/clip2 on the prompt ids -> penultimate hidden states (concatenated) and clip2's text_embeds.
     The negative prompt is fixed, so its embeddings are computed once per pipeline and reused.
  2. latents = fixed latent * init_noise_sigma; for each step t: one unet call on the rows
     [negative prompts; prompts], noise = uncond + 8.0 * (text - uncond), Euler step.
  3. the vae decodes (in chunks of its batch size) and the image is post-processed as the reference:
     (x / 2 + 0.5).clamp(0, 1) -> HWC -> * 255 -> round -> uint8.

Thread safety: an SDXLPipeline and its engines belong to one worker thread (Engine contract).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from code.common.backends.base import Engine
from code.common.benchmark import Processor
from code.common.fileio import write_json
from code.sdxl.constants import GUIDANCE_SCALE, NUM_STEPS, SCHEDULER_CONFIG


class EulerSchedule:
    """EulerDiscreteScheduler's timesteps and sigmas for ``steps`` (from diffusers itself), with the step arithmetic
    done in float32 in the same order as diffusers' ``scale_model_input``/``step`` (s_churn = 0, prediction_type =
    epsilon).

    ``cache``: a folder where the schedule diffusers computed is kept, keyed by the scheduler config, the step count
    and diffusers' version, so that later runs read it instead of importing diffusers and torch (about 10 s of CPU
    per run here; a performance run of the harness otherwise imports neither). The values are diffusers' own, float32
    stored exactly, so runs with and without the cache compute the same images (TEST01 compares them byte for
    byte)."""

    def __init__(self, config: Mapping | None = None, steps: int = NUM_STEPS, cache: str | Path | None = None):
        config = dict(config or SCHEDULER_CONFIG)
        if config.get("prediction_type", "epsilon") != "epsilon":
            raise ValueError(f"SDXL uses prediction_type=epsilon, got {config['prediction_type']}")
        path = Path(cache) / f"euler-{_schedule_key(config, steps)}.json" if cache else None
        try:
            v = json.loads(path.read_text()) if path else None
        except (OSError, ValueError):
            v = None
        self.cached = v is not None
        if v is None:
            v = _diffusers_schedule(config, steps)
            if path:
                try:
                    write_json(path, v)
                except OSError:           # a read-only build folder: computed each time, as without a cache
                    pass
        self.timesteps = [np.array([t], dtype=np.float32) for t in v["timesteps"]]
        self.sigmas = [np.float32(s) for s in v["sigmas"]]
        self.in_scale = [np.float32(s) for s in v["in_scale"]]
        self.init_noise_sigma = np.float32(v["init_noise_sigma"])
        self.steps = steps

    def scale_input(self, sample: np.ndarray, i: int) -> np.ndarray:
        return sample / self.in_scale[i]

    def step(self, noise: np.ndarray, i: int, sample: np.ndarray) -> np.ndarray:
        sigma = self.sigmas[i]
        pred_original = sample - sigma * noise
        derivative = (sample - pred_original) / sigma
        return sample + derivative * (self.sigmas[i + 1] - sigma)


def _schedule_key(config: Mapping, steps: int) -> str:
    from importlib.metadata import version

    blob = json.dumps({"config": dict(config), "steps": steps, "diffusers": version("diffusers")}, sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _diffusers_schedule(config: Mapping, steps: int) -> dict:
    """The schedule as diffusers computes it; float32 values as Python floats (exact)."""
    from diffusers import EulerDiscreteScheduler

    sched = EulerDiscreteScheduler.from_config(dict(config))
    sched.set_timesteps(steps)
    sig = sched.sigmas.float()
    return {"timesteps": [float(t) for t in sched.timesteps.float().numpy()],
            "sigmas": [float(s) for s in sig.numpy()],
            # float32 as torch computes them: (sigma**2 + 1) ** 0.5 on 0-d float32 tensors
            "in_scale": [float(((s ** 2 + 1) ** 0.5).item()) for s in sig],
            "init_noise_sigma": float(sched.init_noise_sigma)}


def postprocess(image: np.ndarray) -> np.ndarray:
    """Decoder output float32 [B,3,H,W] in [-1,1] -> uint8 [B,H,W,3], exactly as the reference."""
    x = np.clip(image / np.float32(2) + np.float32(0.5), 0, 1)
    return np.ascontiguousarray((x.transpose(0, 2, 3, 1) * np.float32(255)).round().astype(np.uint8))


class SDXLPipeline:
    """Generates images from token ids. ``engines``: {"clip1","clip2","unet","vae"} -> Engine.

    batch_sizes: the most rows each engine takes per call; the unet's counts prompts, so one call
    carries 2x that many rows (prompt + negative prompt). Inputs larger than an engine's batch are
    split into chunks.
    """

    def __init__(self, engines: Mapping[str, Engine], *, latent: np.ndarray, neg_ids: tuple[np.ndarray, np.ndarray],
                 batch_sizes: Mapping[str, int], image_size: int, scheduler_config: Mapping | None = None,
                 steps: int = NUM_STEPS, guidance: float = GUIDANCE_SCALE, schedule_cache: str | Path | None = None):
        self.engines = dict(engines)
        self.bs = {k: max(1, int(batch_sizes[k])) for k in ("clip1", "clip2", "unet", "vae")}
        self.schedule = EulerSchedule(scheduler_config, steps, schedule_cache)
        self.guidance = np.float32(guidance)
        self.image_size = int(image_size)
        self.latent = np.ascontiguousarray(latent, dtype=np.float32)          # [1,4,h,w]
        self.neg_hidden, self.neg_pooled = self.encode(neg_ids[0], neg_ids[1])  # [1,77,C], [1,P]
        # SDXL micro-conditioning: original size, crop top-left, target size (all the image size).
        s = float(self.image_size)
        self.time_id_row = np.array([[s, s, 0.0, 0.0, s, s]], dtype=np.float32)
        self._const_cache: dict[int, tuple[np.ndarray, ...]] = {}

    # --- pieces ------------------------------------------------------------------------------------
    def _chunked(self, name: str, feeds: Mapping[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
        """Run engine ``name`` over n rows in chunks of its batch size; concatenate the outputs."""
        bs = self.bs[name]
        if n <= bs:
            return self.engines[name].infer(feeds)
        parts = [self.engines[name].infer({k: v[s:s + bs] for k, v in feeds.items()}) for s in range(0, n, bs)]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def encode(self, ids_1: np.ndarray, ids_2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token ids int32 [B,77] x2 -> (hidden [B,77,C1+C2], pooled text_embeds [B,P])."""
        n = len(ids_1)
        h1 = self._chunked("clip1", {"input_ids": np.ascontiguousarray(ids_1, dtype=np.int32)}, n)["hidden_states"]
        o2 = self._chunked("clip2", {"input_ids": np.ascontiguousarray(ids_2, dtype=np.int32)}, n)
        return np.concatenate([h1, o2["hidden_states"]], axis=-1), o2["text_embeds"]

    def _constants(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Per batch size: the negative rows of the unet batch and the time ids (read-only)."""
        if n not in self._const_cache:
            neg_h = np.repeat(self.neg_hidden, n, axis=0)
            neg_p = np.repeat(self.neg_pooled, n, axis=0)
            time_ids = np.ascontiguousarray(np.repeat(self.time_id_row, 2 * n, axis=0))
            for a in (neg_h, neg_p, time_ids):
                a.setflags(write=False)
            self._const_cache[n] = (neg_h, neg_p, time_ids)
        return self._const_cache[n]

    def denoise(self, hidden: np.ndarray, pooled: np.ndarray) -> np.ndarray:
        """The 20-step guided Euler loop for one batch of n prompts (n <= unet batch). Returns latents."""
        n = len(hidden)
        neg_h, neg_p, time_ids = self._constants(n)
        ehs = np.ascontiguousarray(np.concatenate([neg_h, hidden]))
        text_embeds = np.ascontiguousarray(np.concatenate([neg_p, pooled]))
        ehs.setflags(write=False)
        text_embeds.setflags(write=False)
        sched = self.schedule
        latents = np.repeat(self.latent, n, axis=0) * sched.init_noise_sigma
        unet = self.engines["unet"]
        for i, t in enumerate(sched.timesteps):
            x = sched.scale_input(latents, i)
            out = unet.infer({"sample": np.concatenate([x, x]), "timestep": t, "encoder_hidden_states": ehs,
                              "text_embeds": text_embeds, "time_ids": time_ids})["noise_pred"]
            uncond, text = out[:n], out[n:]
            noise = uncond + self.guidance * (text - uncond)
            latents = sched.step(noise, i, latents)
        return latents

    def decode(self, latents: np.ndarray) -> np.ndarray:
        """Latents [B,4,h,w] -> uint8 images [B,H,W,3]; the vae runs in chunks of its batch size."""
        img = self._chunked("vae", {"latent": np.ascontiguousarray(latents, dtype=np.float32)}, len(latents))["image"]
        return postprocess(img)

    # --- whole pipeline ------------------------------------------------------------------------------
    def generate(self, ids_1: np.ndarray, ids_2: np.ndarray) -> np.ndarray:
        """Token ids [B,77] x2 -> uint8 images [B,H,W,3]. Batches larger than the unet batch are split."""
        hidden, pooled = self.encode(ids_1, ids_2)
        bs = self.bs["unet"]
        lat = [self.denoise(hidden[s:s + bs], pooled[s:s + bs]) for s in range(0, len(hidden), bs)]
        return self.decode(np.concatenate(lat))

    def warmup(self) -> None:
        """One call of every engine at its largest batch (allocations, lazy initialisation)."""
        n = self.bs["unet"]
        ids = np.repeat(np.zeros((1, 77), dtype=np.int32), max(n, self.bs["clip1"], self.bs["clip2"]), axis=0)
        hidden, pooled = self.encode(ids, ids)
        neg_h, neg_p, time_ids = self._constants(n)
        lat = np.repeat(self.latent, 2 * n, axis=0)
        self.engines["unet"].infer({"sample": lat, "timestep": self.schedule.timesteps[0],
                                    "encoder_hidden_states": np.concatenate([neg_h, hidden[:n]]),
                                    "text_embeds": np.concatenate([neg_p, pooled[:n]]), "time_ids": time_ids})
        self.decode(np.repeat(self.latent, self.bs["vae"], axis=0))

    def close(self) -> None:
        for e in self.engines.values():
            e.close()


class SDXLProcessor(Processor):
    """Batch of QSL indices -> one uint8 HWC image per index (C-contiguous views of one batch array).

    Owned by one SUT worker thread. ``data`` is a code.sdxl.dataset.SDXLData (read-only, shared).
    """

    def __init__(self, pipeline: SDXLPipeline, data, batch_size: int):
        self.pipeline = pipeline
        self.data = data
        self.batch_size = int(batch_size)

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        idx = np.asarray(indices, dtype=np.int64)
        images = self.pipeline.generate(self.data.ids_1[idx], self.data.ids_2[idx])
        return [images[i] for i in range(len(idx))]

    def warmup(self) -> None:
        self.pipeline.warmup()

    def close(self) -> None:
        self.pipeline.close()
