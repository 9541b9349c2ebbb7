"""Tag2Text, the captioner VBench 0.1.5 scores the ``scene`` dimension with, from timm and transformers modules.

VBench (``vbench/scene.py``, ``vbench/third_party/tag2Text/tag2text.py``: ``tag2text_caption(pretrained=
~/.cache/vbench/caption_model/tag2text_swin_14m.pth, image_size=384, vit='swin_b')``):
- image encoder: Swin-B at 384 px (config_swinB_384.json: embed 128, depths 2-2-18-2, heads 4-8-16-32, window 12),
  its output the mean of the final normed tokens followed by the 144 tokens (1 + 12 x 12, width 1024);
- tag head (Query2Label): 3429 learned label queries through 2 BERT layers of cross-attention + feed-forward only
  (q2l_config.json: width 768, 4 heads), ``fc`` one linear map per class, sigmoid > 0.7, six tags never kept;
- tag encoder: a 12-layer bidirectional BERT with cross-attention to the image (med_config.json: 768 wide, 12 heads,
  vocab 30524 = bert-base-uncased + [DEC] + [ENC]); its layers 0-1 share their cross-attention and feed-forward
  weights with the tag head's (VBench's ``tie_encoder_decoder_weights``); input: the tags joined by ' | ', padded to
  40 tokens, [ENC] in place of [CLS];
- caption decoder: a 12-layer BERT LM with cross-attention to the tag encoding; prompt "a picture of " ([DEC] a
  picture of), beam search with 3 beams, max_length 30, min_length 10, repetition penalty 1.0, the prompt cut off.

Here the Swin is ``timm``'s SwinTransformer, the BERTs ``transformers``' BertModel / BertLMHeadModel / BertAttention /
BertIntermediate / BertOutput (so no layer is written here), with three adjustments that keep VBench's maths:
BLIP's BERT embeddings have no token-type embedding (ours are zero), the tag encoder and tag head read the
1024-wide image tokens (their cross-attention keys/values are ``Linear(1024, 768)``), and the tag encoder is
bidirectional although it has cross-attention (transformers builds cross-attention only into decoder layers).

VBench's batching has an effect kept here (``video_captions``): it repeats the tag encoding once per beam before
``generate``, and transformers' ``generate`` (>= 4.27; the reference's 4.51.3) repeats every tensor argument once
more; BLIP's attention then keeps the first rows, so frame b of a video is captioned from frame b // 3's tags and
image (of 16 frames, frames 0-5 decide). ``tests/test_wan_tag2text.py`` runs VBench's own modules and compares.

Variants: ``build_real(checkpoint, tokenizer_dir, tags)`` loads VBench's ``tag2text_swin_14m.pth`` (``load_vbench_
state_dict`` maps its names); ``build_tiny(seed)`` is the same architecture at tiny widths with random, seeded
weights, a WordPiece vocabulary of TINY_WORDS and 3429 tags made of them: its captions are noise, not captions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

IMAGE_SIZE = 384
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)     # vbench.utils.tag2text_transform's Normalize
FRAMES = 16                   # scene.py: load_video(num_frames=16), 'middle' sampling
NUM_CLASS = 3429
THRESHOLD = 0.7
DELETE_TAG_INDEX = (127, 3351, 3265, 3338, 3355, 3359)
PROMPT = "a picture of "
TAG_MAX_TOKENS = 40
NUM_BEAMS, MAX_LENGTH, MIN_LENGTH, REPETITION_PENALTY = 3, 30, 10, 1.0
CHECKPOINT = "tag2text_swin_14m.pth"
CHECKPOINT_URL = "https://huggingface.co/spaces/xinyu1205/recognize-anything/resolve/main/tag2text_swin_14m.pth"
TOKENIZER = "bert-base-uncased"     # VBench's init_tokenizer, plus [DEC] (bos) and [ENC]


@dataclass(frozen=True)
class Arch:
    """Widths: Swin (embed_dim x 8 = vision width), the BERTs (hidden, layers, heads, feed-forward), the tag head."""
    embed_dim: int
    depths: tuple
    swin_heads: tuple
    hidden: int
    layers: int
    heads: int
    intermediate: int
    q2l_layers: int
    q2l_heads: int
    window_size: int = 12


SWIN_B = Arch(embed_dim=128, depths=(2, 2, 18, 2), swin_heads=(4, 8, 16, 32), hidden=768, layers=12, heads=12,
              intermediate=3072, q2l_layers=2, q2l_heads=4)
TINY = Arch(embed_dim=8, depths=(2, 2, 2, 2), swin_heads=(1, 1, 2, 2), hidden=32, layers=2, heads=4, intermediate=64,
            q2l_layers=2, q2l_heads=2)
# the tiny vocabulary and tags: scene and object words (the tiny prompts' scenes among them), so that a random
# caption can hit a scene now and then
TINY_WORDS = (
    "a picture of the in on with and at alley amusement park beach city street ocean mountain forest sky sunset "
    "snow person dog cat car boat bird horse building road tree water grass field room kitchen bridge river lake "
    "garden night light sign wall people crowd ride wheel tower train bus house window door table chair flower "
    "rock sand wave cloud hill valley desert market temple palace").split()


TINY_VOCAB = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "|", *TINY_WORDS)


def tiny_tags() -> list[str]:
    """3429 tags: the words, then word pairs, in a fixed order."""
    words = TINY_WORDS[8:]
    tags = list(words) + [f"{a} {b}" for a in words for b in words if a != b]
    return tags[:NUM_CLASS]


def _finish_tokenizer(tok):
    """VBench's init_tokenizer: [DEC] as bos, [ENC] as an additional special token (enc_token_id)."""
    tok.add_special_tokens({"bos_token": "[DEC]"})
    tok.add_special_tokens({"additional_special_tokens": ["[ENC]"]})
    tok.enc_token_id = tok.convert_tokens_to_ids("[ENC]")
    return tok


