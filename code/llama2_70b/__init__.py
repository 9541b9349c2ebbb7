"""Llama-2-70B chat on OpenORCA (MLPerf "llama2-70b", 24,576 samples): Offline, Server and Interactive.

Declares the benchmark only; the work is in ``code.llama2_70b.harness:Llama2Benchmark`` on the shared
LLM layer (``code.common.llm``). TTFT and TPOT are measured by LoadGen (``use_token_latencies``):
Server 2000 ms / 200 ms, Interactive 450 ms / 40 ms (mlperf.conf's ``llama2-70b-interactive``).
Round v6.1 files only the 99.9 accuracy variant.
"""
from code.common.benchmark import BenchmarkSpec
from code.common.llm.memory import LLMShape

SPEC = BenchmarkSpec(
    name="llama2_70b",
    mlperf_name="llama2-70b",
    loadgen_model="llama2-70b",
    aliases=("llama2", "llama-2-70b", "llama2_70b_chat", "llama2-70b-chat"),
    scenarios=("Offline", "Server", "Interactive"),
    impl="code.llama2_70b.harness:Llama2Benchmark",
    precisions=("fp32", "fp16", "bf16", "fp8"),
    starting_weights="meta-llama/Llama-2-70b-chat-hf",
    watchdog_s=900.0,
    generates_tokens=True,
    scratch_gb=280,                 # models + data + preprocessed data of the reference variant
    llm_shape=LLMShape(params=68.98e9, layers=80, kv_heads=8, head_dim=128, mean_input=300, mean_output=294.45,
                       source="Llama-2-70b-chat-hf config.json; output mean: the checker's TOKENS_PER_SAMPLE; "
                              "input mean: OpenOrca prompts, approximate"),
)
