"""Mixtral-8x7B-Instruct-v0.1 (MLPerf "mixtral-8x7b"): a mixture of experts (8 experts, top-2 routing)
on 15,000 samples, 5,000 each of OpenOrca (ROUGE), GSM8K (exact-match accuracy) and MBXP (code that
must pass its tests), datacenter Offline and Server (TTFT 2000 ms, TPOT 200 ms).

Declares the benchmark only; the work is in ``code.mixtral_8x7b.harness:MixtralBenchmark`` on the
shared LLM layer (``code.common.llm``). Scorers: ``code.mixtral_8x7b.gsm8k`` and
``code.mixtral_8x7b.mbxp`` (generated code runs in a contained subprocess). Mixtral is in rounds
v5.0 to v6.0.
"""
from code.common.benchmark import BenchmarkSpec
from code.common.llm.memory import LLMShape
from code.common.fields import Field, parse_int

SPEC = BenchmarkSpec(
    name="mixtral_8x7b",
    mlperf_name="mixtral-8x7b",
    loadgen_model="mixtral-8x7b",
    aliases=("mixtral", "mixtral-8x7b-instruct", "mixtral_8x7b_instruct"),
    scenarios=("Offline", "Server"),
    impl="code.mixtral_8x7b.harness:MixtralBenchmark",
    fields=(
        Field("mbxp_workers", parse_int, 2, "Processes that run generated MBXP code in parallel when scoring "
              "accuracy (the reference's --n_workers).", minimum=1, benchmarks=("mixtral_8x7b",), config=False),
        Field("mbxp_timeout_s", parse_int, 20, "Time limit for one MBXP program (compile and run each), as the "
              "reference's 20 s.", unit="s", minimum=1, benchmarks=("mixtral_8x7b",), config=False),
    ),
    precisions=("fp32", "fp16", "bf16", "fp8"),
    starting_weights="mistralai/Mixtral-8x7B-Instruct-v0.1 (MLCommons checkpoint, commit a60832cb)",
    watchdog_s=900.0,
    generates_tokens=True,
    scratch_gb=100,                 # models + data + preprocessed data of the reference variant
    llm_shape=LLMShape(params=46.7e9, layers=32, kv_heads=8, head_dim=128, mean_input=600, mean_output=145.9,
                       experts=8,
                       source="Mixtral-8x7B-Instruct-v0.1 config.json; output mean: the checker's TOKENS_PER_SAMPLE; "
                              "input mean: OpenOrca + GSM8K (5-shot) + MBXP prompts, approximate"),
)
