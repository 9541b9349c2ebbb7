"""Whisper models: the real whisper-large-v3 folder (download.py fetches it), the seeded tiny variant of the same
architecture, and batched greedy decoding.

Decoding (``Decoder``): transformers' ``GenerationMixin.generate`` on ``WhisperForConditionalGeneration``: the
encoder runs once per batch, then greedy steps over a KV cache (``EncoderDecoderCache``: the decoder's self-attention
keys/values grow a token a step, the cross-attention ones are computed once). Every row starts from the reference's
decoder prompt ``<|startoftranscript|><|en|><|transcribe|><|notimestamps|>`` and ends at ``<|endoftext|>`` or after
200 new tokens (reference_SUT.py: vLLM, temperature 0, max_tokens 200). Whisper's own ``generate`` wrapper is
bypassed: it would add the checkpoint's suppress_tokens / begin_suppress_tokens logits processors and its
long-form and timestamp logic, which the reference's vLLM greedy decode does not apply. All prompts have the same
length and every encoder input is 3,000 frames, so a batch needs no padding and no attention mask: a row's tokens
do not depend on the batch it is in (tests/test_whisper.py checks batch 8 against batch 1 on the tiny model).

An answer is what the reference SUT logs: the text decoded with special tokens skipped, lower-cased, stripped, as
int64 indices into dataset.LABELS; its token count (LoadGen's ``n_tokens``: whisper's result is tokens/s) counts
every generated token, the final ``<|endoftext|>`` included, as vLLM's ``token_ids`` do.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from code.whisper import dataset, features

PROMPT = ("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>")
EOT = "<|endoftext|>"
MAX_NEW_TOKENS = 200                    # reference_SUT.py SamplingParams(max_tokens=200)
TINY_SEED = 20261206
TINY_MAX_NEW_TOKENS = 24
TINY_VOCAB = 384
WORD_GAIN = 3.0                         # tiny build: how strongly the word tokens follow the sample-specific states
CONV_GAIN = 10.0                        # tiny build: encoder convolution scale
CROSS_GAIN = 4.0                       # tiny build: cross-attention output scale (answers that depend on the audio)
# whisper-large-v3's special tokens in its order (the tiny tokenizer adds them after the BPE vocabulary)
SPECIALS = (EOT, "<|startoftranscript|>", "<|en|>", "<|de|>", "<|fr|>", "<|translate|>", "<|transcribe|>",
            "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>")


def dtype_of(precision: str):
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)


# --- tiny variant ---------------------------------------------------------------------------------------------
def tiny_corpus(n: int = 6000, seed: int = TINY_SEED) -> list[str]:
    """Lower-case sentences over the tiny word list (LibriSpeech transcripts are lower-cased by the reference)."""
    from code.common.llm.tiny import TextGen

    g = TextGen(seed)
    return [" " + g.sentence(4, 14).lower().rstrip(".?").replace(",", "") for _ in range(n)]


def build_tokenizer(out_dir: Path):
    """A byte-level BPE tokenizer trained here on the tiny corpus (the hub's is unreachable), with Whisper's special
    tokens, saved as a transformers WhisperTokenizer folder."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import WhisperTokenizer

    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(tiny_corpus(), vocab_size=TINY_VOCAB, min_frequency=2, show_progress=False,
                            special_tokens=[EOT])
    out_dir.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(out_dir))
    tok = WhisperTokenizer(vocab=str(out_dir / "vocab.json"), merges=str(out_dir / "merges.txt"))
    tok.add_special_tokens({"additional_special_tokens": [t for t in SPECIALS if t != EOT]})
    tok.save_pretrained(str(out_dir))
    return tok


