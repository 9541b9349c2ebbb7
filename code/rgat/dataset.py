"""IGBH: the on-disk layout the reference reads, the graph it builds, its neighbour sampling, and our QSL.

Layout (the reference's ``tools/download_igbh_full.sh`` + ``tools/split_seeds.py``), under ``<root>/<size>/processed``:
  <ntype>/node_feat.npy                      features; full: raw float32 (N, 1024) without a .npy header for
                                             paper and author (the reference memmaps them), .npy for the rest
  paper/node_label_2K.npy                    labels (2,983 classes); full: raw float32 (N,)
  <src>__<rel>__<dst>/edge_index.npy         (E, 2) int64 COO: column 0 the source, column 1 the destination
  train_idx.pt, val_idx.pt                   the split (torch.randperm over the labelled papers, seed 42); the
                                             788,379 validation papers are the LoadGen samples, in that order

The graph (``dgl_utilities/feature_fetching.py`` ``IGBHeteroGraphStructure.augment_edges`` + ``components.py``
``build_graph``): the six relations, a ``rev_<rel>`` reverse of each of the five between different types, and
``cites`` made symmetric with exactly one self loop per paper (self loops in the file are dropped). We store
each relation as CSC (``preprocess``): ``indptr`` over destination nodes, ``indices`` the source of each in-edge.

Sampling (``dgl_utilities/pyg_sampler.py`` ``PyGSampler([5, 10, 15])``, which mimics PyG/GLT): from the seeds
outwards with fan-outs 15, 10, 5; per hop, every relation into a frontier node gives up to ``fanout`` of its
in-edges drawn uniformly without replacement (all of them when it has no more); a node is expanded once, at the
first hop it is reached; the block of each layer holds the edges of that hop and of all hops nearer the seeds.
The draw is random, as the reference's is; our RNG is numpy's, seeded per Processor.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path
from typing import Sequence

import numpy as np

from code.common.benchmark import QSL
from code.common.errors import MissingDataError

NTYPES = ("paper", "author", "institute", "fos", "journal", "conference")
RELATIONS = (("paper", "cites", "paper"), ("paper", "written_by", "author"), ("author", "affiliated_to", "institute"),
             ("paper", "topic", "fos"), ("paper", "published", "journal"), ("paper", "venue", "conference"))
ETYPES = RELATIONS + tuple((d, f"rev_{r}", s) for s, r, d in RELATIONS if s != d)
FANOUTS = (5, 10, 15)              # the reference's order: layer 0 (input side) first; sampled from the seeds outwards
LABEL_FILE = "node_label_2K.npy"
NUM_CLASSES = 2983
FEATURE_DIM = 1024
# IGBHeteroGraphStructure.num_nodes["full"]; the full split: split_seeds.py over 157,675,969 labelled papers
FULL_NODES = {"paper": 269346174, "author": 277220883, "institute": 26918, "fos": 712960, "journal": 49052,
              "conference": 4547}
FULL_LABELLED = 157675969
FULL_SEEDS = 788379                # int(157,675,969 x 0.01): the checker's dataset-size and performance-sample-count
RAW_MEMMAP = ("paper", "author")   # full: raw float32 files without a .npy header
# What the real run needs (graph/R-GAT/README.md: "~600GB of RAM and ~2.3TB of disk").
FULL_DISK_GB, FULL_RAM_GB = 2300, 600
# tools/download_igbh_full.sh (the reference gives no checksums; ``check_layout`` checks every file's shape)
IGBH_URL = "https://igb-public.s3.us-east-2.amazonaws.com/IGBH/processed"
FULL_FILES = tuple(f"{t}/{f}" for t in NTYPES for f in ("node_feat.npy", f"{t}_id_index_mapping.npy")) + \
    ("paper/node_label_19.npy", "paper/node_label_2K.npy") + tuple(f"{'__'.join(r)}/edge_index.npy" for r in RELATIONS)


def etype_name(etype: tuple[str, str, str]) -> str:
    return "__".join(etype)


# --- up-front resource checks ------------------------------------------------------------------------

def check_room(folder: Path, need_gb: float, what: str, fix: str) -> None:
    """One-line error when ``folder``'s volume has less than ``need_gb`` free."""
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free / 1e9
    if free < need_gb:
        raise MissingDataError(f"{what} needs ~{need_gb:.0f} GB free in {folder}; the volume has {free:.0f} GB", fix)


