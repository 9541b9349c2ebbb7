"""GPT-J 6B summarisation (MLPerf "gptj", CNN/DailyMail 3.0.0 validation, 13,368 articles).

Declares the benchmark only; the work is in ``code.gptj.harness:GPTJBenchmark`` on the shared LLM
layer (``code.common.llm``). GPT-J is in round v5.0 only (``--round=v5.0``): later rounds replaced it
with Llama3.1-8B. Its tokens/s are inferred by LoadGen (``infer_token_latencies``: 69 tokens per
sample), so no first-token events are sent, but in its TEST06 audit (v5.0's models_TEST06), which turns on
``use_token_latencies`` so that LoadGen logs each answer's first token and token count (code.common.harness.child);
the 4-beam search reports the first token with the completion.
"""
from code.common.benchmark import BenchmarkSpec
from code.common.llm.memory import LLMShape

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
    llm_shape=LLMShape(params=6.05e9, layers=28, kv_heads=16, head_dim=256, mean_input=800, mean_output=69,
                       source="GPT-J 6B config.json (no grouped-query attention); output mean: LoadGen's 69 tokens "
                              "per sample; input mean: CNN/DailyMail prompts, approximate"),
)
