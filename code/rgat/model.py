"""The R-GAT of the reference (``dgl_utilities/components.py`` ``RGAT_DGL``), in plain torch.

Architecture: three ``HeteroGraphConv`` layers (sum over relations), each holding one ``GATConv(in, hidden/heads,
heads)`` per edge type (11 types: the six IGBH relations and five reverses), hidden 512, 4 heads, leaky ReLU
(slope 0.01) and dropout (a no-op in eval) between layers, and a ``Linear(512, 2983)`` on the paper nodes. A
GATConv here is DGL's: one ``fc`` for source and destination, ``attn_l`` / ``attn_r`` (1, heads, out), LeakyReLU
0.2 on the attention logits, softmax over each destination's in-edges, ``bias`` (heads*out), no residual; a
relation with no edges in a block is skipped (HeteroGraphConv), a node with none of its in-edges gets the bias.

Weights: the checkpoint the reference loads (``torch.load(ckpt)["model_state_dict"]`` of its ``RGAT`` wrapper:
keys ``model.layers.<l>.mods.<rel>.{fc.weight,attn_l,attn_r,bias}`` and ``model.linear.*``, the same tensors
again under ``layers.*``), read with our module's names, which are the same less the ``model.`` prefix.
DGL itself is not a dependency: its newest PyPI wheel (2.1.0) has no graphbolt library for this torch.
"""
from __future__ import annotations

import json
from pathlib import Path

from code.common.errors import MissingDataError
from code.rgat.dataset import ETYPES, NTYPES, etype_name

REAL = {"in_feats": 1024, "h_feats": 512, "num_classes": 2983, "num_layers": 3, "n_heads": 4}
TINY = {"in_feats": 32, "h_feats": 32, "num_classes": 16, "num_layers": 3, "n_heads": 4}
TINY_SEED = 20261206
CHECKPOINT = "RGAT.pt"             # the R2 copy's file name (rgat-model.uri)
TINY_WEIGHTS = "tiny_rgat.pt"
CONFIG = "config.json"
MODEL_URI = "https://inference.mlcommons-storage.org/metadata/rgat-model.uri"
OUTPUT = "logits"


def input_names(num_layers: int) -> list[str]:
    """The engine's inputs, in call order: features per node type, then per layer the (2, E) local edges of every
    edge type and the destination-node count of every node type."""
    return ([f"x_{t}" for t in NTYPES] + [f"e{l}_{etype_name(et)}" for l in range(num_layers) for et in ETYPES]
            + [f"ndst{l}" for l in range(num_layers)])


def feeds(blocks, x: dict) -> dict:
    """Engine feeds of sampled blocks (``dataset.sample_blocks``) and their input features (``IGBHQSL.gather``)."""
    import numpy as np

    out = {f"x_{t}": x[t] for t in NTYPES}
    for l, b in enumerate(blocks):
        for et in ETYPES:
            out[f"e{l}_{etype_name(et)}"] = b.edges.get(et, np.zeros((2, 0), np.int64))
        out[f"ndst{l}"] = np.array([b.n_dst[t] for t in NTYPES], np.int64)
    return out


def _torch():
    import torch

    return torch


