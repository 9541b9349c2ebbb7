"""DLRM-DCNv2 in plain torch, its embedding tables (CPU or row-wise sharded over devices), the tiny
variant, the reference checkpoint's key mapping and its download.

Architecture (torchrec ``DLRM_DCN`` as the reference builds it in backend_pytorch_native.py):
  * sparse arch: one ``nn.EmbeddingBag(rows, D, mode="sum")`` per table (26), multi-hot lookups given as
    flat indices + bag offsets (torchrec's KeyedJaggedTensor layout) -> (B, 26, D);
  * dense arch: MLP 13 -> 512 -> 256 -> 128 (= D), ReLU after every layer (torchrec's MLP);
  * interaction: x0 = concat(dense (B, D), the 26 pooled embeddings) = (B, 27 * D); three low-rank
    cross layers (DCNv2, torchrec ``LowRankCrossNet``): x_{l+1} = x0 * (W_l (V_l x_l) + b_l) + x_l with
    V_l (512, 27D), W_l (27D, 512);
  * over arch: MLP 27D -> 1024 -> 1024 -> 512 -> 256 (ReLU), then Linear 256 -> 1; sigmoid (the
    reference applies it in predict()).

Row-wise sharding (``RowShardedEmbeddingBag``): table rows are split in contiguous ranges over the
devices (shard s holds rows [s*ceil(R/n), (s+1)*ceil(R/n)) of an R-row table); each lookup index is
routed to the shard that holds its row (index - shard start), each shard pools its part of every bag
on its own device (an EmbeddingBag with per-shard offsets; a bag with no row there sums to zero), and
the partial sums are added on the output device. The result equals the unsharded table's up to float
summation order.

Reference checkpoint -> this module (``checkpoint_key``; a ``module.`` prefix, DistributedModelParallel's,
is dropped first):
  model.sparse_arch.embedding_bag_collection.embedding_bags.t_cat_<k>.weight -> embeddings.tables.<k>.weight
  model.dense_arch.model._mlp.<j>._linear.{weight,bias}                    -> dense_arch.<j>.{weight,bias}
  model.inter_arch.crossnet.{V_kernels,W_kernels,bias}.<l>                 -> crossnet.{V_kernels,W_kernels,bias}.<l>
  model.over_arch.model.0._mlp.<j>._linear.{weight,bias}                   -> over_arch.<j>.{weight,bias}
  model.over_arch.model.1.{weight,bias}                                    -> over_arch.<last>.{weight,bias}
The real checkpoint is a torchsnapshot folder (``.snapshot_metadata``, tables sharded as written by
training); reading it needs the torchsnapshot package (``load_snapshot``). A plain torch state-dict
file (``.pt``) with the same keys loads without it.
"""
from __future__ import annotations

import dataclasses
import math
import shutil
import threading
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from code.common.errors import HarnessError, MissingDataError
from code.dlrm_v2 import constants as K

TINY_SEED = 20261201
TINY_DIM = 16
TINY_WEIGHTS = "dlrm_tiny.pt"
CONFIG = "dlrm_config.json"
DENSE_ONNX = "dlrm_dense.onnx"          # bottom MLP + interaction + top MLP, fed pooled embeddings
REAL_CHECKPOINT_DIR = "model_weights"   # what the R2 download writes (a torchsnapshot folder)
INPUTS = ("dense", "sparse")            # the full model's inputs: (B, 13) float32, (B, sum(hot)) int32
ONNX_INPUTS = ("dense", "pooled")       # the dense part's: (B, 13) float32, (B, 26, D) float32
OUTPUT = "probability"                  # (B,) float32 click probability


@dataclasses.dataclass(frozen=True)
class DLRMConfig:
    num_embeddings: tuple[int, ...] = K.NUM_EMBEDDINGS
    multi_hot: tuple[int, ...] = K.MULTI_HOT_SIZES
    dim: int = K.EMBEDDING_DIM
    dense_arch: tuple[int, ...] = K.DENSE_ARCH
    over_arch: tuple[int, ...] = K.OVER_ARCH
    dcn_layers: int = K.DCN_LAYERS
    low_rank: int = K.DCN_LOW_RANK
    num_dense: int = K.NUM_DENSE

    @property
    def hot_offsets(self) -> tuple[int, ...]:
        """Column where table k's indices start in the (B, sum(hot)) sparse array; last = total."""
        return tuple(int(x) for x in np.concatenate([[0], np.cumsum(self.multi_hot)]))

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: Mapping) -> "DLRMConfig":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


