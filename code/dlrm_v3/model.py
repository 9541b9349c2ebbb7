"""The HSTU generative recommender (the reference's DlrmHSTU in inference mode), its tiny build from a seed, and
the real checkpoint's layout.

Written from the reference's definition (recommendation/dlrm_v3/generative_recommenders/modules: dlrm_hstu.py,
preprocessors.py ContextualPreprocessor, action_encoder.py, positional_encoder.py, stu.py STULayer,
postprocessors.py TimestampLayerNormPostprocessor, multitask_module.py; ops/pytorch: the attention mask, the
positional indices, the uvqk split and the output). Parameter names follow the reference's module paths, so the
dense part of its checkpoint loads by name. Sequences are padded here, not jagged: a row is
[contextual user_id | history (padded) | candidates (padded)], and masks keep the padding out of everything a real
position sees.

Per request: item embeddings MLP(item_id, category) of each candidate; the user side runs the preprocessor (content
MLP of the item_id embedding + MLP of the category embedding + MLP of the action bitmask embeddings, the contextual
user_id projected into position 0 when the history holds at least ``contextual_min_uih_len`` items), positional
and time embeddings (x * sqrt(D) + position + time bucket), the STU layers (causal and target-aware: a candidate
sees the history and itself), then the candidates' outputs through the timestamp layer-norm postprocessor; the
click probability is sigmoid(MLP(user * item)). The reference's data sets every timestamp to 1, so the time
bucket is 0 and the postprocessor's time features are constant; the attention is divided by the batch's longest
sequence, as the reference's kernels divide by max_seq_len (1 + the batch's longest history + its most candidates).
"""
from __future__ import annotations

import dataclasses
import json
import math
import threading
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from code.common.errors import MissingDataError
from code.dlrm_v3 import constants as K

INPUTS = ("user_id", "uih_ids", "uih_actions", "cand_ids", "lengths")
OUTPUT = "predictions"
CONFIG = "config.json"
TINY_WEIGHTS = "hstu_tiny.pt"
TIME_FEATURES = ((60 * 60, 24), (24 * 60 * 60, 7))      # hour of day, day of week (postprocessors.py)


