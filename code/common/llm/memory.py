"""Does an LLM config block fit its GPUs? Weights plus KV cache per GPU, from the model's shape.

An engine (vLLM, TensorRT-LLM, SGLang) claims ``kv_cache_memory_fraction`` of each GPU for weights,
activations and the paged KV cache. What is left after the weights holds the KV cache, and the KV
cache bounds how many sequences decode at once: a ``gpu_batch_size`` larger than that is never reached
(vLLM preempts, TensorRT-LLM queues), and weights larger than the budget do not load at all.

Sizing: weights = parameters x bytes per weight / (tensor x pipeline parallel); KV per token per GPU =
2 (K and V) x layers x KV heads x head dim x bytes per KV element / (tensor x pipeline parallel); a
sequence in flight holds on average its prompt and half its answer (mean input + mean output / 2; with
beams, the prompt once and half of each beam's answer). The means are the dataset's (see each benchmark's ``llm_shape``); they
size a steady state, not the worst case, so a block this check passes can still preempt on long
prompts, while one it refuses cannot hold its batch at all.
"""
from __future__ import annotations

import dataclasses

from code.common.errors import HarnessError

GiB = 2 ** 30            # nvidia-smi's unit (an "80 GB" H100 reports 81559 MiB = 79.6 GiB)
# bytes per weight and per KV-cache element, by the precision a config block names: fp8 engines keep
# an fp8 KV cache (vLLM kv_cache_dtype=fp8, TensorRT-LLM FP8 KV); int8/int4 weight-only keep fp16 KV.
PRECISION_BYTES = {"fp32": (4.0, 4.0), "fp16": (2.0, 2.0), "bf16": (2.0, 2.0), "fp8": (1.0, 1.0),
                   "int8": (1.0, 2.0), "int4": (0.5, 2.0), "fp4": (0.5, 1.0)}


@dataclasses.dataclass(frozen=True)
class LLMShape:
    """What the real model's config.json and the dataset say; the tiny variant is never checked."""
    params: float           # all parameters (every expert of a mixture of experts)
    layers: int             # num_hidden_layers
    kv_heads: int           # num_key_value_heads (= attention heads without grouped-query attention)
    head_dim: int           # hidden_size / num_attention_heads
    mean_input: float       # tokens per prompt, dataset mean
    mean_output: float      # tokens per answer, dataset mean
    source: str = ""        # where the figures come from
    experts: int = 0        # routed experts per MoE layer (0: a dense model); MoE models take expert_parallel_size

    def tokens_in_flight(self, beams: int = 1) -> float:
        """KV tokens one sequence holds on average: its prompt (shared by its beams, as vLLM's and
        TensorRT-LLM's paged caches share the prompt's blocks) and half of each beam's answer."""
        return self.mean_input + beams * self.mean_output / 2


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    gpu_gib: float           # one GPU's memory
    budget_gib: float        # the fraction of it the engine claims
    weights_gib: float       # per GPU
    kv_gib: float            # per GPU, for batch sequences in flight
    batch: int
    max_batch: int          # the most sequences whose KV fits beside the weights
    fraction: float
    gpus: int               # GPUs of one instance (tensor x pipeline parallel)

    @property
    def fits(self) -> bool:
        return self.weights_gib < self.budget_gib and self.batch <= self.max_batch

    def describe(self) -> str:
        return (f"per GPU: weights {self.weights_gib:.1f} GiB + KV cache {self.kv_gib:.1f} GiB for {self.batch} "
                f"sequences = {self.weights_gib + self.kv_gib:.1f} GiB of {self.budget_gib:.1f} GiB "
                f"({self.fraction:g} x {self.gpu_gib:.1f} GiB); at most {self.max_batch} sequences fit")


def plan(shape: LLMShape, *, precision: str, batch: int, gpu_gib: float, fraction: float,
         tensor_parallel: int = 1, pipeline_parallel: int = 1, beams: int = 1) -> MemoryPlan:
    if precision not in PRECISION_BYTES:
        raise HarnessError(f"no memory model for precision {precision}", f"use one of {', '.join(PRECISION_BYTES)}")
    wb, kb = PRECISION_BYTES[precision]
    gpus = max(1, tensor_parallel) * max(1, pipeline_parallel)
    weights = shape.params * wb / gpus / GiB
    per_seq = 2 * shape.layers * shape.kv_heads * shape.head_dim * kb / gpus * shape.tokens_in_flight(beams) / GiB
    budget = fraction * gpu_gib
    free = max(0.0, budget - weights)
    return MemoryPlan(gpu_gib=gpu_gib, budget_gib=budget, weights_gib=weights, kv_gib=batch * per_seq, batch=batch,
                      max_batch=int(free // per_seq) if per_seq > 0 else 0, fraction=fraction, gpus=gpus)


def check(p: MemoryPlan, where: str) -> None:
    """A one-line refusal naming what does not fit and the setting that fixes it."""
    if p.weights_gib >= p.budget_gib:
        raise HarnessError(f"{where}: the weights alone take {p.weights_gib:.1f} GiB per GPU, more than the "
                           f"{p.budget_gib:.1f} GiB the engine may use ({p.describe()})",
                           f"use more GPUs per instance (--tensor_parallel_size={p.gpus * 2}) or a smaller precision")
    if p.batch > p.max_batch:
        more = f"--tensor_parallel_size={p.gpus * 2}"
        raise HarnessError(f"{where}: gpu_batch_size {p.batch} does not fit ({p.describe()})",
                           f"use --gpu_batch_size={p.max_batch} (or more GPUs per instance: {more})" if p.max_batch
                           else f"use more GPUs per instance ({more})")
