"""3D-UNet models: the real MLPerf KiTS19 ONNX (downloaded from Zenodo, pinned md5) and the tiny seeded one.

Both expose the reference ONNX interface: input ``input`` (N, 1, R, R, R) float32, output ``output``
(N, 3, R, R, R) float32 logits (background, kidney, tumour), with a dynamic batch axis (the
reference's ``_dynbatch`` export). R = 128 for the real model, 32 for the tiny one.

The topology is the MLPerf-Training 3D-UNet the reference checkpoint comes from: an input block of
two 3x3x3 conv + instance norm + leaky ReLU, one strided-conv downsample block per filter step, a
bottleneck, transposed-conv upsample blocks concatenating the skips, and a 1x1x1 output conv. The
real model has filters (32, 64, 128, 256, 320); the tiny one (4, 8, 16), so a 32^3 patch goes down
to 4^3 as a 128^3 one goes down to 4^3 in the real model.
"""
from __future__ import annotations

import warnings
from pathlib import Path

from code.common.fileio import download, staged_path, write_json

INPUT = "input"
OUTPUT = "output"
ONNX_NAME = "3dunet_kits19_128x128x128_dynbatch.onnx"     # the reference's dynamic-batch export
TORCH_NAME = "3dunet_kits19_pytorch.ptc"                    # TorchScript, for --backend=pytorch
# file name -> (url, md5), both from Zenodo record 5597155. md5s pinned from mlcommons/mlperf-automations
# script/get-ml-model-3d-unet-kits19/meta.yaml, variations "onnx,fp32" and "pytorch,fp32"
# (MLC_DOWNLOAD_CHECKSUM next to these URLs).
DOWNLOADS = {
    ONNX_NAME: ("https://zenodo.org/records/5597155/files/3dunet_kits19_128x128x128_dynbatch.onnx?download=1",
                "82f0618fde78f9839e7c712274019b4a"),
    TORCH_NAME: ("https://zenodo.org/records/5597155/files/3dunet_kits19_pytorch.ptc?download=1",
                 "2251109371f408c9f10a4320ffdcaef8"),
}
REAL_ROI = 128
TINY_ROI = 32
TINY_FILTERS = (4, 8, 16)
REAL_FILTERS = (32, 64, 128, 256, 320)
TINY_SEED = 20261201
TINY_WEIGHTS = "tiny_unet3d.pt"