REAL = DLRMConfig()


def tiny_config() -> DLRMConfig:
    """26 tables of 50-5000 rows (log-uniform, fixed seed), dim 16, the reference's multi-hot sizes."""
    rng = np.random.default_rng(TINY_SEED)
    rows = np.exp(rng.uniform(np.log(50), np.log(5000), size=K.NUM_SPARSE)).astype(int)
    return DLRMConfig(num_embeddings=tuple(int(r) for r in rows), dim=TINY_DIM, dense_arch=(64, 32, TINY_DIM),
                      over_arch=(64, 32, 1), dcn_layers=3, low_rank=32)


# ----------------------------------------------------------------------------------------- modules
def _torch():
    import torch

    return torch


def small_job_threads():
    """torch on one thread for the tiny builds (seconds of small ops): an OpenMP team of 2 on a shared
    2-core machine made the tiny set's forward 20x slower (5.8 s vs 0.25 s)."""
    from code.common.backends.pytorch import one_thread

    return one_thread()


def bag_offsets(batch: int, hot: int, device=None):
    """Offsets of ``batch`` bags of ``hot`` lookups each in a flat index list."""
    torch = _torch()
    return torch.arange(0, batch * hot, hot, device=device)


class _Base:  # namespace for lazily defined torch classes (torch imports only when a model is built)
    pass


