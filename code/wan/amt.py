"""AMT-S, the frame interpolator of VBench's motion_smoothness, in PyTorch.

AMT (All-Pairs Multi-Field Transforms for Efficient Frame Interpolation, Li et al., CVPR 2023), small variant, as
VBench 0.1.5 builds it from ``AMT-S.yaml`` (corr_radius 3, corr_lvls 4, num_flows 3) and loads ``amt-s.pth``
(``torch.load(...)['state_dict']``). Written from the paper's description of the network; the module tree carries
the checkpoint's parameter names, so the real weights load with ``load_state_dict(strict=True)``:

- ``feat_encoder``: RAFT's small feature encoder (7x7/2 stem, three stages of two bottleneck residual blocks, the
  2nd and 3rd at stride 2, instance norm without affine parameters, 1x1 projection): 1/8-resolution features of
  both frames, for the correlation volume;
- the all-pairs correlation: the dot products of every 1/8 feature of frame 0 with every one of frame 1 (over
  sqrt(C)), and its transpose, each average-pooled into a 4-level pyramid; looked up in a (2r+1)^2 window around a
  point per pixel and level;
- ``encoder``: a 4-level context pyramid (two 3x3 conv + PReLU per level, the first at stride 2), 1/2..1/16;
- ``decoder4``: from both frames' 1/16 features and the time step t (a constant map, AMT's time embedding) the
  initial flows t->0, t->1 and the intermediate feature at 1/8; ``decoder3``/``decoder2`` warp the next level's
  features by the current flows and refine them (a 2x transposed-conv step each, flows added to 2x their
  upsampling);
- ``update4/3/2``: at each of those levels, the correlation looked up where the flows point (t->0 flow scaled
  by 1/(1-t) into frame 1's correlation, t->1 flow by 1/t into frame 0's, the linear-motion assumption), encoded
  with the flows into residual updates of flows and feature (levels 3 and 2 work at 1/8, their output upsampled);
- ``decoder1``: the multi-field decoder: num_flows pairs of full-resolution flows, blend masks and residuals;
  each pair warps both (mean-subtracted) frames into a candidate, ``comb_block`` merges the candidates with their
  mean; the result is clamped to [0, 1].

The frames are RGB in [0, 1], (B, 3, H, W), H and W multiples of 16 (VBench pads them: ``pad16``). ``scale`` < 1
runs the network on frames resized by it (VBench shrinks frames only where GPU memory is short: ``vbench_scale``).

``tiny_model`` is the same network at tiny widths, random-weight and seeded (the harness's tiny variant: no
checkpoint, its interpolations are not those of AMT-S).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

TIME_STEP = 0.5                  # VBench interpolates the midpoint (embt = 1/2)
# where VBench keeps the checkpoint (vbench/utils.py init_submodules: $VBENCH_CACHE_DIR or ~/.cache/vbench) and
# the address it downloads it from when absent
CKPT_URL = "https://huggingface.co/lalala125/AMT/resolve/main/amt-s.pth"


def vbench_ckpt_path() -> str:
    cache = os.environ.get("VBENCH_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "vbench")
    return os.path.join(cache, "amt_model", "amt-s.pth")


@dataclass(frozen=True)
class Widths:
    """The channel widths of an AMT network; ``AMT_S`` are the checkpoint's."""
    enc: tuple[int, ...] = (20, 32, 44, 56)         # context pyramid, levels 1..4
    skip: int = 20                                  # the decoders' residual side channels
    feat_stem: int = 32                             # feature encoder: stem and stage widths, output
    feat_stages: tuple[int, ...] = (32, 64, 96)
    feat_out: int = 84
    hidden: int = 76                                # update blocks
    flow_dim: int = 20
    corr_dim: int = 64
    fc_dim: int = 68
    radius: int = 3
    levels: int = 4
    num_flows: int = 3


