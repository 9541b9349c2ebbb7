"""The VBench dimensions the Wan 2.2 reference scores (run_evaluation.py's default six), on uint8 videos.

Each function follows VBench 0.1.5's ``vbench/<dimension>.py`` step for step (its transforms, frame sampling,
clamping and averaging), with the model handed in: VBench loads DINO ViT-B/16 (torch.hub), CLIP ViT-B/32
(openai clip), RAFT (things checkpoint), AMT-S and Tag2Text (Swin-B + BERT) from its cache. Here the same
architectures come from timm (DINO's ViT is timm's layout; ``dino_features`` runs DINO's own forward on it),
open_clip (CLIP) and torchvision (RAFT-large), random-weight and seeded in the tiny variant (``build_scorers``);
tests/test_wan_vbench_official.py checks these four dimensions against VBench 0.1.5's own compute functions on the
same weights (OpenAI's CLIP class, the original RAFT under its names). The two that no library provides whole:
- motion_smoothness: ``motion_smoothness`` takes any interpolator; the tiny variant passes code.wan.amt's
  ``Interpolator`` around the AMT-S architecture at tiny widths (random-weight, seeded); ``amt.load_amt_s`` loads
  VBench's amt-s.pth into the real one (tests/test_wan_amt.py checks it against VBench 0.1.5's own code);
- scene: code.wan.tag2text assembles Tag2Text (timm's Swin-B, transformers' BERTs) with VBench's settings and
  batching, tiny and seeded here (``build_tiny``); ``build_real`` loads VBench's tag2text_swin_14m.pth
  (tests/test_wan_tag2text.py checks it against VBench 0.1.5's own scene code).

A video is uint8 [T, H, W, 3] RGB. Dimension results are VBench's: (score over all frames or videos, per video).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

DINO_MEAN, DINO_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CLIP_MEAN, CLIP_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)

# The scorers' architectures: the real ones, and tiny random-weight ones of the same kind.
# dynamic_img_size: timm's own forward then takes any input whose sides are multiples of 16; subject_consistency
# runs DINO's forward instead (dino_features), which takes any size, as DINO's own ViT
DINO_VITB16 = dict(img_size=224, patch_size=16, embed_dim=768, depth=12, num_heads=12, num_classes=0,
                   dynamic_img_size=True)
DINO_TINY = dict(img_size=224, patch_size=16, embed_dim=32, depth=2, num_heads=2, num_classes=0, dynamic_img_size=True)
CLIP_TINY = {"embed_dim": 32, "vision_cfg": {"image_size": 224, "layers": 2, "width": 32, "patch_size": 32,
                                            "head_width": 16},
             "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2}}


def _tensor_frames(video: np.ndarray):
    """vbench.utils.load_video's tensor: ``torch.Tensor(frames)``, i.e. float32 (its comment says uint8), so the
    resizes below run in float and are neither rounded nor clamped back to 0..255."""
    import torch

    return torch.from_numpy(np.array(video)).permute(0, 3, 1, 2).float()        # (T, C, H, W) float32, 0..255


def dino_transform(frames, n_px: int = 224):
    """vbench.utils.dino_transform: Resize(shorter side n_px, antialias=False) on the float frames, /255, Normalize."""
    from torchvision.transforms import Normalize, Resize

    x = Resize(size=n_px, antialias=False)(frames).float().div(255.0)
    return Normalize(DINO_MEAN, DINO_STD)(x)


def clip_transform(frames, n_px: int = 224):
    """vbench.utils.clip_transform: bicubic Resize (antialias=False) on the float frames, CenterCrop, /255,
    Normalize."""
    from torchvision.transforms import CenterCrop, InterpolationMode, Normalize, Resize

    x = Resize(n_px, interpolation=InterpolationMode.BICUBIC, antialias=False)(frames)
    x = CenterCrop(n_px)(x).float().div(255.0)
    return Normalize(CLIP_MEAN, CLIP_STD)(x)


def clip_transform_image(image, n_px: int = 224):
    """vbench.utils.clip_transform_Image on one PIL image: bicubic Resize, CenterCrop, ToTensor, Normalize."""
    from torchvision.transforms import CenterCrop, InterpolationMode, Normalize, Resize, ToTensor

    x = CenterCrop(n_px)(Resize(n_px, interpolation=InterpolationMode.BICUBIC, antialias=False)(image))
    return Normalize(CLIP_MEAN, CLIP_STD)(ToTensor()(x))


def _consistency(features_per_video: Sequence) -> tuple[float, list[float]]:
    """VBench's temporal consistency: for frames i >= 1, the mean of max(0, cos(f_i, f_{i-1})) and
    max(0, cos(f_i, f_0)); the score is the sum over all such frames of all videos over their count."""
    import torch.nn.functional as F

    total, cnt, per_video = 0.0, 0, []
    for feats in features_per_video:
        feats = F.normalize(feats, dim=-1, p=2)
        v = 0.0
        for i in range(1, len(feats)):
            pre = max(0.0, F.cosine_similarity(feats[i - 1:i], feats[i:i + 1]).item())
            fir = max(0.0, F.cosine_similarity(feats[0:1], feats[i:i + 1]).item())
            v += (pre + fir) / 2
            cnt += 1
        total += v
        per_video.append(v / (len(feats) - 1))
    return total / cnt, per_video


def dino_features(vit, x):
    """facebookresearch/dino's ``VisionTransformer.forward`` on timm's ViT (DINO's parameter names): the patch
    convolution (a side that is not a multiple of the patch is floored: a 720p frame resized to 224 x 398 gives
    14 x 24 patches, where timm's dynamic_img_size refuses it), the [CLS] token, the position embeddings resized as
    DINO's ``interpolate_pos_encoding`` does (bicubic at scale factor (n + 0.1) / sqrt(N), not to a size, and not
    timm's antialiased resample), the blocks, the norm; the [CLS] feature."""
    import math

    import torch
    import torch.nn.functional as F

    b, _, h, w = x.shape
    proj = vit.patch_embed.proj
    tokens = torch.cat([vit.cls_token.expand(b, -1, -1), proj(x).flatten(2).transpose(1, 2)], dim=1)
    pos = vit.pos_embed
    n = pos.shape[1] - 1
    if tokens.shape[1] - 1 != n or h != w:
        side, patch = math.sqrt(n), proj.kernel_size[0]
        h0, w0 = h // patch + 0.1, w // patch + 0.1
        grid = pos[:, 1:].reshape(1, int(side), int(side), -1).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, scale_factor=(h0 / side, w0 / side), mode="bicubic")
        pos = torch.cat([pos[:, :1], grid.permute(0, 2, 3, 1).reshape(1, -1, pos.shape[-1])], dim=1)
    x = tokens + pos
    for blk in vit.blocks:
        x = blk(x)
    return vit.norm(x)[:, 0]


def subject_consistency(dino, videos: Sequence[np.ndarray]) -> tuple[float, list[float]]:
    """DINO features (``dino_features`` on the timm ViT ``dino``) of every frame, one at a time as VBench;
    consistency of consecutive and first frames."""
    import torch

    feats = []
    with torch.no_grad():
        for v in videos:
            x = dino_transform(_tensor_frames(v))
            feats.append(torch.cat([dino_features(dino, x[i:i + 1]) for i in range(len(x))]))
    return _consistency(feats)


def background_consistency(clip_model, videos: Sequence[np.ndarray]) -> tuple[float, list[float]]:
    """CLIP image features of all frames at once, the same consistency rule."""
    import torch

    with torch.no_grad():
        feats = [clip_model.encode_image(clip_transform(_tensor_frames(v))) for v in videos]
    return _consistency(feats)


def appearance_style(clip_model, tokenizer, videos: Sequence[np.ndarray], styles: Sequence[str]):
    """Per frame: CLIP's logits_per_text of the frame and the style text, / 100; the mean over all frames."""
    import torch
    from PIL import Image

    total, cnt, per_video = 0.0, 0, []
    with torch.no_grad():
        for v, style in zip(videos, styles):
            text = tokenizer([style])
            tf = clip_model.encode_text(text)
            tf = tf / tf.norm(dim=1, keepdim=True)
            sims = []
            for frame in v:
                imf = clip_model.encode_image(clip_transform_image(Image.fromarray(frame)).unsqueeze(0))
                imf = imf / imf.norm(dim=1, keepdim=True)
                logit = clip_model.logit_scale.exp() * imf @ tf.t()        # logits_per_image; per_text is its .t()
                sims.append(float(logit[0, 0]) / 100)
            total += sum(sims)
            cnt += len(sims)
            per_video.append(float(np.mean(sims)))
    return total / cnt, per_video


def dynamic_degree(raft, videos: Sequence[np.ndarray], fps: float, iters: int = 20) -> tuple[float, list[bool]]:
    """RAFT flow between frames sampled every round(fps / 8); a pair moves when the mean of its largest 5% flow
    magnitudes exceeds 6 x (short side / 256); a video is dynamic when round(4 x frames / 16) pairs move."""
    import torch

    interval = max(1, round(fps / 8))
    moved = []
    with torch.no_grad():
        for v in videos:
            frames = [torch.from_numpy(f.astype(np.uint8)).permute(2, 0, 1).float()[None] for f in v][::interval]
            thres = 6.0 * (min(frames[0].shape[-2:]) / 256.0)
            count_num = round(4 * (len(frames) / 16.0))
            count, move = 0, False
            for a, b in zip(frames[:-1], frames[1:]):
                if _flow_score(raft, a, b, iters) > thres:
                    count += 1
                if count >= count_num:
                    move = True
                    break
            moved.append(move)
    return float(np.mean(moved)), moved


def _flow_score(raft, a, b, iters: int) -> float:
    """VBench's DynamicDegree.get_score of a frame pair (float [1, 3, H, W], 0..255): RAFT's flow on the padded
    pair, the mean of its largest 5% magnitudes."""
    import torch

    a, b = _pad8(a), _pad8(b)
    flow = raft(2 * (a / 255.0) - 1, 2 * (b / 255.0) - 1, num_flow_updates=iters)[-1]
    rad = torch.sqrt(flow[0, 0] ** 2 + flow[0, 1] ** 2).numpy().ravel()
    cut = int(rad.size * 0.05)
    return np.mean(np.abs(np.sort(-rad))[:cut]).item()


def _pad8(x):
    """RAFT's InputPadder ('sintel' mode): replicate-pad H and W up to multiples of 8, evenly on both sides."""
    import torch.nn.functional as F

    h, w = x.shape[-2:]
    ph, pw = (((h // 8) + 1) * 8 - h) % 8, (((w // 8) + 1) * 8 - w) % 8
    if not ph and not pw:
        return x
    return F.pad(x, [pw // 2, pw - pw // 2, ph // 2, ph - ph // 2], mode="replicate")


def blend_interpolator(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rounded mean of the two neighbouring frames (a baseline: no motion model)."""
    return np.round((a.astype(np.float32) + b.astype(np.float32)) / 2).astype(np.uint8)


def motion_smoothness(interpolate: Callable[[np.ndarray, np.ndarray], np.ndarray],
                      videos: Sequence[np.ndarray]) -> tuple[float, list[float]]:
    """Keep the even frames, interpolate one frame between each pair, compare with the odd frames:
    (255 - mean |odd - interpolated|) / 255 per video; the score is the mean over videos. ``interpolate``: uint8
    frames (a, b) -> the uint8 frame between them (VBench: AMT-S, ``code.wan.amt.Interpolator``)."""
    per_video = []
    for v in videos:
        kept = list(v[0::2])
        outs = [kept[0]]
        for a, b in zip(kept[:-1], kept[1:]):
            outs += [interpolate(a, b), b]
        odd, interp = list(v[1::2]), outs[1::2]
        diff = np.mean([np.mean(np.abs(o.astype(np.int16) - i.astype(np.int16))) for o, i in zip(odd, interp)])
        per_video.append(float((255.0 - diff) / 255.0))
    return float(np.mean(per_video)), per_video


def scene(tag2text_model, videos: Sequence[np.ndarray], scenes: Sequence[str]) -> tuple[float, list[float]]:
    """VBench's scene: Tag2Text captions of each video's 16 'middle' frames (code.wan.tag2text, VBench's batching
    kept), then ``scene_score``."""
    from code.wan import tag2text

    caps = [tag2text.video_captions(tag2text_model, tag2text.frames_tensor(v)) for v in videos]
    return scene_score(caps, scenes)


def scene_score(captions_per_video: Sequence[Sequence[str]], scenes: Sequence[str]) -> tuple[float, list[float]]:
    """VBench's check: a frame's caption matches when every word of the scene name is a substring of it."""
    ok = total = 0
    per_video = []
    for caps, sc in zip(captions_per_video, scenes):
        hits = sum(all(q in c for q in sc.split(" ")) for c in caps)
        ok, total = ok + hits, total + len(caps)
        per_video.append(hits / len(caps))
    return ok / total, per_video


# --- the scorers' models -----------------------------------------------------------------------------------

def build_scorers(seed: int = 0) -> dict:
    """Tiny random-weight DINO ViT (timm), CLIP (open_clip) and RAFT-large (torchvision), seeded."""
    import open_clip
    import torch
    from timm.models.vision_transformer import VisionTransformer
    from torchvision.models.optical_flow import raft_large

    torch.manual_seed(seed)
    dino = VisionTransformer(**DINO_TINY).eval()
    clip_model = open_clip.CLIP(**CLIP_TINY).eval()
    raft = raft_large(weights=None).eval()
    from code.wan import tag2text     # Tag2Text at tiny widths, from its own seed (forked RNG)
    from code.wan import amt          # AMT at tiny widths, from its own seed (the RNG stream above is untouched)

    return {"dino": dino, "clip": clip_model, "clip_tokenizer": open_clip.tokenize, "raft": raft,
            "interpolate": amt.Interpolator(amt.tiny_model(seed)), "tag2text": tag2text.build_tiny(seed)}
