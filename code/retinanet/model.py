"""RetinaNet models: the real MLPerf ONNX (downloaded) and the tiny seeded variant (built here).

Both follow the MLPerf ``resnext50_32x4d_fpn.onnx`` interface: input ``images`` (1, 3, S, S) float32
RGB in [0, 1] (the ImageNet normalisation is inside the model, as in torchvision's
GeneralizedRCNNTransform), outputs ``boxes`` (N, 4) xmin, ymin, xmax, ymax in input pixels,
``scores`` (N,) sorted in decreasing order, ``labels`` (N,) int64 in 0..263 (the OpenImages
category ids of the MLPerf annotations). Inside: per FPN level the top 1000 candidates above score
0.05, class-wise NMS at IoU 0.5, at most 300 detections (torchvision RetinaNet, the MLPerf settings).

Two ways to run it (``retinanet_postprocess``):
  model  the whole graph above in the engine (ONNX Runtime, pytorch): what the reference runs;
  host   the engine runs normalisation, backbone, FPN and heads only, with fixed-shape outputs
         ``cls_logits`` (1, A, 264) and ``bbox_regression`` (1, A, 4) (A = all anchors), and the
         decode / top-k / NMS above runs on the host with torchvision's own RetinaNet code
         (``HostPostprocess``). TensorRT needs this: the harness's TensorRT runtime holds outputs
         whose shape follows from the inputs only. The head-only ONNX is cut out of the full one
         (``cut_headless``), so both ways run the same weights.

Tiny variant: torchvision's RetinaNet head (9 anchors, 264 classes) and FPN with P6/P7 on a small
5-stage conv backbone, 256x256 inputs (anchor sizes scaled by 256/800), weights from TINY_SEED with
the classifier calibrated on seeded images that are not the evaluation set (per-class centring, then
a global offset so a few hundred (anchor, class) pairs per image pass the 0.05 threshold; without it
a random head predicts nothing, or one class everywhere).
"""
from __future__ import annotations

from pathlib import Path

from code.common.errors import HarnessError, MissingDataError
from code.common.fileio import download, staged_path, write_json

INPUT = "images"
OUTPUTS = ("boxes", "scores", "labels")
HEAD_OUTPUTS = ("cls_logits", "bbox_regression")
NUM_CLASSES = 264
NUM_ANCHORS = 9
SCORE_THRESH = 0.05          # the reference's PostProcessOpenImagesRetinanet threshold (and the model's)
DETECTIONS_PER_IMG = 300
TOPK_CANDIDATES = 1000
NMS_THRESH = 0.5
REAL_SIZE = 800
TINY_SIZE = 256
TINY_SEED = 20261201
TINY_FPN = 16
ONNX_NAME = "resnext50_32x4d_fpn.onnx"
PTH_NAME = "resnext50_32x4d_fpn.pth"
# file name -> (url, md5): the MLPerf RetinaNet ONNX (opset 13, converted from the MLPerf training
# checkpoint; Zenodo record 6617879) and that checkpoint (record 6617981). md5s pinned from
# mlcommons/mlperf-automations script/get-ml-model-retinanet/meta.yaml, variations "onnx,fp32" and
# "pytorch,fp32" (MLC_DOWNLOAD_CHECKSUM next to these Zenodo URLs).
DOWNLOADS = {
    ONNX_NAME: ("https://zenodo.org/records/6617879/files/resnext50_32x4d_fpn.onnx?download=1",
                "4544f4e56e0a4684215831cc937ea45c"),
    PTH_NAME: ("https://zenodo.org/records/6617981/files/resnext50_32x4d_fpn.pth?download=1",
               "a55f6bec3464f605ce8d686da8ac1533"),
}
HEADLESS_NAME = "retinanet_headless.onnx"
TINY_WEIGHTS = "tiny_retinanet.pt"


def input_size(variant: str) -> int:
    return TINY_SIZE if variant == "tiny" else REAL_SIZE


def anchor_sizes(size: int) -> tuple:
    k = size / REAL_SIZE
    return tuple((int(x * k), int(x * k * 2 ** (1.0 / 3)), int(x * k * 2 ** (2.0 / 3))) for x in (32, 64, 128, 256, 512))


