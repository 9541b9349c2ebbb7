"""GPT-OSS-120B (MLPerf "gpt-oss-120b"): OpenAI's 117B-parameter mixture of experts (36 layers, 128 experts top-4,
5.1B active; sliding-window and full attention layers in turn, attention sinks; ``GptOssForCausalLM``), MoE weights
in MXFP4 (~65 GB). It answers in the harmony chat format (an ``analysis`` channel, then a ``final`` one). Prompts
come pre-tokenized in harmony format: 4,395 accuracy samples (AIME25 x8, GPQA-Diamond x5, LiveCodeBench-v6 x3,
reasoning effort high) and 6,396 performance samples (reasoning effort low), scored by exact match
(``code.common.llm.exact_match``, harmony rules, each sub-dataset weighted by 1 / its repeats). Datacenter Offline
plus Server or Interactive (TTFT/TPOT 3 s / 80 ms and 2 s / 15 ms). Audited by TEST07 and TEST09.

Declares the benchmark only; the work is in ``code.gpt_oss_120b.harness:GptOss120BBenchmark`` on the shared LLM
layer (``code.common.llm``). In rounds v6.0 on.
"""
from code.common.benchmark import BenchmarkSpec
from code.common.llm.memory import LLMShape

SPEC = BenchmarkSpec(
    name="gpt_oss_120b",
    mlperf_name="gpt-oss-120b",
    loadgen_model="gpt-oss-120b",
    aliases=("gpt-oss", "gpt_oss", "gptoss", "gpt-oss-120b-99", "gptoss120b"),
    scenarios=("Offline", "Server", "Interactive"),
    impl="code.gpt_oss_120b.harness:GptOss120BBenchmark",
    # fp4: the checkpoint's own MXFP4 experts (vLLM / SGLang read its quantization_config); fp32 for the tiny model
    precisions=("fp32", "fp16", "bf16", "fp4"),
    starting_weights="openai/gpt-oss-120b (revision b5c939de8f754692c1647ca79fbf85e8c1e70f8a, MLCommons R2 copy)",
    watchdog_s=3600.0,              # accuracy answers up to 32,768 tokens
    generates_tokens=True,
    scratch_gb=80,                  # the MXFP4 checkpoint (~65 GB) + data
    llm_shape=LLMShape(params=116.8e9, layers=36, kv_heads=8, head_dim=64, mean_input=1000, mean_output=1278.2,
                       experts=128,
                       source="openai/gpt-oss-120b config.json; output mean: TEST09's reference mean OSL of the "
                              "performance set (1,278.2 tokens, compliance/TEST09/gpt-oss-120b/audit.config); input "
                              "mean: harmony prompts with the system header, approximate; every layer counted as "
                              "full attention (the sliding ones hold 128 tokens: conservative)"),
)