def _define():
    torch = _torch()
    nn = torch.nn

    class EmbeddingBags(nn.Module):
        """The 26 tables on one device: (B, sum(hot)) indices -> (B, 26, D) pooled sums."""

        def __init__(self, cfg: DLRMConfig, device="cpu", init: bool = True):
            super().__init__()
            self.cfg = cfg
            # init=False: uninitialised storage (weights come from a checkpoint; drawing 26 x 40M x 128
            # random numbers first would take minutes)
            self.tables = nn.ModuleList(
                nn.EmbeddingBag(n, cfg.dim, mode="sum", device=device) if init else
                nn.EmbeddingBag(n, cfg.dim, mode="sum", _weight=torch.empty(n, cfg.dim, device=device))
                for n in cfg.num_embeddings)

        def forward(self, sparse):
            b = sparse.shape[0]
            o = self.cfg.hot_offsets
            dev = self.tables[0].weight.device
            sparse = sparse.to(dev)
            out = []
            for k, table in enumerate(self.tables):
                h = o[k + 1] - o[k]
                idx = sparse[:, o[k]:o[k + 1]].reshape(-1)
                out.append(table(idx, bag_offsets(b, h, dev).to(idx.dtype)))
            return torch.stack(out, 1)

    class RowShardedEmbeddingBag(nn.Module):
        """One table, rows split in contiguous ranges over ``devices`` (see the module docstring)."""

        def __init__(self, rows: int, dim: int, devices: Sequence, weight=None, init: bool = True):
            super().__init__()
            n = len(devices)
            per = max(1, math.ceil(rows / n))
            self.rows, self.dim = rows, dim
            self.bounds = [(min(s * per, rows), min((s + 1) * per, rows)) for s in range(n)]
            self.devices = [torch.device(d) for d in devices]
            self.shards = nn.ModuleList()
            for (lo, hi), dev in zip(self.bounds, self.devices):
                bag = nn.EmbeddingBag(max(1, hi - lo), dim, mode="sum",
                                      _weight=torch.empty(max(1, hi - lo), dim, device=dev))
                if weight is None and init:
                    nn.init.normal_(bag.weight)
                if weight is not None and hi > lo:
                    with torch.no_grad():
                        bag.weight.copy_(weight[lo:hi])
                self.shards.append(bag)

        def forward(self, indices, offsets, out_device):
            """indices: flat (sum of bag lengths,), offsets: (B,) bag starts; -> (B, D) on out_device."""
            b = offsets.shape[0]
            lengths = torch.diff(offsets, append=torch.tensor([indices.shape[0]], device=offsets.device))
            bag_of = torch.repeat_interleave(torch.arange(b, device=offsets.device), lengths)
            out = torch.zeros(b, self.dim, device=out_device)
            for (lo, hi), dev, shard in zip(self.bounds, self.devices, self.shards):
                if hi <= lo:
                    continue
                mine = (indices >= lo) & (indices < hi)
                local = (indices[mine] - lo).to(dev)
                counts = torch.bincount(bag_of[mine], minlength=b)
                offs = torch.cumsum(counts, 0) - counts
                part = shard(local, offs.to(dev).to(local.dtype))
                out += part.to(out_device)
            return out

        def full_weight(self):
            return torch.cat([s.weight[: hi - lo].detach().cpu() for (lo, hi), s in zip(self.bounds, self.shards)])

    class ShardedEmbeddingBags(nn.Module):
        """The 26 tables, each row-wise sharded over ``devices``; same interface as EmbeddingBags.
        ``.to()`` does not move it (its shards stay where they were placed)."""

        def __init__(self, cfg: DLRMConfig, devices: Sequence, weights: Sequence | None = None, init: bool = True):
            super().__init__()
            self.cfg, self.devices = cfg, [torch.device(d) for d in devices]
            self.tables = nn.ModuleList(
                RowShardedEmbeddingBag(n, cfg.dim, devices, None if weights is None else weights[k], init)
                for k, n in enumerate(cfg.num_embeddings))

        def forward(self, sparse, out_device=None):
            out_device = out_device or sparse.device
            b = sparse.shape[0]
            o = self.cfg.hot_offsets
            out = []
            for k, table in enumerate(self.tables):
                h = o[k + 1] - o[k]
                idx = sparse[:, o[k]:o[k + 1]].reshape(-1)
                out.append(table(idx, bag_offsets(b, h, sparse.device).to(idx.dtype), out_device))
            return torch.stack(out, 1)

        def _apply(self, fn, recurse=True):   # nn.Module.to/cuda/float: the shards keep their placement
            return self

    class LowRankCrossNet(nn.Module):
        def __init__(self, width: int, layers: int, rank: int):
            super().__init__()
            self.V_kernels = nn.ParameterList(nn.Parameter(torch.empty(rank, width)) for _ in range(layers))
            self.W_kernels = nn.ParameterList(nn.Parameter(torch.empty(width, rank)) for _ in range(layers))
            self.bias = nn.ParameterList(nn.Parameter(torch.zeros(width)) for _ in range(layers))
            for p in (*self.V_kernels, *self.W_kernels):
                nn.init.xavier_normal_(p)

        def forward(self, x0):
            x = x0
            for v, w, b in zip(self.V_kernels, self.W_kernels, self.bias):
                x = x0 * (torch.nn.functional.linear(torch.nn.functional.linear(x, v), w) + b) + x
            return x

    class DenseDLRM(nn.Module):
        """Everything but the tables: (dense (B, 13), pooled (B, 26, D)) -> probability (B,)."""

        def __init__(self, cfg: DLRMConfig):
            super().__init__()
            dims = (cfg.num_dense, *cfg.dense_arch)
            self.dense_arch = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
            width = (len(cfg.num_embeddings) + 1) * cfg.dim
            self.crossnet = LowRankCrossNet(width, cfg.dcn_layers, cfg.low_rank)
            dims = (width, *cfg.over_arch)
            self.over_arch = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))

        def logits(self, dense, pooled):
            x = dense
            for lin in self.dense_arch:
                x = torch.relu(lin(x))
            x = torch.cat([x.unsqueeze(1), pooled.to(x.dtype)], 1).reshape(x.shape[0], -1)
            x = self.crossnet(x)
            for lin in self.over_arch[:-1]:
                x = torch.relu(lin(x))
            return self.over_arch[-1](x).reshape(-1)

        def forward(self, dense, pooled):
            return torch.sigmoid(self.logits(dense, pooled))

    class DLRM(DenseDLRM):
        """The whole model: (dense (B, 13), sparse (B, sum(hot)) int) -> probability (B,)."""

        def __init__(self, cfg: DLRMConfig, embeddings=None, init: bool = True):
            super().__init__(cfg)
            self.cfg = cfg
            self.embeddings = embeddings if embeddings is not None else EmbeddingBags(cfg, init=init)

        def dense_part(self) -> "DenseDLRM":
            d = DenseDLRM(self.cfg)
            d.load_state_dict({k: v for k, v in self.state_dict().items() if not k.startswith("embeddings.")})
            return d.eval()

        def forward(self, dense, sparse):
            if isinstance(self.embeddings, ShardedEmbeddingBags):
                pooled = self.embeddings(sparse, out_device=dense.device)
            else:
                pooled = self.embeddings(sparse)
            return torch.sigmoid(self.logits(dense, pooled.to(dense.device)))

    for c in (EmbeddingBags, RowShardedEmbeddingBag, ShardedEmbeddingBags, LowRankCrossNet, DenseDLRM, DLRM):
        setattr(_Base, c.__name__, c)