# --- downloads ---------------------------------------------------------------------------------------

def download_real(model_dir: Path, with_checkpoint: bool = False, log=print) -> Path:
    """The MLPerf ONNX (and, for --backend=pytorch, the training checkpoint), each checked against its
    pinned md5 (a mismatch: one-line error, file discarded)."""
    fix = "make download_model BENCHMARKS=retinanet"
    for name in [ONNX_NAME] + ([PTH_NAME] if with_checkpoint else []):
        url, md5 = DOWNLOADS[name]
        log(f"[download_model] {url} -> {model_dir / name} (md5 {md5})")
        download(url, model_dir / name, md5=md5, fix=fix)
    return model_dir / ONNX_NAME


# --- torch models ------------------------------------------------------------------------------------

def _retinanet(backbone, size: int):
    from torchvision.models.detection import RetinaNet
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.retinanet import RetinaNetHead

    ag = AnchorGenerator(anchor_sizes(size), ((0.5, 1.0, 2.0),) * 5)
    head = RetinaNetHead(backbone.out_channels, NUM_ANCHORS, NUM_CLASSES)
    return RetinaNet(backbone, NUM_CLASSES, min_size=size, max_size=size, anchor_generator=ag, head=head,
                     score_thresh=SCORE_THRESH, nms_thresh=NMS_THRESH, detections_per_img=DETECTIONS_PER_IMG,
                     topk_candidates=TOPK_CANDIDATES)


def _tiny_backbone():
    import torch
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7

    def stage(i, o):
        return torch.nn.Sequential(torch.nn.Conv2d(i, o, 3, 2, 1, bias=False), torch.nn.BatchNorm2d(o),
                                   torch.nn.ReLU(inplace=True))

    body = torch.nn.Sequential()
    for name, (i, o) in zip(("stem", "layer1", "layer2", "layer3", "layer4"),
                            ((3, 16), (16, 24), (24, 32), (32, 48), (48, 64))):
        body.add_module(name, stage(i, o))
    return BackboneWithFPN(body, {"layer2": "0", "layer3": "1", "layer4": "2"}, [32, 48, 64], TINY_FPN,
                           extra_blocks=LastLevelP6P7(TINY_FPN, TINY_FPN))


def tiny_torch_model():
    """The seeded tiny RetinaNet (eval mode), calibrated (see the module docstring)."""
    import torch

    torch.manual_seed(TINY_SEED)
    net = _retinanet(_tiny_backbone(), TINY_SIZE).eval()
    g = torch.Generator().manual_seed(TINY_SEED + 1)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
    for c in net.head.classification_head.conv.modules():
        if isinstance(c, torch.nn.Conv2d):
            torch.nn.init.normal_(c.weight, std=(2 / (9 * TINY_FPN)) ** 0.5, generator=g)
    _calibrate(net)
    return net


def _calibrate(net) -> None:
    import numpy as np
    import torch

    from code.retinanet.dataset import synthetic_image, to_model_input

    rng = np.random.default_rng(TINY_SEED + 2)
    x = torch.from_numpy(np.stack([to_model_input(synthetic_image(rng)[0], TINY_SIZE) for _ in range(16)]))
    cls, reg = net.head.classification_head, net.head.regression_head
    with torch.no_grad():
        feats = list(net.backbone(net.transform.normalize(x)).values())
        cls.cls_logits.bias.zero_()
        logits = cls(feats)                                        # (B, A, C)
        per_class = logits.reshape(-1, NUM_CLASSES)
        bias = -per_class.mean(0)
        scale = 1.5 / per_class.std(0).clamp_min(1e-6)
        w = cls.cls_logits.weight.view(NUM_ANCHORS, NUM_CLASSES, *cls.cls_logits.weight.shape[1:])
        w.mul_(scale.view(1, -1, 1, 1, 1))
        cls.cls_logits.bias.copy_((bias * scale).repeat(NUM_ANCHORS))
        logits = cls(feats).flatten()
        q = torch.quantile(logits[::7].float(), 1 - 1e-4)
        cls.cls_logits.bias.add_(float(-q + np.log(SCORE_THRESH / (1 - SCORE_THRESH))))
        r = reg(feats)
        reg.bbox_reg.weight.mul_(0.2 / r.std())


