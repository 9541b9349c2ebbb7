"""The multi-hot Criteo day-23 set as the reference reads it (python/multihot_criteo.py, "multihot-criteo"),
its user-query aggregation, the QSL, and the tiny synthetic set.

Files (``<data>/``): day_23_dense.npy float32 (rows, 13), already log(x + 3) (torchrec's npy
preprocessing; the inference reference applies no transform); day_23_sparse_multi_hot.npz with members
"<k>.npy" int32 (rows, MULTI_HOT_SIZES[k]) stored uncompressed (the reference memory-maps them);
day_23_labels.npy int32 (rows, 1). The validation set is the first ceil(rows / 2) rows.

Aggregation (one LoadGen sample = one user query of consecutive items): the reference seeds numpy's
global generator with 123 (main.py --numpy-rand-seed) and, from offset 0, draws one query length per
query as ``quantile[np.random.randint(low=0, high=20)]`` (tools/dist_quantile.txt) until the items are
used up (the last query is cut at the end). The trace file dlrm_trace_of_aggregated_samples.txt holds
"<start>, <end>, <count>" per query, as main.py writes it and tools/accuracy-dlrm.py reads it.
"""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Sequence

import numpy as np

from code.common.benchmark import QSL
from code.common.errors import MissingDataError
from code.common.fileio import read_json, staged_path, write_json
from code.dlrm_v2 import constants as K

MANIFEST = "manifest.json"
TINY_ROWS = 32767               # odd, so "the first ceil(rows / 2)" is exercised: 16384 validation items
TINY_DATA_SEED = 23


def validation_rows(rows: int) -> int:
    return rows // 2 + rows % 2


# --------------------------------------------------------------------------------------- aggregation
def query_offsets(n_items: int, quantile: Sequence[int] = K.QUANTILE, seed: int = K.QUANTILE_SEED) -> np.ndarray:
    """Query boundaries [0, ..., n_items] exactly as the reference draws them (see the module docstring)."""
    rs = np.random.RandomState(seed)
    q = np.asarray(quantile, dtype=np.int64)
    offs, qo = [], 0
    while True:
        offs.append(qo)
        qo = min(qo + int(q[rs.randint(low=0, high=len(q))]), n_items)
        if qo >= n_items:
            break
    offs.append(qo)
    return np.asarray(offs, dtype=np.int64)


def write_trace(path: Path, offsets: np.ndarray) -> None:
    with staged_path(path, suffix=".txt") as tmp:
        s, e = offsets[:-1], offsets[1:]
        tmp.write_text("".join(f"{a}, {b}, {b - a}\n" for a, b in zip(s.tolist(), e.tolist())))


def read_trace(path: Path, fix: str) -> np.ndarray:
    if not Path(path).is_file():
        raise MissingDataError(f"query trace not found: {path}", fix)
    offs = [0]
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        parts = line.split(", ")
        try:
            s, e, c = (int(x) for x in parts)
        except ValueError:
            raise MissingDataError(f"{path}:{n}: not '<start>, <end>, <count>'", fix) from None
        if s != offs[-1] or e - s != c or c <= 0:
            raise MissingDataError(f"{path}:{n}: query {s}..{e} does not follow the previous one", fix)
        offs.append(e)
    return np.asarray(offs, dtype=np.int64)


# -------------------------------------------------------------------------------------------- files
def npz_member(path: Path, name: str, fix: str) -> np.ndarray:
    """Memory-map one stored (uncompressed) .npy member of an .npz, as the reference does."""
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        raise MissingDataError(f"{path}: not a readable .npz ({type(e).__name__}: {e})", fix) from None
    with zf:
        if name not in zf.NameToInfo:
            raise MissingDataError(f"{path}: member {name} missing (the 26 multi-hot features are 0.npy..25.npy)", fix)
        info = zf.NameToInfo[name]
        if info.compress_type != zipfile.ZIP_STORED:
            raise MissingDataError(f"{path}: member {name} is compressed; the reference memory-maps stored members "
                                   "(write it with np.savez, not np.savez_compressed)", fix)
        with zf.open(name) as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(f)
            header = f.tell()
        # local file header: 30 bytes + name + extra field, then the member's bytes
        with open(path, "rb") as raw:
            raw.seek(info.header_offset + 26)
            n_name, n_extra = np.frombuffer(raw.read(4), "<u2")
        start = info.header_offset + 30 + int(n_name) + int(n_extra) + header
    return np.memmap(path, dtype=dtype, shape=shape, order="F" if fortran else "C", mode="r", offset=start)


