"""subject_consistency, background_consistency, appearance_style and dynamic_degree (code.wan.vbench) against
VBench 0.1.5's own code: its ``compute_<dimension>`` functions, with their transforms, frame sampling and video
readers, on the same videos and the same random-weight models as ours. (The reference's other two dimensions have
their own modules: motion_smoothness in test_wan_amt.py, scene in test_wan_tag2text.py.)

The oracle is the vbench==0.1.5 package plus the two packages its code imports for these dimensions, openai-clip
(OpenAI's ``clip``: its model class, tokenizer and ``clip.load``) and easydict, all installed by ``make venv`` with
--no-deps. The package's ``__init__`` (which imports every dimension) is skipped. Stand-ins, none of which touches
VBench's arithmetic:
- decord (VBench's mp4 reader in ``utils.load_video``; not installable next to this environment's pins): a
  VideoReader serving the frames OpenCV decodes from the same mp4 files (dynamic_degree reads them with OpenCV
  itself, unchanged); ours gets those frames too;
- the loading steps only: ``torch.hub.load`` (DINO ViT-B/16 from facebookresearch/dino) returns DINO's own
  VisionTransformer (its vit_base recipe at build_scorers' tiny widths) holding our timm ViT's state dict, where
  DINO's repository is where VBench's local mode keeps it (``$VBENCH_CACHE_DIR`` or ~/.cache/vbench, then
  dino_model/facebookresearch_dino_main); elsewhere (no download here) a module running ours' ``dino_features`` on
  that ViT, so that the test then checks VBench's reader, transform and loop only (it says which); ``clip.load`` (a checkpoint path) returns an OpenAI ``clip.model.CLIP`` holding the
  state dict of our open_clip model. compute_dynamic_degree loads its RAFT from a file as it always does: build_scorers'
  torchvision RAFT-large, batch-norm statistics moved, saved under the original RAFT's parameter names.
Without the packages the oracle tests skip with that reason.
"""
from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from code.wan import vbench
from tests.vbench_oracle import decord_stand_in, mounted, vbench_root

FPS = 16                                     # Wan's: dynamic_degree samples every round(16 / 8) = 2nd frame
# non-square, sides not multiples of 8 (RAFT's padding) and >= 128 (torchvision's RAFT needs it), even (mp4v); DINO's
# resize gives 224 x 327: 14 x 20 patches (7 columns floored), its position embeddings interpolated
H, W, FRAMES = 130, 190, 8
STYLES = ("oil painting", "black and white", "pixel art", "watercolor painting")
FLOW_SCALE = 0.0878
DIMS = ("subject_consistency", "background_consistency", "appearance_style", "dynamic_degree")
# the tiny CLIP at widths OpenAI's CLIP class can hold (it fixes vision heads = width // 64) and with its QuickGELU
CLIP_OPENAI = {"embed_dim": 32, "vision_cfg": {"image_size": 224, "layers": 2, "width": 64, "patch_size": 32,
                                              "head_width": 64},
               "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2}}


def _video(seed: int, speed: float) -> np.ndarray:
    """A textured pattern drifting by ``speed`` pixels a frame, with noise: uint8 [T, H, W, 3]."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    out = []
    for t in range(FRAMES):
        x, y = xx - speed * t, yy - 0.6 * speed * t
        img = np.stack([np.sin(x / 7) + np.cos(y / 5), np.sin((x + y) / 9), np.cos(x / 4 - y / 11)], -1)
        img = 127.5 + 60 * img + rng.normal(0, 6, (H, W, 3))
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return np.stack(out)


def _write_decode(path: Path, video: np.ndarray) -> np.ndarray:
    """The video as an mp4 (OpenCV's mp4v at FPS), and the RGB frames OpenCV decodes back from it."""
    import cv2

    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), FPS, (W, H))
    for f in video:
        w.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    w.release()
    cap, out = cv2.VideoCapture(str(path)), []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        out.append(cv2.cvtColor(f, cv2.COLOR_BGR2RGB))
    cap.release()
    assert len(out) == FRAMES, f"OpenCV wrote/decoded {len(out)} of {FRAMES} frames of {path}"
    return np.stack(out)