def real_torch_model(model_dir: Path):
    """The MLPerf RetinaNet (ResNeXt50-32x4d FPN, P3-P7, 264 classes, 800x800) from the training
    checkpoint (``PTH_NAME``, its "model" state dict), on torchvision's modules."""
    import torch
    from torchvision.models import resnext50_32x4d
    from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7

    path = model_dir / PTH_NAME
    if not path.exists():
        raise MissingDataError(f"PyTorch checkpoint not found: {path}",
                               "make download_model BENCHMARKS=retinanet RUN_ARGS=--backend=pytorch")
    backbone = _resnet_fpn_extractor(resnext50_32x4d(), 5, returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(256, 256))
    net = _retinanet(backbone, REAL_SIZE)
    state = torch.load(path, map_location="cpu", weights_only=False)
    net.load_state_dict(state.get("model", state) if isinstance(state, dict) else state)
    return net.eval()


def load_torch(model_dir: Path, variant: str):
    import torch

    if variant != "tiny":
        return real_torch_model(model_dir)
    net = _retinanet(_tiny_backbone(), TINY_SIZE)
    net.load_state_dict(torch.load(model_dir / TINY_WEIGHTS, weights_only=True))
    return net.eval()


def _wrappers():
    import torch

    class Detections(torch.nn.Module):
        """images (B, 3, S, S) -> boxes, scores, labels of the first image (the ONNX contract)."""

        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, images):
            d = self.net(list(images))[0]
            return d["boxes"], d["scores"], d["labels"]

    class Headless(torch.nn.Module):
        """images -> cls_logits (B, A, C), bbox_regression (B, A, 4): no decode, no NMS."""

        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, images):
            feats = list(self.net.backbone(self.net.transform.normalize(images)).values())
            out = self.net.head(feats)
            return out["cls_logits"], out["bbox_regression"]

    return Detections, Headless


def detections_module(net):
    return _wrappers()[0](net).eval()


def headless_module(net):
    return _wrappers()[1](net).eval()


def eager_factory(source_dir, spec, device, dtype):
    """The pytorch backend's eager module (code.common.backends.pytorch): the torch RetinaNet from
    the weights in ``source_dir``, whole graph or head only (``spec.extra['postprocess']``)."""
    variant = str(spec.extra.get("variant", "reference"))
    net = load_torch(Path(source_dir), variant)
    if spec.extra.get("postprocess") == "host":
        return headless_module(net), (INPUT,), HEAD_OUTPUTS
    return detections_module(net), (INPUT,), OUTPUTS


def build_tiny(model_dir: Path, log=print) -> Path:
    """Build the seeded tiny model; export it like the MLPerf ONNX (batch 1, whole graph)."""
    import warnings

    import torch

    net = tiny_torch_model()
    model_dir.mkdir(parents=True, exist_ok=True)
    with staged_path(model_dir / TINY_WEIGHTS, suffix=".pt") as tmp:
        torch.save(net.state_dict(), tmp)
    x = torch.zeros(1, 3, TINY_SIZE, TINY_SIZE)
    dest = model_dir / ONNX_NAME
    with staged_path(dest, suffix=".onnx") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(detections_module(net), (x,), str(tmp), input_names=[INPUT], output_names=list(OUTPUTS),
                          opset_version=17, dynamo=False)
    write_json(model_dir / "model.json", {"variant": "tiny", "seed": TINY_SEED, "input_size": TINY_SIZE,
                                          "arch": "torchvision RetinaNet, 5-stage conv backbone, FPN 16 ch P3-P7, "
                                                  "9 anchors, 264 classes"})
    log(f"[download_model] built tiny retinanet -> {dest}")
    return dest


# --- head-only graph ---------------------------------------------------------------------------------