def build_tiny(out_dir: Path, calibration: Sequence[np.ndarray]) -> dict:
    """The seeded tiny WhisperForConditionalGeneration (2+2 layers, d_model 64, 128 mel bins, 1,500 encoder
    positions: the real model's input shape) with its tokenizer, saved in ``out_dir``. A random decoder rarely
    emits ``<|endoftext|>``, nor whole words: the output rows of the word tokens get a component along the decoder's
    mean hidden state, and the ``<|endoftext|>`` row a growing one until the median answer on ``calibration`` (features)
    ends before ~60% of TINY_MAX_NEW_TOKENS, so answers end early at varied lengths."""
    import shutil
    import tempfile

    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    from code.common.fileio import staged_dir, write_json

    with tempfile.TemporaryDirectory() as td:
        tok = build_tokenizer(Path(td))
        ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIALS}
        torch.manual_seed(TINY_SEED)
        cfg = WhisperConfig(vocab_size=len(tok), num_mel_bins=features.N_MELS, d_model=64, encoder_layers=2,
                            decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                            encoder_ffn_dim=128, decoder_ffn_dim=128, max_source_positions=features.N_FRAMES // 2,
                            max_target_positions=64, pad_token_id=ids[EOT], bos_token_id=ids[EOT],
                            eos_token_id=ids[EOT], decoder_start_token_id=ids["<|startoftranscript|>"],
                            suppress_tokens=None, begin_suppress_tokens=None, tie_word_embeddings=False)
        model = WhisperForConditionalGeneration(cfg).eval()
        dec = Decoder(model, tok, max_new_tokens=TINY_MAX_NEW_TOKENS, min_new_tokens=2)
        x = np.stack(calibration)
        head = model.get_output_embeddings().weight
        with torch.no_grad():
            # let the audio move the encoder's states (at random init the positional embeddings swamp the convolutions'
            # outputs: samples' states differ by ~1%) and those states move the decoder's
            model.model.encoder.conv1.weight *= CONV_GAIN
            model.model.encoder.conv2.weight *= CONV_GAIN
            for layer in model.model.decoder.layers:
                layer.encoder_attn.out_proj.weight *= CROSS_GAIN
            # the common direction of the decoder's last hidden states: rows given a component along it win more
            # often (a random head's logits have no sign to scale)
            enc = model.model.encoder(torch.from_numpy(x)).last_hidden_state
            h = model.model.decoder(input_ids=dec.prompt_t.expand(len(x), -1), encoder_hidden_states=enc).last_hidden_state
            mean = h.mean(dim=(0, 1))
            mean = mean / mean.norm()
            vocab = tok.convert_ids_to_tokens(list(range(len(tok))))
            words = [i for i, t in enumerate(vocab) if t.startswith("\u0120") and len(t) > 3]
            # ... and the word rows components along the directions in which the samples' states differ, so that
            # different audio picks different words
            dev = (h - h.mean(dim=0, keepdim=True)).reshape(-1, h.shape[-1])
            _, sv, vt = torch.linalg.svd(dev, full_matrices=False)
            k = int((sv > sv[0] * 1e-3).sum())
            gen = torch.Generator().manual_seed(TINY_SEED)
            mix = torch.randn(len(words), k, generator=gen) @ vt[:k]
            head[words] += 1.0 * mean + WORD_GAIN * mix
            row = head[ids[EOT]].detach().clone()
            trace: list[tuple[float, float]] = []

            def median_at(scale: float) -> float:
                head[ids[EOT]] = row + scale * mean
                med = float(np.median([len(t) for t in dec.tokens(x, encoded=enc)]))
                trace.append((round(scale, 4), med))
                return med
            lo, hi = 0.0, 32.0                 # bisection for the smallest scale whose median answer ends early
            for _ in range(8):
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if median_at(mid) <= TINY_MAX_NEW_TOKENS * 0.6 else (mid, hi)
            scale = hi
            median_at(scale)
        record = {"seed": TINY_SEED, "vocab_size": len(tok), "eos_scale": scale, "median_tokens": trace[-1][1],
                  "calibration": trace, "parameters": sum(p.numel() for p in model.parameters())}
        with staged_dir(Path(out_dir)) as tmp:
            model.save_pretrained(str(tmp))
            for f in Path(td).iterdir():
                shutil.copy2(f, tmp / f.name)
            write_json(tmp / "tiny_build.json", record)
    return record


# --- loading and decoding -----------------------------------------------------------------------------------------
def load(folder: Path, precision: str = "fp32", device: str = "cpu"):
    """(model, tokenizer) from a transformers folder (the real checkpoint or the tiny one)."""
    from transformers import AutoTokenizer, WhisperForConditionalGeneration
    from transformers.utils import logging

    logging.disable_progress_bar()
    model = WhisperForConditionalGeneration.from_pretrained(str(folder), dtype=dtype_of(precision)).to(device).eval()
    return model, AutoTokenizer.from_pretrained(str(folder))


class Decoder:
    """Batched greedy decoding of feature batches into answers (see the module doc). Not thread-safe: one per
    worker."""

    def __init__(self, model, tokenizer, max_new_tokens: int = MAX_NEW_TOKENS, min_new_tokens: int = 0):
        import torch
        from transformers import GenerationConfig

        self.model, self.tokenizer = model, tokenizer
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.eot = tokenizer.convert_tokens_to_ids(EOT)
        self.prompt = [tokenizer.convert_tokens_to_ids(t) for t in PROMPT]
        self.prompt_t = torch.tensor([self.prompt], dtype=torch.long, device=self.device)
        self.config = GenerationConfig(max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens, do_sample=False,
                                       num_beams=1, use_cache=True, eos_token_id=self.eot, pad_token_id=self.eot,
                                       decoder_start_token_id=self.prompt[0])

    def tokens(self, feats: np.ndarray, encoded=None) -> list[list[int]]:
        """Generated token ids per row of (B, n_mels, 3000) features, up to and including the first EOT.
        ``encoded``: the encoder's last hidden states for ``feats`` when already computed (the tiny build's search)."""
        import torch
        from transformers.generation.utils import GenerationMixin
        from transformers.modeling_outputs import BaseModelOutput

        x = torch.from_numpy(np.ascontiguousarray(feats)).to(self.device, self.dtype)
        kw = {"encoder_outputs": BaseModelOutput(last_hidden_state=encoded)} if encoded is not None else {}
        with torch.inference_mode():
            out = GenerationMixin.generate(self.model, input_features=x, generation_config=self.config,
                                           decoder_input_ids=self.prompt_t.expand(x.shape[0], -1), **kw)
        rows = out[:, len(self.prompt):].tolist()
        return [r[:r.index(self.eot) + 1] if self.eot in r else r for r in rows]

    def text(self, tokens: Sequence[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=True)

    def decode(self, feats: np.ndarray) -> tuple[list[np.ndarray], list[int]]:
        """(answers as int64 label indices, token counts) per row."""
        toks = self.tokens(feats)
        return [dataset.to_labels(self.text(t)) for t in toks], [len(t) for t in toks]