AMT_S = Widths()
TINY = Widths(enc=(8, 12, 16, 20), skip=8, feat_stem=8, feat_stages=(8, 16, 24), feat_out=16, hidden=16,
              flow_dim=8, corr_dim=16, fc_dim=16)


def _up(x, factor: float):
    """Bilinear resize by a factor (half-pixel centres), the resampling AMT uses between its levels."""
    return F.interpolate(x, scale_factor=factor, mode="bilinear", align_corners=False)


def _pixel_grid(b: int, h: int, w: int, device) -> torch.Tensor:
    """(B, 2, H, W) pixel coordinates, x first."""
    ys, xs = torch.meshgrid(torch.arange(h, device=device, dtype=torch.float32),
                            torch.arange(w, device=device, dtype=torch.float32), indexing="ij")
    return torch.stack([xs, ys])[None].expand(b, -1, -1, -1)


def _sample(img, xy, padding: str):
    """Bilinear samples of img (N, C, H, W) at pixel coordinates xy (N, h, w, 2), corner-aligned."""
    h, w = img.shape[-2:]
    scale = torch.tensor([2.0 / max(w - 1, 1), 2.0 / max(h - 1, 1)], device=xy.device, dtype=xy.dtype)
    return F.grid_sample(img, xy * scale - 1.0, mode="bilinear", padding_mode=padding, align_corners=True)


def warp(img, flow):
    """Backward warp: out(p) = img(p + flow(p)), bilinear, border-clamped."""
    b, _, h, w = flow.shape
    xy = (_pixel_grid(b, h, w, flow.device).to(flow.dtype) + flow).permute(0, 2, 3, 1)
    return _sample(img, xy, "border")


# --- feature encoder (RAFT's small encoder) ------------------------------------------------------------------

class _Bottleneck(nn.Module):
    """1x1 -> 3x3 (stride) -> 1x1 at a quarter of the width, instance-normed, ReLU; 1x1 shortcut when strided."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        mid = cout // 4
        self.conv1 = nn.Conv2d(cin, mid, 1)
        self.conv2 = nn.Conv2d(mid, mid, 3, stride=stride, padding=1)
        self.conv3 = nn.Conv2d(mid, cout, 1)
        self.norm1, self.norm2, self.norm3 = nn.InstanceNorm2d(mid), nn.InstanceNorm2d(mid), nn.InstanceNorm2d(cout)
        self.downsample = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride), nn.InstanceNorm2d(cout))
                           if stride != 1 else None)

    def forward(self, x):
        y = F.relu(self.norm1(self.conv1(x)))
        y = F.relu(self.norm2(self.conv2(y)))
        y = F.relu(self.norm3(self.conv3(y)))
        return F.relu((x if self.downsample is None else self.downsample(x)) + y)


class FeatureEncoder(nn.Module):
    def __init__(self, wd: Widths):
        super().__init__()
        self.conv1 = nn.Conv2d(3, wd.feat_stem, 7, stride=2, padding=3)
        self.norm1 = nn.InstanceNorm2d(wd.feat_stem)
        cin = wd.feat_stem
        for i, (c, s) in enumerate(zip(wd.feat_stages, (1, 2, 2)), 1):
            setattr(self, f"layer{i}", nn.Sequential(_Bottleneck(cin, c, s), _Bottleneck(c, c, 1)))
            cin = c
        self.conv2 = nn.Conv2d(cin, wd.feat_out, 1)

    def forward(self, x):
        x = F.relu(self.norm1(self.conv1(x)))
        return self.conv2(self.layer3(self.layer2(self.layer1(x))))


# --- all-pairs correlation pyramid ---------------------------------------------------------------------------

class CorrPyramid:
    """Correlations of every 1/8 position of frame 0 with all of frame 1 (and the transpose), pooled by 2 per
    level. ``lookup(c0, c1)``: for each pixel p, the (2r+1)^2 window of frame 0's row p around c0(p) and of frame
    1's row p around c1(p), on every level (coordinates / 2^level); channels level-major, within a level the
    x offset outer and the y offset inner (the checkpoint's order)."""

    def __init__(self, f0, f1, levels: int, radius: int):
        b, c, h, w = f0.shape
        corr = torch.einsum("bcp,bcq->bpq", f0.flatten(2), f1.flatten(2)) / math.sqrt(c)   # (B, HW0, HW1)
        self.pyr0 = [corr.reshape(b * h * w, 1, h, w)]
        self.pyr1 = [corr.transpose(1, 2).reshape(b * h * w, 1, h, w)]
        for _ in range(levels - 1):
            self.pyr0.append(F.avg_pool2d(self.pyr0[-1], 2, 2))
            self.pyr1.append(F.avg_pool2d(self.pyr1[-1], 2, 2))
        r = torch.arange(-radius, radius + 1, dtype=torch.float32, device=f0.device)
        ox, oy = torch.meshgrid(r, r, indexing="ij")          # window (i, j): x offset r_i, y offset r_j
        self.offsets = torch.stack([ox, oy], -1)             # (2r+1, 2r+1, 2)

    def _look(self, pyr, coords):
        b, _, h, w = coords.shape
        centre = coords.permute(0, 2, 3, 1).reshape(b * h * w, 1, 1, 2)
        out = [_sample(level, centre / 2 ** i + self.offsets, "zeros").reshape(b, h, w, -1)
               for i, level in enumerate(pyr)]
        return torch.cat(out, -1).permute(0, 3, 1, 2).contiguous().float()

    def lookup(self, c0, c1):
        return self._look(self.pyr0, c0), self._look(self.pyr1, c1)


# --- context encoder, decoders, update blocks ----------------------------------------------------------------

def _conv_prelu(cin: int, cout: int, k: int = 3, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2), nn.PReLU(cout))


