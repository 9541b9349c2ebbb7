"""Qwen3-VL-235B-A22B (MLPerf "qwen3-vl-235b-a22b"): a vision-language mixture of experts (235B parameters, 22B
active; 94 text layers of 128 experts top-8, a ViT of 27 blocks; ``Qwen3VLMoeForConditionalGeneration``). One sample
is one Shopify product: its image, title, description and a list of candidate categories; the model answers with a
JSON object (category, brand, is_secondhand). Scored by the hierarchical F1 of the category path (the reference's
``mlperf_inf_mm_q3vl/evaluation.py``: longest common prefix of the " > " levels, micro-averaged), >= 99% of 0.7903
(Offline, Server: 48,289 samples of Shopify/product-catalogue) or of 0.7878 (Interactive, v6.1: the 8,000-sample
nvidia/Shopify-product-catalogue-8k). Datacenter Offline and Server (v6.0), Offline plus Server or Interactive
(v6.1), bounded end to end: p99 latency of a whole answer 12 s (Server) / 1.5 s (Interactive), not TTFT/TPOT.

Declares the benchmark only; the work is in ``code.qwen3_vl.harness:Qwen3VLBenchmark`` on the shared LLM layer
(``code.common.llm``). In rounds v6.0 on.
"""
from code.common.benchmark import BenchmarkSpec
from code.common.llm.memory import LLMShape

SPEC = BenchmarkSpec(
    name="qwen3_vl",
    mlperf_name="qwen3-vl-235b-a22b",
    loadgen_model="qwen3-vl-235b-a22b",
    aliases=("qwen3-vl", "qwen3_vl", "qwen3vl", "q3vl", "qwen3-vl-235b-a22b", "qwen3_vl_235b_a22b"),
    scenarios=("Offline", "Server", "Interactive"),
    impl="code.qwen3_vl.harness:Qwen3VLBenchmark",
    precisions=("fp32", "fp16", "bf16", "fp8"),
    starting_weights="Qwen/Qwen3-VL-235B-A22B-Instruct (revision 710c13861be6c466e66de3f484069440b8f31389)",
    watchdog_s=1800.0,
    generates_tokens=True,
    scratch_gb=520,                 # the bf16 checkpoint (~471 GB) + the catalogue (~6.4 GB of images)
    llm_shape=LLMShape(params=235e9, layers=94, kv_heads=4, head_dim=128, mean_input=2500, mean_output=60,
                       experts=128,
                       source="Qwen3-VL-235B-A22B-Instruct config.json (text: 94 layers, 4 KV heads of 128); input "
                              "mean: the README's calibration table (809-6,902 tokens with the image), approximate; "
                              "output mean: a one-line JSON answer, approximate"),
)
