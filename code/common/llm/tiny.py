"""Tiny LLM variants: a shared byte-level BPE tokenizer trained here, seeded small causal LMs
(GPT-J, Llama, Mixtral and DeepSeek-V3 (mixtures of experts) shapes), and synthetic English-like text for the synthetic datasets.

Everything is built offline from fixed seeds, so two builds are identical. The tokenizer is GPT-2
style (``vocab.json`` + ``merges.txt`` and a ``tokenizer.json``), so both the fast and the slow
transformers tokenizers load it (the official evaluation scripts ask for ``use_fast=False``).

Output lengths: a randomly initialised model would almost never emit its EOS, and every sample
would run to ``max_new_tokens``. The build scales the EOS row of the output embedding until the
median greedy output length on calibration prompts is about half of ``max_new_tokens`` (a seeded,
deterministic search), so samples end early at varied lengths and the early-finishing paths of
the batching scheduler are exercised.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

SEED = 20261201
VOCAB_SIZE = 512
SPECIAL = ("<unk>", "<s>", "</s>")          # ids 0, 1, 2 (Llama's convention: bos 1, eos 2)
UNK, BOS, EOS = 0, 1, 2

_ONSETS = ("b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "st", "tr", "pl", "ch", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou")
_CODAS = ("", "", "n", "r", "s", "t", "l", "nd", "st", "ck")


def words(n: int = 400, seed: int = SEED) -> list[str]:
    """A fixed pseudo-English vocabulary of ``n`` distinct words (1-3 syllables)."""
    rng = np.random.default_rng(seed)
    out: list[str] = []
    seen = set()
    while len(out) < n:
        w = "".join(_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))] +
                    _CODAS[rng.integers(len(_CODAS))] for _ in range(int(rng.integers(1, 4))))
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out


class TextGen:
    """Seeded sentences and articles over ``words()`` (Zipf-like word frequencies)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.vocab = words()
        p = 1.0 / np.arange(1, len(self.vocab) + 1)
        self.p = p / p.sum()
        # what rng.choice(vocab, size=n, p=p) computes, made once: the cumulative distribution it searches a uniform
        # draw in (the same draws, the same words; choice rebuilt both on every call, 1.5 CPU-s of the tokenizer's
        # 20,000-sentence corpus against 0.2)
        self._words = np.array(self.vocab)
        cdf = self.p.cumsum()
        self._cdf = cdf / cdf[-1]

    def sentence(self, lo: int = 5, hi: int = 16) -> str:
        n = int(self.rng.integers(lo, hi))
        ws = list(self._words[self._cdf.searchsorted(self.rng.random(n), side="right")])
        ws[0] = ws[0].capitalize()
        if n > 6 and self.rng.random() < 0.3:
            ws[int(self.rng.integers(2, n - 2))] += ","
        return " ".join(ws) + ("?" if self.rng.random() < 0.05 else ".")

    def paragraph(self, sentences: int) -> str:
        return " ".join(self.sentence() for _ in range(sentences))


def corpus(n_sentences: int = 20000, seed: int = SEED) -> list[str]:
    g = TextGen(seed)
    return [g.sentence() for _ in range(n_sentences)]


# --- tokenizer --------------------------------------------------------------------------------------