def check_memory(need_gb: float, what: str, fix: str) -> None:
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    if total < need_gb:
        raise MissingDataError(f"{what} needs ~{need_gb:.0f} GB of RAM (graph/R-GAT/README.md); this machine has "
                               f"{total:.0f} GB", fix)


# --- the raw layout ----------------------------------------------------------------------------------

@dataclasses.dataclass
class RawIGBH:
    """The reference's files of one dataset size under ``root`` (``<root>/<size>/processed``)."""

    root: Path
    size: str
    fix: str

    @property
    def base(self) -> Path:
        return Path(self.root) / self.size / "processed"

    def _need(self, p: Path) -> Path:
        if not p.is_file():
            raise MissingDataError(f"IGBH file not found: {p}", self.fix)
        return p

    def features(self, ntype: str) -> np.ndarray:
        p = self._need(self.base / ntype / "node_feat.npy")
        if self.size == "full" and ntype in RAW_MEMMAP:
            return np.memmap(p, dtype=np.float32, mode="r", shape=(FULL_NODES[ntype], FEATURE_DIM))
        return np.load(p, mmap_mode="r")

    def labels(self) -> np.ndarray:
        p = self._need(self.base / "paper" / LABEL_FILE)
        if self.size == "full":
            return np.memmap(p, dtype=np.float32, mode="r", shape=(FULL_NODES["paper"],))
        return np.load(p, mmap_mode="r")

    def edges(self, rel: tuple[str, str, str]) -> np.ndarray:
        return np.load(self._need(self.base / etype_name(rel) / "edge_index.npy"), mmap_mode="r")

    def val_idx(self) -> np.ndarray:
        import torch

        return torch.load(self._need(self.base / "val_idx.pt")).numpy().astype(np.int64)

    def num_nodes(self) -> dict[str, int]:
        return {t: int(self.features(t).shape[0]) for t in NTYPES}


def augmented_coo(raw: RawIGBH) -> dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]]:
    """(src, dst) per edge type of the graph the reference builds (see the module docstring), in memory."""
    n_paper = raw.num_nodes()["paper"]
    out = {}
    for rel in RELATIONS:
        e = np.asarray(raw.edges(rel))
        src, dst = e[:, 0].astype(np.int64), e[:, 1].astype(np.int64)
        if rel[0] == rel[2]:
            keep = src != dst
            loop = np.arange(n_paper, dtype=np.int64)
            out[rel] = (np.concatenate([src[keep], dst[keep], loop]), np.concatenate([dst[keep], src[keep], loop]))
        else:
            out[rel] = (src, dst)
            out[(rel[2], f"rev_{rel[1]}", rel[0])] = (dst, src)
    return out


def to_csc(src: np.ndarray, dst: np.ndarray, n_dst: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(n_dst + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n_dst), out=indptr[1:])
    return indptr, src[order].astype(np.int64)


def preprocess(raw: RawIGBH, out_dir: Path) -> dict[str, int]:
    """Write the CSC of every edge type under ``out_dir/<etype>/{indptr,indices}.npy``; returns edges per type."""
    from code.common.fileio import staged_path

    nodes = raw.num_nodes()
    counts = {}
    for et, (src, dst) in augmented_coo(raw).items():
        indptr, indices = to_csc(src, dst, nodes[et[2]])
        d = Path(out_dir) / etype_name(et)
        d.mkdir(parents=True, exist_ok=True)
        for name, arr in (("indptr", indptr), ("indices", indices)):
            with staged_path(d / f"{name}.npy") as tmp, open(tmp, "wb") as f:
                np.save(f, arr)
        counts[etype_name(et)] = int(indices.size)
    return counts


# --- the graph and its sampler -----------------------------------------------------------------------