def cls(name: str):
    if not hasattr(_Base, name):
        _define()
    return getattr(_Base, name)


def build(cfg: DLRMConfig, seed: int | None = None, devices: Sequence | None = None, pinned: bool = False,
          init: bool = True):
    """A randomly initialised DLRM (seeded if ``seed``; ``init=False``: tables left uninitialised for a
    checkpoint to fill). Tables row-wise sharded when ``devices`` has more than one entry, or held on
    ``devices[0]`` whatever ``.to()`` does to the dense part when ``pinned`` (host tables on a GPU system)."""
    torch = _torch()
    if seed is not None:
        torch.manual_seed(seed)
    sharded = devices and (len(devices) > 1 or pinned)
    emb = cls("ShardedEmbeddingBags")(cfg, devices, init=init) if sharded else None
    return cls("DLRM")(cfg, emb, init=init).eval()


def shard(model, devices: Sequence):
    """A DLRM whose tables are the given model's, row-wise sharded over ``devices`` (dense part copied)."""
    weights = [t.weight.detach() for t in model.embeddings.tables]
    m = cls("DLRM")(model.cfg, cls("ShardedEmbeddingBags")(model.cfg, devices, weights))
    m.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith("embeddings.")}, strict=False)
    return m.eval()


# ---------------------------------------------------------------------------- checkpoint key mapping
def checkpoint_key(key: str, cfg: DLRMConfig) -> str | None:
    """The reference checkpoint's key -> ours (None: not a model weight, e.g. optimizer state)."""
    k = key[len("module."):] if key.startswith("module.") else key
    k = k[len("model."):] if k.startswith("model.") else k
    p = "sparse_arch.embedding_bag_collection.embedding_bags.t_cat_"
    if k.startswith(p):
        n, _, rest = k[len(p):].partition(".")
        return f"embeddings.tables.{int(n)}.{rest}" if rest == "weight" else None
    if k.startswith("dense_arch.model._mlp."):
        j, _, rest = k[len("dense_arch.model._mlp."):].partition(".")
        return f"dense_arch.{j}.{rest.removeprefix('_linear.')}"
    if k.startswith("inter_arch.crossnet."):
        return "crossnet." + k[len("inter_arch.crossnet."):]
    if k.startswith("over_arch.model.0._mlp."):
        j, _, rest = k[len("over_arch.model.0._mlp."):].partition(".")
        return f"over_arch.{j}.{rest.removeprefix('_linear.')}"
    if k.startswith("over_arch.model.1."):
        return f"over_arch.{len(cfg.over_arch) - 1}.{k[len('over_arch.model.1.'):]}"
    return None


