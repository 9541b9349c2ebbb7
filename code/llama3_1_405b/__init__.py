"""Llama-3.1-405B-Instruct (MLPerf "llama3.1-405b"): long-context tasks (LongBench, LongDataCollections, RULER's
needle-in-a-haystack and QA, GovReport summaries), 8,313 samples. Each sample is scored by its own metric: ROUGE-L
(summaries), needle exact match (RULER) or QA exact match; tokens per sample 684.68 ± 10%. Datacenter: v5.0 Server +
Offline; v5.1 and v6.0 Offline plus one of Interactive or Server (TTFT/TPOT 6 s / 175 ms and 4.5 s / 80 ms).

Declares the benchmark only; the work is in ``code.llama3_1_405b.harness:Llama405Benchmark`` on the shared LLM layer
(``code.common.llm``), scored by ``code.llama3_1_405b.accuracy``. In rounds v5.0 to v6.0.
"""
from code.common.benchmark import BenchmarkSpec
from code.common.llm.memory import LLMShape

SPEC = BenchmarkSpec(
    name="llama3_1_405b",
    mlperf_name="llama3.1-405b",
    loadgen_model="llama3_1-405b",
    aliases=("llama3.1-405b", "llama3_1-405b", "llama-3.1-405b", "llama3.1-405b-instruct", "405b"),
    scenarios=("Offline", "Server", "Interactive"),
    impl="code.llama3_1_405b.harness:Llama405Benchmark",
    precisions=("fp32", "fp16", "bf16", "fp8"),
    starting_weights="meta-llama/Llama-3.1-405B-Instruct (MLCommons R2 copy, Llama-3.1-405B-Instruct)",
    watchdog_s=1800.0,
    generates_tokens=True,
    scratch_gb=900,                 # bf16 checkpoint (~810 GB) + data
    llm_shape=LLMShape(params=405e9, layers=126, kv_heads=8, head_dim=128, mean_input=9400, mean_output=684.68,
                       source="Llama-3.1-405B-Instruct config.json; output mean: the checker's TOKENS_PER_SAMPLE; "
                              "input mean: the 8,313 long-context prompts, approximate"),
)