class ContextEncoder(nn.Module):
    def __init__(self, widths: tuple[int, ...]):
        super().__init__()
        self.n = len(widths)
        cin = 3
        for i, c in enumerate(widths, 1):
            setattr(self, f"pyramid{i}", nn.Sequential(_conv_prelu(cin, c, 3, 2), _conv_prelu(c, c)))
            cin = c

    def forward(self, x):
        feats = []
        for i in range(1, self.n + 1):
            x = getattr(self, f"pyramid{i}")(x)
            feats.append(x)
        return feats


class SideResBlock(nn.Module):
    """A residual block whose last ``side`` channels get an extra 3x3 conv after each of its first two convs."""

    def __init__(self, c: int, side: int):
        super().__init__()
        self.side = side
        self.conv1, self.conv3 = _conv_prelu(c, c), _conv_prelu(c, c)
        self.conv2, self.conv4 = _conv_prelu(side, side), _conv_prelu(side, side)
        self.conv5 = nn.Conv2d(c, c, 3, padding=1)
        self.prelu = nn.PReLU(c)

    def _side(self, y, conv):
        return torch.cat([y[:, :-self.side], conv(y[:, -self.side:])], 1)

    def forward(self, x):
        y = self.conv3(self._side(self.conv1(x), self.conv2))
        y = self.conv5(self._side(y, self.conv4))
        return self.prelu(x + y)


def _decoder_block(cin: int, mid: int, side: int, cout: int) -> nn.Sequential:
    return nn.Sequential(_conv_prelu(cin, mid), SideResBlock(mid, side), nn.ConvTranspose2d(mid, cout, 4, 2, 1))


class InitDecoder(nn.Module):
    """Both frames' coarsest features and the time-step map -> flows t->0, t->1 and the feature, one level up."""

    def __init__(self, c: int, cout: int, side: int):
        super().__init__()
        self.convblock = _decoder_block(2 * c + 1, 2 * c, side, cout + 4)

    def forward(self, f0, f1, t):
        b, _, h, w = f0.shape
        out = self.convblock(torch.cat([f0, f1, t.expand(b, 1, h, w)], 1))
        return out[:, 0:2], out[:, 2:4], out[:, 4:]