def reference_keys(cfg: DLRMConfig) -> dict[str, tuple[int, ...]]:
    """The reference checkpoint's model keys (as DLRMTrain(DLRM_DCN) names them) and their shapes."""
    out = {}
    for k, n in enumerate(cfg.num_embeddings):
        out[f"model.sparse_arch.embedding_bag_collection.embedding_bags.t_cat_{k}.weight"] = (n, cfg.dim)
    dims = (cfg.num_dense, *cfg.dense_arch)
    for j, (a, b) in enumerate(zip(dims, dims[1:])):
        out[f"model.dense_arch.model._mlp.{j}._linear.weight"] = (b, a)
        out[f"model.dense_arch.model._mlp.{j}._linear.bias"] = (b,)
    width = (len(cfg.num_embeddings) + 1) * cfg.dim
    for lyr in range(cfg.dcn_layers):
        out[f"model.inter_arch.crossnet.V_kernels.{lyr}"] = (cfg.low_rank, width)
        out[f"model.inter_arch.crossnet.W_kernels.{lyr}"] = (width, cfg.low_rank)
        out[f"model.inter_arch.crossnet.bias.{lyr}"] = (width,)
    dims = (width, *cfg.over_arch)
    for j, (a, b) in enumerate(zip(dims[:-1], dims[1:-1])):
        out[f"model.over_arch.model.0._mlp.{j}._linear.weight"] = (b, a)
        out[f"model.over_arch.model.0._mlp.{j}._linear.bias"] = (b,)
    out["model.over_arch.model.1.weight"] = (dims[-1], dims[-2])
    out["model.over_arch.model.1.bias"] = (dims[-1],)
    return out


def _assign(model, ours: str, value) -> None:
    """Copy one checkpoint tensor into ``model``'s parameter ``ours`` (a table: into its shards)."""
    torch = _torch()
    value = torch.as_tensor(value)
    with torch.no_grad():
        if ours.startswith("embeddings.tables."):
            table = model.embeddings.tables[int(ours.split(".")[2])]
            if hasattr(table, "shards"):
                for (lo, hi), sh in zip(table.bounds, table.shards):
                    if hi > lo:
                        sh.weight.copy_(value[lo:hi])
            else:
                table.weight.copy_(value)
            return
        model.get_parameter(ours).copy_(value)


def load_reference_state(model, state: Mapping[str, object], source: str, fix: str) -> None:
    """Copy a reference-keyed state dict into ``model`` (plain or sharded tables); every model weight
    must be present with its shape, or a one-line error names the first that is not."""
    cfg = model.cfg
    mapped = {}
    for key, value in state.items():
        ours = checkpoint_key(key, cfg)
        if ours is not None:
            mapped[ours] = value
    for key, shape in reference_keys(cfg).items():
        ours = checkpoint_key(key, cfg)
        if ours not in mapped:
            raise MissingDataError(f"{source}: checkpoint has no {key} (nor module.{key})", fix)
        got = tuple(mapped[ours].shape)
        if got != shape:
            raise MissingDataError(f"{source}: {key} has shape {got}, expected {shape}", fix)
    for key in reference_keys(cfg):
        ours = checkpoint_key(key, cfg)
        _assign(model, ours, mapped[ours])


def load_snapshot(path: Path, model, fix: str) -> None:
    """The reference's torchsnapshot folder, read entry by entry (``Snapshot.read_object`` into a tensor
    of the entry's full shape: torchsnapshot assembles a sharded entry), each copied into the model and
    freed before the next, so no more than one table is held twice. Needs the torchsnapshot package."""
    try:
        from torchsnapshot import Snapshot
    except ImportError:
        raise HarnessError(f"{path} is a torchsnapshot checkpoint and the torchsnapshot package is not installed",
                           "make prebuild (requirements.txt pins torchsnapshot==0.1.0), or convert the "
                           "checkpoint to a torch state dict (.pt) with the keys model.py documents") from None
    torch = _torch()
    snap = Snapshot(path=str(path))
    by_ref = {}
    for entry in snap.get_manifest():        # "<rank>/model/<key>"
        parts = entry.split("/", 2)
        if len(parts) == 3 and parts[1] == "model":
            by_ref.setdefault(parts[2].removeprefix("module."), entry)
    cfg = model.cfg
    for key, shape in reference_keys(cfg).items():
        if key not in by_ref:
            raise MissingDataError(f"{path}: the snapshot has no entry for {key}", fix)
    for key, shape in reference_keys(cfg).items():
        value = snap.read_object(by_ref[key], obj_out=torch.empty(shape))
        if tuple(value.shape) != shape:
            raise MissingDataError(f"{path}: {key} has shape {tuple(value.shape)}, expected {shape}", fix)
        _assign(model, checkpoint_key(key, cfg), value)
        del value


# ------------------------------------------------------------------------------------------ files
def write_config(model_dir: Path, cfg: DLRMConfig) -> None:
    from code.common.fileio import write_json

    write_json(model_dir / CONFIG, cfg.to_json())