def tiny_tokenizer():
    """A BertTokenizer (uncased WordPiece) over BERT's five specials, '|' and TINY_WORDS."""
    from transformers import BertTokenizer

    return _finish_tokenizer(BertTokenizer(vocab={t: i for i, t in enumerate(TINY_VOCAB)}))


def real_tokenizer(tokenizer_dir: str):
    """bert-base-uncased's tokenizer from a local folder (vocab.txt), with VBench's two added tokens (30524)."""
    from transformers import BertTokenizer

    return _finish_tokenizer(BertTokenizer.from_pretrained(tokenizer_dir))


def _bert_config(arch: Arch, vocab_size: int, heads: int, layers: int):
    from transformers import BertConfig

    # med_config.json / q2l_config.json; dropout is inactive in eval
    return BertConfig(vocab_size=vocab_size, hidden_size=arch.hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, intermediate_size=arch.intermediate, hidden_act="gelu",
                      max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0,
                      is_decoder=True, add_cross_attention=True, attn_implementation="eager")


def _wide_cross_attention(attn, in_width: int, hidden: int):
    """The cross-attention's keys and values read ``in_width``-wide tokens (BLIP's ``encoder_width``)."""
    import torch.nn as nn

    attn.self.key, attn.self.value = nn.Linear(in_width, hidden), nn.Linear(in_width, hidden)


