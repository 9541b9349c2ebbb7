"""ResNet50 models: the real MLPerf ONNX (downloaded) and the tiny seeded variant (built here).

Both expose the same interface as the MLPerf resnet50_v1.onnx: input ``input_tensor:0`` (N,3,H,W)
float32 mean-subtracted, outputs ``ArgMax:0`` (N,) int64 over 1001 classes (0 = background, so
ImageNet label = argmax - 1) and ``softmax_tensor:0`` (N,1001).
"""
from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from code.common.errors import HarnessError
from code.common.fileio import download, mirrored, staged_path, write_json

INPUT = "input_tensor:0"
OUTPUTS = ("ArgMax:0", "softmax_tensor:0")
# MLPerf ResNet50-v1.5 ONNX, opset 11 (what the reference README links).
ZENODO_RECORD = "4735647"
ONNX_NAME = "resnet50_v1.onnx"
TINY_SEED = 20261130
TINY_CROP = 64
REAL_CROP = 224


def zenodo_md5(record: str, name: str) -> tuple[str, str]:
    """(download url, md5) for a file of a Zenodo record, from Zenodo's own record API."""
    api = f"https://zenodo.org/api/records/{record}"
    try:
        with urllib.request.urlopen(mirrored(api), timeout=60) as r:
            meta = json.load(r)
    except Exception as e:
        raise HarnessError(f"could not read {api}: {type(e).__name__}: {e}",
                           "check network access, or place the model file by hand", 3) from None
    for f in meta.get("files", []):
        if f.get("key") == name:
            algo, _, digest = f["checksum"].partition(":")
            if algo != "md5":
                raise HarnessError(f"unexpected checksum type {algo} for {name}", "report this", 3)
            return f["links"]["self"], digest
    raise HarnessError(f"{name} not found in Zenodo record {record}", "report this", 3)


def download_real(model_dir: Path, log=print) -> Path:
    dest = model_dir / ONNX_NAME
    url, md5 = zenodo_md5(ZENODO_RECORD, ONNX_NAME)
    log(f"[download_model] {url} -> {dest} (md5 {md5})")
    download(url, dest, md5=md5, fix="make download_model BENCHMARKS=resnet50")
    return dest


def tiny_torch_model():
    """ResNet-v1.5 bottleneck family, one block per stage, 1001 classes; weights from TINY_SEED."""
    import torch
    from torchvision.models.resnet import Bottleneck, ResNet

    torch.manual_seed(TINY_SEED)
    net = ResNet(Bottleneck, [1, 1, 1, 1], num_classes=1001)
    # Random BN statistics so activations stay O(1) and predictions spread over classes.
    g = torch.Generator().manual_seed(TINY_SEED + 1)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
    _calibrate_head(net)
    return WithArgmax(net).eval()


def synthetic_image(rng) -> "np.ndarray":
    """One seeded synthetic RGB image (HWC uint8, 64-111 px a side): smooth colour field plus noise."""
    import numpy as np
    from PIL import Image

    h, w = rng.integers(64, 112, size=2)
    base = rng.integers(0, 256, size=(4, 4, 3)).astype(np.uint8)
    img = np.asarray(Image.fromarray(base).resize((int(w), int(h)), Image.Resampling.BICUBIC))
    return np.clip(img.astype(np.int16) + rng.integers(-20, 21, size=img.shape), 0, 255).astype(np.uint8)


def _calibrate_head(net) -> None:
    """Centre the classifier on the mean feature of 256 seeded calibration images (not the eval set).
    Without it a random network predicts one class for nearly every input; with it predictions
    spread over hundreds of classes, so top-1 agreement is a meaningful fidelity check."""
    import numpy as np
    import torch
    from PIL import Image

    rng = np.random.default_rng(TINY_SEED + 2)
    means = torch.tensor([123.68, 116.78, 103.94]).view(1, 3, 1, 1)
    imgs = [np.asarray(Image.fromarray(synthetic_image(rng)).resize((TINY_CROP, TINY_CROP))) for _ in range(256)]
    x = torch.from_numpy(np.stack(imgs).transpose(0, 3, 1, 2).astype(np.float32)) - means
    trunk = torch.nn.Sequential(*list(net.children())[:-1]).eval()
    with torch.no_grad():
        mu = trunk(x).flatten(1).mean(0)
        net.fc.bias.sub_(net.fc.weight @ mu)


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
                                          "arch": "ResNet(Bottleneck,[1,1,1,1]) 1001 classes"})
    log(f"[download_model] built tiny resnet50 -> {dest}")
    return dest


def load_tiny_torch(model_dir: Path):
    import torch

    net = tiny_torch_model()
    net.load_state_dict(torch.load(model_dir / "tiny_resnet50.pt", weights_only=True))
    return net.eval()
