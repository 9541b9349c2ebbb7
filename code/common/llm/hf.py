"""The ``transformers`` step model: a Hugging Face causal LM with one batched KV cache.

Rows are left-padded to a common cache length. A prefill of the joining prompts builds their own
cache; it is merged into the running one by left-padding the shorter of the two (keys, values and
the attention mask) and concatenating on the batch dimension. Rows that leave are dropped with
``DynamicCache.batch_select_indices``, and leading columns that no row uses any more are trimmed.
Positions are kept per row (``position_ids``), so a row's numbers do not depend on its padding:
at batch 1 the tokens are those of ``model.generate`` with greedy decoding (tests prove it). A sampling row
keeps its own random stream (``code.common.llm.sampling``) from join to leave.
"""
from __future__ import annotations

import inspect
from typing import Sequence

import numpy as np

from code.common.llm.generation import StepModel


class TransformersStepModel(StepModel):
    def __init__(self, model, *, eos_token_id: int | None, pad_token_id: int = 0, max_context: int = 0,
                 extra_eos: tuple[int, ...] = ()):
        import torch

        self.torch = torch
        self.model = model.eval()
        self.config = model.config
        self.device = next(model.parameters()).device
        self.eos_token_id = eos_token_id
        self.extra_eos = tuple(extra_eos)
        self.pad_token_id = pad_token_id
        self.vocab_size = int(model.config.vocab_size)
        self.max_context = max_context or int(getattr(model.config, "max_position_embeddings", 0)
                                              or getattr(model.config, "n_positions", 0))
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = "logits_to_keep" in params
        self.cache = None
        self.mask = None       # (rows, cache length) long
        self.pos = None        # (rows,) next position of each row
        self.samplers: list = []   # per row: None (greedy) or its sampling.RowSampler

    # --- helpers ------------------------------------------------------------------------------------
    def _forward(self, ids, mask, positions, cache):
        kw = {"input_ids": ids, "attention_mask": mask, "position_ids": positions, self._cache_kw: cache,
              "use_cache": True}
        if self._keep_kw:
            kw["logits_to_keep"] = 1
        return self.model(**kw).logits[:, -1, :]

    def _pick(self, logits, suppress_eos: Sequence[bool], samplers: Sequence) -> list[int]:
        from code.common.llm.sampling import choose

        logits = logits.float()
        if self.eos_token_id is not None and any(suppress_eos):
            rows = self.torch.tensor([i for i, s in enumerate(suppress_eos) if s], device=logits.device)
            for e in (self.eos_token_id, *self.extra_eos):
                logits[rows, e] = -float("inf")
        if not any(samplers):
            return logits.argmax(-1).tolist()
        return choose(logits, samplers)

    def _new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self.config)

    @staticmethod
    def _pad_left(x, n: int, dim: int, value=0):
        if n == 0:
            return x
        import torch

        shape = list(x.shape)
        shape[dim] = n
        return torch.cat([torch.full(shape, value, dtype=x.dtype, device=x.device), x], dim=dim)

    # --- StepModel -------------------------------------------------------------------------------
    def join(self, prompts, suppress_eos, sampling=None):
        from code.common.llm.sampling import RowSampler

        torch = self.torch
        samplers = [None if h is None else RowSampler(h[0], h[1], self.device)
                    for h in (sampling or [None] * len(prompts))]
        lens = [len(p) for p in prompts]
        width = max(lens)
        self._within_window(width, len(prompts))
        ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.as_tensor(np.asarray(p, dtype=np.int64))
            mask[i, width - len(p):] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        ids, mask, positions = ids.to(self.device), mask.to(self.device), positions.to(self.device)
        cache = self._new_cache()
        with torch.inference_mode():
            first = self._pick(self._forward(ids, mask, positions, cache), suppress_eos, samplers)
        pos = torch.tensor(lens, dtype=torch.long, device=self.device)
        if self.cache is None:
            self.cache, self.mask, self.pos, self.samplers = cache, mask, pos, samplers
        else:
            self._merge(cache, mask, pos)
            self.samplers = self.samplers + samplers
        return first

    def _merge(self, cache, mask, pos) -> None:
        torch = self.torch
        a, b = self.mask.shape[1], mask.shape[1]
        width = max(a, b)
        self._within_window(width, self.mask.shape[0] + mask.shape[0])
        for old, new in zip(self.cache.layers, cache.layers):
            old.keys = torch.cat([self._pad_left(old.keys, width - a, -2), self._pad_left(new.keys, width - b, -2)], 0)
            old.values = torch.cat([self._pad_left(old.values, width - a, -2),
                                    self._pad_left(new.values, width - b, -2)], 0)
        self.mask = torch.cat([self._pad_left(self.mask, width - a, 1), self._pad_left(mask, width - b, 1)], 0)
        self.pos = torch.cat([self.pos, pos])
        self._sync_lengths()

    def _sync_lengths(self) -> None:
        """A sliding-window layer (GPT-OSS's) sizes its attention mask by its own token count: after a merge
        pads, or a leave trims, the columns, that count is the cache's width again. Exact while the window holds
        the whole sequence (the tiny GPT-OSS: window = context); a sequence past the window is not supported here."""
        for layer in self.cache.layers:
            if hasattr(layer, "cumulative_length"):
                layer.cumulative_length = int(layer.keys.shape[-2])

    def _within_window(self, width: int, rows: int) -> None:
        """Refuse ``rows`` > 1 sequences ``width`` columns wide past a sliding window: its layers keep the last
        window - 1 tokens while the batch's mask keeps every column, and the rows would attend to the wrong ones."""
        window = getattr(self.config, "sliding_window", None) or 0
        if window and rows > 1 and width >= window - 1 and "sliding_attention" in (getattr(self.config, "layer_types",
                                                                                            None) or ()):
            raise RuntimeError(
                f"batched sequences reached the model's {window}-token sliding window, which the transformers backend's "
                "in-flight batching does not support; run with --backend=vllm (or a vLLM/SGLang server and "
                "--backend=openai), or --gpu_batch_size=1")

    def step(self, last_tokens, suppress_eos):
        torch = self.torch
        ids = torch.tensor(last_tokens, dtype=torch.long, device=self.device)[:, None]
        self._within_window(self.mask.shape[1] + 1, self.mask.shape[0])
        self.mask = torch.cat([self.mask, torch.ones((self.mask.shape[0], 1), dtype=torch.long, device=self.device)], 1)
        with torch.inference_mode():
            nxt = self._pick(self._forward(ids, self.mask, self.pos[:, None], self.cache), suppress_eos, self.samplers)
        self.pos = self.pos + 1
        return nxt

    def leave(self, rows):
        torch = self.torch
        gone = set(rows)
        keep = [i for i in range(self.mask.shape[0]) if i not in gone]
        if not keep:
            self.cache = self.mask = self.pos = None
            self.samplers = []
            return
        self.samplers = [self.samplers[i] for i in keep]
        idx = torch.tensor(keep, dtype=torch.long, device=self.device)
        self.cache.batch_select_indices(idx)
        self.mask, self.pos = self.mask[idx], self.pos[idx]
        used = self.mask.any(0).nonzero()
        lead = int(used[0]) if len(used) else 0
        if lead:                      # columns no remaining row attends to
            for layer in self.cache.layers:
                layer.keys, layer.values = layer.keys[..., lead:, :], layer.values[..., lead:, :]
            self.mask = self.mask[:, lead:]
            self._sync_lengths()

    def warmup(self) -> None:
        p = np.arange(1, 9, dtype=np.int64) % max(2, self.vocab_size)
        self.join([p], [False])
        self.step([1], [False])
        self.leave([0])


def greedy_generate(model, prompt: np.ndarray, *, max_new_tokens: int, min_new_tokens: int, eos_token_id: int | None,
                    pad_token_id: int = 0) -> list[int]:
    """Plain ``model.generate`` (greedy, batch 1): the fidelity reference outside the harness."""
    import torch

    ids = torch.as_tensor(np.asarray(prompt, dtype=np.int64))[None].to(next(model.parameters()).device)
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, num_beams=1,
                             max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens,
                             eos_token_id=eos_token_id, pad_token_id=pad_token_id)
    return out[0, ids.shape[1]:].tolist()