@dataclasses.dataclass(frozen=True)
class HSTUConfig:
    num_heads: int
    attn_linear_dim: int
    attn_qk_dim: int
    num_layers: int
    table_dim: int
    preprocessor_hidden_dim: int
    transducer_dim: int
    mlp_hidden: int
    action_weights: tuple[int, ...]
    action_embedding_dim: int
    num_items: int
    num_categories: int
    num_users: int
    max_seq_len: int
    max_num_candidates_inference: int
    contextual_min_uih_len: int
    num_position_buckets: int
    num_time_buckets: int

    @property
    def items_per_category(self) -> int:
        return max(1, self.num_items // self.num_categories)

    @property
    def max_uih_len(self) -> int:
        """datasets/dataset.py: max_seq_len - max_num_candidates (32) - the contextual features (1)."""
        return self.max_seq_len - 32 - 1

    @classmethod
    def of(cls, d: dict) -> "HSTUConfig":
        return cls(**{**d, "action_weights": tuple(d["action_weights"])})


REAL = HSTUConfig.of(K.REAL)


def tiny_config() -> HSTUConfig:
    return HSTUConfig.of(K.TINY)


class SwishLayerNorm(nn.Module):
    """x * sigmoid(layer_norm(x)) (ops/layer_norm.py SwishLayerNorm: its own weight and bias, eps 1e-5)."""

    def __init__(self, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        return x * torch.sigmoid(F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, eps=1e-5))


def _mlp(i: int, h: int, o: int, out_norm: bool = True) -> nn.Sequential:
    layers = [nn.Linear(i, h), SwishLayerNorm(h), nn.Linear(h, o)]
    return nn.Sequential(*layers, *([nn.LayerNorm(o)] if out_norm else []))


class EmbeddingCollection(nn.Module):
    def __init__(self, cfg: HSTUConfig):
        super().__init__()
        self.embeddings = nn.ModuleDict({
            "item_id": nn.Embedding(cfg.num_items, cfg.table_dim),
            "item_category_id": nn.Embedding(cfg.num_categories, cfg.table_dim),
            "user_id": nn.Embedding(cfg.num_users, cfg.table_dim)})


class ActionEncoder(nn.Module):
    def __init__(self, cfg: HSTUConfig):
        super().__init__()
        n, d = len(cfg.action_weights), cfg.action_embedding_dim
        self.register_buffer("_combined_action_weights", torch.tensor(cfg.action_weights))
        self._action_embedding_table = nn.Parameter(torch.zeros(n, d))
        self._target_action_embedding_table = nn.Parameter(torch.zeros(1, n * d))

    def forward(self, actions, n_hist_pad: int, n_cand_pad: int):
        B = actions.shape[0]
        bits = (torch.bitwise_and(actions.unsqueeze(-1), self._combined_action_weights) > 0)
        hist = (bits.unsqueeze(-1) * self._action_embedding_table).reshape(B, n_hist_pad, -1)
        tgt = self._target_action_embedding_table.expand(B, n_cand_pad, -1)
        return torch.cat([hist, tgt], 1)


class ContextualPreprocessor(nn.Module):
    def __init__(self, cfg: HSTUConfig):
        super().__init__()
        i, h, o = cfg.table_dim, cfg.preprocessor_hidden_dim, cfg.transducer_dim
        self._batched_contextual_linear_weights = nn.Parameter(torch.zeros(1, i, o))
        self._batched_contextual_linear_bias = nn.Parameter(torch.zeros(1, o))
        self._content_embedding_mlp = _mlp(i, h, o)
        self._additional_embedding_mlp = _mlp(i, h, o)       # item_category_id
        self._action_encoder = ActionEncoder(cfg)
        self._action_embedding_mlp = _mlp(len(cfg.action_weights) * cfg.action_embedding_dim, h, o)


class PositionalEncoder(nn.Module):
    def __init__(self, cfg: HSTUConfig):
        super().__init__()
        self._position_embeddings_weight = nn.Parameter(torch.zeros(cfg.num_position_buckets, cfg.transducer_dim))
        self._timestamp_embeddings_weight = nn.Parameter(torch.zeros(cfg.num_time_buckets + 1, cfg.transducer_dim))


class STULayer(nn.Module):
    def __init__(self, cfg: HSTUConfig):
        super().__init__()
        D, H, hd, qd = cfg.transducer_dim, cfg.num_heads, cfg.attn_linear_dim, cfg.attn_qk_dim
        self.H, self.hd, self.qd = H, hd, qd
        self._uvqk_weight = nn.Parameter(torch.zeros(D, (2 * hd + 2 * qd) * H))
        self._uvqk_beta = nn.Parameter(torch.zeros((2 * hd + 2 * qd) * H))
        self._input_norm_weight = nn.Parameter(torch.ones(D))
        self._input_norm_bias = nn.Parameter(torch.zeros(D))
        self._output_weight = nn.Parameter(torch.zeros(3 * hd * H, D))
        self._output_norm_weight = nn.Parameter(torch.ones(hd * H))
        self._output_norm_bias = nn.Parameter(torch.zeros(hd * H))

    def forward(self, x, mask, norm_len: float):
        B, N, D = x.shape
        H, hd, qd = self.H, self.hd, self.qd
        xn = F.layer_norm(x, (D,), self._input_norm_weight, self._input_norm_bias, eps=1e-6)
        u, v, q, k = torch.split(xn @ self._uvqk_weight + self._uvqk_beta, [hd * H, hd * H, qd * H, qd * H], -1)
        u = F.silu(u)
        q = q.view(B, N, H, qd).transpose(1, 2)
        k = k.view(B, N, H, qd).transpose(1, 2)
        v = v.view(B, N, H, hd).transpose(1, 2)
        attn = F.silu(q @ k.transpose(-1, -2) * (1.0 / math.sqrt(qd))) / norm_len
        attn = attn * mask.unsqueeze(1)
        a = (attn @ v).transpose(1, 2).reshape(B, N, H * hd)
        y = u * F.layer_norm(a, (H * hd,), self._output_norm_weight, self._output_norm_bias, eps=1e-6)
        return x + torch.cat([u, a, y], -1) @ self._output_weight


class STUStack(nn.Module):
    def __init__(self, cfg: HSTUConfig):
        super().__init__()
        self._stu_layers = nn.ModuleList([STULayer(cfg) for _ in range(cfg.num_layers)])


class TimestampLayerNormPostprocessor(nn.Module):
    def __init__(self, cfg: HSTUConfig):
        super().__init__()
        D = cfg.transducer_dim
        self.register_buffer("_period_units", torch.tensor([[p for p, _ in TIME_FEATURES]], dtype=torch.float32))
        self.register_buffer("_units_per_period", torch.tensor([[n for _, n in TIME_FEATURES]], dtype=torch.float32))
        self._time_feature_combiner = nn.Linear(D + 2 * len(TIME_FEATURES), D)
        self._layer_norm = nn.LayerNorm(D)

    def forward(self, x, timestamps):
        units = torch.div(timestamps.unsqueeze(-1), self._period_units, rounding_mode="floor")
        angle = torch.remainder(units, self._units_per_period) / self._units_per_period * 2 * 3.14
        feats = torch.stack([torch.cos(angle), torch.sin(angle)], -1).flatten(-2, -1).to(x.dtype)
        return self._layer_norm(self._time_feature_combiner(torch.cat([x, feats], -1)))


class HSTUTransducer(nn.Module):
    def __init__(self, cfg: HSTUConfig):
        super().__init__()
        self._input_preprocessor = ContextualPreprocessor(cfg)
        self._positional_encoder = PositionalEncoder(cfg)
        self._stu_module = STUStack(cfg)
        self._output_postprocessor = TimestampLayerNormPostprocessor(cfg)


class MultitaskModule(nn.Module):
    def __init__(self, cfg: HSTUConfig):
        super().__init__()
        self._prediction_module = _mlp(cfg.transducer_dim, cfg.mlp_hidden, 1, out_norm=False)


class DlrmHSTU(nn.Module):
    """forward(user_id [B], uih_ids [B, L], uih_actions [B, L], cand_ids [B, C], lengths [B, 2]) -> [B, C] click
    probabilities (0 in the padding)."""

    def __init__(self, cfg: HSTUConfig):
        super().__init__()
        self.cfg = cfg
        D = cfg.transducer_dim
        self._embedding_collection = EmbeddingCollection(cfg)
        self._hstu_transducer = HSTUTransducer(cfg)
        self._item_embedding_mlp = _mlp(2 * cfg.table_dim, cfg.mlp_hidden, D)
        self._multitask_module = MultitaskModule(cfg)

    def _lookup(self, table: str, ids, like):
        """Rows of ``table`` for ``ids``, on the device and in the dtype of ``like`` (the tables may stay in host
        memory while the dense part runs on a GPU, as the reference's ModelFamily keeps them: table_device cpu)."""
        coll = self.__dict__.get("_host_tables") or self._embedding_collection
        t = coll.embeddings[table]
        return t(ids.to(t.weight.device)).to(device=like.device, dtype=like.dtype)

    def forward(self, user_id, uih_ids, uih_actions, cand_ids, lengths):
        cfg = self.cfg
        pre = self._hstu_transducer._input_preprocessor
        B, L = uih_ids.shape
        C = cand_ids.shape[1]
        n_hist, n_cand = lengths[:, 0], lengths[:, 1]
        ar_l = torch.arange(L, device=uih_ids.device)
        ar_c = torch.arange(C, device=uih_ids.device)
        hist_ok = ar_l.unsqueeze(0) < n_hist.unsqueeze(1)          # [B, L]
        cand_ok = ar_c.unsqueeze(0) < n_cand.unsqueeze(1)          # [B, C]
        ids = torch.cat([uih_ids, cand_ids], 1)                    # history then candidates, one sequence
        dense = self._item_embedding_mlp[0].weight                 # where (and in what dtype) the dense part runs
        item = self._lookup("item_id", ids, dense)
        cat = self._lookup("item_category_id", torch.div(ids, cfg.items_per_category, rounding_mode="floor")
                           .clamp(max=cfg.num_categories - 1), dense)
        # candidates' item embeddings (dlrm_hstu._item_forward)
        item_emb = self._item_embedding_mlp(torch.cat([item[:, L:], cat[:, L:]], -1))
        # the user side: content + category + actions (ContextualPreprocessor)
        x = pre._content_embedding_mlp(item) + pre._additional_embedding_mlp(cat)
        x = x + pre._action_embedding_mlp(pre._action_encoder(uih_actions, L, C))
        ctx = self._lookup("user_id", user_id.clamp(max=cfg.num_users - 1), dense) \
            @ pre._batched_contextual_linear_weights[0]
        ctx = (ctx + pre._batched_contextual_linear_bias[0]) * (n_hist >= cfg.contextual_min_uih_len).unsqueeze(1)
        x = torch.cat([ctx.unsqueeze(1), x], 1)                   # [B, N = 1 + L + C, D]
        N = 1 + L + C
        # positions (pt_position._get_col_indices, contextual_seq_len 1): history counted back from its end, the
        # candidates at 0 past it; timestamps are all 1, so every time bucket is 0
        pos_enc = self._hstu_transducer._positional_encoder
        hist_pos = (n_hist.unsqueeze(1) - ar_l.unsqueeze(0)).clamp(min=0) + 1
        pos = torch.cat([torch.zeros_like(n_hist).unsqueeze(1), hist_pos, torch.ones(B, C, dtype=hist_pos.dtype,
                                                                                       device=x.device)], 1)
        pos = pos.clamp(max=cfg.num_position_buckets - 1)
        x = x * (cfg.transducer_dim ** 0.5) + pos_enc._position_embeddings_weight[pos] \
            + pos_enc._timestamp_embeddings_weight[0]
        # causal, target-aware mask over the real positions (pt_hstu_attention._get_valid_attn_mask)
        valid = torch.cat([torch.ones(B, 1, dtype=torch.bool, device=x.device), hist_ok, cand_ok], 1)   # [B, N]
        is_cand = torch.cat([torch.zeros(B, 1 + L, dtype=torch.bool, device=x.device), cand_ok], 1)
        ar_n = torch.arange(N, device=x.device)
        causal = ar_n.unsqueeze(1) >= ar_n.unsqueeze(0)                                                 # [N, N]
        mask = causal.unsqueeze(0) & valid.unsqueeze(1) & valid.unsqueeze(2) & ~is_cand.unsqueeze(1)
        mask = mask | (torch.eye(N, dtype=torch.bool, device=x.device).unsqueeze(0) & valid.unsqueeze(2))
        mask = mask.to(x.dtype)
        # the reference's max_seq_len: the contextual feature + the longest history + the most candidates in the batch
        norm_len = float(1 + int(n_hist.max()) + int(n_cand.max()))
        for layer in self._hstu_transducer._stu_module._stu_layers:
            x = layer(x, mask, norm_len)
        user = self._hstu_transducer._output_postprocessor(x[:, 1 + L:], torch.ones(B, C, device=x.device))
        logits = self._multitask_module._prediction_module(user * item_emb).squeeze(-1)
        return torch.sigmoid(logits) * cand_ok.to(logits.dtype)


# --- weights ---------------------------------------------------------------------------------------------
def init_tiny(model: DlrmHSTU, seed: int = K.TINY_SEED) -> DlrmHSTU:
    """Seeded random weights (xavier for matrices, small normals for tables and biases)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            table = name.startswith("_embedding_collection.") or name.endswith(("_table", "_embeddings_weight"))
            if p.dim() == 1 and name.endswith("weight"):                   # layer-norm scales
                p.fill_(1.0)
            elif p.dim() >= 2 and not table:                                # projections: xavier-normal
                fan = p.shape[-2] + p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=g) * math.sqrt(2.0 / fan))
            else:                                                           # tables, biases
                p.copy_(torch.randn(p.shape, generator=g) * (0.5 if p.dim() >= 2 else 0.05))
    return model


def build_tiny(model_dir: Path) -> tuple[DlrmHSTU, Path]:
    cfg = tiny_config()
    model = init_tiny(DlrmHSTU(cfg)).eval()
    return model, save(model, model_dir)


def save(model: DlrmHSTU, model_dir: Path) -> Path:
    from code.common.fileio import staged_path, write_text

    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    with staged_path(model_dir / TINY_WEIGHTS, suffix=".pt") as tmp:
        torch.save(model.state_dict(), tmp)
    write_text(model_dir / CONFIG, json.dumps(dataclasses.asdict(model.cfg), indent=2) + "\n")
    return model_dir / TINY_WEIGHTS


def read_config(model_dir: Path, fix: str) -> HSTUConfig:
    p = Path(model_dir) / CONFIG
    if not p.is_file():
        if real_checkpoint(model_dir) is not None:
            return REAL
        raise MissingDataError(f"model not found: {p}", fix)
    return HSTUConfig.of(json.loads(p.read_text()))


def real_checkpoint(model_dir: Path) -> Path | None:
    """checkpoint.py's layout: <path>/non_sparse.ckpt and <path>/sparse/, <path> being the folder given to
    --model-path (the README's example ends in the training step, ".../streaming_100b/89/"); the newest such
    folder under ``model_dir``."""
    d = Path(model_dir)
    hits = [p.parent for p in d.rglob(K.NON_SPARSE) if (p.parent / K.SPARSE_DIR).is_dir()] if d.is_dir() else []
    return max(hits, key=lambda p: (len(p.parts), p.name)) if hits else None


def load_real(model: DlrmHSTU, path: Path) -> DlrmHSTU:
    """The dense part from non_sparse.ckpt["dense_dict"] by name, the tables from the sparse/ checkpoint
    (torch.distributed.checkpoint, saved by checkpoint.save_dmp_checkpoint as {"sparse_dict": SparseState}: keys
    "sparse_dict.<the EmbeddingCollection's state_dict key>")."""
    import torch.distributed.checkpoint as dcp

    dense = torch.load(Path(path) / K.NON_SPARSE, map_location="cpu", weights_only=False)["dense_dict"]
    own = model.state_dict()
    missing = [k for k in own if not k.startswith("_embedding_collection.") and k not in dense]
    if missing:
        raise MissingDataError(f"{path / K.NON_SPARSE}: no {missing[0]} (and {len(missing) - 1} more) in dense_dict",
                               "download the checkpoint again (make download_model BENCHMARKS=dlrm_v3)")
    model.load_state_dict({k: v for k, v in dense.items() if k in own}, strict=False)
    tables = {k: v for k, v in own.items() if k.startswith("_embedding_collection.")}
    dcp.load({"sparse_dict": tables}, storage_reader=dcp.FileSystemReader(str(Path(path) / K.SPARSE_DIR)))
    model.load_state_dict(tables, strict=False)
    return model


_LOCK = threading.Lock()
_SHARED: dict[str, DlrmHSTU] = {}


def load(model_dir: Path, fix: str) -> DlrmHSTU:
    """The model of ``model_dir`` on the CPU (the tiny weights or the real checkpoint); one copy per process."""
    key = str(Path(model_dir).resolve())
    with _LOCK:
        if key not in _SHARED:
            cfg = read_config(model_dir, fix)
            model = DlrmHSTU(cfg)
            tiny = Path(model_dir) / TINY_WEIGHTS
            if tiny.is_file():
                model.load_state_dict(torch.load(tiny, map_location="cpu", weights_only=True))
            else:
                real = real_checkpoint(model_dir)
                if real is None:
                    raise MissingDataError(f"model not found: no {TINY_WEIGHTS} and no {K.NON_SPARSE} + "
                                           f"{K.SPARSE_DIR}/ under {model_dir}", fix)
                load_real(model, real)
            _SHARED[key] = model.eval()
        return _SHARED[key]


def eager_factory(source_dir, spec, device, dtype):
    """code.common.backends.pytorch's eager factory: the dense part on ``device`` in ``dtype``; the tables stay in
    host memory, one copy per process shared by the engines (the reference's ModelFamily: table_device cpu, the
    dense module on each GPU in bf16; the real tables are ~1 TB)."""
    model = load(Path(source_dir), str(spec.extra.get("fix", "")))
    if str(device) != "cpu" or dtype != torch.float32:
        import copy

        tables, model._embedding_collection = model._embedding_collection, None
        try:
            dense = copy.deepcopy(model).to(device=device, dtype=dtype)
        finally:
            model._embedding_collection = tables
        # not a submodule: the engine's module.to(device / dtype) leaves the host tables where they are
        dense.__dict__["_host_tables"] = tables
        model = dense
    return model, list(INPUTS), [OUTPUT]


def predict(model: DlrmHSTU, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """One forward pass on numpy feeds (the tiny data's labels, the raw loop of scripts/bench_dlrm_v3.py)."""
    with torch.inference_mode():
        return model(*[torch.from_numpy(feeds[n]) for n in INPUTS]).float().numpy()