_TV2RAFT = [  # torchvision RAFT-large name -> the original RAFT's (VBench's third_party/RAFT), in order
    (r"^feature_encoder\.", "fnet."), (r"^context_encoder\.", "cnet."),
    (r"^(\w+net)\.convnormrelu\.0\.", r"\1.conv1."), (r"^(\w+net)\.convnormrelu\.1\.", r"\1.norm1."),
    (r"^(\w+net)\.conv\.", r"\1.conv2."),
    (r"\.convnormrelu1\.0\.", ".conv1."), (r"\.convnormrelu1\.1\.", ".norm1."),
    (r"\.convnormrelu2\.0\.", ".conv2."), (r"\.convnormrelu2\.1\.", ".norm2."),
    (r"motion_encoder\.convcorr(\d)\.0\.", r"encoder.convc\1."),
    (r"motion_encoder\.convflow(\d)\.0\.", r"encoder.convf\1."), (r"motion_encoder\.conv\.0\.", "encoder.conv."),
    (r"recurrent_block\.convgru(\d)\.conv(\w)\.", r"gru.conv\2\1."),
    (r"^mask_predictor\.convrelu\.0\.", "update_block.mask.0."), (r"^mask_predictor\.conv\.", "update_block.mask.2."),
]


def _raft_state_dict(tv_sd: dict) -> dict:
    """torchvision RAFT-large's state dict under the original RAFT's names (its downsample norm is also norm3)."""
    out = {}
    for k, v in tv_sd.items():
        for pat, rep in _TV2RAFT:
            k = re.sub(pat, rep, k)
        out[k] = v
        if ".downsample.1." in k:
            out[k.replace(".downsample.1.", ".norm3.")] = v
    return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """VBench's four dimension modules (stand-ins active until the module ends), the videos (mp4 files, a
    VBench_full_info-style json, the decoded frames), and the models on both sides."""
    root = vbench_root("third_party/RAFT/core/raft.py", needs=("clip", "easydict"))
    import clip
    import open_clip

    d = tmp_path_factory.mktemp("vbench_official")
    videos = {}
    cuts = np.random.default_rng(9).integers(0, 256, (FRAMES, H, W, 3), dtype=np.uint8)   # a new scene every frame
    for i, v in enumerate((_video(0, 0.0), _video(1, 0.4), _video(2, 3.0), cuts)):
        p = str(d / f"video {i}-0.mp4")
        videos[p] = _write_decode(Path(p), v)
    info = [{"prompt_en": f"prompt {i}", "dimension": list(DIMS), "video_list": [p],
             "auxiliary_info": {"appearance_style": {"appearance_style": STYLES[i]}}}
            for i, p in enumerate(videos)]
    (d / "full_info.json").write_text(json.dumps(info))

    models = vbench.build_scorers(0)
    # CLIP: ours (open_clip, QuickGELU as OpenAI's ViT-B/32) and OpenAI's class holding its state dict
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        oc = open_clip.CLIP(**CLIP_OPENAI, quick_gelu=True).eval()
    v, t = CLIP_OPENAI["vision_cfg"], CLIP_OPENAI["text_cfg"]
    ref_clip = clip.model.CLIP(CLIP_OPENAI["embed_dim"], v["image_size"], v["layers"], v["width"], v["patch_size"],
                               t["context_length"], t["vocab_size"], t["width"], t["heads"], t["layers"]).eval()
    ref_clip.load_state_dict(oc.state_dict(), strict=True)
    # RAFT: build_scorers' torchvision RAFT-large with its batch-norm statistics and affines moved off their
    # initial values (else a mis-mapped norm would go unseen), saved under the original RAFT's names
    raft = copy.deepcopy(models["raft"])
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for m in raft.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.mul_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.add_(0.1 * torch.randn(m.bias.shape, generator=g))
                m.running_mean.add_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.mul_(1 + 0.3 * torch.rand(m.running_var.shape, generator=g))
        # the flow head's output scaled down: random weights move every pair by ~30 px, far above the threshold
        # (6 x 130 / 256 = 3.05 px); scaled, the pairs' scores straddle it and the verdicts differ
        raft.update_block.flow_head.conv2.weight.mul_(FLOW_SCALE)
        raft.update_block.flow_head.conv2.bias.mul_(FLOW_SCALE)
    torch.save(_raft_state_dict(raft.state_dict()), d / "raft-things.pth")
    with mounted(root, {"decord": decord_stand_in(videos)}):
        mods = {n: importlib.import_module(f"vbench.{n}") for n in DIMS}
        yield {"mods": mods, "json": str(d / "full_info.json"), "videos": videos, "dino": models["dino"],
               "oc": oc, "tokenizer": models["clip_tokenizer"], "ref_clip": ref_clip, "raft": raft,
               "raft_path": str(d / "raft-things.pth"), "clip": clip}


