"""DeepSeek-R1 (MLPerf "deepseek-r1"): a 671B-parameter mixture of experts (37B active, multi-head latent
attention, ``DeepseekV3ForCausalLM``) that reasons at length before it answers. 4,388 samples from AIME,
MATH500, GPQA, MMLU-Pro and LiveCodeBench, scored by exact match (``code.common.llm.exact_match``) with
the mean output length held to 3,886 tokens ± 10%. Datacenter Offline plus Server or Interactive (TTFT/TPOT
2 s / 80 ms and 1.5 s / 15 ms); v5.1's datacenter,edge category also asks for SingleStream.

Declares the benchmark only; the work is in ``code.deepseek_r1.harness:DeepSeekR1Benchmark`` on the shared
LLM layer (``code.common.llm``). In rounds v5.1 on.
"""
from code.common.benchmark import BenchmarkSpec
from code.common.llm.memory import LLMShape

SPEC = BenchmarkSpec(
    name="deepseek_r1",
    mlperf_name="deepseek-r1",
    loadgen_model="deepseek-r1",
    aliases=("deepseek-r1", "deepseek", "deepseek_r1_671b", "dsr1"),
    scenarios=("Offline", "Server", "Interactive", "SingleStream"),
    impl="code.deepseek_r1.harness:DeepSeekR1Benchmark",
    precisions=("fp32", "fp16", "bf16", "fp8"),
    starting_weights="deepseek-ai/DeepSeek-R1 (revision 56d4cbbb4d29f4355bab4b9a39ccb717a14ad5ad, MLCommons R2 copy)",
    watchdog_s=3600.0,              # answers up to 20,000 tokens
    generates_tokens=True,
    scratch_gb=700,                 # the fp8 checkpoint (~690 GB) + data
    # MLA caches one latent of kv_lora_rank + qk_rope_head_dim = 576 values per token and layer, written here as
    # one "KV head" of 288 for K and V together (2 x 288 = 576)
    llm_shape=LLMShape(params=671e9, layers=61, kv_heads=1, head_dim=288, mean_input=800, mean_output=3886.2,
                       experts=256,
                       source="DeepSeek-R1 config.json (MLA latent 512 + rope 64); output mean: the checker's "
                              "TOKENS_PER_SAMPLE; input mean: the 4,388 prompts with the chat template, approximate"),
)
