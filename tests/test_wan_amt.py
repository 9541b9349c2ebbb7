"""AMT-S (code.wan.amt), VBench's motion_smoothness interpolator, against VBench 0.1.5's own code.

The oracle is the vbench==0.1.5 package (``make venv`` installs it with --no-deps: its declared dependencies pin
transformers 4.33.2 and decord, which would replace this environment's). Its AMT network modules need only torch,
numpy and PIL; they are loaded without the package's ``__init__`` (which imports decord for other dimensions),
and ``vbench/motion_smoothness.py`` with stand-ins for the three imports its CPU path never calls (decord's
VideoReader, imageio's imread/imwrite, omegaconf: the network is handed in instead of built from the YAML, whose
parameters are checked here). Without the package the oracle tests skip with that reason.
"""
from __future__ import annotations

import importlib
import importlib.util
import types

import numpy as np
import pytest
import torch

from code.wan import amt
from tests.vbench_oracle import mounted, vbench_root

AMT_S_PARAMS = 2_990_543         # AMT-S's parameter count (the paper: 3.0M)


@pytest.fixture(scope="module")
def official():
    """VBench's AMT-S Model class, its MotionSmoothness class, its AMT utils, and AMT-S.yaml's network entry."""
    root = vbench_root("third_party/amt/networks/AMT-S.py")
    import yaml

    absent = {n: types.SimpleNamespace(**attrs) for n, attrs in (
        ("decord", dict(VideoReader=None, cpu=None)), ("imageio", dict(imread=None, imwrite=None)),
        ("omegaconf", dict(OmegaConf=None))) if importlib.util.find_spec(n) is None}
    with mounted(root, absent):
        model_cls = importlib.import_module("vbench.third_party.amt.networks.AMT-S").Model
        ms = importlib.import_module("vbench.motion_smoothness")
        utils = importlib.import_module("vbench.third_party.amt.utils.utils")
    cfg = yaml.safe_load((root / "third_party" / "amt" / "cfgs" / "AMT-S.yaml").read_text())["network"]
    return {"Model": model_cls, "ms": ms, "utils": utils, "cfg": cfg}


@pytest.fixture(scope="module")
def pair(official):
    """VBench's AMT-S (AMT-S.yaml's parameters) with seeded random weights, every 1-D parameter (PReLU slopes,
    biases) moved off its initial value, and ours loaded from its state dict."""
    cfg = official["cfg"]
    assert cfg["name"] == "networks.AMT-S.Model", cfg
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        ref = official["Model"](**cfg["params"]).eval()
        with torch.no_grad():
            for p in ref.parameters():
                if p.ndim == 1:
                    p.add_(0.02 * torch.randn_like(p))
    ours = amt.AMT(amt.AMT_S).eval()
    ours.load_state_dict(ref.state_dict(), strict=True)
    return ref, ours