def read_config(model_dir: Path, fix: str) -> DLRMConfig:
    from code.common.fileio import read_json

    p = Path(model_dir) / CONFIG
    if not p.is_file():
        raise MissingDataError(f"model not found: {p}", fix)
    try:
        return DLRMConfig.from_json(read_json(p, fix))
    except TypeError as e:
        raise MissingDataError(f"{p}: not a DLRM config ({e})", fix) from None


def load_torch(model_dir: Path, fix: str, devices: Sequence | None = None, pinned: bool = False):
    """The DLRM of ``model_dir`` (tiny .pt, or the real checkpoint), tables sharded over ``devices``
    when more than one is given (or pinned to the one given: ``build``), else on the CPU."""
    torch = _torch()
    model_dir = Path(model_dir)
    cfg = read_config(model_dir, fix)
    model = build(cfg, devices=devices, pinned=pinned, init=False)
    pt = model_dir / TINY_WEIGHTS
    snap = model_dir / REAL_CHECKPOINT_DIR
    if pt.is_file():
        try:
            state = torch.load(pt, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - truncated or not a torch file
            raise MissingDataError(f"{pt}: not a readable torch state dict ({type(e).__name__})", fix) from None
        load_reference_state(model, state, str(pt), fix)
    elif (snap / ".snapshot_metadata").is_file():
        load_snapshot(snap, model, fix)
    else:
        raise MissingDataError(f"model weights not found in {model_dir} ({TINY_WEIGHTS} or {REAL_CHECKPOINT_DIR}/)", fix)
    return model.eval()


def reference_state(model) -> dict:
    """``model``'s weights under the reference checkpoint's keys (what the tiny .pt stores)."""
    ours = {k: v.detach().clone() for k, v in model.state_dict().items()}
    out = {}
    for key in reference_keys(model.cfg):
        out[key] = ours[checkpoint_key(key, model.cfg)]
    return out


# ------------------------------------------------------------------------------------------- tiny
def build_tiny(model_dir: Path, features) -> Path:
    """The seeded tiny DCNv2. Its last layer is rescaled so its logits over ``features`` (the tiny set's
    (dense, sparse) arrays) have mean -1 and standard deviation 3: the tiny labels are then drawn from
    its own probabilities (dataset.tiny_labels), a calibrated model with AUC well above 0.5."""
    from code.common.fileio import staged_path

    torch = _torch()
    cfg = tiny_config()
    model = build(cfg, seed=TINY_SEED)
    with torch.no_grad(), small_job_threads():
        for t in model.embeddings.tables:        # N(0, 1/sqrt(rows)) like torchrec's default init scale
            t.weight.normal_(0, 1.0)
        dense, sparse = features
        z = torch.logit(model(torch.from_numpy(dense), torch.from_numpy(sparse)).double(), eps=1e-12)
        mean, std = float(z.mean()), float(z.std()) or 1.0
        last = model.over_arch[-1]
        scale = 3.0 / std
        last.weight.mul_(scale)
        last.bias.copy_((last.bias - mean) * scale - 1.0)
    model_dir.mkdir(parents=True, exist_ok=True)
    with staged_path(model_dir / TINY_WEIGHTS, suffix=".pt") as tmp:
        torch.save(reference_state(model), tmp)
    write_config(model_dir, cfg)
    return model_dir / TINY_WEIGHTS


def check_disk(folder: Path, need_bytes: int, what: str) -> None:
    """A one-line error naming the folder and the free/needed GB when ``need_bytes`` do not fit."""
    folder = Path(folder)
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < need_bytes:
        raise HarnessError(f"not enough disk space for {what} in {folder}: {free / 1e9:.1f} GB free, "
                           f"{need_bytes / 1e9:.1f} GB needed", "free space there, or point MLPERF_SCRATCH_PATH "
                           "at a disk with room", 3)


def download_real(model_dir: Path, log=print) -> None:
    """The reference checkpoint (~97 GB torchsnapshot) through the MLCommons R2 downloader, every file
    checked against the R2 md5 list; a disk-space check comes first."""
    from code.common.llm import download as dl

    model_dir = Path(model_dir)
    dest = model_dir / REAL_CHECKPOINT_DIR
    if (dest / ".snapshot_metadata").is_file() and (dest / "dlrm-v2-model-weights.md5").is_file():
        log(f"[download_model] {dest} is already downloaded and verified")
        write_config(model_dir, REAL)
        return
    have = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file()) if dest.exists() else 0
    check_disk(model_dir, max(0, K.CHECKPOINT_BYTES - have) + K.DISK_MARGIN_BYTES, "the DLRM-v2 checkpoint")
    log(f"[download_model] DLRM-v2 checkpoint ({K.CHECKPOINT_BYTES / 1e9:.1f} GB) -> {dest} "
        f"(official command: {dl.r2_command(K.MODEL_URI, dest)})")
    dl.r2_download(K.MODEL_URI, dest, log=log)
    write_config(model_dir, REAL)


