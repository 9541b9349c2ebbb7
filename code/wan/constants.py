"""MLPerf-fixed Wan 2.2 T2V settings: rules of the benchmark, not tunables (so not flags).

Transcribed from the reference's ``text_to_video/wan-2.2-t2v-a14b/inference_config.yaml`` and ``run_mlperf.py``
(mlcommons/inference; the shared checkout). ``tests/test_wan.py`` reads those files and compares.
"""
from __future__ import annotations

NUM_STEPS = 20                       # sample_steps
GUIDANCE_SCALE = 4.0                 # high-noise expert (transformer)
GUIDANCE_SCALE_2 = 3.0               # low-noise expert (transformer_2)
BOUNDARY_RATIO = 0.875               # WanPipeline(boundary_ratio=...): t >= 0.875 x 1000 runs the high-noise expert
SEED = 42                            # torch.Generator(device).manual_seed(42), re-seeded for every query
FPS = 16                             # export_to_video fps of the accuracy videos
# the reference's negative prompt, as the YAML block scalar reads and run_mlperf.py .strip()s it
NEGATIVE_PROMPT = (
    "vivid colors, overexposed, static, blurry details, subtitles, style,\n"
    "work of art, painting, picture, still, overall grayish, worst quality,\n"
    "low quality, JPEG artifacts, ugly, deformed, extra fingers, poorly drawn hands,\n"
    "poorly drawn face, deformed, disfigured, deformed limbs, fused fingers,\n"
    "static image, cluttered background, three legs, many people in the background,\n"
    "walking backwards")

# Video geometry per model variant: (height, width, frames). The reference: 720 x 1280, 81 frames (21 latent frames:
# the VAE compresses time 4x after the first frame, space 8x). Tiny: 128 x 128 (the smallest side torchvision RAFT's 1/8-scale
# correlation pyramid takes: 128 / 8 = 16 -> 8 -> 4 -> 2), 5 frames (2 latent frames; dynamic_degree and
# motion_smoothness keep frames 0, 2, 4).
GEOMETRY = {"reference": (720, 1280, 81), "tiny": (128, 128, 5)}

# The Wan-AI Diffusers repositories' scheduler (scheduler/scheduler_config.json: UniPC multistep over flow sigmas).
# The real model reads its own file; the tiny pipeline is saved with this one.
SCHEDULER_CONFIG = {
    "_class_name": "UniPCMultistepScheduler", "beta_end": 0.02, "beta_schedule": "linear", "beta_start": 0.0001,
    "disable_corrector": [], "dynamic_thresholding_ratio": 0.995, "final_sigmas_type": "zero", "flow_shift": 3.0,
    "lower_order_final": True, "num_train_timesteps": 1000, "predict_x0": True, "prediction_type": "flow_prediction",
    "rescale_betas_zero_snr": False, "sample_max_value": 1.0, "solver_order": 2, "solver_p": None,
    "solver_type": "bh2", "steps_offset": 0, "thresholding": False, "timestep_spacing": "linspace",
    "trained_betas": None, "use_beta_sigmas": False, "use_exponential_sigmas": False, "use_flow_sigmas": True,
    "use_karras_sigmas": False,
}

HF_MODEL_ID = "Wan-AI/Wan2.2-T2V-A14B-Diffusers"
HF_REVISION = "5be7df9619b54f4e2667b2755bc6a756675b5cd7"     # the reference README's pinned commit

TINY_SEED = 0
TINY_MAX_TOKENS = 32                 # tiny text encoder's prompt length (the reference: WanPipeline's 512)
REFERENCE_MAX_TOKENS = 512

# VBench dimensions the reference's run_evaluation.py scores (its --dimensions default), in its order
DIMENSIONS = ("subject_consistency", "dynamic_degree", "motion_smoothness", "appearance_style", "scene",
              "background_consistency")


def geometry(variant: str) -> tuple[int, int, int]:
    return GEOMETRY[variant]
