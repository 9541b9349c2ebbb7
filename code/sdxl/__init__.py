"""Stable Diffusion XL (MLPerf "stable-diffusion-xl"): text-to-image on 5000 COCO-2014 captions.

This module only declares the benchmark; it imports nothing heavy. The work is in
``code.sdxl.harness:SDXLBenchmark``. The MLPerf-fixed parts of the pipeline (20 Euler steps,
guidance 8.0, the negative prompt, the fixed latent) are constants in ``code.sdxl.constants``,
not flags: changing them would make the result non-comparable.
"""
from code.common.benchmark import BenchmarkSpec
from code.common.fields import Field, parse_int, parse_str

SPEC = BenchmarkSpec(
    name="sdxl",
    mlperf_name="stable-diffusion-xl",
    loadgen_model="stable-diffusion-xl",
    aliases=("stable-diffusion-xl", "sdxl-base", "stable_diffusion_xl"),
    scenarios=("Offline", "Server", "SingleStream"),
    impl="code.sdxl.harness:SDXLBenchmark",
    fields=(
        Field("sdxl_vae_precision", parse_str, "fp32", "VAE decoder engine precision (TensorRT); the CLIPs are "
              "always fp16 and the unet follows --precision (int8/fp8: calibrated, make calibrate).", choices=("fp32", "fp16"),
              benchmarks=("sdxl",)),
        Field("sdxl_sample_count", parse_int, 0,
              "Use only the first N captions (0: all). A subset is never valid for submission.",
              benchmarks=("sdxl",), minimum=0),
        Field("sdxl_model_dtype", parse_str, "fp16",
              "Which published weights download_model fetches for the real model (the hub's fp16 variant or fp32).",
              choices=("fp16", "fp32"), benchmarks=("sdxl",), config=False, actions=("download_model",)),
    ),
    precisions=("fp32", "fp16", "int8", "fp8"),
    starting_weights="stabilityai/stable-diffusion-xl-base-1.0 (MLCommons fp32/fp16 checkpoint)",
    watchdog_s=600.0,              # a batch of 20-step images on a slow GPU takes minutes
    scratch_gb=30,                 # models + data + preprocessed data of the reference variant
)
