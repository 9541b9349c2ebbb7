"""ResNet50 models: the real MLPerf ONNX (downloaded) and the tiny seeded variant (built here).

Both expose the same interface as the MLPerf resnet50_v1.onnx: input ``input_tensor:0`` (N,3,H,W)
float32 mean-subtracted, outputs ``ArgMax:0`` (N,) int64 over 1001 classes (0 = background, so
ImageNet label = argmax - 1) and ``softmax_tensor:0`` (N,1001).
"""
from __future__ import annotations

import functools
from pathlib import Path

from code.common.fileio import download, staged_path, write_json

INPUT = "input_tensor:0"
OUTPUTS = ("ArgMax:0", "softmax_tensor:0")
ONNX_NAME = "resnet50_v1.onnx"
# file name -> (url, md5). The MLPerf ResNet50-v1.5 ONNX, opset 11, that the reference README links
# (Zenodo record 4735647). md5 pinned from mlcommons/mlperf-automations script/get-ml-model-resnet50/meta.yaml,
# variation "onnx,opset-11" (MLC_DOWNLOAD_CHECKSUM, listed there with this Zenodo URL as a mirror).
DOWNLOADS = {ONNX_NAME: ("https://zenodo.org/records/4735647/files/resnet50_v1.onnx?download=1",
                         "f6a4da60cd5f084d97efc2c1ddb10beb")}
TINY_SEED = 20261130
TINY_CROP = 64
TINY_CLASSES = 256         # prototype classes of the tiny set (code below: _prototype_head)
TINY_JITTER = 24           # per-cell colour jitter around a prototype: how many images lie near a class boundary
REAL_CROP = 224


def download_real(model_dir: Path, log=print) -> Path:
    """The MLPerf ONNX, checked against the pinned md5 (a mismatch: one-line error, file discarded)."""
    dest = model_dir / ONNX_NAME
    url, md5 = DOWNLOADS[ONNX_NAME]
    log(f"[download_model] {url} -> {dest} (md5 {md5})")
    download(url, dest, md5=md5, fix="make download_model BENCHMARKS=resnet50")
    return dest


def tiny_torch_model():
    """ResNet-v1.5 bottleneck family, one block per stage, 1001 classes; weights from TINY_SEED."""
    import torch
    from torchvision.models.resnet import Bottleneck, ResNet

    torch.manual_seed(TINY_SEED)
    net = ResNet(Bottleneck, [1, 1, 1, 1], num_classes=1001)
    # Random BN statistics so activations stay O(1).
    g = torch.Generator().manual_seed(TINY_SEED + 1)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
    _prototype_head(net)
    return WithArgmax(net).eval()


@functools.lru_cache(maxsize=1)
def prototypes() -> tuple["np.ndarray", "np.ndarray"]:
    """The tiny set's TINY_CLASSES class prototypes (4x4 RGB colour fields) and the ImageNet class
    (1..1000 in the 1001-way output) each one stands for; seeded."""
    import numpy as np

    rng = np.random.default_rng(TINY_SEED + 3)
    return rng.integers(0, 256, size=(TINY_CLASSES, 4, 4, 3)), rng.choice(np.arange(1, 1001), TINY_CLASSES, replace=False)


def _render(base, h: int, w: int) -> "np.ndarray":
    import numpy as np
    from PIL import Image

    return np.asarray(Image.fromarray(np.clip(base, 0, 255).astype(np.uint8)).resize((w, h), Image.Resampling.BICUBIC))


def synthetic_image(rng) -> "np.ndarray":
    """One seeded synthetic RGB image (HWC uint8, 64-111 px a side): a class prototype's colour field,
    jittered by up to TINY_JITTER per cell, upsampled, plus pixel noise."""
    import numpy as np

    protos, _ = prototypes()
    k = rng.integers(len(protos))
    h, w = rng.integers(64, 112, size=2)
    img = _render(protos[k] + rng.integers(-TINY_JITTER, TINY_JITTER + 1, size=(4, 4, 3)), int(h), int(w))
    return np.clip(img.astype(np.int16) + rng.integers(-20, 21, size=img.shape), 0, 255).astype(np.uint8)


