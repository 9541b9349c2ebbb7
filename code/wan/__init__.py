"""Wan 2.2 T2V-A14B (MLPerf "wan-2.2-t2v-a14b", text-to-video): Wan-AI/Wan2.2-T2V-A14B-Diffusers, a diffusers
``WanPipeline`` with two 14B ``WanTransformer3DModel`` experts split at boundary_ratio 0.875, generating a
720 x 1280, 81-frame video for each of the 248 VBench prompts (20 UniPC steps, guidance 4.0 / 3.0, seed 42 for
every query), scored by VBench (6 dimensions, mean x 100 >= 99% of 70.48). Datacenter, Offline and SingleStream
(latency in seconds); audited by TEST04; 50 performance samples. In rounds v6.0 on. Lightweight: no heavy imports.

The engine is the diffusers pipeline itself, loaded by each worker (``code.wan.model.load_pipeline``); the
MLPerf-fixed settings are constants (``code.wan.constants``), not flags. The work is in
``code.wan.harness:WanBenchmark``; VBench's dimensions in ``code.wan.vbench``.
"""
from code.common.benchmark import BenchmarkSpec
from code.common.fields import Field, parse_int

SPEC = BenchmarkSpec(
    name="wan",
    mlperf_name="wan-2.2-t2v-a14b",
    loadgen_model="wan-2.2-t2v-a14b",
    aliases=("wan-2.2-t2v-a14b", "wan2.2", "wan-2.2", "wan22", "text_to_video"),
    scenarios=("Offline", "SingleStream"),
    impl="code.wan.harness:WanBenchmark",
    fields=(
        Field("wan_sample_count", parse_int, 0,
              "Use only the first N prompts (0: all). A subset is never valid for submission.",
              benchmarks=("wan",), minimum=0),
    ),
    precisions=("fp32", "bf16"),
    starting_weights="Wan-AI/Wan2.2-T2V-A14B-Diffusers (commit 5be7df9619b54f4e2667b2755bc6a756675b5cd7)",
    watchdog_s=3600.0,             # one 81-frame 720p video takes minutes on a GPU
    scratch_gb=140,                # the Diffusers checkpoint (~126 GB) and the videos of an accuracy run
)