class Graph:
    """The CSC of every edge type (memory-mapped) and the node counts. Read-only; shared by all workers."""

    def __init__(self, csc_dir: Path, num_nodes: dict[str, int], fix: str):
        self.num_nodes = dict(num_nodes)
        self.csc = {}
        for et in ETYPES:
            d = Path(csc_dir) / etype_name(et)
            if not (d / "indptr.npy").is_file() or not (d / "indices.npy").is_file():
                raise MissingDataError(f"graph index not found: {d}", fix)
            indptr, indices = np.load(d / "indptr.npy", mmap_mode="r"), np.load(d / "indices.npy", mmap_mode="r")
            if indptr.shape != (num_nodes[et[2]] + 1,) or int(indptr[-1]) != indices.shape[0]:
                raise MissingDataError(f"graph index {d} does not match the data set's {et[2]} nodes", fix)
            self.csc[et] = (indptr, indices)

    @classmethod
    def in_memory(cls, raw: RawIGBH) -> "Graph":
        """The same graph built from the raw files without writing the index (the tiny variant's labelling)."""
        g = cls.__new__(cls)
        g.num_nodes = raw.num_nodes()
        g.csc = {et: to_csc(s, d, g.num_nodes[et[2]]) for et, (s, d) in augmented_coo(raw).items()}
        return g


