"""Wan 2.2 T2V-A14B: the seeded tiny pipeline of the same architecture, and loading a saved pipeline folder.

The real model (Wan-AI/Wan2.2-T2V-A14B-Diffusers) is a diffusers ``WanPipeline``: a UMT5-XXL text encoder, two
14B ``WanTransformer3DModel`` experts (``transformer`` for the high-noise steps t >= boundary_ratio x 1000,
``transformer_2`` for the rest), the ``AutoencoderKLWan`` video VAE (4x time, 8x space) and a UniPC multistep
flow-matching scheduler. The tiny variant has every one of these, at a few thousand parameters each, with the
reference's scheduler, step count, guidance pair and boundary ratio; its tokenizer is a Unigram model trained
here on a fixed text (the real one is UMT5's SentencePiece vocabulary, which cannot be fetched offline).
Runs load in the reference's dtypes: transformers and text encoder at bf16 on a GPU, the VAE at fp32
(``run_mlperf.py``); the tiny CPU runs keep everything fp32.
"""
from __future__ import annotations

from pathlib import Path

from code.wan.constants import BOUNDARY_RATIO, SCHEDULER_CONFIG, TINY_MAX_TOKENS

TINY = {
    "transformer": dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=8, in_channels=16,
                        out_channels=16, text_dim=32, freq_dim=32, ffn_dim=32, num_layers=2, cross_attn_norm=True,
                        qk_norm="rms_norm_across_heads", rope_max_seq_len=32),
    "vae": dict(base_dim=4, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True, True]),
    "text_encoder": dict(d_model=32, d_ff=64, d_kv=8, num_heads=4, num_layers=2, relative_attention_num_buckets=8,
                         relative_attention_max_distance=16, feed_forward_proj="gated-gelu", dropout_rate=0.0),
}
# The real architecture (the published configs), for reference and random-weight GPU runs.
A14B = {
    "transformer": dict(patch_size=(1, 2, 2), num_attention_heads=40, attention_head_dim=128, in_channels=16,
                        out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=13824, num_layers=40,
                        cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=1024),
    "vae": dict(base_dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, temperal_downsample=[False, True, True]),
}
TOKENIZER_TEXT = (  # what the tiny Unigram tokenizer is trained on: English words of the VBench prompts' kinds
    "a person cat dog car boat bird horse bear elephant panda train truck airplane bicycle street city beach river "
    "ocean mountain forest sky sunset snow rain night indoor outdoor kitchen room swimming pool running walking "
    "drinking water eating reading book painting watercolor oil van gogh pixel art black and white animated style "
    "in the with of on at by during to from cool down landing smoothly runway traffic rush hour corner turning "
    "vivid colors overexposed static blurry details subtitles work picture still overall grayish worst quality low "
    "jpeg artifacts ugly deformed extra fingers poorly drawn hands face disfigured limbs fused image cluttered "
    "background three legs many people walking backwards")


def tiny_tokenizer():
    """A T5TokenizerFast over a Unigram model trained on TOKENIZER_TEXT (deterministic; pad 0, eos 1, unk 2 as T5)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import T5TokenizerFast

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=200, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
                                      show_progress=False)
    tok.train_from_iterator([TOKENIZER_TEXT] * 4, trainer)
    from tokenizers.processors import TemplateProcessing

    tok.post_processor = TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    fast = T5TokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                           extra_ids=0)
    fast.model_max_length = TINY_MAX_TOKENS
    return fast


def build_pipeline(seed: int = 0):
    """The tiny WanPipeline: two seeded WanTransformer3DModel experts, AutoencoderKLWan, a UMT5 encoder, the
    reference's scheduler and boundary ratio."""
    import torch
    from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanPipeline, WanTransformer3DModel
    from transformers import UMT5Config, UMT5EncoderModel

    tok = tiny_tokenizer()
    torch.manual_seed(seed)
    te = UMT5EncoderModel(UMT5Config(vocab_size=len(tok), pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                                     **TINY["text_encoder"]))
    transformer = WanTransformer3DModel(**TINY["transformer"])
    transformer_2 = WanTransformer3DModel(**TINY["transformer"])
    vae = AutoencoderKLWan(**TINY["vae"])
    for m in (te, transformer, transformer_2, vae):
        m.eval()
    sched = UniPCMultistepScheduler.from_config({k: v for k, v in SCHEDULER_CONFIG.items() if k != "_class_name"})
    return WanPipeline(tokenizer=tok, text_encoder=te, vae=vae, scheduler=sched, transformer=transformer,
                       transformer_2=transformer_2, boundary_ratio=BOUNDARY_RATIO)


def save_tiny(model_dir: str | Path, seed: int = 0) -> Path:
    """Build the seeded tiny pipeline and save it (atomically) with save_pretrained."""
    from code.common.fileio import save_seeded_pipeline

    return save_seeded_pipeline(build_pipeline(seed), model_dir, seed)


def is_pipeline_dir(model_dir: str | Path) -> bool:
    d = Path(model_dir)
    return all((d / p).exists() for p in ("model_index.json", "transformer", "transformer_2", "vae", "text_encoder",
                                          "tokenizer", "scheduler"))


def load_pipeline(model_dir: str | Path, precision: str = "fp32", device: str = "cpu"):
    """The saved pipeline as the reference loads it: ``AutoencoderKLWan`` at fp32 passed in, the rest at
    ``precision`` (bf16 in the reference), ``boundary_ratio`` from the folder's model_index.json (the reference
    passes 0.875, the value the folder holds)."""
    import torch
    from diffusers import AutoencoderKLWan, WanPipeline

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    vae = AutoencoderKLWan.from_pretrained(str(model_dir), subfolder="vae", torch_dtype=torch.float32)
    pipe = WanPipeline.from_pretrained(str(model_dir), boundary_ratio=BOUNDARY_RATIO, vae=vae, torch_dtype=dtype)
    pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def count_params(module) -> int:
    return sum(p.numel() for p in module.parameters())