def _build(arch: Arch, tokenizer, tags: Sequence[str]):
    import torch
    import torch.nn as nn
    from timm.models.swin_transformer import SwinTransformer
    from transformers import BertLMHeadModel, BertModel, DynamicCache, EncoderDecoderCache
    from transformers.models.bert.modeling_bert import BertAttention, BertIntermediate, BertOutput

    if len(tags) != NUM_CLASS:
        raise ValueError(f"Tag2Text has {NUM_CLASS} tags, got {len(tags)}")
    vision_width = arch.embed_dim * 8
    vocab = len(tokenizer)

    class Q2LLayer(nn.Module):
        """VBench's vision_multi layer after del_selfattention: cross-attention to the image, then feed-forward."""

        def __init__(self, cfg):
            super().__init__()
            self.crossattention = BertAttention(cfg, is_cross_attention=True)
            _wide_cross_attention(self.crossattention, vision_width, arch.hidden)
            self.intermediate, self.output = BertIntermediate(cfg), BertOutput(cfg)

        def forward(self, x, image_embeds):
            a = self.crossattention(x, encoder_hidden_states=image_embeds)[0]
            return self.output(self.intermediate(a), a)

    class Tag2Text(nn.Module):
        def __init__(self):
            super().__init__()
            self.visual_encoder = SwinTransformer(
                img_size=IMAGE_SIZE, patch_size=4, in_chans=3, num_classes=0, global_pool="", embed_dim=arch.embed_dim,
                depths=arch.depths, num_heads=arch.swin_heads, window_size=arch.window_size, mlp_ratio=4.0,
                qkv_bias=True, drop_rate=0.0, drop_path_rate=0.1)
            self.tag_encoder = BertModel(_bert_config(arch, vocab, arch.heads, arch.layers), add_pooling_layer=False)
            self.tag_encoder.config.is_decoder = False            # bidirectional self-attention, no cache
            for layer in self.tag_encoder.encoder.layer:
                layer.attention.self.is_causal = False
                _wide_cross_attention(layer.crossattention, vision_width, arch.hidden)
            self.text_decoder = BertLMHeadModel(_bert_config(arch, vocab, arch.heads, arch.layers))
            q2l = _bert_config(arch, vocab, arch.q2l_heads, arch.q2l_layers)
            self.vision_multi = nn.Module()
            self.vision_multi.encoder = nn.Module()
            self.vision_multi.encoder.layer = nn.ModuleList(Q2LLayer(q2l) for _ in range(arch.q2l_layers))
            self.label_embed = nn.Embedding(NUM_CLASS, arch.hidden)
            self.fc = nn.Module()                                  # GroupWiseLinear: one (W, b) per class
            bound = 1.0 / math.sqrt(arch.hidden)
            self.fc.W = nn.Parameter(torch.empty(1, NUM_CLASS, arch.hidden).uniform_(-bound, bound))
            self.fc.b = nn.Parameter(torch.empty(1, NUM_CLASS).uniform_(-bound, bound))
            # tie_encoder_decoder_weights(tag_encoder, vision_multi): the tag encoder's first layers use the tag
            # head's cross-attention and feed-forward weights
            for q, t in zip(self.vision_multi.encoder.layer, self.tag_encoder.encoder.layer):
                for name, mod in list(q.named_modules()):
                    if isinstance(mod, (nn.Linear, nn.LayerNorm)):
                        parent, _, leaf = name.rpartition(".")
                        setattr(t.get_submodule(parent), leaf, mod)
            for bert in (self.tag_encoder, self.text_decoder.bert):   # BLIP's embeddings have no token type
                nn.init.zeros_(bert.embeddings.token_type_embeddings.weight)
                bert.embeddings.token_type_embeddings.weight.requires_grad_(False)
            self.tokenizer, self.tag_array = tokenizer, np.array(list(tags))

        def image_embeds(self, images):
            """Swin tokens (B, 144, C) after the final norm, led by their mean: (B, 145, C)."""
            x = self.visual_encoder.forward_features(images).flatten(1, 2)
            return torch.cat([x.mean(1, keepdim=True), x], dim=1)

        def tag_logits(self, image_embeds):
            x = self.label_embed.weight.unsqueeze(0).expand(image_embeds.shape[0], -1, -1)
            for layer in self.vision_multi.encoder.layer:
                x = layer(x, image_embeds)
            return (self.fc.W * x).sum(-1) + self.fc.b

        def tags(self, logits) -> list[str]:
            keep = (torch.sigmoid(logits) > THRESHOLD).cpu().numpy()
            keep[:, list(DELETE_TAG_INDEX)] = False
            return [" | ".join(self.tag_array[np.flatnonzero(k)]) for k in keep]

        def tag_encoding(self, tags: Sequence[str], image_embeds):
            t = self.tokenizer(list(tags), padding="max_length", truncation=True, max_length=TAG_MAX_TOKENS,
                               return_tensors="pt").to(image_embeds.device)
            ids = t.input_ids.clone()
            ids[:, 0] = self.tokenizer.enc_token_id
            return self.tag_encoder(ids, attention_mask=t.attention_mask,
                                    encoder_hidden_states=image_embeds).last_hidden_state

        @torch.no_grad()
        def generate(self, images) -> tuple[list[str], list[str]]:
            """(captions, tags) of each image, (B, 3, 384, 384) normalised: beam search per image."""
            embeds = self.image_embeds(images)
            tags = self.tags(self.tag_logits(embeds))
            enc = self.tag_encoding(tags, embeds)
            ids = self.tokenizer([PROMPT] * len(tags), return_tensors="pt").input_ids.to(images.device)
            ids[:, 0] = self.tokenizer.bos_token_id
            cache = EncoderDecoderCache(DynamicCache(), DynamicCache())    # self- and cross-attention keys
            out = self.text_decoder.generate(
                input_ids=ids[:, :-1], encoder_hidden_states=enc, cache=cache, max_length=MAX_LENGTH,
                min_length=MIN_LENGTH, num_beams=NUM_BEAMS, do_sample=False, eos_token_id=self.tokenizer.sep_token_id,
                pad_token_id=self.tokenizer.pad_token_id, repetition_penalty=REPETITION_PENALTY)
            caps = [self.tokenizer.decode(o, skip_special_tokens=True)[len(PROMPT):] for o in out]
            return caps, tags

    model = Tag2Text().eval()
    return model