def sample_in_edges(indptr: np.ndarray, indices: np.ndarray, dst: np.ndarray, fanout: int,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Up to ``fanout`` in-edges of each node of ``dst``, uniformly without replacement (all when it has no more):
    DGL's ``sample_neighbors(g, nodes, fanout)`` per edge type. Returns global (src, dst) ids."""
    start = np.asarray(indptr[dst], np.int64)
    deg = np.asarray(indptr[dst + 1], np.int64) - start
    take = np.minimum(deg, fanout)
    owner = np.repeat(np.arange(dst.size), take)
    pos = np.empty(int(take.sum()), np.int64)
    full = deg <= fanout
    # nodes with few enough edges: every one of them
    f_off = np.cumsum(take) - take
    if full.any():
        fo = np.repeat(f_off[full], take[full])
        pos[fo + _ramp(take[full])] = np.repeat(start[full], take[full]) + _ramp(take[full])
    hubs = np.flatnonzero(~full)           # more in-edges than the fan-out: a draw without replacement each
    if hubs.size:
        pick = distinct_offsets(deg[hubs], fanout, rng)
        pos[(f_off[hubs][:, None] + np.arange(fanout)).reshape(-1)] = (start[hubs][:, None] + pick).reshape(-1)
    return np.asarray(indices[pos], np.int64), dst[owner]


def distinct_offsets(deg: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """(len(deg), k): k distinct offsets in [0, d) for each d > k, every k-subset equally likely (vectorized over
    the rows; the rule treats all values alike, so the subsets are uniform). Up to 4k: the k smallest of d random
    keys; above: k independent draws, the repeats drawn again until none is left (rare when d > 4k)."""
    out = np.empty((deg.size, k), np.int64)
    small = deg <= 4 * k
    if small.any():
        d = deg[small]
        keys = rng.random((d.size, int(d.max())))
        keys[np.arange(keys.shape[1])[None, :] >= d[:, None]] = np.inf
        out[small] = np.argpartition(keys, k - 1, axis=1)[:, :k]
    if (~small).any():
        d = deg[~small][:, None]
        x = (rng.random((d.shape[0], k)) * d).astype(np.int64)
        while True:
            order = np.argsort(x, axis=1, kind="stable")
            srt = np.take_along_axis(x, order, 1)
            dup = np.zeros_like(x, dtype=bool)
            np.put_along_axis(dup, order[:, 1:], srt[:, 1:] == srt[:, :-1], 1)
            if not dup.any():
                break
            rows = np.nonzero(dup)[0]
            x[dup] = (rng.random(rows.size) * d[rows, 0]).astype(np.int64)
        out[~small] = x
    return out


def _ramp(lengths: np.ndarray) -> np.ndarray:
    """0..l-1 for each l, concatenated."""
    total = int(lengths.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)


@dataclasses.dataclass
class Block:
    """One layer's message-flow graph. ``src[t]``: global ids of its source nodes of type t, the first
    ``n_dst[t]`` of them being its destination nodes; ``edges[etype]``: (2, E) local (src row, dst row)."""

    src: dict[str, np.ndarray]
    n_dst: dict[str, int]
    edges: dict[tuple[str, str, str], np.ndarray]


def _local(order: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Positions in ``order`` (unique ids) of ``ids`` (all present)."""
    srt = np.argsort(order, kind="stable")
    return srt[np.searchsorted(order, ids, sorter=srt)]


def sample_blocks(graph: Graph, seeds: np.ndarray, rng: np.random.Generator,
                  fanouts: Sequence[int] = FANOUTS) -> list[Block]:
    """PyGSampler.sample: the blocks of every layer, input side first; the last block's destination nodes are
    ``seeds`` in order (the reference's seeds are distinct, as LoadGen's samples of one batch are)."""
    seeds = np.asarray(seeds, np.int64)
    frontier = {"paper": seeds}
    expanded = {t: np.zeros(0, np.int64) for t in NTYPES}
    dst_nodes = {t: (seeds if t == "paper" else np.zeros(0, np.int64)) for t in NTYPES}
    acc = {et: (np.zeros(0, np.int64), np.zeros(0, np.int64)) for et in ETYPES}
    blocks: list[Block] = []
    for fanout in reversed(fanouts):
        for t, f in frontier.items():
            expanded[t] = np.union1d(expanded[t], f)
        new = {}
        for et in ETYPES:
            f = frontier.get(et[2])
            if f is not None and f.size:
                new[et] = sample_in_edges(*graph.csc[et], f, fanout, rng)
        frontier = {}
        for t in NTYPES:
            srcs = [new[et][0] for et in new if et[0] == t]
            if srcs:
                u = np.unique(np.concatenate(srcs))
                frontier[t] = u[~np.isin(u, expanded[t], assume_unique=True)]
        for et, (s, d) in new.items():
            acc[et] = (np.concatenate([acc[et][0], s]), np.concatenate([acc[et][1], d]))
        src_nodes = {}
        for t in NTYPES:
            srcs = [acc[et][0] for et in ETYPES if et[0] == t and acc[et][0].size]
            extra = np.unique(np.concatenate(srcs)) if srcs else np.zeros(0, np.int64)
            extra = extra[~np.isin(extra, dst_nodes[t])]
            src_nodes[t] = np.concatenate([dst_nodes[t], extra])
        edges = {et: np.stack([_local(src_nodes[et[0]], s), _local(dst_nodes[et[2]], d)])
                 for et, (s, d) in acc.items() if s.size}
        blocks.insert(0, Block(src_nodes, {t: int(dst_nodes[t].size) for t in NTYPES}, edges))
        dst_nodes = src_nodes
    return blocks


# --- the QSL -----------------------------------------------------------------------------------------

class IGBHQSL(QSL):
    """LoadGen sample i = validation paper ``val_idx[i]``. Nothing to stage per sample: the graph and features
    are memory-mapped and shared by all workers (the reference's ``load_query_samples`` is empty too)."""

    def __init__(self, raw: RawIGBH, graph: Graph, performance_count: int):
        self.raw, self.graph = raw, graph
        self.val_idx = raw.val_idx()
        self.features = {t: raw.features(t) for t in NTYPES}
        self.total_count = int(self.val_idx.size)
        self.performance_count = min(performance_count or self.total_count, self.total_count)

    def load(self, indices: Sequence[int]) -> None:
        return None

    def unload(self, indices: Sequence[int]) -> None:
        return None

    def gather(self, blocks: list[Block]) -> dict[str, np.ndarray]:
        return gather(self.features, blocks)


def gather(features: dict[str, np.ndarray], blocks: list[Block]) -> dict[str, np.ndarray]:
    """Input features (float32) of the first block's source nodes, per node type (rows read in id order)."""
    out = {}
    for t in NTYPES:
        ids, f = blocks[0].src[t], features[t]
        if ids.size:
            order = np.argsort(ids)
            rows = np.empty((ids.size, f.shape[1]), np.float32)
            rows[order] = f[ids[order]]
            out[t] = rows
        else:
            out[t] = np.zeros((0, f.shape[1]), np.float32)
    return out


# --- the tiny variant --------------------------------------------------------------------------------

# The tiny graph: one cluster per validation seed, each its own connected component, with every in-degree at or
# below the smallest fan-out (5), so sampling takes every in-edge and a seed's subgraph does not depend on which
# seeds share its batch: labels (the tiny model's own predictions) are then exact, and 100% is the faithful score.
# The draws of a node with more in-edges than the fan-out are checked in tests/test_rgat.py on a graph of hubs.
TINY_CLUSTERS = 240
TINY_PER_CLUSTER = {"paper": 5, "author": 5, "institute": 1, "fos": 2, "journal": 1, "conference": 1}
TINY_NODES = {t: TINY_CLUSTERS * k for t, k in TINY_PER_CLUSTER.items()}
TINY_SEEDS = TINY_CLUSTERS


def write_tiny(root: Path, seed: int, feat_dim: int) -> Path:
    """A seeded synthetic IGBH in the reference's layout (``<root>/tiny/processed``; .npy throughout, as the
    reference reads every size below large), clusters as above: in each, papers cite one or two others (and a
    few cite themselves: self loops the graph drops), are written by one or two of its authors (each author at
    least one), have one of its two topics, its journal and its venue; its authors share its institute. Every
    node has an in-edge of every relation into its type, as the reference's DGL GATConv requires (it refuses a
    destination node without one: allow_zero_in_degree is off).
    Labels are written later (``write_labels``). Returns the processed dir."""
    import torch

    rng = np.random.default_rng(seed)
    base = Path(root) / "tiny" / "processed"
    k = TINY_PER_CLUSTER
    for t in NTYPES:
        (base / t).mkdir(parents=True, exist_ok=True)
        np.save(base / t / "node_feat.npy", rng.standard_normal((TINY_NODES[t], feat_dim)).astype(np.float32))
    edges: dict = {rel: [] for rel in RELATIONS}
    for c in range(TINY_CLUSTERS):
        off = {t: c * n for t, n in k.items()}
        papers = off["paper"] + np.arange(k["paper"])
        cited = set()
        for i in range(k["paper"]):          # a ring (i cites i+1) plus a chord: symmetric degree <= 4
            cited.add((i, (i + 1) % k["paper"]))
        cited.add((0, 2))
        cited.add((int(rng.integers(0, k["paper"])),) * 2)
        edges[("paper", "cites", "paper")] += [(papers[a], papers[b]) for a, b in sorted(cited)]
        authors = off["author"] + np.arange(k["author"])
        for i, p in enumerate(papers):       # author i wrote paper i, some papers have a second author
            edges[("paper", "written_by", "author")].append((p, authors[i]))
            if rng.random() < 0.5:
                edges[("paper", "written_by", "author")].append((p, authors[(i + 1) % k["author"]]))
            edges[("paper", "topic", "fos")].append((p, off["fos"] + i % k["fos"]))
            edges[("paper", "published", "journal")].append((p, off["journal"]))
            edges[("paper", "venue", "conference")].append((p, off["conference"]))
        edges[("author", "affiliated_to", "institute")] += [(a, off["institute"]) for a in authors]
    for rel, e in edges.items():
        (base / etype_name(rel)).mkdir(parents=True, exist_ok=True)
        np.save(base / etype_name(rel) / "edge_index.npy", np.asarray(e, np.int64).reshape(-1, 2))
    # split_seeds.py's files: 60% of the papers for training, then the validation seeds (one paper a cluster)
    P = TINY_NODES["paper"]
    val = rng.permutation(TINY_CLUSTERS) * k["paper"] + rng.integers(0, k["paper"], TINY_CLUSTERS)
    rest = np.setdiff1d(np.arange(P), val)
    torch.save(torch.from_numpy(rng.permutation(rest)[: int(P * 0.6)]), base / "train_idx.pt")
    torch.save(torch.from_numpy(val.astype(np.int64)), base / "val_idx.pt")
    return base


def write_labels(base: Path, labels: np.ndarray) -> None:
    np.save(Path(base) / "paper" / LABEL_FILE, labels.astype(np.float32))