def _video(frames: int, h: int, w: int, seed: int = 0) -> np.ndarray:
    """A textured pattern drifting right and down, with noise: uint8 [T, H, W, 3]."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    out = []
    for t in range(frames):
        x, y = xx - 2.5 * t, yy - 1.5 * t
        img = np.stack([np.sin(x / 7) + np.cos(y / 5), np.sin((x + y) / 9), np.cos(x / 4 - y / 11)], -1)
        img = 127.5 + 60 * img + rng.normal(0, 4, (h, w, 3))
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return np.stack(out)


def test_amt_s_checkpoint_loads_by_name(official, tmp_path):
    """A checkpoint laid out as amt-s.pth ({'state_dict': VBench's AMT-S names}) loads strictly: no missing or
    unexpected key, every shape equal."""
    sd = official["Model"](**official["cfg"]["params"]).state_dict()
    torch.save({"state_dict": sd}, tmp_path / "amt-s.pth")
    model = amt.load_amt_s(tmp_path / "amt-s.pth")
    ours = model.state_dict()
    assert sorted(ours) == sorted(sd) and all(ours[k].shape == sd[k].shape for k in sd)
    assert sum(p.numel() for p in model.parameters()) == AMT_S_PARAMS
    assert all(torch.equal(ours[k], sd[k]) for k in sd)


def test_amt_s_names_without_oracle():
    """Independent of the package: the parameter count and a few of the checkpoint's names and shapes."""
    sd = amt.AMT(amt.AMT_S).state_dict()
    assert sum(v.numel() for v in sd.values()) == AMT_S_PARAMS
    assert sd["feat_encoder.conv1.weight"].shape == (32, 3, 7, 7)
    assert sd["feat_encoder.layer2.0.downsample.0.weight"].shape == (64, 32, 1, 1)
    assert sd["update4.convc1.weight"].shape == (64, 2 * 4 * 49, 1, 1)
    assert sd["decoder4.convblock.0.0.weight"].shape == (112, 113, 3, 3)
    assert sd["decoder1.convblock.2.weight"].shape == (60, 24, 4, 4)
    assert sd["comb_block.1.weight"].shape == (18,)


def test_amt_s_frames_match_vbench(pair):
    """The interpolated frame (t = 1/2) of VBench's forward and ours, same weights: at scale 1 and at the
    0.5 VBench would use on a small GPU."""
    ref, ours = pair
    g = torch.Generator().manual_seed(0)
    for (h, w), scale in (((128, 144), 1.0), ((256, 256), 0.5)):
        x0 = torch.rand(1, 3, h, w, generator=g)
        x1 = torch.roll(x0, (2, 3), (-2, -1)) * 0.9 + 0.05
        with torch.no_grad():
            want = ref(x0, x1, torch.tensor(0.5).view(1, 1, 1, 1), scale_factor=scale, eval=True)["imgt_pred"]
            got = ours(x0, x1, 0.5, scale)
        diff = (want - got).abs().max().item()
        print(f"[fidelity] AMT-S {h}x{w} scale {scale}: max |VBench - ours| {diff:.3g} "
              f"(frame std {want.std().item():.3f})")
        assert diff < 1e-4
        assert (want - 0.5 * (x0 + x1)).abs().mean() > 1e-3        # not a plain blend


def test_motion_smoothness_matches_vbench(official, pair, tmp_path):
    """VBench's MotionSmoothness.motion_score (CPU path: its scale, InputPadder to 16, the odd frames against
    the interpolation of the even ones) on a 7-frame 120x136 video read from PNGs, against
    code.wan.vbench.motion_smoothness with our Interpolator; and the interpolated frames themselves."""
    import cv2

    from code.wan import vbench

    ref, ours = pair
    video = _video(7, 120, 136)
    for i, f in enumerate(video):
        cv2.imwrite(str(tmp_path / f"{i:03d}.png"), cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    ms = official["ms"].MotionSmoothness.__new__(official["ms"].MotionSmoothness)
    ms.device, ms.niters, ms.model = "cpu", 1, ref
    ms.initialization()
    want = ms.motion_score(str(tmp_path))
    interp = amt.Interpolator(ours)
    got, per = vbench.motion_smoothness(interp, [video])
    # the frames: VBench's own conversion (img2tensor, InputPadder(16), tensor2img) around its model
    u = official["utils"]
    padder = u.InputPadder((1, 3, 120, 136), 16)
    flips = []
    for a, b in zip(video[0:-1:2], video[2::2]):
        x0, x1 = padder.pad(u.img2tensor(a), u.img2tensor(b))
        with torch.no_grad():
            ref_frame = u.tensor2img(padder.unpad(ref(x0, x1, ms.embt, scale_factor=1, eval=True)["imgt_pred"]))
        d = np.abs(ref_frame.astype(int) - interp(a, b).astype(int))
        flips.append((d.max(), (d > 0).mean()))
    print(f"[fidelity] motion_smoothness: VBench {want:.8f}, ours {got:.8f} (|diff| {abs(want - got):.2g}); "
          f"interpolated uint8 frames: max |diff| {max(f[0] for f in flips)}, "
          f"{max(f[1] for f in flips):.4%} of bytes differ")
    assert per == [got] and abs(want - got) < 1e-5
    assert max(f[0] for f in flips) <= 1 and max(f[1] for f in flips) < 1e-3
    blend = vbench.motion_smoothness(vbench.blend_interpolator, [video])[0]
    assert abs(blend - got) > 1e-4                                  # the network, not the blend, was scored


def test_vbench_scale_and_padding():
    """VBench's CPU path never shrinks; on CUDA a 720p frame keeps scale 1 on a 24 GiB card and up; the scale
    snaps to 16 / an integer; the padding splits evenly."""
    assert amt.vbench_scale(720, 1280) == 1.0
    assert amt.pad_amounts(120, 136, 16) == (4, 4, 4, 4) and amt.pad_amounts(720, 1280, 16) == (0, 0, 0, 0)
    assert amt.pad_amounts(121, 130, 16) == (7, 7, 3, 4)


def test_tiny_amt_seeded():
    """The tiny variant: AMT-S's architecture (same names) at tiny widths, the same weights for a seed, and
    building it leaves the caller's random stream alone (build_scorers seeds its other models from it)."""
    torch.manual_seed(5)
    a = amt.tiny_model(0)
    after = torch.rand(1)
    torch.manual_seed(5)
    assert torch.equal(torch.rand(1), after)
    b, c = amt.tiny_model(0), amt.tiny_model(1)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert sorted(sa) == sorted(amt.AMT(amt.AMT_S).state_dict())
    assert all(torch.equal(sa[k], sb[k]) for k in sa) and not all(torch.equal(sa[k], sc[k]) for k in sa)
    assert sum(v.numel() for v in sa.values()) < AMT_S_PARAMS // 5
    v = _video(5, 128, 128)
    out = amt.Interpolator(a)(v[0], v[2])
    assert out.shape == (128, 128, 3) and out.dtype == np.uint8