def _torch_classes():
    import torch
    from torch import nn

    def conv(cin, cout, stride=1):
        return nn.Sequential(nn.Conv3d(cin, cout, 3, stride=stride, padding=1, bias=False),
                             nn.InstanceNorm3d(cout, affine=True), nn.LeakyReLU(0.01, inplace=True))

    class Down(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.conv1, self.conv2 = conv(cin, cout, 2), conv(cout, cout)

        def forward(self, x):
            return self.conv2(self.conv1(x))

    class Up(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.up = nn.ConvTranspose3d(cin, cout, 2, stride=2)
            self.conv1, self.conv2 = conv(2 * cout, cout), conv(cout, cout)

        def forward(self, x, skip):
            return self.conv2(self.conv1(torch.cat([self.up(x), skip], dim=1)))

    class UNet3D(nn.Module):
        def __init__(self, filters=REAL_FILTERS, in_channels=1, classes=3):
            super().__init__()
            f = list(filters)
            self.input_block = nn.Sequential(conv(in_channels, f[0]), conv(f[0], f[0]))
            self.downsample = nn.ModuleList([Down(a, b) for a, b in zip(f[:-1], f[1:])])
            self.bottleneck = Down(f[-1], f[-1])
            ups = [Up(f[-1], f[-1])] + [Up(a, b) for a, b in zip(reversed(f[1:]), reversed(f[:-1]))]
            self.upsample = nn.ModuleList(ups)
            self.output = nn.Conv3d(f[0], classes, 1)

        def forward(self, x):
            x = self.input_block(x)
            skips = [x]
            for d in self.downsample:
                x = d(x)
                skips.append(x)
            x = self.bottleneck(x)
            for u, s in zip(self.upsample, reversed(skips)):
                x = u(x, s)
            return self.output(x)

    return UNet3D


def UNet3D(filters=REAL_FILTERS):  # noqa: N802 - a factory that keeps torch out of module import
    return _torch_classes()(filters)


def tiny_torch_model():
    """The tiny 3D-UNet with seeded weights, its output bias centred (see _calibrate)."""
    import torch

    torch.manual_seed(TINY_SEED)
    net = UNet3D(TINY_FILTERS).eval()
    _calibrate(net)
    return net


def _calibrate(net) -> None:
    """Centre the output conv on seeded calibration patches (not the evaluation set): subtract each
    class's mean logit so the argmax spreads over all three classes instead of one (a DICE check on
    a network that predicts background everywhere would be vacuous)."""
    import numpy as np
    import torch

    from code.unet3d.dataset import synthetic_case

    rng = np.random.default_rng(TINY_SEED + 7)
    xs = []
    for _ in range(4):
        img, _, _ = synthetic_case(rng)
        from code.unet3d.dataset import normalize

        v = normalize(img.astype(np.float32))
        d, h, w = (min(s, TINY_ROI) for s in v.shape)
        patch = np.full((TINY_ROI,) * 3, float(v.min()), np.float32)
        patch[:d, :h, :w] = v[:d, :h, :w]
        xs.append(patch)
    x = torch.from_numpy(np.stack(xs)[:, None])
    with torch.no_grad():
        y = net(x)
        net.output.bias.sub_(y.mean(dim=(0, 2, 3, 4)))
        y = net(x)
        # scale the spread so no class dominates: background gets a small head start (as in CT)
        net.output.bias[0].add_(0.25 * float(y.std()))


def build_tiny(model_dir: Path, log=print) -> Path:
    """Seeded tiny model: weights (.pt) and a dynamic-batch ONNX export with the reference's names."""
    import torch

    net = tiny_torch_model()
    model_dir.mkdir(parents=True, exist_ok=True)
    with staged_path(model_dir / TINY_WEIGHTS, suffix=".pt") as tmp:
        torch.save(net.state_dict(), tmp)
    dest = model_dir / ONNX_NAME
    x = torch.zeros(2, 1, TINY_ROI, TINY_ROI, TINY_ROI)
    with staged_path(dest, suffix=".onnx") as tmp, warnings.catch_warnings():
        # InstanceNorm3d without running stats normalises with the input's statistics in eval mode
        # too, which is what the exporter's "train=True" warning is about: expected here.
        warnings.filterwarnings("ignore", message=".*instance_norm.*")
        torch.onnx.export(net, (x,), str(tmp), input_names=[INPUT], output_names=[OUTPUT],
                          dynamic_axes={INPUT: {0: "batch_size"}, OUTPUT: {0: "batch_size"}},
                          opset_version=17, dynamo=False)
    write_json(model_dir / "model.json", {"variant": "tiny", "seed": TINY_SEED, "roi": TINY_ROI,
                                          "filters": list(TINY_FILTERS)})
    log(f"[download_model] built tiny 3D-UNet (filters {TINY_FILTERS}, {TINY_ROI}^3 patches) -> {dest}")
    return dest


def load_tiny_torch(model_dir: Path):
    import torch

    net = UNet3D(TINY_FILTERS)
    net.load_state_dict(torch.load(Path(model_dir) / TINY_WEIGHTS, weights_only=True))
    return net.eval()


def download_real(model_dir: Path, with_torch: bool = False, log=print) -> Path:
    """The reference's dynamic-batch ONNX (and, for the pytorch backend, its TorchScript) from Zenodo,
    each checked against its pinned md5 (a mismatch: one-line error, file discarded); resumable."""
    for name in [ONNX_NAME] + ([TORCH_NAME] if with_torch else []):
        url, md5 = DOWNLOADS[name]
        fix = (f"check network access and rerun make download_model BENCHMARKS=unet3d, or place {name} "
               f"({url}, md5 {md5}) at {model_dir / name} by hand")
        log(f"[download_model] {url} -> {model_dir / name} (md5 {md5})")
        download(url, model_dir / name, md5=md5, fix=fix, timeout=120)
    return model_dir / ONNX_NAME


def eager_factory(source_dir, spec, device, dtype):
    """--backend=pytorch (code.common.backends.pytorch eager format): the tiny weights when the model
    folder holds them, else the reference's TorchScript (3dunet_kits19_pytorch.ptc, which
    download_model fetches too when --backend=pytorch)."""
    import torch

    from code.common.errors import MissingDataError

    d = Path(source_dir)
    if (d / TINY_WEIGHTS).exists():
        net = load_tiny_torch(d)
    elif (d / TORCH_NAME).exists():
        net = torch.jit.load(str(d / TORCH_NAME), map_location="cpu").eval()
    else:
        raise MissingDataError(f"no torch model in {d} ({TORCH_NAME})",
                               'make download_model BENCHMARKS=unet3d RUN_ARGS="--backend=pytorch"')
    return net.to(dtype), [INPUT], [OUTPUT]
