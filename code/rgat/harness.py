"""R-GAT actions: IGBH download, split and CSC index, the tiny variant, the eager torch engine, QSL, Processor
and accuracy.

The engine is the whole R-GAT as an eager torch module (``--backend=pytorch``; a sampled subgraph has no fixed
shape to export). Sampling and feature gathering run on the host in the Processor, as the reference's do
(``PyGSampler`` on the CPU graph, features fetched from the memory-mapped arrays and moved to the device).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from code.common import paths
from code.common.backends import get_backend
from code.common.backends.base import EngineSpec, ModelSource
from code.common.benchmark import Benchmark, Processor
from code.common.engines import get_or_build
from code.common.errors import HarnessError, MissingDataError
from code.rgat import SPEC, dataset as D, model
from code.rgat.accuracy import score

SPLIT_SEED, TRAIN_FRAC, VAL_FRAC = 42, 0.6, 0.01      # tools/split_seeds.py defaults
MEMORY_FIX = ("run on a machine with ~600 GB of RAM (graph/R-GAT/README.md), or use the tiny variant "
              "(MODEL_VARIANT=tiny)")


class RGATBenchmark(Benchmark):
    spec = SPEC

    # --- locations -----------------------------------------------------------------------------
    @property
    def size(self) -> str:
        return "tiny" if self.tiny else "full"

    @property
    def data_root(self) -> Path:
        """The folder holding ``<size>/processed`` (the reference's ``--dataset-path``)."""
        if self.settings.data_dir and not self.tiny:
            return Path(self.settings.data_dir).expanduser()
        return paths.data_dir("igbh", self.settings.model_variant)

    @property
    def csc_dir(self) -> Path:
        return paths.preprocessed_dir("igbh", self.settings.model_variant) / "csc"

    def raw(self) -> D.RawIGBH:
        return D.RawIGBH(self.data_root, self.size, self.fix("download_data"))

    # --- model and data ------------------------------------------------------------------------
    def download_model(self) -> None:
        if self.tiny:
            p = model.build_tiny(self.model_dir)
            print(f"[download_model] tiny R-GAT ({model.TINY}) -> {p}")
            return
        print(f"[download_model] {model.download_real(self.model_dir)}")

    def download_data(self) -> None:
        if self.tiny:
            self._make_tiny_data()
            return
        from code.common.fileio import download

        base = self.raw().base
        D.check_room(base, D.FULL_DISK_GB, "IGBH full (2.2 TB) and its index",
                     "free space there, or pass --data_dir=<folder on a volume with room>")
        for rel in D.FULL_FILES:
            download(f"{D.IGBH_URL}/{rel}", base / rel, check=lambda p, r=rel: check_full_file(p, r),
                     fix=self.fix("download_data"))
            print(f"[download_data] {base / rel}")
        self._split_seeds(base)

    @staticmethod
    def _split_seeds(base: Path) -> None:
        """tools/split_seeds.py --dataset_size full: seed 42, randperm over the 157,675,969 labelled papers."""
        import torch

        from code.common.fileio import staged_path

        torch.manual_seed(SPLIT_SEED)
        perm = torch.randperm(D.FULL_LABELLED)
        n_train, n_val = int(D.FULL_LABELLED * TRAIN_FRAC), int(D.FULL_LABELLED * VAL_FRAC)
        assert n_val == D.FULL_SEEDS
        for name, part in (("train_idx.pt", perm[:n_train]), ("val_idx.pt", perm[n_train:n_train + n_val])):
            with staged_path(base / name, suffix=".pt") as tmp:
                torch.save(part.clone(), tmp)
        print(f"[download_data] split: {n_val} validation seeds -> {base / 'val_idx.pt'}")

    def _make_tiny_data(self) -> None:
        """The synthetic graph (seeded), then its labels: the tiny model's predictions for the validation papers
        (one batch: the tiny graph makes a seed's subgraph independent of its batch, see dataset.TINY_CLUSTERS);
        the other papers get seeded random classes."""
        import torch

        if not (self.model_dir / model.TINY_WEIGHTS).exists():
            model.build_tiny(self.model_dir)
        base = D.write_tiny(self.data_root, model.TINY_SEED, model.TINY["in_feats"])
        raw = self.raw()
        graph = D.Graph.in_memory(raw)
        val = raw.val_idx()
        net = model.load(self.model_dir, self.fix("download_model"))
        torch.set_num_threads(1)          # small graphs: one thread is fastest (and fair to a shared CPU)
        rng = np.random.default_rng(model.TINY_SEED)
        labels = rng.integers(0, model.TINY["num_classes"], D.TINY_NODES["paper"])
        blocks = D.sample_blocks(graph, val, rng)
        f = model.feeds(blocks, D.gather({t: raw.features(t) for t in D.NTYPES}, blocks))
        with torch.inference_mode():
            out = net(*[torch.from_numpy(np.ascontiguousarray(f[n])) for n in model.input_names(3)])
        labels[val] = out.argmax(1).numpy()
        D.write_labels(base, labels)
        print(f"[download_data] tiny IGBH ({sum(D.TINY_NODES.values())} nodes, {val.size} seeds) -> {base}")

    def preprocess_data(self) -> None:
        raw = self.raw()
        if not self.tiny:
            D.check_memory(D.FULL_RAM_GB, "indexing IGBH full", MEMORY_FIX)
            D.check_room(self.csc_dir, 1500, "the CSC index of IGBH full (~11.6B int64 edges)",
                         "free space in the scratch folder (MLPERF_SCRATCH_PATH)")
        counts = D.preprocess(raw, self.csc_dir)
        print(f"[preprocess_data] CSC of {len(counts)} edge types ({sum(counts.values())} edges) -> {self.csc_dir}")

    # --- engines -------------------------------------------------------------------------------
    def config(self) -> dict:
        return model.read_config(self.model_dir, self.fix("download_model"))

    def engine_spec(self, device_id: int = 0) -> EngineSpec:
        cfg = self.config()
        shapes = {n: ((-1, cfg["in_feats"]) if n.startswith("x_") else (2, -1) if n.startswith("e") else (6,))
                  for n in model.input_names(cfg["num_layers"])}
        return self.engine_spec_for("rgat", self.settings.batch_size(), shapes, device_id,
                                    extra={"fix": self.fix("download_model"), "output_names": [model.OUTPUT]})

    def generate_engines(self) -> dict[str, str]:
        s = self.settings

        def no_onnx():
            raise HarnessError("R-GAT runs as an eager torch module (a sampled subgraph has no fixed shape)",
                               "use --backend=pytorch")

        source = ModelSource(no_onnx, module_factory="code.rgat.model:eager_factory", module_dir=self.model_dir,
                             fix=self.fix("download_model"))
        self.config()
        path = get_or_build(get_backend(s.backend), source, self.engine_spec(), system_id=s.system_id,
                            benchmark="rgat", scenario=s.scenario)
        return {"rgat": str(path)}

    # --- run -----------------------------------------------------------------------------------
    def make_qsl(self) -> D.IGBHQSL:
        raw = self.raw()
        if not self.tiny:
            D.check_memory(D.FULL_RAM_GB, "running on IGBH full", MEMORY_FIX)
        graph = D.Graph(self.csc_dir, raw.num_nodes(), self.fix("preprocess_data"))
        self.qsl = D.IGBHQSL(raw, graph, self.settings.performance_sample_count or 0)
        return self.qsl

    def make_processors(self, qsl, engines) -> list[Processor]:
        backend = get_backend(self.settings.backend)
        return [RGATProcessor(backend.load(engines["rgat"], spec), qsl, spec.batch_size, cores, seed=i)
                for i, (spec, cores) in enumerate(self.worker_specs())]

    def accuracy(self, accuracy_log: str, out_dir: str) -> dict:
        raw = self.raw()
        labels = np.asarray(raw.labels())[raw.val_idx()].astype(np.int64)
        target = self.settings.round_entry().accuracy_min["acc"]
        return score(accuracy_log, labels, Path(out_dir) / "accuracy.txt", target, tiny=self.tiny)


class RGATProcessor(Processor):
    """A batch = up to ``batch_size`` seed papers sampled together (one subgraph, as the reference's batches);
    each sample's response is its predicted class as one int64 (accuracy.py)."""

    def __init__(self, engine, qsl: D.IGBHQSL, batch_size: int, cores: tuple[int, ...] | None = None,
                 seed: int = 0):
        self.engine, self.qsl, self.batch_size, self.cores = engine, qsl, batch_size, cores
        self.rng = np.random.default_rng(seed)

    def classes(self, seeds: np.ndarray) -> np.ndarray:
        """Predicted class per distinct seed paper (sampling, feature gathering, the engine, argmax)."""
        blocks = D.sample_blocks(self.qsl.graph, seeds, self.rng)
        out = self.engine.infer(model.feeds(blocks, self.qsl.gather(blocks)))[model.OUTPUT]
        return np.asarray(out).argmax(1).astype(np.int64)

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        seeds, inverse = np.unique(self.qsl.val_idx[np.asarray(indices, np.int64)], return_inverse=True)
        pred = self.classes(seeds)[inverse]
        return [pred[i:i + 1].copy() for i in range(len(indices))]

    def warmup(self) -> None:
        n = min(self.batch_size, self.qsl.total_count)
        for _ in range(2):
            self.classes(np.unique(self.qsl.val_idx[:n]))


def check_full_file(path: Path, rel: str) -> None:
    """A downloaded IGBH full file has the shape the reference reads (the reference publishes no checksums)."""
    ntype, name = rel.split("/")
    if ntype in D.RAW_MEMMAP and name == "node_feat.npy":
        want = D.FULL_NODES[ntype] * D.FEATURE_DIM * 4
        ok = path.stat().st_size >= want
    elif name.startswith("node_label_"):
        ok = path.stat().st_size >= D.FULL_NODES["paper"] * 4
    elif name.endswith("_id_index_mapping.npy"):          # not read by the benchmark: a .npy of any content
        with open(path, "rb") as f:
            ok = f.read(6) == b"\x93NUMPY"
    else:
        try:
            a = np.load(path, mmap_mode="r")
        except (ValueError, OSError):
            ok = False
        else:
            ok = (a.ndim == 2 and a.shape[1] == 2) if name == "edge_index.npy" else a.shape[0] == D.FULL_NODES[ntype]
    if not ok:
        raise MissingDataError(f"{path} is not the IGBH full {rel} (truncated or another size)",
                               "delete it and rerun make download_data BENCHMARKS=rgat")