def build_tokenizer(out_dir: Path) -> Path:
    """Train the shared tiny byte-level BPE tokenizer on the synthetic corpus; save it as a
    transformers tokenizer folder (fast and slow forms). Returns the folder."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    from code.common.fileio import staged_dir

    out_dir = Path(out_dir)
    with staged_dir(out_dir) as tmp:
        bpe = ByteLevelBPETokenizer(add_prefix_space=False)
        bpe.train_from_iterator(corpus(), vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=list(SPECIAL),
                                show_progress=False)
        bpe.save_model(str(tmp))                       # vocab.json + merges.txt (the slow tokenizer's files)
        tok = GPT2TokenizerFast(vocab=str(tmp / "vocab.json"), merges=str(tmp / "merges.txt"),
                                unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="</s>",
                                add_prefix_space=False, model_max_length=4096)
        tok.save_pretrained(str(tmp))
    return out_dir


def load_tokenizer(folder: Path, *, use_fast: bool = True):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), use_fast=use_fast)


# --- models -----------------------------------------------------------------------------------------

def tiny_config(kind: str, vocab_size: int, context: int):
    if kind == "gptj":
        from transformers import GPTJConfig

        return GPTJConfig(vocab_size=vocab_size, n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=context,
                          n_inner=256, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=EOS, tie_word_embeddings=False)
    if kind == "llama":
        from transformers import LlamaConfig

        return LlamaConfig(vocab_size=vocab_size, hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=context,
                           bos_token_id=BOS, eos_token_id=EOS, pad_token_id=EOS, tie_word_embeddings=False)
    if kind == "mixtral":         # a mixture of experts: 4 experts, top-2 routing (Mixtral-8x7B has 8, top-2)
        from transformers import MixtralConfig

        return MixtralConfig(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                             max_position_embeddings=context, sliding_window=None, router_jitter_noise=0.0,
                             bos_token_id=BOS, eos_token_id=EOS, pad_token_id=EOS, tie_word_embeddings=False)
    if kind == "deepseek_v3":     # DeepSeek-R1's shape: multi-head latent attention, 1 dense layer then MoE layers of
        from transformers import DeepseekV3Config    # 8 routed experts in 2 groups (top-2, 1 group) + 1 shared

        return DeepseekV3Config(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                                num_hidden_layers=2, first_k_dense_replace=1, num_attention_heads=4,
                                num_key_value_heads=4, n_shared_experts=1, n_routed_experts=8, num_experts_per_tok=2,
                                n_group=2, topk_group=1, kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8,
                                qk_nope_head_dim=8, v_head_dim=16, max_position_embeddings=context,
                                bos_token_id=BOS, eos_token_id=EOS, pad_token_id=EOS, tie_word_embeddings=False)
    if kind == "gpt_oss":         # GPT-OSS-120B's shape: sliding / full attention layers in turn, attention sinks,
        from transformers import GptOssConfig        # 4 experts top-2 (the real one: 128, top-4), GQA 4:2

        # the window is the context: the sliding layers keep their own layer type and mask path, but never slide in
        # a tiny run, where the scheduler's left-padded cache merge needs every layer to hold the whole sequence
        return GptOssConfig(vocab_size=vocab_size, hidden_size=64, intermediate_size=64, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
                            num_experts_per_tok=2, sliding_window=context, max_position_embeddings=context,
                            layer_types=["sliding_attention", "full_attention"] * 2,
                            rope_parameters={"rope_type": "default", "rope_theta": 150000.0},
                            bos_token_id=BOS, eos_token_id=EOS, pad_token_id=EOS, tie_word_embeddings=False)
    raise ValueError(f"no tiny model kind {kind!r}")


def _median_length(model, prompts: Sequence[np.ndarray], max_new: int, min_new: int, limit: float) -> float | None:
    """The median greedy output length of ``prompts`` (in-flight batching, all of them in one batch of 16), or None
    as soon as it is certain to be over ``limit``: the median of the lengths so far, a row still running counted at
    the length it has reached (its final length is at least that), is a lower bound of the final median. Stopping
    there changes nothing the rows before it computed, so the search's choice is the one a full run makes; it saves
    the tail of every scale that is too small (the tiny Llama's first scale: 0.13 CPU-s instead of 0.21)."""
    from code.common.llm.generation import GenRequest, Scheduler
    from code.common.llm.hf import TransformersStepModel

    lens: list[int] = []
    import threading

    done = threading.Event()
    over: list[bool] = []

    class Calibration(Scheduler):
        def _iterate(self, joiners):
            super()._iterate(joiners)
            if self.active and np.median(lens + [len(r.tokens) for r in self.active] + [0] * len(self._queue)) > limit:
                self.model.leave(list(range(len(self.active))))
                self.active = []
                over.append(True)
                done.set()

    sch = Calibration(TransformersStepModel(model, eos_token_id=EOS), 16)

    def finish(r, toks):
        lens.append(len(toks))
        if len(lens) == len(prompts):
            done.set()
    sch.start(lambda r, t: None, finish)
    sch.submit([GenRequest(i, i, p, max_new, min_new) for i, p in enumerate(prompts)])
    done.wait()
    sch.stop()
    return None if over else float(np.median(lens))


def build_model(kind: str, out_dir: Path, tokenizer_dir: Path, *, context: int, max_new_tokens: int,
                min_new_tokens: int, calibration_prompts: Sequence[np.ndarray], seed: int = SEED,
                boost: Sequence[str] = (), boost_scale: float = 1.0) -> dict:
    """Seeded tiny model of ``kind`` ("gptj" | "llama" | "mixtral") saved with its tokenizer in ``out_dir``
    (a transformers folder). ``boost``: tokens whose output-embedding rows are scaled by ``boost_scale``
    first (tiny Mixtral: the digits, so that its GSM8K answers hold numbers). Returns the build record
    (also written as tiny_build.json)."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    from code.common.fileio import staged_dir, write_json

    quiet()
    tok = load_tokenizer(tokenizer_dir)
    torch.manual_seed(seed)
    cfg = tiny_config(kind, len(tok), context)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    head = model.get_output_embeddings().weight
    boosted = [tok.convert_tokens_to_ids(t) for t in boost]
    if boosted:
        with torch.no_grad():
            head[boosted] = head[boosted] * boost_scale
    row = head[EOS].detach().clone()
    chosen, trace = 1.0, []
    limit = max_new_tokens * 0.6
    with torch.no_grad():
        for k in range(24):                  # 1.0, 1.12, 1.25, ... up to ~13
            scale = round(1.12 ** k, 4)
            head[EOS] = row * scale
            med = _median_length(model, calibration_prompts, max_new_tokens, min_new_tokens,
                                 limit if k < 23 else float("inf"))         # the last: its median, whatever it is
            trace.append((scale, med if med is not None else f">{limit:g}"))     # a median over the limit: not run out
            chosen = scale
            if med is not None and med <= limit:
                break
        head[EOS] = row * chosen
    record = {"kind": kind, "seed": seed, "vocab_size": len(tok), "context": context, "eos_scale": chosen,
              "median_output_tokens": trace[-1][1], "calibration": trace,
              "boost": {"tokens": list(boost), "scale": boost_scale} if boosted else None,
              "parameters": sum(p.numel() for p in model.parameters())}
    with staged_dir(Path(out_dir)) as tmp:
        model.save_pretrained(str(tmp))
        for f in Path(tokenizer_dir).iterdir():
            shutil.copy2(f, tmp / f.name)
        write_json(tmp / "tiny_build.json", record)
    return record


def quiet() -> None:
    """No transformers progress bars for loading / saving a tiny checkpoint (one line each, every time)."""
    from transformers.utils import logging

    logging.disable_progress_bar()


def load_model(folder: Path, precision: str = "fp32", device: str = "cpu"):
    import torch
    from transformers import AutoModelForCausalLM

    quiet()
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)
    return AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype).to(device).eval()