def _classes():
    torch = _torch()

    def softmax(e, dst, n: int):
        """Softmax of edge scores ``e`` (E, heads) over the in-edges of each destination (DGL's edge_softmax)."""
        idx = dst.unsqueeze(1).expand_as(e)
        m = e.new_full((n, e.shape[1]), float("-inf")).scatter_reduce_(0, idx, e, "amax", include_self=True)
        ex = (e - m[dst]).exp()
        return ex / e.new_zeros(n, e.shape[1]).index_add_(0, dst, ex)[dst]

    class GATConv(torch.nn.Module):
        """DGL's GATConv(in, out, heads) at inference (no dropout, no residual), on a block's local edges."""

        def __init__(self, in_feats: int, out_feats: int, heads: int):
            super().__init__()
            self.heads, self.out_feats = heads, out_feats
            self.fc = torch.nn.Linear(in_feats, heads * out_feats, bias=False)
            self.attn_l = torch.nn.Parameter(torch.empty(1, heads, out_feats))
            self.attn_r = torch.nn.Parameter(torch.empty(1, heads, out_feats))
            self.bias = torch.nn.Parameter(torch.zeros(heads * out_feats))

        def reset_parameters(self, gen) -> None:
            """components.GATPatched.reset_parameters: glorot on fc, attn_l, attn_r; bias 0."""
            for p in (self.fc.weight, self.attn_l, self.attn_r):
                std = (6.0 / (p.size(-2) + p.size(-1))) ** 0.5
                with torch.no_grad():
                    p.copy_((torch.rand(p.shape, generator=gen) * 2 - 1) * std)

        def forward(self, h_src, h_dst, edges):
            """``h_dst``: the destination nodes' features (the first rows of their type's block input)."""
            n_dst = h_dst.shape[0]
            fs = self.fc(h_src).view(-1, self.heads, self.out_feats)
            fd = self.fc(h_dst).view(-1, self.heads, self.out_feats)
            el = (fs * self.attn_l).sum(-1)
            er = (fd * self.attn_r).sum(-1)
            src, dst = edges[0], edges[1]
            a = softmax(torch.nn.functional.leaky_relu(el[src] + er[dst], 0.2), dst, n_dst)
            out = fs.new_zeros(n_dst, self.heads, self.out_feats).index_add_(0, dst, fs[src] * a.unsqueeze(-1))
            return out.reshape(n_dst, -1) + self.bias

    class HeteroLayer(torch.nn.Module):
        """DGL's HeteroGraphConv({rel: GATConv}) with aggregate "sum"; ``mods`` keyed by relation name."""

        def __init__(self, in_feats: int, h_feats: int, heads: int):
            super().__init__()
            self.mods = torch.nn.ModuleDict({et[1]: GATConv(in_feats, h_feats // heads, heads) for et in ETYPES})

        def forward(self, h: dict, n_dst, edges: dict) -> dict:
            out: dict = {}
            for i, et in enumerate(ETYPES):
                e = edges[i]
                if e.shape[1] == 0 or et[0] not in h or et[2] not in h:
                    continue
                y = self.mods[et[1]](h[et[0]], h[et[2]][:int(n_dst[NTYPES.index(et[2])])], e)
                out[et[2]] = out[et[2]] + y if et[2] in out else y
            return out

    class RGAT(torch.nn.Module):
        """``forward(*inputs)`` in ``input_names`` order -> logits of the last block's paper nodes (the seeds)."""

        def __init__(self, in_feats: int, h_feats: int, num_classes: int, num_layers: int = 3, n_heads: int = 4):
            super().__init__()
            self.num_layers = num_layers
            self.layers = torch.nn.ModuleList(
                [HeteroLayer(in_feats if l == 0 else h_feats, h_feats, n_heads) for l in range(num_layers)])
            self.dropout = torch.nn.Dropout(0.2)
            self.linear = torch.nn.Linear(h_feats, num_classes)

        def forward(self, *inputs):
            nt, ne = len(NTYPES), len(ETYPES)
            h = {t: x for t, x in zip(NTYPES, inputs[:nt]) if x.shape[0] > 0}
            edges, n_dst = inputs[nt: nt + self.num_layers * ne], inputs[nt + self.num_layers * ne:]
            for l, layer in enumerate(self.layers):
                h = layer(h, n_dst[l], edges[l * ne:(l + 1) * ne])
                if l != self.num_layers - 1:
                    h = {k: self.dropout(torch.nn.functional.leaky_relu(v)) for k, v in h.items()}
            return self.linear(h["paper"])

    return RGAT


def build(cfg: dict):
    return _classes()(**cfg)


def read_config(model_dir: Path, fix: str) -> dict:
    p = Path(model_dir) / CONFIG
    if not p.is_file():
        raise MissingDataError(f"model not found: {p}", fix)
    return json.loads(p.read_text())


def from_reference_state(sd: dict) -> dict:
    """The reference wrapper's state dict (``model.*`` and a duplicate ``layers.*``) in our names."""
    if any(k.startswith("model.") for k in sd):
        return {k[len("model."):]: v for k, v in sd.items() if k.startswith("model.")}
    return dict(sd)


def load(model_dir: Path, fix: str):
    """The fp32 module of ``model_dir``: the tiny weights, or the reference checkpoint (RGAT.pt)."""
    torch = _torch()
    cfg = read_config(model_dir, fix)
    net = build(cfg)
    tiny = Path(model_dir) / TINY_WEIGHTS
    ckpt = tiny if tiny.is_file() else Path(model_dir) / CHECKPOINT
    if not ckpt.is_file():
        raise MissingDataError(f"model not found: {ckpt}", fix)
    obj = torch.load(ckpt, map_location="cpu", weights_only=False)
    sd = obj.get("model_state_dict", obj) if isinstance(obj, dict) else obj
    missing, unexpected = net.load_state_dict(from_reference_state(sd), strict=False)
    if missing or unexpected:
        raise MissingDataError(f"{ckpt} is not an R-GAT of {cfg} (missing {missing[:3]}, unexpected {unexpected[:3]})",
                               fix)
    return net.eval()


def build_tiny(model_dir: Path) -> Path:
    """The tiny R-GAT from a seed, saved as the reference saves its checkpoint (``model_state_dict`` of its
    wrapper: ``model.*`` keys and the duplicate ``layers.*``), so the tiny path loads what the real one does."""
    torch = _torch()
    from code.common.fileio import staged_path, write_json

    gen = torch.Generator().manual_seed(TINY_SEED)
    net = build(TINY)
    for layer in net.layers:
        for m in layer.mods.values():
            m.reset_parameters(gen)
            with torch.no_grad():
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
    with torch.no_grad():
        net.linear.weight.copy_(torch.randn(net.linear.weight.shape, generator=gen) / TINY["h_feats"] ** 0.5)
        net.linear.bias.zero_()
    sd = {f"model.{k}": v for k, v in net.state_dict().items()}
    sd.update({k: v for k, v in net.state_dict().items() if k.startswith("layers.")})
    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    with staged_path(model_dir / TINY_WEIGHTS, suffix=".pt") as tmp:
        torch.save({"model_state_dict": sd}, tmp)
    write_json(model_dir / CONFIG, TINY)
    return model_dir / TINY_WEIGHTS


def download_real(model_dir: Path, log=print) -> Path:
    """RGAT.pt from the MLCommons R2 copy (md5-checked against the list the .uri names), and the real config."""
    from code.common.fileio import write_json
    from code.common.llm import download as dl

    dl.r2_download(MODEL_URI, Path(model_dir), log=log)
    hits = sorted(Path(model_dir).rglob(CHECKPOINT))
    if not hits:
        raise MissingDataError(f"the R2 copy of {MODEL_URI} holds no {CHECKPOINT}", f"put {CHECKPOINT} in {model_dir}")
    if hits[0] != Path(model_dir) / CHECKPOINT:
        hits[0].replace(Path(model_dir) / CHECKPOINT)
    write_json(Path(model_dir) / CONFIG, REAL)
    return Path(model_dir) / CHECKPOINT


def eager_factory(source_dir, spec, device, dtype):
    """code.common.backends.pytorch's eager factory: the whole R-GAT on ``device``."""
    net = load(Path(source_dir), str(spec.extra.get("fix", "")))
    return net.to(device), input_names(net.num_layers), [OUTPUT]
