"""SDXL components: architecture configs, the seeded tiny pipeline, tokenizers, and ONNX export.

Layout of a model folder (diffusers ``save_pretrained`` of a StableDiffusionXLPipeline):
``text_encoder/ text_encoder_2/ tokenizer/ tokenizer_2/ unet/ vae/ scheduler/ model_index.json``.
ONNX files go to ``<model folder>/onnx/<component>.onnx``.

Component contracts (all batch axes dynamic, named "B"):
- clip1: input_ids int32 [B,77] -> hidden_states float32 [B,77,C1] (penultimate layer, as SDXL uses)
- clip2: input_ids int32 [B,77] -> hidden_states [B,77,C2] (penultimate), text_embeds [B,P] (projected pooled)
- unet:  sample [B,4,h,w], timestep float32 [1], encoder_hidden_states [B,77,C1+C2], text_embeds [B,P],
         time_ids [B,6] -> noise_pred [B,4,h,w]   (B counts prompt and negative prompt rows)
- vae:   latent [B,4,h,w] (unscaled, as the scheduler leaves it) -> image float32 [B,3,8h,8w] in [-1,1]
"""
from __future__ import annotations

import gzip
import os
from pathlib import Path

from code.sdxl.constants import MAX_TOKENS

# --- architecture configs --------------------------------------------------------------------------

# Tiny: SDXL-shaped (two CLIP encoders, text_time conditioning, 8x VAE), about 1-2M params each, 128x128.
TINY = {
    "clip1": dict(vocab_size=49408, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
                  max_position_embeddings=MAX_TOKENS, hidden_act="quick_gelu", projection_dim=32,
                  bos_token_id=0, eos_token_id=2, pad_token_id=1),
    "clip2": dict(vocab_size=49408, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
                  max_position_embeddings=MAX_TOKENS, hidden_act="gelu", projection_dim=32,
                  bos_token_id=0, eos_token_id=2, pad_token_id=1),
    "unet": dict(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
                 down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                 up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
                 attention_head_dim=(2, 4), transformer_layers_per_block=(1, 2), use_linear_projection=True,
                 addition_embed_type="text_time", addition_time_embed_dim=8,
                 projection_class_embeddings_input_dim=8 * 6 + 32, cross_attention_dim=64, norm_num_groups=8),
    "vae": dict(in_channels=3, out_channels=3, latent_channels=4, layers_per_block=1,
                block_out_channels=(16, 32, 64, 64), down_block_types=("DownEncoderBlock2D",) * 4,
                up_block_types=("UpDecoderBlock2D",) * 4, norm_num_groups=8, sample_size=128,
                scaling_factor=0.13025, force_upcast=True),
}

# Full-size SDXL base 1.0 architecture (the published configs), for random-weight GPU runs.
SDXL = {
    "clip1": dict(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                  num_attention_heads=12, max_position_embeddings=77, hidden_act="quick_gelu", projection_dim=768,
                  bos_token_id=0, eos_token_id=2, pad_token_id=1),
    "clip2": dict(vocab_size=49408, hidden_size=1280, intermediate_size=5120, num_hidden_layers=32,
                  num_attention_heads=20, max_position_embeddings=77, hidden_act="gelu", projection_dim=1280,
                  bos_token_id=0, eos_token_id=2, pad_token_id=1),
    "unet": dict(sample_size=128, in_channels=4, out_channels=4, layers_per_block=2, block_out_channels=(320, 640, 1280),
                 down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
                 up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
                 attention_head_dim=(5, 10, 20), transformer_layers_per_block=(1, 2, 10), use_linear_projection=True,
                 addition_embed_type="text_time", addition_time_embed_dim=256,
                 projection_class_embeddings_input_dim=2816, cross_attention_dim=2048, norm_num_groups=32),
    "vae": dict(in_channels=3, out_channels=3, latent_channels=4, layers_per_block=2,
                block_out_channels=(128, 256, 512, 512), down_block_types=("DownEncoderBlock2D",) * 4,
                up_block_types=("UpDecoderBlock2D",) * 4, norm_num_groups=32, sample_size=1024,
                scaling_factor=0.13025, force_upcast=True),
}
ARCHS = {"tiny": TINY, "sdxl": SDXL}


