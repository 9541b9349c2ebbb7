"""LLM backends: what turns a checkpoint folder into GenerationProcessors.

- ``transformers`` (CPU, and GPUs without another engine): the Hugging Face model with a KV cache,
  batched by the harness's own scheduler (``code.common.llm.generation.Scheduler``: in-flight or
  static). Beam search (GPT-J's reference uses 4 beams) goes through ``model.generate`` in static
  batches, since beams cannot stream.
- ``vllm``: vLLM's ``LLMEngine`` (its own continuous batching and paged KV cache); tensor / pipeline
  parallel sizes from config.json. Optional install: ``requirements-llm-gpu.txt``.
- ``tensorrt_llm``: TensorRT-LLM's ``LLM`` API (1.x: the PyTorch flow, in-flight batching in its executor),
  streaming ``generate_async``. Optional install, same file.
- ``openai``: OpenAI-compatible servers over HTTP (``make run_llm_server``: vLLM, SGLang, TensorRT-LLM's
  ``trtllm-serve`` or the harness's own server), one worker per server (``code.common.llm.openai_client``).

vLLM and TensorRT-LLM choose their GPUs with ``CUDA_VISIBLE_DEVICES``, which is process-wide: in-process they
run one model instance (``place`` refuses more; ``make run_llm_server`` serves one per GPU group), and only
transformers decodes with beams (``check`` refuses a beam benchmark on the others).

vLLM and TensorRT-LLM are imported only when used; without them ``available()`` says what is missing
and tests that need them skip with that reason. They are written against the libraries' public APIs
(vLLM 0.33 ``LLMEngine.add_request/step``, TensorRT-LLM 1.2 ``LLM.generate_async``).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Sequence

import numpy as np

from code.common.backends.base import Backend
from code.common.errors import HarnessError
from code.common.llm.generation import GenRequest, GenerationProcessor, Scheduler, decoding
from code.common.llm.sampling import GREEDY, Sampling


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """Everything one generation worker needs (built by ``LLMBenchmark.worker_specs``)."""

    model_dir: str
    precision: str = "fp32"
    device: str = "cpu"                # "cpu" | "cuda:<n>"
    gpus: tuple[int, ...] = ()         # the GPUs this worker spans (tensor x pipeline parallel)
    max_batch_size: int = 1
    batching: str = "inflight"
    max_num_tokens: int = 0
    batch_timeout_s: float = 0.0
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    expert_parallel_size: int = 1      # mixture of experts: GPUs the experts are spread over (within tensor parallel)
    distributed_backend: str = "auto"  # "auto" | "mp" | "ray": how one instance spans its GPUs (ray: over nodes)
    kv_cache_memory_fraction: float = 0.9
    eos_token_id: int | None = None
    extra_eos: tuple[int, ...] = ()    # other ids that end a sequence (a list eos_token_id in config.json)
    pad_token_id: int = 0
    max_context: int = 0
    num_beams: int = 1
    sampling: Sampling = GREEDY        # the benchmark's decoding (code.common.llm.sampling), for every request
    threads: int = 0                   # CPU: torch intra-op threads of this worker (0: all cores)
    cpu_cores: tuple[int, ...] = ()    # CPU: pin the worker thread here
    name: str = "gen-worker-0"
    # --backend=openai: the server this worker drives (code.common.llm.openai_client)
    endpoint: str = ""
    served_model: str = ""
    request_timeout_s: float = 300.0
    start_fix: str = ""                # the command that starts the server (its not-answering error's fix)
    api: str = "completions"           # llm_api: completions (token ids) | chat (text)
    token_ids: str = "server"          # llm_token_ids: server (streamed ids) | retokenize (streamed text, encoded)
    multimodal: bool = False           # requests carry chat messages with images (code.common.llm.vision)


class LLMBackend(Backend):
    """An LLM backend has no ONNX engine to build: ``prepare_model`` returns what its workers load."""

    engine_suffix = ""
    precisions = ("fp32", "fp16", "bf16")
    serves_tokens = True
    remote = False                     # True: each worker is a server the harness drives over the network
    beam_search = False                # decodes with num_beams > 1 (the others refuse a beam benchmark)
    instances_per_process = 0          # >0: model instances one process can hold (CUDA_VISIBLE_DEVICES is per process)

    def build(self, onnx_path, engine_path, spec):   # pragma: no cover - the engine flow is not used for LLMs
        raise HarnessError(f"--backend={self.name} builds no ONNX engines", "use an LLM benchmark with this backend")

    def load(self, engine_path, spec):                # pragma: no cover
        raise HarnessError(f"--backend={self.name} loads no ONNX engines", "use an LLM benchmark with this backend")

    def prepare_model(self, model_dir: str, spec: WorkerSpec) -> str:
        """What the workers load: the checkpoint folder (the engines build their own graphs from it)."""
        self.check(spec)
        return model_dir

    def check(self, spec: WorkerSpec) -> None:
        """Refuse what this backend would silently do differently from the reference: beam search."""
        if spec.num_beams > 1 and not self.beam_search:
            raise HarnessError(f"--backend={self.name} decodes greedily; this benchmark's reference decodes with "
                               f"{spec.num_beams} beams", "use --backend=transformers (beam search in-process) "
                               "for this benchmark")

    def place(self, specs: Sequence[WorkerSpec]) -> None:
        """Refuse more model instances than one process can place on their own GPUs."""
        n = self.instances_per_process
        if n and len(specs) > n:
            raise HarnessError(f"--backend={self.name} holds {n} model instance per process (its GPUs are chosen "
                               f"with CUDA_VISIBLE_DEVICES, which is process-wide); this config asks for {len(specs)} "
                               f"(GPU groups {', '.join(','.join(map(str, s.gpus)) or '-' for s in specs)})",
                               "serve one instance per GPU group: make run_llm_server (its engine), then "
                               "make run_harness RUN_ARGS=\"... --backend=openai\"")

    @staticmethod
    def pin_gpus(spec: WorkerSpec) -> None:
        """This process's GPUs are the instance's group, unless the user chose them (CUDA_VISIBLE_DEVICES set)."""
        import os

        if spec.gpus and "CUDA_VISIBLE_DEVICES" not in os.environ:
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, spec.gpus))

    def processor(self, spec: WorkerSpec) -> GenerationProcessor:
        raise NotImplementedError


def _torch_dtype(precision: str):
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


class TransformersBackend(LLMBackend):
    name, short, library, display = "transformers", "HF", "transformers", "Hugging Face Transformers"
    preference = {"gpu": 2, "cpu": 0}
    beam_search = True

    def processor(self, spec: WorkerSpec) -> GenerationProcessor:
        import torch
        from transformers import AutoModelForCausalLM

        from code.common.llm.hf import TransformersStepModel
        from code.common.llm.tiny import quiet

        quiet()
        if spec.precision not in ("fp32", "fp16", "bf16"):
            raise HarnessError(f"--backend=transformers runs fp32, fp16 or bf16, not {spec.precision}",
                               "use --backend=vllm or --backend=tensorrt_llm for fp8, or --precision=fp16")
        if spec.device == "cpu" and spec.precision != "fp32":
            raise HarnessError(f"--backend=transformers runs {spec.precision} on GPUs only; this worker is on the CPU",
                               "use --precision=fp32 on a CPU system")
        def init() -> None:                  # on the worker thread: OpenMP's thread count is per thread
            if spec.cpu_cores:
                import os

                os.sched_setaffinity(0, spec.cpu_cores)
            if spec.device == "cpu" and spec.threads:
                torch.set_num_threads(spec.threads)
        if spec.multimodal:
            from code.common.llm import vision

            return vision.VisionProcessor(vision.load_model(spec.model_dir, _torch_dtype(spec.precision), spec.device),
                                          vision.ChatInputs(spec.model_dir), spec, init)
        model = AutoModelForCausalLM.from_pretrained(spec.model_dir, dtype=_torch_dtype(spec.precision))
        model = model.to(spec.device).eval()
        if spec.num_beams > 1:
            return BeamSearchProcessor(model, spec, init)
        step = TransformersStepModel(model, eos_token_id=spec.eos_token_id, extra_eos=spec.extra_eos,
                                     pad_token_id=spec.pad_token_id,
                                     max_context=spec.max_context)
        return Scheduler(step, spec.max_batch_size, mode=spec.batching, max_num_tokens=spec.max_num_tokens,
                         batch_timeout_s=spec.batch_timeout_s, name=spec.name, thread_init=init, sampling=spec.sampling)


class BeamSearchProcessor(Scheduler):
    """Beam search (``num_beams`` > 1) in static batches through ``model.generate``: beams do not stream,
    so the first token is reported with the completion (GPT-J infers token latencies anyway)."""

    def __init__(self, model, spec: WorkerSpec, init):
        from code.common.llm.generation import NullStepModel

        super().__init__(NullStepModel(spec.eos_token_id), spec.max_batch_size, mode="static",
                         batch_timeout_s=spec.batch_timeout_s, name=spec.name, thread_init=init)
        self.hf, self.spec = model, spec

    def _iterate(self, joiners: list[GenRequest]) -> None:
        import torch

        if not joiners:
            return
        spec, dev = self.spec, next(self.hf.parameters()).device
        width = max(len(r.prompt) for r in joiners)
        ids = torch.full((len(joiners), width), spec.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, r in enumerate(joiners):
            ids[i, width - len(r.prompt):] = torch.as_tensor(np.asarray(r.prompt, dtype=np.int64))
            mask[i, width - len(r.prompt):] = 1
        with torch.inference_mode():
            out = self.hf.generate(ids.to(dev), attention_mask=mask.to(dev), num_beams=spec.num_beams,
                                   early_stopping=True, do_sample=False, max_new_tokens=joiners[0].max_new_tokens,
                                   min_new_tokens=joiners[0].min_new_tokens, eos_token_id=spec.eos_token_id,
                                   pad_token_id=spec.pad_token_id)
        self.counters["steps"] += 1
        self.counters["joins"] += 1
        for r, row in zip(joiners, out[:, width:].tolist()):
            if spec.eos_token_id is not None and spec.eos_token_id in row:   # drop the padding after the EOS
                row = row[:row.index(spec.eos_token_id) + 1]
            r.tokens = row
            r.first_at = time.monotonic()
            self.on_first(r, row[0])
            self._finish(r)


class VLLMBackend(LLMBackend):
    name, short, library, display = "vllm", "vLLM", "vllm", "vLLM"
    spans_ray_cluster = True
    preference = {"gpu": 1}
    instances_per_process = 1

    def processor(self, spec: WorkerSpec) -> GenerationProcessor:
        self.check(spec)
        self.pin_gpus(spec)
        return VLLMProcessor(spec)


class VLLMProcessor(GenerationProcessor):
    """vLLM's engine stepped on one thread: requests are added between steps (vLLM batches them
    continuously), and each step's outputs carry every request's tokens so far."""

    def __init__(self, spec: WorkerSpec):
        from vllm import EngineArgs, LLMEngine, SamplingParams

        self.SamplingParams = SamplingParams
        args = EngineArgs(model=spec.model_dir, tokenizer=spec.model_dir, skip_tokenizer_init=True,
                          dtype={"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}.get(spec.precision, "auto"),
                          quantization="fp8" if spec.precision == "fp8" else None,
                          tensor_parallel_size=spec.tensor_parallel_size,
                          pipeline_parallel_size=spec.pipeline_parallel_size,
                          enable_expert_parallel=spec.expert_parallel_size > 1,
                          distributed_executor_backend=None if spec.distributed_backend == "auto" else spec.distributed_backend,
                          gpu_memory_utilization=spec.kv_cache_memory_fraction, max_num_seqs=spec.max_batch_size,
                          max_num_batched_tokens=spec.max_num_tokens or None, enable_prefix_caching=False,
                          max_model_len=spec.max_context or None, seed=0)
        self.engine = LLMEngine.from_engine_args(args)
        self.spec, self.sampling = spec, spec.sampling
        self.max_batch_size, self.eos_token_id = spec.max_batch_size, spec.eos_token_id
        self._new: list[GenRequest] = []
        self._live: dict[str, GenRequest] = {}
        self._cv = threading.Condition()
        self._stopping = False
        self.errors: list[BaseException] = []
        self.steps = 0

    def start(self, on_first, on_done) -> None:
        super().start(on_first, on_done)
        self._thread = threading.Thread(target=self._loop, name=self.spec.name, daemon=True)
        self._thread.start()

    def submit(self, requests: Sequence[GenRequest]) -> None:
        with self._cv:
            self._new.extend(requests)
            self._cv.notify()

    def outstanding(self) -> int:
        return len(self._new) + len(self._live)

    def progress(self) -> int:
        return self.steps

    def state(self) -> str:
        return f"{self.spec.name}: vLLM with {len(self._live)} running, {len(self._new)} waiting ({self.steps} steps)"

    def _loop(self) -> None:
        try:
            while True:
                with self._cv:
                    while not self._new and not self._live and not self._stopping:
                        self._cv.wait()
                    if self._stopping and not self._live:
                        return
                    new, self._new = self._new, []
                for r in new:
                    rid = str(r.qid)
                    self._live[rid] = r
                    params = self.SamplingParams(**vllm_sampling(decoding(r, self.sampling)),
                                                 max_tokens=r.max_new_tokens,
                                                 min_tokens=r.min_new_tokens, detokenize=False,
                                                 stop_token_ids=list(self.spec.extra_eos)
                                                 + (list(r.stop) if len(r.stop) == 1 else []) or None)
                    self.engine.add_request(rid, {"prompt_token_ids": [int(t) for t in r.prompt]}, params)
                for out in self.engine.step():
                    r = self._live.get(out.request_id)
                    if r is None:
                        continue
                    toks = list(out.outputs[0].token_ids)
                    if toks and not r.tokens:
                        r.first_at = time.monotonic()
                        self.on_first(r, int(toks[0]))
                    stopped = _stopped(r, toks)
                    if stopped is not None and not out.finished:      # a multi-token stop sequence: vLLM
                        self.engine.abort_request([out.request_id])    # stops on single tokens only (V1: a list)
                        toks = stopped
                    r.tokens = toks
                    if out.finished or stopped is not None:
                        del self._live[out.request_id]
                        r.done = True
                        self.on_done(r, np.asarray(toks, dtype=np.int32))
                self.steps += 1
        except BaseException as e:   # answer everything: LoadGen must never wait forever
            self.errors.append(e)
            for r in list(self._live.values()) + self._new:
                if not r.done:
                    r.done = True
                    self.on_done(r, np.zeros(0, dtype=np.int32))

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        self._thread.join(timeout=60)

    def stats(self) -> dict:
        return {"steps": self.steps, "engine": "vllm"}


class TensorRTLLMBackend(LLMBackend):
    """TensorRT-LLM 1.x: ``tensorrt_llm.LLM`` is the PyTorch flow, which compiles from the Hugging Face checkpoint
    when it loads (there is no engine to build or ``save`` beforehand; that was the TensorRT flow's class)."""

    name, short, library, display = "tensorrt_llm", "TRTLLM", "tensorrt_llm", "TensorRT-LLM"
    spans_ray_cluster = True
    preference = {"gpu": 0}
    instances_per_process = 1

    def processor(self, spec: WorkerSpec) -> GenerationProcessor:
        self.check(spec)
        self.pin_gpus(spec)
        return TensorRTLLMProcessor(spec)


def _trtllm_llm(model: str, spec: WorkerSpec):
    from tensorrt_llm import LLM
    from tensorrt_llm.llmapi import KvCacheConfig, QuantAlgo, QuantConfig

    quant = QuantConfig(quant_algo=QuantAlgo.FP8, kv_cache_quant_algo=QuantAlgo.FP8) if spec.precision == "fp8" else None
    moe = {"moe_expert_parallel_size": spec.expert_parallel_size,
           "moe_tensor_parallel_size": spec.tensor_parallel_size // spec.expert_parallel_size} \
        if spec.expert_parallel_size > 1 else {}
    if spec.distributed_backend == "ray":       # Ray instead of MPI spawns the ranks, over the cluster's nodes
        moe["orchestrator_type"] = "ray"
    return LLM(model=model, tensor_parallel_size=spec.tensor_parallel_size, quant_config=quant, **moe,
               pipeline_parallel_size=spec.pipeline_parallel_size, dtype={"fp32": "float32", "fp16": "float16",
                                                                           "bf16": "bfloat16"}.get(spec.precision, "auto"),
               max_batch_size=spec.max_batch_size, max_num_tokens=spec.max_num_tokens or None,
               kv_cache_config=KvCacheConfig(free_gpu_memory_fraction=spec.kv_cache_memory_fraction),
               skip_tokenizer_init=True)


class TensorRTLLMProcessor(GenerationProcessor):
    """TensorRT-LLM's executor batches in flight; each request streams through ``generate_async`` on an
    asyncio loop of this worker's own thread."""

    def __init__(self, spec: WorkerSpec):
        self.spec, self.sampling = spec, spec.sampling
        self.llm = _trtllm_llm(spec.model_dir, spec)
        self.max_batch_size, self.eos_token_id = spec.max_batch_size, spec.eos_token_id
        self.errors: list[BaseException] = []
        self._live = 0
        self.streamed = 0                       # streamed outputs of every request (progress)

    def start(self, on_first, on_done) -> None:
        import asyncio

        super().start(on_first, on_done)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=self.spec.name, daemon=True)
        self._thread.start()

    def submit(self, requests: Sequence[GenRequest]) -> None:
        import asyncio

        for r in requests:
            self._live += 1
            asyncio.run_coroutine_threadsafe(self._one(r), self.loop)

    async def _one(self, r: GenRequest) -> None:
        from tensorrt_llm import SamplingParams

        how = decoding(r, self.sampling)
        params = SamplingParams(max_tokens=r.max_new_tokens, min_tokens=r.min_new_tokens, end_id=self.spec.eos_token_id,
                                stop_token_ids=list(self.spec.extra_eos) or None,
                                pad_id=self.spec.pad_token_id, detokenize=False,
                                **trtllm_sampling(how))
        toks: list[int] = []
        try:
            result = self.llm.generate_async([int(t) for t in r.prompt], sampling_params=params, streaming=True)
            async for out in result:
                self.streamed += 1
                toks = list(out.outputs[0].token_ids)
                if toks and not r.tokens:
                    r.first_at = time.monotonic()
                    r.tokens = toks
                    self.on_first(r, int(toks[0]))
                stopped = _stopped(r, toks)
                if stopped is not None:               # the sample's stop sequence: end it here
                    toks = stopped
                    result.abort()
                    break
        except BaseException as e:  # noqa: BLE001 - answered empty below; the run reports the error
            self.errors.append(e)
            toks = []
        self._live -= 1
        r.tokens, r.done = toks, True
        self.on_done(r, np.asarray(toks, dtype=np.int32))

    def outstanding(self) -> int:
        return self._live

    def progress(self) -> int:
        return self.streamed

    def state(self) -> str:
        return f"{self.spec.name}: TensorRT-LLM with {self._live} request(s) in flight"

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=60)
        self.llm.shutdown()