def _prototype_batch():
    """The prototypes rendered at the crop size, mean-subtracted: a float32 NCHW torch batch."""
    import numpy as np
    import torch

    protos, _ = prototypes()
    means = torch.tensor([123.68, 116.78, 103.94]).view(1, 3, 1, 1)
    side = int(100.0 * TINY_CROP / 87.5)      # as code.resnet50.dataset.preprocess_image sees an image: the
    o = (side - TINY_CROP) // 2                # short side scaled to crop/0.875, then the centre crop
    imgs = [_render(p, side, side)[o:o + TINY_CROP, o:o + TINY_CROP] for p in protos]
    return torch.from_numpy(np.stack(imgs).transpose(0, 3, 1, 2).astype(np.float32)) - means


def _prototype_head(net) -> None:
    """Make the classifier a nearest-prototype one: the row of each prototype's class is the unit
    direction of its (centred) feature, scaled; the other classes' rows shrink to near zero.

    A random head on a random trunk predicts by margins far below any quantization noise (int8 agreed
    with fp32 on 76% of images), unlike a trained ResNet50, whose top-1 stands well clear. With this
    head the tiny model behaves like a trained one: predictions spread over ~250 classes, images near
    a class boundary are rare (the jitter sets how rare), so int8-vs-fp32 top-1 agreement means what
    it means for the real model."""
    import torch

    _, classes = prototypes()
    x = _prototype_batch()
    trunk = torch.nn.Sequential(*list(net.children())[:-1]).eval()
    with torch.no_grad():
        f = trunk(x).flatten(1)
        mu = f.mean(0)
        c = f - mu
        net.fc.weight.mul_(0.01)
        net.fc.weight[torch.from_numpy(classes)] = c / c.norm(dim=1, keepdim=True) * 10
        net.fc.bias.copy_(-(net.fc.weight @ mu))


def _with_argmax():
    import torch

    class WithArgmaxImpl(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            logits = self.net(x)
            return torch.argmax(logits, dim=1), torch.softmax(logits, dim=1)

    return WithArgmaxImpl


def WithArgmax(net):  # noqa: N802 - factory that keeps torch out of module import
    return _with_argmax()(net)


def build_tiny(model_dir: Path, log=print) -> Path:
    """Build the seeded tiny model and export it to ONNX with a dynamic batch axis."""
    import torch

    dest = model_dir / ONNX_NAME
    net = tiny_torch_model()
    model_dir.mkdir(parents=True, exist_ok=True)
    with staged_path(model_dir / "tiny_resnet50.pt", suffix=".pt") as tmp:
        torch.save(net.state_dict(), tmp)
    x = torch.zeros(1, 3, TINY_CROP, TINY_CROP)
    with staged_path(dest, suffix=".onnx") as tmp:
        torch.onnx.export(net, (x,), str(tmp), input_names=[INPUT], output_names=list(OUTPUTS),
                          dynamic_axes={INPUT: {0: "batch"}, OUTPUTS[0]: {0: "batch"}, OUTPUTS[1]: {0: "batch"}},
                          opset_version=17, dynamo=False)
    write_json(model_dir / "model.json", {"variant": "tiny", "seed": TINY_SEED, "crop": TINY_CROP,
                                          "arch": "ResNet(Bottleneck,[1,1,1,1]) 1001 classes",
                                          "head": f"nearest prototype, {TINY_CLASSES} classes"})
    log(f"[download_model] built tiny resnet50 -> {dest}")
    return dest


def export_random_full(dest: Path, seed: int = 0) -> Path:
    """The full-size ResNet50-v1.5 architecture (torchvision, 1001 classes) with seeded random weights,
    exported with the MLPerf ONNX interface at REAL_CROP and a dynamic batch axis: the real model's shape
    and cost where its weights cannot be had (scripts/bench_harness.py, scripts/gpu_check.py)."""
    import torch
    import torchvision

    torch.manual_seed(seed)
    net = WithArgmax(torchvision.models.resnet50(num_classes=1001)).eval()
    with staged_path(dest, suffix=".onnx") as tmp:
        torch.onnx.export(net, (torch.zeros(1, 3, REAL_CROP, REAL_CROP),), str(tmp), input_names=[INPUT],
                          output_names=list(OUTPUTS), opset_version=17, dynamo=False,
                          dynamic_axes={INPUT: {0: "b"}, OUTPUTS[0]: {0: "b"}, OUTPUTS[1]: {0: "b"}})
    return dest


def load_tiny_torch(model_dir: Path):
    import torch

    net = tiny_torch_model()
    net.load_state_dict(torch.load(model_dir / "tiny_resnet50.pt", weights_only=True))
    return net.eval()