class Day23:
    """The three day-23 files, checked: dtypes, widths, one row count; ``rows`` = the validation part."""

    def __init__(self, data_dir: Path, num_embeddings: Sequence[int], multi_hot: Sequence[int], fix: str,
                 validation: bool = True):
        from code.common.fileio import load_array

        self.dir = Path(data_dir)
        for name in K.DATA_FILES:
            if not (self.dir / name).is_file():
                raise MissingDataError(f"{name} not found in {self.dir}", fix)
        self.dense = load_array(self.dir / K.DENSE_FILE, fix, mmap=True)
        if self.dense.ndim != 2 or self.dense.shape[1] != K.NUM_DENSE:
            raise MissingDataError(f"{self.dir / K.DENSE_FILE}: dense features of shape {self.dense.shape}, expected "
                                   f"(rows, {K.NUM_DENSE})", fix)
        if self.dense.dtype != np.float32:
            raise MissingDataError(f"{self.dir / K.DENSE_FILE}: dtype {self.dense.dtype}, expected float32", fix)
        total = self.dense.shape[0]
        self.labels = load_array(self.dir / K.LABELS_FILE, fix, mmap=True)
        if self.labels.shape not in ((total, 1), (total,)):
            raise MissingDataError(f"{self.dir / K.LABELS_FILE}: shape {self.labels.shape}, expected ({total}, 1)", fix)
        self.sparse = []
        for k, hot in enumerate(multi_hot):
            a = npz_member(self.dir / K.SPARSE_FILE, f"{k}.npy", fix)
            if a.dtype != np.int32 or a.shape != (total, hot):
                raise MissingDataError(f"{self.dir / K.SPARSE_FILE}: feature {k} is {a.dtype} {a.shape}, expected "
                                       f"int32 ({total}, {hot})", fix)
            self.sparse.append(a)
        self.num_embeddings = tuple(int(n) for n in num_embeddings)
        self.multi_hot = tuple(int(h) for h in multi_hot)
        self.total_rows = total
        self.rows = validation_rows(total) if validation else total
        self.fix = fix

    def fingerprint(self) -> list:
        return [[n, (self.dir / n).stat().st_size, (self.dir / n).stat().st_mtime_ns] for n in K.DATA_FILES]

    def check_indices(self, start: int = 0, stop: int | None = None, chunk: int = 1 << 20, progress=None) -> None:
        """Every multi-hot index of rows [start, stop) within its table: else a one-line error naming the
        feature, the row, the value and the table size."""
        stop = self.rows if stop is None else stop
        for k, (a, n) in enumerate(zip(self.sparse, self.num_embeddings)):
            for s in range(start, stop, chunk):
                block = np.asarray(a[s:min(stop, s + chunk)])
                bad = (block < 0) | (block >= n)
                if bad.any():
                    r, c = np.argwhere(bad)[0]
                    raise MissingDataError(f"{self.dir / K.SPARSE_FILE}: sparse feature {k} row {s + int(r)} has index "
                                           f"{int(block[r, c])}, beyond its table of {n} rows (valid 0..{n - 1})",
                                           self.fix)
            if progress:
                progress()

    def gather(self, s: int, e: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(dense (n, 13) float32, sparse (n, sum(hot)) int32, labels (n,) float32) of rows [s, e)."""
        dense = np.ascontiguousarray(self.dense[s:e], dtype=np.float32)
        sparse = np.concatenate([np.asarray(a[s:e]) for a in self.sparse], axis=1).astype(np.int32, copy=False)
        labels = np.asarray(self.labels[s:e]).reshape(-1).astype(np.float32)
        return dense, np.ascontiguousarray(sparse), labels


def is_current(pre_dir: Path, manifest: dict) -> bool:
    p = pre_dir / MANIFEST
    if not p.is_file() or not (pre_dir / K.TRACE_FILE).is_file():
        return False
    try:
        return read_json(p, "") == manifest
    except Exception:  # noqa: BLE001 - unreadable: rewrite it
        return False


def write_manifest(stage: Path, manifest: dict) -> None:
    write_json(stage / MANIFEST, manifest)


# ---------------------------------------------------------------------------------------------- QSL
class CriteoQSL(QSL):
    """One sample = one aggregated user query. ``load`` gathers each query's rows into contiguous
    arrays (checked: every index within its table)."""

    def __init__(self, day: Day23, offsets: np.ndarray, performance_count: int):
        self.day, self.offsets = day, offsets
        self.total_count = len(offsets) - 1
        self.performance_count = min(performance_count or self.total_count, self.total_count)
        self.limits = np.repeat(np.asarray(day.num_embeddings, np.int64), day.multi_hot)
        self.loaded: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def query_rows(self, i: int) -> tuple[int, int]:
        return int(self.offsets[i]), int(self.offsets[i + 1])

    def load(self, indices: Sequence[int]) -> None:
        for i in indices:
            if i not in self.loaded:
                s, e = self.query_rows(i)
                d, sp, lab = self.day.gather(s, e)
                bad = (sp < 0) | (sp >= self.limits)
                if bad.any():
                    r, c = np.argwhere(bad)[0]
                    k = int(np.searchsorted(np.cumsum(self.day.multi_hot), c, side="right"))
                    raise MissingDataError(f"{self.day.dir / K.SPARSE_FILE}: sparse feature {k} row {s + int(r)} has "
                                           f"index {int(sp[r, c])}, beyond its table of {int(self.limits[c])} rows",
                                           self.day.fix)
                self.loaded[i] = (d, sp, lab)

    def unload(self, indices: Sequence[int]) -> None:
        for i in indices:
            self.loaded.pop(i, None)

    def sample(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.loaded[i]


# --------------------------------------------------------------------------------------------- tiny
def tiny_features(num_embeddings: Sequence[int], multi_hot: Sequence[int], rows: int = TINY_ROWS,
                  seed: int = TINY_DATA_SEED) -> tuple[np.ndarray, list[np.ndarray]]:
    """Seeded synthetic day-23 features: dense = log(count + 3) of geometric counts (torchrec's transform
    of Criteo's integer features), multi-hot indices uniform over each table."""
    rng = np.random.default_rng(seed)
    counts = rng.geometric(0.08, size=(rows, K.NUM_DENSE)) - 1
    dense = np.log(counts.astype(np.float64) + 3).astype(np.float32)
    sparse = [rng.integers(0, n, size=(rows, h), dtype=np.int64).astype(np.int32)
              for n, h in zip(num_embeddings, multi_hot)]
    return dense, sparse


def tiny_labels(probabilities: np.ndarray, seed: int = TINY_DATA_SEED + 1) -> np.ndarray:
    """Clicks drawn from the tiny model's own probabilities (calibrated by model.build_tiny)."""
    rng = np.random.default_rng(seed)
    return (rng.random(probabilities.shape[0]) < probabilities).astype(np.int32).reshape(-1, 1)


def write_day23(data_dir: Path, dense: np.ndarray, sparse: Sequence[np.ndarray], labels: np.ndarray) -> None:
    """The reference's three files, each staged and renamed into place."""
    with staged_path(data_dir / K.DENSE_FILE, suffix=".npy") as tmp:
        with open(tmp, "wb") as f:
            np.save(f, dense)
    with staged_path(data_dir / K.SPARSE_FILE, suffix=".npz") as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **{str(k): a for k, a in enumerate(sparse)})
    with staged_path(data_dir / K.LABELS_FILE, suffix=".npy") as tmp:
        with open(tmp, "wb") as f:
            np.save(f, labels)


def features_of(dense: np.ndarray, sparse: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    return dense, np.ascontiguousarray(np.concatenate(sparse, axis=1).astype(np.int32))