class IntermediateDecoder(nn.Module):
    """The feature, both frames' features warped by the flows, the flows -> refined flows and feature, 2x."""

    def __init__(self, c: int, cout: int, side: int):
        super().__init__()
        self.convblock = _decoder_block(3 * c + 4, 3 * c, side, cout + 4)

    def forward(self, ft, f0, f1, flow0, flow1):
        out = self.convblock(torch.cat([ft, warp(f0, flow0), warp(f1, flow1), flow0, flow1], 1))
        return out[:, 0:2] + 2.0 * _up(flow0, 2.0), out[:, 2:4] + 2.0 * _up(flow1, 2.0), out[:, 4:]


class MultiFlowDecoder(nn.Module):
    """The last level: num_flows flow pairs (residuals on the upsampled flow), blend masks, image residuals."""

    def __init__(self, c: int, side: int, n: int):
        super().__init__()
        self.n = n
        self.convblock = _decoder_block(3 * c + 4, 3 * c, side, 8 * n)

    def forward(self, ft, f0, f1, flow0, flow1):
        n = self.n
        out = self.convblock(torch.cat([ft, warp(f0, flow0), warp(f1, flow1), flow0, flow1], 1))
        d0, d1, mask, res = torch.split(out, [2 * n, 2 * n, n, 3 * n], 1)
        flow0 = d0 + (2.0 * _up(flow0, 2.0)).repeat(1, n, 1, 1)
        flow1 = d1 + (2.0 * _up(flow1, 2.0)).repeat(1, n, 1, 1)
        return flow0, flow1, torch.sigmoid(mask), res


class UpdateBlock(nn.Module):
    """Correlation + flows -> motion features -> a 2-conv recurrent-style step on [motion, flows, feature] ->
    feature and flow residuals. ``factor``: the level's resolution over 1/8 (its feature is brought to 1/8 and
    the residuals back up; flow residuals scaled by it)."""

    def __init__(self, cdim: int, wd: Widths, factor: int | None):
        super().__init__()
        self.factor = factor
        planes = 2 * wd.levels * (2 * wd.radius + 1) ** 2
        self.convc1 = nn.Conv2d(planes, wd.corr_dim, 1)
        self.convf1 = nn.Conv2d(4, 2 * wd.flow_dim, 7, padding=3)
        self.convf2 = nn.Conv2d(2 * wd.flow_dim, wd.flow_dim, 3, padding=1)
        self.conv = nn.Conv2d(wd.corr_dim + wd.flow_dim, wd.fc_dim, 3, padding=1)

        def two(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, wd.hidden, 3, padding=1), nn.LeakyReLU(0.1),
                                 nn.Conv2d(wd.hidden, cout, 3, padding=1))
        self.gru = two(wd.fc_dim + 4 + cdim, wd.hidden)
        self.feat_head = two(wd.hidden, cdim)
        self.flow_head = two(wd.hidden, 4)

    def forward(self, feat, flow, corr):
        act = lambda x: F.leaky_relu(x, 0.1)  # noqa: E731
        if self.factor:
            feat = _up(feat, 1.0 / self.factor)
        motion = act(self.conv(torch.cat([act(self.convc1(corr)), act(self.convf2(act(self.convf1(flow))))], 1)))
        h = self.gru(torch.cat([motion, flow, feat], 1))
        d_feat, d_flow = self.feat_head(h), self.flow_head(h)
        if self.factor:
            d_feat, d_flow = _up(d_feat, self.factor), self.factor * _up(d_flow, self.factor)
        return d_feat, d_flow