def vllm_sampling(how: tuple[Sampling, int] | None) -> dict:
    """vLLM's SamplingParams (and its OpenAI server's request fields) for a request's decoding: temperature 0 when
    greedy; else temperature, top_p, top_k (-1: off) and the request's own seed."""
    if how is None:
        return {"temperature": 0.0}
    s, seed = how
    return {"temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k if s.top_k > 0 else -1, "seed": seed}


def trtllm_sampling(how: tuple[Sampling, int] | None) -> dict:
    """TensorRT-LLM's SamplingParams for a request's decoding: top_k 1 when greedy; else temperature, top_k (0: all
    logits), top_p (given: with neither top_k nor top_p set it decodes greedily) and the request's seed."""
    if how is None:
        return {"top_k": 1}
    s, seed = how
    return {"temperature": s.temperature, "top_k": max(0, s.top_k), "top_p": s.top_p, "seed": seed}


def _stopped(r: GenRequest, tokens: list[int]) -> list[int] | None:
    """The output cut after ``r``'s stop sequence, once the engine's tokens contain it (else None)."""
    from code.common.llm.generation import cut_at_stop, ends_with_stop

    cut = cut_at_stop(tokens, r.stop, r.min_new_tokens)
    return cut if ends_with_stop(cut, r.stop) and len(cut) >= r.min_new_tokens else None


class OpenAIBackend(LLMBackend):
    """Workers that are servers: each drives one OpenAI-compatible endpoint over HTTP. The servers own the model,
    its precision and its batching; the harness sends at most ``gpu_batch_size`` requests to each at a time."""

    name, short, library, display = "openai", "OAI", "aiohttp", "OpenAI-compatible HTTP server"
    precisions = ("fp32", "fp16", "bf16", "fp8", "int8")
    remote = True                      # workers are endpoints (LLMBenchmark.worker_specs), not model instances

    def processor(self, spec: WorkerSpec) -> GenerationProcessor:
        from code.common.llm.openai_client import OpenAIProcessor

        self.check(spec)             # the completions API has no beam search
        return OpenAIProcessor(spec.endpoint, model=spec.served_model or None, max_inflight=spec.max_batch_size,
                               timeout_s=spec.request_timeout_s, eos_token_id=spec.eos_token_id,
                               start_fix=spec.start_fix, name=spec.name, api=spec.api, token_ids=spec.token_ids,
                               tokenizer_dir=spec.model_dir, sampling=spec.sampling)