# --- tokenizers ------------------------------------------------------------------------------------

def clip_bpe_tokenizer(pad_token: str = "<|endoftext|>"):
    """The real CLIP BPE tokenizer, built offline from the vocabulary open_clip ships.

    SDXL's ``tokenizer`` pads with <|endoftext|>; its ``tokenizer_2`` pads with "!" (id 0).
    """
    import open_clip
    from open_clip.tokenizer import bytes_to_unicode
    from transformers import CLIPTokenizer

    path = os.path.join(os.path.dirname(open_clip.__file__), "bpe_simple_vocab_16e6.txt.gz")
    lines = gzip.open(path).read().decode("utf-8").split("\n")
    merges = [tuple(m.split()) for m in lines[1:49152 - 256 - 2 + 1]]
    vocab = list(bytes_to_unicode().values())
    vocab = vocab + [v + "</w>" for v in vocab] + ["".join(m) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    tok = CLIPTokenizer(vocab={v: i for i, v in enumerate(vocab)}, merges=merges, pad_token=pad_token)
    tok.model_max_length = MAX_TOKENS
    return tok


def load_tokenizers(model_dir: str | Path):
    """(tokenizer, tokenizer_2) of a saved pipeline folder."""
    from transformers import CLIPTokenizer

    model_dir = Path(model_dir)
    return (CLIPTokenizer.from_pretrained(model_dir / "tokenizer"),
            CLIPTokenizer.from_pretrained(model_dir / "tokenizer_2"))


# --- building pipelines ----------------------------------------------------------------------------

def build_components(arch: str = "tiny", seed: int = 0, *, dtype=None, device=None) -> dict:
    """Random-weight components of the given architecture, seeded (deterministic on CPU)."""
    import torch
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    from code.sdxl.constants import SCHEDULER_CONFIG

    cfg = ARCHS[arch]
    torch.manual_seed(seed)
    ctx = torch.device(device) if device else torch.device("cpu")
    with ctx:
        comps = {
            "text_encoder": CLIPTextModel(CLIPTextConfig(**cfg["clip1"])),
            "text_encoder_2": CLIPTextModelWithProjection(CLIPTextConfig(**cfg["clip2"])),
            "unet": UNet2DConditionModel(**cfg["unet"]),
            "vae": AutoencoderKL(**cfg["vae"]),
        }
    for m in comps.values():
        m.eval()
        if dtype is not None and dtype != torch.float32:
            m.to(dtype)
    comps["scheduler"] = EulerDiscreteScheduler.from_config(SCHEDULER_CONFIG)
    comps["tokenizer"] = clip_bpe_tokenizer()
    comps["tokenizer_2"] = clip_bpe_tokenizer(pad_token="!")
    return comps


def build_pipeline(arch: str = "tiny", seed: int = 0, *, dtype=None, device=None):
    from diffusers import StableDiffusionXLPipeline

    return StableDiffusionXLPipeline(**build_components(arch, seed, dtype=dtype, device=device),
                                     add_watermarker=False)


def load_pipeline(model_dir: str | Path, *, dtype=None, device: str | None = None):
    """The diffusers pipeline of a saved folder (the reference the harness is checked against)."""
    import torch
    from diffusers import StableDiffusionXLPipeline

    from code.sdxl.download import weights_variant

    pipe = StableDiffusionXLPipeline.from_pretrained(str(model_dir), dtype=dtype or torch.float32,
                                                     variant=weights_variant(Path(model_dir)), add_watermarker=False)
    if device:
        pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def save_tiny(model_dir: str | Path, seed: int = 0) -> Path:
    """Build the seeded tiny pipeline and save it (atomically) with save_pretrained."""
    from code.common.fileio import save_seeded_pipeline

    return save_seeded_pipeline(build_pipeline("tiny", seed), model_dir, seed)


def is_pipeline_dir(model_dir: str | Path) -> bool:
    d = Path(model_dir)
    return all((d / p).exists() for p in ("model_index.json", "unet", "vae", "text_encoder", "text_encoder_2",
                                          "tokenizer", "tokenizer_2"))


def count_params(module) -> int:
    return sum(p.numel() for p in module.parameters())