class AMT(nn.Module):
    """AMT at the given widths; ``AMT(AMT_S)`` is the network of amt-s.pth. forward(img0, img1, t, scale) ->
    the frame at time t, (B, 3, H, W) in [0, 1]."""

    def __init__(self, wd: Widths = AMT_S):
        super().__init__()
        self.wd = wd
        c = wd.enc
        self.feat_encoder = FeatureEncoder(wd)
        self.encoder = ContextEncoder(c)
        self.decoder4 = InitDecoder(c[3], c[2], wd.skip)
        self.decoder3 = IntermediateDecoder(c[2], c[1], wd.skip)
        self.decoder2 = IntermediateDecoder(c[1], c[0], wd.skip)
        self.decoder1 = MultiFlowDecoder(c[0], wd.skip, wd.num_flows)
        self.update4 = UpdateBlock(c[2], wd, None)
        self.update3 = UpdateBlock(c[1], wd, 2)
        self.update2 = UpdateBlock(c[0], wd, 4)
        n = wd.num_flows
        self.comb_block = nn.Sequential(nn.Conv2d(3 * n, 6 * n, 3, 1, 1), nn.PReLU(6 * n), nn.Conv2d(6 * n, 3, 3, 1, 1))

    def _refine(self, update, corr, grid, ft, flow0, flow1, t, down: int):
        """Look the correlation up where the level's flows (brought to 1/8) point, apply the update block."""
        f0, f1 = (flow0, flow1) if down == 1 else (_up(flow0, 1 / down) / down, _up(flow1, 1 / down) / down)
        c0, c1 = corr.lookup(grid + f1 / t, grid + f0 / (1 - t))
        d_ft, d_flow = update(ft, torch.cat([f0, f1], 1), torch.cat([c0, c1], 1))
        return ft + d_ft, flow0 + d_flow[:, :2], flow1 + d_flow[:, 2:]

    def forward(self, img0, img1, t, scale: float = 1.0):
        t = torch.as_tensor(t, dtype=img0.dtype, device=img0.device).reshape(1, 1, 1, 1)
        mean = torch.cat([img0, img1], 2).mean(1, keepdim=True).mean(2, keepdim=True).mean(3, keepdim=True)
        img0, img1 = img0 - mean, img1 - mean
        x0, x1 = (img0, img1) if scale == 1.0 else (_up(img0, scale), _up(img1, scale))
        b, _, h, w = x0.shape
        grid = _pixel_grid(b, h // 8, w // 8, x0.device)
        fmap0, fmap1 = self.feat_encoder(torch.cat([x0, x1])).chunk(2)
        corr = CorrPyramid(fmap0, fmap1, self.wd.levels, self.wd.radius)
        e0, e1 = self.encoder(x0), self.encoder(x1)

        flow0, flow1, ft = self.decoder4(e0[3], e1[3], t)
        ft, flow0, flow1 = self._refine(self.update4, corr, grid, ft, flow0, flow1, t, 1)
        flow0, flow1, ft = self.decoder3(ft, e0[2], e1[2], flow0, flow1)
        ft, flow0, flow1 = self._refine(self.update3, corr, grid, ft, flow0, flow1, t, 2)
        flow0, flow1, ft = self.decoder2(ft, e0[1], e1[1], flow0, flow1)
        ft, flow0, flow1 = self._refine(self.update2, corr, grid, ft, flow0, flow1, t, 4)
        flow0, flow1, mask, res = self.decoder1(ft, e0[0], e1[0], flow0, flow1)
        if scale != 1.0:
            flow0, flow1 = _up(flow0, 1 / scale) / scale, _up(flow1, 1 / scale) / scale
            mask, res = _up(mask, 1 / scale), _up(res, 1 / scale)
        return self._combine(img0, img1, flow0, flow1, mask, res, mean).clamp(0, 1)

    def _combine(self, img0, img1, flow0, flow1, mask, res, mean):
        """Each field k: mask_k x img0 warped by flow0_k + (1 - mask_k) x img1 warped by flow1_k + mean + res_k;
        the frame: the candidates' mean + comb_block(the candidates)."""
        n = self.wd.num_flows
        b, _, h, w = flow0.shape
        rep = lambda x: x.repeat_interleave(n, 0)  # noqa: E731   (b*n, ...), field-minor
        w0 = warp(rep(img0), flow0.reshape(b * n, 2, h, w))
        w1 = warp(rep(img1), flow1.reshape(b * n, 2, h, w))
        m = mask.reshape(b * n, 1, h, w)
        cand = (m * w0 + (1 - m) * w1 + rep(mean) + res.reshape(b * n, 3, h, w)).reshape(b, n, 3, h, w)
        return cand.mean(1) + self.comb_block(cand.reshape(b, 3 * n, h, w))


# --- VBench's use: the padding, the scale, the frame conversion -------------------------------------------------

def vbench_scale(h: int, w: int, device: str = "cpu") -> float:
    """MotionSmoothness.initialization + motion_score: on CUDA, frames whose size over 1024x512 exceeds what the
    card's memory allows (1500 MiB per anchor, 2500 MiB reserved) are shrunk; on CPU never. The scale is snapped
    to 16 / an integer."""
    if device.startswith("cuda"):
        avail = torch.cuda.get_device_properties(device).total_memory
        s = 1024 * 512 / (h * w) * np.sqrt((avail - 2500 * 1024 ** 2) / (1500 * 1024 ** 2))
    else:
        s = 8192 * 8192 / (h * w)
    s = min(s, 1.0)
    return float(16 / np.floor(16 / np.sqrt(s)))


def pad_amounts(h: int, w: int, divisor: int) -> tuple[int, int, int, int]:
    """InputPadder: (left, right, top, bottom) replicate padding up to multiples of divisor, split evenly."""
    ph, pw = -h % divisor, -w % divisor
    return pw // 2, pw - pw // 2, ph // 2, ph - ph // 2


class Interpolator:
    """VBench's motion_smoothness call, one frame pair at a time: uint8 RGB frames -> /255 -> replicate-padded
    to multiples of int(16 / scale) -> the network at t = 1/2 -> unpadded -> x255, clipped, truncated to uint8."""

    def __init__(self, model: AMT, device: str = "cpu"):
        self.model, self.device = model.eval().to(device), device
        self._geom: dict = {}

    def _geometry(self, h: int, w: int):
        if (h, w) not in self._geom:
            scale = vbench_scale(h, w, self.device)
            self._geom[(h, w)] = (scale, pad_amounts(h, w, int(16 / scale)))
        return self._geom[(h, w)]

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        h, w = a.shape[:2]
        scale, (l, r, t, btm) = self._geometry(h, w)
        x = torch.from_numpy(np.stack([a, b])[..., :3]).permute(0, 3, 1, 2).to(self.device) / 255.0
        x = F.pad(x, [l, r, t, btm], mode="replicate")
        with torch.no_grad():
            y = self.model(x[0:1], x[1:2], TIME_STEP, scale)
        y = y[0, :, t:t + h, l:l + w]
        return (y * 255.0).permute(1, 2, 0).cpu().numpy().clip(0, 255).astype(np.uint8)


# --- building -----------------------------------------------------------------------------------------------

def load_amt_s(path, device: str = "cpu") -> AMT:
    """AMT-S with VBench's checkpoint (amt-s.pth: {'state_dict': ...}), strictly by name."""
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    model = AMT(AMT_S)
    model.load_state_dict(ckpt.get("state_dict", ckpt) if isinstance(ckpt, dict) else ckpt, strict=True)
    return model.eval().to(device)


def tiny_model(seed: int = 0) -> AMT:
    """The AMT architecture at tiny widths (``TINY``), random weights from ``seed``: not AMT-S's interpolations."""
    with torch.random.fork_rng(devices=[]):        # leaves the caller's RNG stream as it was
        torch.manual_seed(seed)
        return AMT(TINY).eval()