def build_tiny(seed: int = 0):
    """The tiny random-weight Tag2Text (seeded): the real architecture at TINY widths, tiny vocabulary and tags."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _build(TINY, tiny_tokenizer(), tiny_tags())


def build_real(checkpoint: str, tokenizer_dir: str, tags: Sequence[str], arch: Arch = SWIN_B):
    """Tag2Text Swin-B 14M: VBench's checkpoint file into the Swin-B architecture, bert-base-uncased's vocabulary
    from ``tokenizer_dir`` (vocab.txt), VBench's 3429 tags (``load_tags``)."""
    model = _build(arch, real_tokenizer(tokenizer_dir), tags)
    load_checkpoint(model, checkpoint)
    return model


def load_tags(tag_class_py: str) -> list[str]:
    """The tag list of VBench's ``third_party/tag2Text/tag_class.py`` (its ``tra_array`` literal), read, not run."""
    import ast
    from pathlib import Path

    for node in ast.parse(Path(tag_class_py).read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "tra_array" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise ValueError(f"{tag_class_py} has no tra_array")


def load_checkpoint(model, path: str) -> None:
    """VBench's ``tag2text_swin_14m.pth`` (``{'model': state_dict}``), strictly by name (``load_vbench_state_dict``)."""
    import torch

    sd = torch.load(path, map_location="cpu", weights_only=False)
    load_vbench_state_dict(model, sd.get("model", sd))


def load_vbench_state_dict(model, state_dict: dict) -> None:
    """Load a state dict with VBench's Tag2Text_Caption names, strictly. The name map: the Swin's through timm's
    ``checkpoint_filter_fn`` (its downsampling moves from the end of stage i to the start of stage i + 1; attention
    masks and position indices are not weights); BLIP's persistent ``position_ids`` dropped; the token-type
    embeddings BLIP lacks set to zero. Everything else has the same name."""
    import torch
    from timm.models.swin_transformer import checkpoint_filter_fn

    vis = {k[len("visual_encoder."):]: v for k, v in state_dict.items() if k.startswith("visual_encoder.")}
    out = {f"visual_encoder.{k}": v for k, v in checkpoint_filter_fn(vis, model.visual_encoder).items()}
    for k, v in state_dict.items():
        if not k.startswith("visual_encoder.") and not k.endswith("embeddings.position_ids"):
            out[k] = v
    for bert in ("tag_encoder", "text_decoder.bert"):
        w = model.get_submodule(f"{bert}.embeddings.token_type_embeddings").weight
        out[f"{bert}.embeddings.token_type_embeddings.weight"] = torch.zeros_like(w)
    model.load_state_dict(out, strict=True)


# --- VBench's scene inputs --------------------------------------------------------------------------------

def middle_indices(num_frames: int, vlen: int) -> list[int]:
    """vbench.utils.get_frame_indices(num_frames, vlen, sample='middle'): the middle of num_frames equal spans,
    padded with the last index when the video is shorter."""
    acc = min(num_frames, vlen)
    edges = np.linspace(0, vlen, acc + 1).astype(int)
    idx = [(int(a) + int(b) - 1) // 2 for a, b in zip(edges[:-1], edges[1:])]
    return idx + [idx[-1]] * (num_frames - len(idx))


def frames_tensor(video: np.ndarray):
    """The 16 sampled frames of a uint8 [T, H, W, 3] video as VBench feeds Tag2Text: 384 x 384, ToTensor, Normalize
    (ImageNet mean/std). VBench asks its decoder for 384 x 384 (decord's FFmpeg filter ``scale=384:384`` on the
    decoded mp4: swscale's default, bicubic, since FFmpeg commit 9f14396; bilinear in a filter graph before it, so
    it depends on the FFmpeg decord was built with); here PIL's bicubic resize does it on the raw frames."""
    import torch
    from PIL import Image
    from torchvision.transforms import Compose, InterpolationMode, Normalize, Resize, ToTensor

    t = Compose([Resize((IMAGE_SIZE, IMAGE_SIZE), interpolation=InterpolationMode.BICUBIC), ToTensor(),
                 Normalize(MEAN, STD)])
    return torch.stack([t(Image.fromarray(video[i])) for i in middle_indices(FRAMES, len(video))])


def video_captions(model, frames) -> list[str]:
    """The captions VBench's ``get_caption`` returns for one video's frames: frame b gets the caption of frame
    b // NUM_BEAMS (see the module docstring), so only the first ceil(B / 3) frames are captioned."""
    n = len(frames)
    caps, _ = model.generate(frames[:-(-n // NUM_BEAMS)])
    return [caps[b // NUM_BEAMS] for b in range(n)]