def _dino_repo() -> Path | None:
    """facebookresearch/dino where VBench's local mode keeps it (vbench.utils.init_submodules), if it is there."""
    import os

    cache = os.environ.get("VBENCH_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "vbench")
    d = Path(cache) / "dino_model" / "facebookresearch_dino_main"
    return d if (d / "vision_transformer.py").is_file() else None


def _dino_official(vit):
    """DINO's own VisionTransformer (hubconf's vit_base recipe: qkv bias, LayerNorm eps 1e-6, mlp ratio 4) at the
    timm ViT's widths, holding its state dict (strict: DINO's names are timm's); None without DINO's repository."""
    from functools import partial

    repo = _dino_repo()
    if repo is None:
        return None
    saved = sys.modules.pop("utils", None)             # its `from utils import trunc_normal_` is DINO's utils.py
    sys.path.insert(0, str(repo))                     # as torch.hub.load(source='local') puts it
    try:
        spec = importlib.util.spec_from_file_location("dino_vision_transformer", repo / "vision_transformer.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(repo))
        sys.modules.pop("utils", None)
        if saved is not None:
            sys.modules["utils"] = saved
    blk = vit.blocks[0]
    ref = mod.VisionTransformer(patch_size=vit.patch_embed.proj.kernel_size[0], embed_dim=vit.embed_dim,
                                depth=len(vit.blocks), num_heads=blk.attn.num_heads, mlp_ratio=4, qkv_bias=True,
                                norm_layer=partial(torch.nn.LayerNorm, eps=1e-6), num_classes=0).eval()
    ref.load_state_dict(vit.state_dict(), strict=True)
    return ref


class _OursDino(torch.nn.Module):
    """The stand-in without DINO's repository: ours' DINO forward on the timm ViT."""

    def __init__(self, vit):
        super().__init__()
        self.vit = vit

    def forward(self, x):
        return vbench.dino_features(self.vit, x)


def _agree(dim: str, want: float, got: float, want_per, got_per):
    print(f"[fidelity] {dim}: VBench {want:.8f}, ours {got:.8f} (|diff| {abs(want - got):.2g}); per video "
          f"VBench {[round(float(x), 6) for x in want_per]}, ours {[round(float(x), 6) for x in got_per]}")
    assert len(want_per) == len(got_per)
    assert math.isclose(want, got, rel_tol=1e-4), (dim, want, got)          # 4 significant digits
    assert all(math.isclose(float(a), float(b), rel_tol=1e-4) for a, b in zip(want_per, got_per))
    if dim.endswith("consistency"):        # scores near 1: their distance to 1 to 4 significant digits as well
        assert all(math.isclose(1 - a, 1 - b, rel_tol=1e-3, abs_tol=1e-8)
                   for a, b in zip([want, *want_per], [got, *got_per]))


def test_subject_consistency_matches_vbench(setup, monkeypatch):
    """compute_subject_consistency (load_video, dino_transform, one frame at a time) with torch.hub.load standing
    in for the download: DINO's own ViT holding build_scorers' weights (or, without DINO's repository, ours' forward
    on them: see the module docstring). The frames resize to 224 x 303: 14 x 18 patches, position embeddings
    interpolated, 7 columns floored away."""
    s = setup
    calls = []
    model = _dino_official(s["dino"])
    print(f"[fidelity] subject_consistency: DINO's model is "
          f"{'DINO own VisionTransformer from ' + str(_dino_repo()) if model is not None else 'ours (no DINO repo)'}")
    model = model if model is not None else _OursDino(s["dino"])
    monkeypatch.setattr(torch.hub, "load", lambda **kw: calls.append(kw) or model)
    sub = {"repo_or_dir": "facebookresearch/dino:main", "source": "github", "model": "dino_vitb16",
           "read_frame": False}
    want, per = s["mods"]["subject_consistency"].compute_subject_consistency(s["json"], "cpu", sub)
    got, got_per = vbench.subject_consistency(s["dino"], list(s["videos"].values()))
    assert calls and calls[0]["model"] == "dino_vitb16"
    _agree("subject_consistency", want, got, [r["video_results"] for r in per], got_per)
    assert 0 < got < 1                                          # not saturated: frames differ in the features


def test_background_consistency_matches_vbench(setup, monkeypatch):
    """compute_background_consistency (load_video, clip_transform, all frames at once) on OpenAI's CLIP class,
    ours on open_clip with the same weights; clip.load stands in for the checkpoint."""
    s = setup
    monkeypatch.setattr(s["clip"], "load", lambda *a, **k: (s["ref_clip"], None))
    want, per = s["mods"]["background_consistency"].compute_background_consistency(
        s["json"], "cpu", ["ViT-B-32.pt", False])
    got, got_per = vbench.background_consistency(s["oc"], list(s["videos"].values()))
    _agree("background_consistency", want, got, [r["video_results"] for r in per], got_per)


def test_appearance_style_matches_vbench(setup, monkeypatch):
    """compute_appearance_style (PIL frames, clip_transform_Image, OpenAI's clip.tokenize and CLIP forward:
    logits_per_text / 100) against ours with open_clip's tokenizer and model, same weights."""
    s = setup
    monkeypatch.setattr(s["clip"], "load", lambda *a, **k: (s["ref_clip"], None))
    want, per = s["mods"]["appearance_style"].compute_appearance_style(s["json"], "cpu", {"name": "ViT-B/32"})
    got, got_per = vbench.appearance_style(s["oc"], s["tokenizer"], list(s["videos"].values()), STYLES)
    _agree("appearance_style", want, got, [r["video_results"] for r in per], got_per)
    assert len(set(round(x, 5) for x in got_per)) == len(got_per)     # the style text matters


def test_dynamic_degree_matches_vbench(setup, monkeypatch):
    """compute_dynamic_degree (OpenCV's reader and fps, every round(fps / 8)th frame, the original RAFT loaded from
    its file, InputPadder, 20 iterations) against ours with torchvision's RAFT: each pair's score (the mean of the
    top 5% flow magnitudes) and each video's verdict."""
    s = setup
    want_scores, got_scores = [], []
    cls = s["mods"]["dynamic_degree"].DynamicDegree
    check = cls.check_move
    monkeypatch.setattr(cls, "check_move", lambda self, sl: want_scores.append(list(sl)) or check(self, sl))
    score = vbench._flow_score
    monkeypatch.setattr(vbench, "_flow_score", lambda *a, **k: got_scores.append(score(*a, **k)) or got_scores[-1])
    want, per = s["mods"]["dynamic_degree"].compute_dynamic_degree(s["json"], "cpu", {"model": s["raft_path"]})
    got, moved = vbench.dynamic_degree(s["raft"], list(s["videos"].values()), FPS)
    flat = [x for sl in want_scores for x in sl]
    print(f"[fidelity] dynamic_degree pair scores: VBench {[round(x, 5) for x in flat]}, "
          f"ours {[round(x, 5) for x in got_scores]}")
    assert [len(sl) for sl in want_scores] == [len(range(0, FRAMES, 2)) - 1] * len(s["videos"])
    _agree("dynamic_degree", want, got, [r["video_results"] for r in per], moved)
    # ours stops at a video's first moving pair (VBench scores all, then counts): compare the pairs ours scored
    assert 0 < got < 1                      # the verdicts differ across the videos (the threshold decides)
    thres, need = 6.0 * min(H, W) / 256, round(4 * len(range(0, FRAMES, 2)) / 16)
    it = iter(got_scores)
    for sl in want_scores:
        count = 0
        for x in sl:
            y = next(it)
            assert math.isclose(x, y, rel_tol=1e-4), (x, y)
            count += x > thres
            if count >= need:
                break
    assert next(it, None) is None


def test_dino_forward_720p_matches_dino():
    """Ours' DINO forward (code.wan.vbench.dino_features on timm's ViT) on a 720p frame's shape after VBench's
    dino_transform (224 x 398: 14 x 24 patches, 14 columns floored, position embeddings interpolated) and on
    224 x 224: against DINO's own VisionTransformer where its repository is laid as VBench's local mode lays it,
    and at 224 x 224 (no interpolation) against timm's own forward in any case."""
    models = vbench.build_scorers(0)
    vit = models["dino"]
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for p in vit.parameters():                  # moved off timm's init (zero biases, small position embeddings)
            p.add_(0.05 * torch.randn(p.shape, generator=g))
        x, sq = torch.randn(1, 3, 224, 398, generator=g), torch.randn(1, 3, 224, 224, generator=g)
        ours, ours_sq = vbench.dino_features(vit, x), vbench.dino_features(vit, sq)
        d_timm = (ours_sq - vit(sq)).abs().max().item()
        print(f"[fidelity] DINO forward 224x224: max |timm - ours| {d_timm:.3g}")
        assert d_timm < 1e-5
        ref = _dino_official(vit)
        if ref is None:
            pytest.skip("facebookresearch/dino is not in VBench's local cache ($VBENCH_CACHE_DIR or ~/.cache/vbench, "
                        "dino_model/facebookresearch_dino_main): the 224 x 398 forward was not compared")
        want, want_sq = ref(x), ref(sq)
    d, d_sq = (want - ours).abs().max().item(), (want_sq - ours_sq).abs().max().item()
    print(f"[fidelity] DINO forward 224x398: max |DINO - ours| {d:.3g} (feature std {want.std().item():.3f}); "
          f"224x224: {d_sq:.3g}")
    assert d < 1e-5 and d_sq < 1e-5