# ------------------------------------------------------------------------- engines: torch factory
_SHARED: dict[tuple, object] = {}
_SHARED_LOCK = threading.Lock()


def shared_embeddings(model_dir: Path, devices: Sequence, fix: str, pinned: bool = False):
    """One copy of the tables per process and placement, shared by every worker's engine (the real
    tables are ~100 GB: one copy per worker would not fit): row-wise sharded over ``devices`` when it
    names more than one, else whole on that one device (``pinned``: kept there when the engine moves
    the dense part to its GPU). Returns the DLRM holding them."""
    key = (str(model_dir), tuple(str(d) for d in devices), pinned)
    with _SHARED_LOCK:
        if key not in _SHARED:
            if len(devices) > 1 or pinned:
                m = load_torch(model_dir, fix, devices=devices, pinned=pinned)
            else:
                m = load_torch(model_dir, fix)
                m.embeddings.to(devices[0])
            _SHARED[key] = m
        return _SHARED[key]


def eager_factory(source_dir, spec, device, dtype):
    """code.common.backends.pytorch's eager factory: the whole DLRM on ``device``; the tables sharded
    over ``spec.extra["shard_devices"]`` when it names more than one device, held on the one it names
    (["cpu"]: host tables on a GPU system), else on ``device`` (CPU EmbeddingBags on a CPU system);
    one copy per process, shared between its engines."""
    torch = _torch()
    fix = str(spec.extra.get("fix", ""))
    devices = list(spec.extra.get("shard_devices") or []) or [str(device)]
    pinned = len(devices) == 1 and str(devices[0]) != str(device)       # host tables, dense part on a GPU
    shared = shared_embeddings(Path(source_dir), devices, fix, pinned)
    model = cls("DLRM")(shared.cfg, shared.embeddings)
    model.load_state_dict({k: v for k, v in shared.state_dict().items() if not k.startswith("embeddings.")},
                          strict=False)
    model = model.to(device).eval()
    if dtype != torch.float32:
        model = model.to(dtype)
    return model, list(INPUTS), [OUTPUT]


def export_dense_onnx(model_dir: Path, fix: str) -> Path:
    """The dense part (bottom MLP + DCNv2 interaction + top MLP + sigmoid) as ONNX, inputs dense (B, 13)
    and pooled (B, 26, D), for engines fed by embeddings looked up in torch (tensorrt, onnxruntime)."""
    import warnings

    from code.common.fileio import staged_path

    out = Path(model_dir) / DENSE_ONNX
    sources = [p for p in (Path(model_dir) / TINY_WEIGHTS, Path(model_dir) / CONFIG,
                           Path(model_dir) / REAL_CHECKPOINT_DIR / ".snapshot_metadata") if p.exists()]
    if out.is_file() and all(p.stat().st_mtime_ns <= out.stat().st_mtime_ns for p in sources):
        return out        # up to date: no torch import in the parent
    torch = _torch()
    model = load_torch(model_dir, fix)
    dense = model.dense_part()
    cfg = model.cfg
    ex = (torch.zeros(2, cfg.num_dense), torch.zeros(2, len(cfg.num_embeddings), cfg.dim))
    with staged_path(out, suffix=".onnx") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(dense, ex, str(tmp), input_names=list(ONNX_INPUTS), output_names=[OUTPUT],
                          dynamic_axes={n: {0: "batch"} for n in (*ONNX_INPUTS, OUTPUT)}, opset_version=17,
                          dynamo=False)
    return out
