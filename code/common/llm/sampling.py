"""Decoding parameters and the sampler of the in-process engine.

``Sampling`` is what a benchmark's reference decodes with (``code.common.llm.harness.Generation.sampling``,
overridden by ``--llm_temperature`` / ``--llm_top_k`` / ``--llm_top_p`` / ``--llm_seed``): greedy when the
temperature is 0 or top_k is 1, otherwise sampling from the softmax of the logits divided by the temperature,
restricted to the top_k most likely tokens (0: all) and then to the smallest set whose probability reaches top_p
(1.0: all), as transformers' ``TemperatureLogitsWarper``, ``TopKLogitsWarper`` and ``TopPLogitsWarper`` applied in
that order, and vLLM, SGLang and TensorRT-LLM filter.

Each sample draws from its own random stream: ``request_seed(index)`` mixes the run's seed with the sample's QSL
index, so a sample's tokens do not depend on which other samples share its batch or when it joined one. The same
number is the ``seed`` an OpenAI-compatible server gets for that sample (vLLM and SGLang seed a request's own
generator with it).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0       # 0: greedy
    top_k: int = 0                 # 0 (the references' -1): no top-k filter
    top_p: float = 1.0             # 1.0: no nucleus filter
    seed: int = 0                  # the run's seed; each sample's stream is request_seed(its index)

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0 or self.top_k == 1

    def request_seed(self, index: int) -> int:
        """The seed of sample ``index``'s stream (31 bits: every server's JSON parser takes it)."""
        return int(np.random.SeedSequence([int(self.seed) & 0xFFFFFFFF, int(index) & 0xFFFFFFFF])
                   .generate_state(1, np.uint32)[0]) & 0x7FFFFFFF

    def record(self) -> dict:
        """metadata.json's ``generation.sampling``: the parameters and the decoding they amount to."""
        return {**dataclasses.asdict(self), "decoding": "greedy" if self.greedy else "sampling"}


GREEDY = Sampling()


def warp(logits, temperature, top_k, top_p):
    """``logits`` (rows, vocab) divided by ``temperature`` with the tokens outside each row's top-k and top-p sets at
    -inf (per-row tensors or scalars; top_k <= 0 and top_p >= 1 filter nothing). At least one token stays."""
    import torch

    rows, vocab = logits.shape
    dev = logits.device

    def col(x, dtype):
        return torch.as_tensor(x, dtype=dtype, device=dev).reshape(-1, 1).expand(rows, 1)
    x = logits.float() / col(temperature, torch.float32)
    k, p = col(top_k, torch.long), col(top_p, torch.float32)
    # top-k: scores below the k-th largest go (ties with it stay)
    kth = x.sort(-1, descending=True).values.gather(1, k.clamp(1, vocab) - 1)
    x = x.masked_fill((k > 0) & (x < kth), -float("inf"))
    # top-p over what is left (top_p < 1 only, as generate adds no TopPLogitsWarper at 1.0): ascending, the tokens
    # whose cumulative probability is <= 1 - top_p go, never the last
    srt, order = x.sort(-1)
    drop = (srt.softmax(-1).cumsum(-1) <= (1 - p)) & (p < 1)
    drop[:, -1] = False
    return x.masked_fill(drop.scatter(1, order, drop), -float("inf"))


class RowSampler:
    """One sample's parameters and its random stream (a ``torch.Generator`` on the logits' device)."""

    def __init__(self, sampling: Sampling, seed: int, device):
        import torch

        self.sampling = sampling
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(int(seed))


def choose(logits, samplers: Sequence[RowSampler | None]) -> list[int]:
    """Each row's next token: the argmax for a greedy row (``None`` or a greedy Sampling), a draw from the warped
    distribution with the row's own generator otherwise."""
    import torch

    tokens = logits.argmax(-1)
    rows = [i for i, s in enumerate(samplers) if s is not None and not s.sampling.greedy]
    if rows:
        sel = torch.as_tensor(rows, device=logits.device)
        ss = [samplers[i].sampling for i in rows]
        probs = warp(logits[sel], [s.temperature for s in ss], [s.top_k for s in ss], [s.top_p for s in ss]).softmax(-1)
        for j, i in enumerate(rows):
            tokens[i] = torch.multinomial(probs[j], 1, generator=samplers[i].generator)[0]
    return tokens.tolist()