def cut_headless(full_onnx: Path, dest: Path) -> Path:
    """Cut the head-only graph (``HEAD_OUTPUTS``) out of a whole-RetinaNet ONNX: the two Concat nodes
    that gather the per-level outputs of the shared classification conv (9 x 264 channels) and
    regression conv (9 x 4 channels) become the outputs; decode and NMS are dropped."""
    import onnx
    from onnx import helper

    m = onnx.load(str(full_onnx))
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    consts = {n.output[0]: n for n in g.node if n.op_type == "Constant"}
    producer = {o: n for n in g.node for o in n.output}

    def conv_weight_of(tensor: str, depth: int = 0):
        n = producer.get(tensor)
        if n is None or depth > 8:
            return None
        if n.op_type == "Conv":
            return n.input[1]
        if n.op_type in ("Reshape", "Transpose", "Flatten", "Unsqueeze", "Squeeze", "Identity"):
            return conv_weight_of(n.input[0], depth + 1)
        return None

    def out_channels(w: str) -> int | None:
        if w in inits:
            return int(inits[w].dims[0])
        if w in consts:
            return int(consts[w].attribute[0].t.dims[0])
        return None

    found: dict[str, str] = {}
    for n in g.node:
        if n.op_type != "Concat" or len(n.input) < 2:
            continue
        ws = {conv_weight_of(i) for i in n.input}
        if len(ws) != 1 or None in ws:
            continue
        ch = out_channels(ws.pop())
        if ch == NUM_ANCHORS * NUM_CLASSES:
            found.setdefault("cls_logits", n.output[0])
        elif ch == NUM_ANCHORS * 4:
            found.setdefault("bbox_regression", n.output[0])
    if set(found) != set(HEAD_OUTPUTS):
        raise HarnessError(f"{full_onnx}: cannot find the RetinaNet head outputs (found {sorted(found)})",
                           "use --retinanet_postprocess=model (the whole graph in the engine)", 4)
    inputs = [i.name for i in g.input if i.name not in inits]
    with staged_path(dest, suffix=".onnx") as tmp:
        onnx.utils.extract_model(str(full_onnx), str(tmp), inputs, [found[k] for k in HEAD_OUTPUTS])
        cut = onnx.load(str(tmp))
        for name, t in zip(HEAD_OUTPUTS, [found[k] for k in HEAD_OUTPUTS]):
            cut.graph.node.append(helper.make_node("Identity", [t], [name], name=f"harness_{name}"))
            old = next(o for o in cut.graph.output if o.name == t)
            new = onnx.ValueInfoProto()
            new.CopyFrom(old)
            new.name = name
            cut.graph.output.remove(old)
            cut.graph.output.append(new)
        onnx.save(cut, str(tmp))
    return dest


class HostPostprocess:
    """torchvision's RetinaNet decode / top-k / NMS on the host, for head-only engines: anchors are
    built once for the input size, then ``__call__(cls_logits, bbox_regression)`` of one image ->
    (boxes, scores, labels) exactly as the whole graph returns them."""

    def __init__(self, size: int):
        import torch
        from torchvision.models.detection.image_list import ImageList

        self.size = size
        self.net = _retinanet(_NoBackbone(), size)
        shapes = [(size + s - 1) // s for s in (8, 16, 32, 64, 128)]
        feats = [torch.zeros(1, 1, h, h) for h in shapes]
        self.anchors = self.net.anchor_generator(ImageList(torch.zeros(1, 3, size, size), [(size, size)]), feats)
        self.split = [NUM_ANCHORS * h * h for h in shapes]

    def __call__(self, cls_logits, bbox_regression):
        import torch

        with torch.inference_mode():
            cl = torch.as_tensor(cls_logits).reshape(1, -1, NUM_CLASSES)
            br = torch.as_tensor(bbox_regression).reshape(1, -1, 4)
            head = {"cls_logits": list(cl.split(self.split, dim=1)),
                    "bbox_regression": list(br.split(self.split, dim=1))}
            anchors = [list(a.split(self.split)) for a in self.anchors]
            d = self.net.postprocess_detections(head, anchors, [(self.size, self.size)])[0]
        return d["boxes"].numpy(), d["scores"].numpy(), d["labels"].numpy()


def _NoBackbone():  # noqa: N802 - a module factory that keeps torch out of module import
    import torch

    m = torch.nn.Identity()
    m.out_channels = 1
    return m
