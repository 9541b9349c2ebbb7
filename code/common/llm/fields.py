"""Schema fields shared by every LLM benchmark (declared once; ``code.common.benchmarks.registry``
scopes them to the benchmarks whose spec says ``generates_tokens``)."""
from __future__ import annotations

from code.common.fields import Field, parse_float, parse_int, parse_list, parse_str
from code.common.scenarios import SERVER_LIKE as SERVERS

LLM_FIELDS: tuple[Field, ...] = (
    Field("llm_batching", parse_str, "inflight", "How the generation scheduler batches: inflight (continuous: new "
          "requests join the running batch between decode steps, finished ones leave) or static (a batch runs until "
          "its last sequence ends before the next one starts). gpu_batch_size is the batch's maximum size.",
          choices=("inflight", "static")),
    Field("llm_max_num_tokens", parse_int, 0, "Token budget of one scheduler step: the prompt tokens of requests "
          "joining plus one per running sequence (0: no budget beyond gpu_batch_size).", minimum=0),
    Field("llm_temperature", parse_float, None, "Sampling temperature (default: the benchmark reference's: "
          "GPT-OSS-120B samples at 1.0, Qwen3-VL at 0.7 with top_k 20 and top_p 0.8, the others decode "
          "greedily). 0: greedy decoding (the argmax); above 0, each sample draws its tokens from its own seeded "
          "stream (--llm_seed).", minimum=0.0),
    Field("llm_top_k", parse_int, None, "Top-k filter when sampling (default: the reference's; 0: off, the "
          "references' -1; 1: greedy).", minimum=-1),
    Field("llm_top_p", parse_float, None, "Top-p (nucleus) filter when sampling (default: the reference's; 1.0: off).",
          minimum=0.0, maximum=1.0),
    Field("llm_seed", parse_int, None, "Seed of the sampling streams (default: the reference's, 42 where it names "
          "one, else 0): sample i draws from a stream seeded by (seed, i), in process and as the request's seed on "
          "an OpenAI-compatible server, so its tokens do not depend on its batch.", minimum=0),
    Field("llm_sample_count", parse_int, 0, "Use only the first N dataset samples (0: all). A subset is never valid "
          "for submission.", minimum=0),
    Field("ttft_latency_ns", parse_int, 0, "Time-to-first-token bound override (0: mlperf.conf's for this benchmark "
          "and scenario).", unit="ns", minimum=0, scenarios=SERVERS),
    Field("tpot_latency_ns", parse_int, 0, "Time-per-output-token bound override (0: mlperf.conf's).", unit="ns",
          minimum=0, scenarios=SERVERS),
    Field("tensor_parallel_size", parse_int, 1, "vllm / tensorrt_llm: GPUs one model instance spans (tensor "
          "parallel); workers = GPUs / (tensor x pipeline parallel size).", minimum=1),
    Field("pipeline_parallel_size", parse_int, 1, "vllm / tensorrt_llm: pipeline-parallel stages per instance.",
          minimum=1),
    Field("llm_distributed_backend", parse_str, "auto", "vllm / tensorrt_llm: how one model instance spans its GPUs. "
          "auto: the engine's default (processes on one node); ray: over the Ray cluster (executor=ray, "
          "ray_address), so tensor x pipeline parallel may span several nodes (vLLM distributed_executor_backend, "
          "TensorRT-LLM orchestrator_type); mp: processes on one node.", choices=("auto", "mp", "ray")),
    Field("kv_cache_memory_fraction", parse_float, 0.9, "vllm (gpu_memory_utilization) / tensorrt_llm "
          "(free_gpu_memory_fraction): share of GPU memory for weights and KV cache.", minimum=0.05, maximum=1.0),
    # --- OpenAI-compatible servers (code.common.llm.servers, code.common.llm.openai_client) ---
    Field("llm_endpoints", parse_list, (), "backend=openai: the servers to drive, http://host:port,... (default: "
          "the ones make run_llm_server started, build/llm_server/endpoints.json).", config=False),
    Field("llm_served_model", parse_str, "", "backend=openai with --llm_endpoints: the model name to send (default: "
          "the one model the server lists at /v1/models).", config=False),
    Field("llm_api", parse_str, "completions", "backend=openai: the route a sample takes. completions: the prompt as "
          "token ids to /v1/completions (exact; vLLM, SGLang, trtllm-serve and the harness's server); chat: the "
          "prompt's text as one user message to /v1/chat/completions, for servers that speak only chat (the "
          "MLCommons endpoints echo server); a server with a chat template applies it to text that already has "
          "the benchmark's.", choices=("completions", "chat")),
    Field("llm_token_ids", parse_str, "server", "backend=openai: where LoadGen's output token ids come from. "
          "server: the ids the server streams (vLLM's return_token_ids, the harness's server; exact); retokenize: "
          "the streamed text encoded with the benchmark's tokenizer, for servers that stream text only, as the "
          "MLCommons endpoints client counts tokens (a count can differ from the generated one where the text "
          "encodes differently).", choices=("server", "retokenize")),
    Field("llm_request_timeout_s", parse_float, 300.0, "backend=openai: a server silent this long within one "
          "request has failed (the run ends naming it).", unit="s", minimum=1),
    Field("llm_server_engine", parse_str, "auto", "make run_llm_server: what serves the model. vllm (vllm serve), "
          "sglang (sglang.launch_server), trtllm (trtllm-serve), harness (the harness's own server over the "
          "transformers backend); auto: vllm on GPU systems where it imports, else harness.",
          choices=("auto", "harness", "vllm", "sglang", "trtllm")),
    Field("llm_server_port", parse_int, 8000, "make run_llm_server: the first server's port (the next ones count "
          "up).", minimum=1, maximum=65535, config=False),
    Field("llm_server_host", parse_str, "127.0.0.1", "make run_llm_server: the address the servers listen on.",
          config=False),
    Field("llm_server_start_s", parse_float, 1800.0, "make run_llm_server: how long a server may take to become "
          "healthy (a large model loads for minutes).", unit="s", minimum=1, config=False),
)

# the mixture-of-experts models (a spec whose llm_shape has experts): code.common.benchmarks.registry scopes them
MOE_FIELDS: tuple[Field, ...] = (
    Field("expert_parallel_size", parse_int, 1, "vllm / sglang / tensorrt_llm: GPUs the experts of one instance are "
          "spread over (expert parallel; vLLM enables it when > 1, TensorRT-LLM's moe_expert_parallel_size). "
          "Must divide tensor_parallel_size.", minimum=1),
)
