"""GPT-J 6B summarisation (MLPerf "gptj", CNN/DailyMail 3.0.0 validation, 13,368 articles).

Declares the benchmark only; the work is in ``code.gptj.harness:GPTJBenchmark`` on the shared LLM
layer (``code.common.llm``). GPT-J is in round v5.0 only (``--round=v5.0``): later rounds replaced it
with Llama3.1-8B. Its tokens/s are inferred by LoadGen (``infer_token_latencies``: 69 tokens per
sample), so no first-token events are sent.
"""
from code.common.benchmark import BenchmarkSpec

SPEC = BenchmarkSpec(
    name="gptj",
    mlperf_name="gptj",
    loadgen_model="gptj",
    aliases=("gpt-j", "gptj-6b", "gpt-j-6b"),
    scenarios=("Offline", "Server", "SingleStream"),
    impl="code.gptj.harness:GPTJBenchmark",
    precisions=("fp32", "fp16", "bf16"),
    starting_weights="MLCommons fine-tuned GPT-J 6B checkpoint (CNN/DailyMail)",
    watchdog_s=600.0,
    generates_tokens=True,
    scratch_gb=30,                 # models + data + preprocessed data of the reference variant
)
