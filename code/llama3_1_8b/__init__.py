"""Llama-3.1-8B-Instruct summarisation (MLPerf "llama3.1-8b", CNN/DailyMail 3.0.0 validation): the
current rounds' successor to GPT-J. Datacenter: 13,368 articles, Offline plus Server or Interactive
(TTFT/TPOT 2000/100 ms and 500/30 ms). Edge ("llama3.1-8b-edge"): a 5,000-article subset,
SingleStream and Offline. ``--category`` picks the twin (SingleStream means edge).

Declares the benchmark only; the work is in ``code.llama3_1_8b.harness:Llama31Benchmark`` on the
shared LLM layer (``code.common.llm``). In rounds v5.1 on.
"""
from code.common.benchmark import BenchmarkSpec
from code.common.llm.memory import LLMShape
from code.common.fields import Field, parse_str

SPEC = BenchmarkSpec(
    name="llama3_1_8b",
    mlperf_name="llama3.1-8b",
    loadgen_model="llama3_1-8b",
    aliases=("llama3.1-8b", "llama3_1-8b", "llama3.1", "llama-3.1-8b", "llama3.1-8b-instruct"),
    scenarios=("Offline", "Server", "Interactive", "SingleStream"),
    impl="code.llama3_1_8b.harness:Llama31Benchmark",
    fields=(
        Field("category", parse_str, "auto", "Which twin of the benchmark a run is for: datacenter (llama3.1-8b, "
              "13,368 articles) or edge (llama3.1-8b-edge, 5,000; LoadGen model llama3_1-8b-edge). auto: edge for "
              "SingleStream, else datacenter.", choices=("auto", "datacenter", "edge"), benchmarks=("llama3_1_8b",)),
    ),
    precisions=("fp32", "fp16", "bf16", "fp8"),
    starting_weights="meta-llama/Llama-3.1-8B-Instruct (commit be673f32)",
    watchdog_s=600.0,
    generates_tokens=True,
    scratch_gb=20,                 # models + data + preprocessed data of the reference variant
    llm_shape=LLMShape(params=8.03e9, layers=32, kv_heads=8, head_dim=128, mean_input=800, mean_output=128,
                       source="Llama-3.1-8B-Instruct config.json; output: the 128-token cap; input mean: "
                              "CNN/DailyMail prompts, approximate"),
)
