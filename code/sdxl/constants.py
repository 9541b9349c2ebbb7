"""MLPerf-fixed SDXL settings. These are rules of the benchmark, not tunables: they are not flags."""
from __future__ import annotations

NUM_STEPS = 20
GUIDANCE_SCALE = 8.0
NEGATIVE_PROMPT = "normal quality, low quality, worst quality, low res, blurry, nsfw, nude"
MAX_TOKENS = 77                      # both CLIP tokenizers, padding="max_length", truncation on
LATENT_SEED = 0                      # the official latents.npy is randn_tensor(seed 0); tiny uses the same rule
COMPONENTS = ("clip1", "clip2", "unet", "vae")
SUBFOLDER = {"clip1": "text_encoder", "clip2": "text_encoder_2", "unet": "unet", "vae": "vae"}  # in the pipeline folder

# Image side in pixels per model variant. The latent side is image side / 8 for both.
IMAGE_SIZE = {"reference": 1024, "tiny": 128}
LATENT_CHANNELS = 4
VAE_SCALE = 8

# Tiny variant dataset: the first TINY_SAMPLES real captions when the real file is at hand, else
# synthetic ones. AccuracyOnly runs every sample, so this sets the tiny accuracy run's length.
TINY_SAMPLES = 320
TINY_CAL_CAPTIONS = 4               # the tiny unet calibrates on its first 4 captions (x 20 steps)
TINY_SEED = 0

# SDXL base 1.0 scheduler/scheduler_config.json (EulerDiscreteScheduler). Used when a model folder
# has no scheduler config of its own.
SCHEDULER_CONFIG = {
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "beta_start": 0.00085,
    "clip_sample": False,
    "interpolation_type": "linear",
    "num_train_timesteps": 1000,
    "prediction_type": "epsilon",
    "sample_max_value": 1.0,
    "set_alpha_to_one": False,
    "skip_prk_steps": True,
    "steps_offset": 1,
    "timestep_spacing": "leading",
    "trained_betas": None,
    "use_karras_sigmas": False,
}

# Public Hugging Face repository of the real model.
HF_MODEL_ID = "stabilityai/stable-diffusion-xl-base-1.0"


def latent_side(variant: str) -> int:
    return IMAGE_SIZE[variant] // VAE_SCALE


def input_shapes(component: str, configs: dict[str, dict]) -> dict[str, tuple[int, ...]]:
    """Input name -> shape with -1 for the batch axis (EngineSpec.input_shapes), from the pipeline folder's json
    configs (``configs``: "unet", "vae", "text_encoder_2"; code.sdxl.export.configs_of). No torch: the parent
    process of a run names its engines without importing it."""
    if component in ("clip1", "clip2"):
        return {"input_ids": (-1, MAX_TOKENS)}
    unet = configs["unet"]
    side, ch = int(unet["sample_size"]), int(unet["in_channels"])
    if component == "unet":
        proj = int(configs["text_encoder_2"]["projection_dim"])
        return {"sample": (-1, ch, side, side), "timestep": (1,),
                "encoder_hidden_states": (-1, MAX_TOKENS, int(unet["cross_attention_dim"])),
                "text_embeds": (-1, proj), "time_ids": (-1, 6)}
    if component == "vae":
        return {"latent": (-1, int(configs["vae"]["latent_channels"]), side, side)}
    raise KeyError(component)
