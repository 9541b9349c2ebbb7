"""The synthetic streaming data set in the reference's own file layout, its tiny twin, and the QSL.

Layout (datasets/synthetic_streaming.py of the reference; one folder, ``<prefix>`` = ``sampled_data/``):
  ``<i>.csv``                    one line per user of file i; 4 x (total_ts + 2) fields: per slot, candidate ids,
                                 candidate ratings, history ids, history ratings ("1,2,3" lists, "" when empty)
  ``offset.csv``                 row i: the byte offset of each user's line in ``<i>.csv`` (a JSON list)
  ``requests_per_ts.csv``        row ts: the users requested at ts (a JSON list)
  ``requests_per_ts_offset.csv`` one row: the byte offset of each row of requests_per_ts.csv
  ``users_cumsum_per_ts.csv``    row ts: the cumulative request count per file (a JSON list)
An inference sample is (ts_idx, query_idx): ts_idx counts the inference timestamps (0 = train_ts), query_idx is
the request's index at that timestamp. Its history is slots 0..train_ts and train_ts+2..ts+1 (slot train_ts+1 is
the evaluation timestamp, left out); its candidates are slot ts+2 (as the reader's inference branch reads them).

QSL index -> (ts_idx, query_idx) is fixed: timestamps in order, requests in order. The reference runs requests
in a shuffled order within each timestamp (StreamingQuerySampler.run_order) and names each answer by the pair;
every answer carries the pair, so TEST08 matches them as the official script does. A sample's features depend
only on its pair, never on what ran before it.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from code.common.benchmark import QSL
from code.common.errors import MissingDataError
from code.common.fileio import staged_path
from code.dlrm_v3 import constants as K


def _ints(field: str) -> list[int]:
    """A reference list field: "1,2,3", "[1, 2]", a single "7", or "" (json_loads of datasets/utils.py)."""
    if not field:
        return []
    s = field if field[0] == "[" or field[-1] == "]" else f"[{field}]"
    y = json.loads(s)
    return [y] if isinstance(y, int) else list(y)


def _row(line: str) -> list[str]:
    return next(csv.reader([line]))


@dataclass(frozen=True)
class Sample:
    """One request: the user, the history (ids, ratings) and the candidates (ids, ratings)."""
    ts_idx: int
    query_idx: int
    user_id: int
    uih_ids: np.ndarray
    uih_ratings: np.ndarray
    cand_ids: np.ndarray
    cand_ratings: np.ndarray

    @property
    def labels(self) -> np.ndarray:
        return (self.cand_ratings >= K.POSITIVE_RATING).astype(np.float32)

    @property
    def weights(self) -> np.ndarray:
        return np.ones(self.cand_ids.shape[0], np.float32)


class Streaming:
    """The reference's streaming files under ``root``; ``layout``: constants.SAMPLED or TINY_DATA."""

    def __init__(self, root: Path, layout: dict, fix: str, max_uih_len: int, max_candidates: int):
        self.root, self.layout = Path(root), layout
        self.dir = self.root / layout["prefix"]
        self.train_ts, self.total_ts = layout["train_ts"], layout["total_ts"]
        self.max_uih_len, self.max_candidates = max_uih_len, max_candidates
        names = list(K.INDEX_FILES) + [f"{i}.csv" for i in range(layout["num_files"])]
        missing = [n for n in names if not (self.dir / n).is_file()]
        if missing:
            raise MissingDataError(f"{self.dir}: {', '.join(missing)} missing (the synthetic streaming data set)", fix)
        self.users_per_file = layout["num_users"] // layout["num_files"]
        with open(self.dir / "offset.csv") as f:
            self.file_offsets = [_ints(r[0]) for r in csv.reader(f)]
        with open(self.dir / "requests_per_ts_offset.csv") as f:
            self.request_offsets = _ints(next(csv.reader(f))[0])
        with open(self.dir / "users_cumsum_per_ts.csv") as f:
            self.cumsum = [_ints(r[0]) for r in csv.reader(f)]
        if len(self.request_offsets) != self.total_ts or len(self.cumsum) < self.total_ts:
            raise MissingDataError(f"{self.dir}: {len(self.request_offsets)} timestamps indexed, the set has "
                                   f"{self.total_ts}", fix)
        self.items_per_category = layout["num_items"] // layout["num_categories"]

    @property
    def inference_ts(self) -> int:
        return self.total_ts - self.train_ts

    def requests(self, ts: int) -> list[int]:
        with open(self.dir / "requests_per_ts.csv") as f:
            f.seek(self.request_offsets[ts])
            return _ints(_row(f.readline())[0])

    def counts(self, percentage: float = 1.0) -> list[int]:
        """Requests per inference timestamp (the reference's num_unique_requests at warmup_ratio 1)."""
        return [int(self.cumsum[t][-1] * percentage) for t in range(self.train_ts, self.total_ts)]

    def read(self, ts_idx: int, query_idx: int, requests: Sequence[int] | None = None) -> Sample:
        ts = self.train_ts + ts_idx
        cumsum = self.cumsum[ts]
        file_idx = next(i for i, c in enumerate(cumsum) if c > query_idx)
        user = (requests if requests is not None else self.requests(ts))[query_idx]
        with open(self.dir / f"{file_idx}.csv") as f:
            f.seek(self.file_offsets[file_idx][user % self.users_per_file])
            fields = _row(f.readline())
        if len(fields) != 4 * (self.total_ts + 2):
            raise MissingDataError(f"{self.dir / f'{file_idx}.csv'}: user {user} has {len(fields)} fields, expected "
                                   f"{4 * (self.total_ts + 2)}", "download the data set again")
        slots = list(range(self.train_ts + 1)) + list(range(self.train_ts + 2, ts + 2))
        ids, ratings = [], []
        for i in slots:
            if fields[4 * i]:                   # the reader takes a slot's history only where it has candidates
                ids += _ints(fields[2 + 4 * i])
                ratings += _ints(fields[3 + 4 * i])
        c_ids, c_rat = _ints(fields[4 * (ts + 2)]), _ints(fields[1 + 4 * (ts + 2)])
        a = (lambda x, n: np.asarray(x[:n], np.int64))     # maybe_truncate_seq: the first n
        return Sample(ts_idx, query_idx, user, a(ids, self.max_uih_len), a(ratings, self.max_uih_len),
                      a(c_ids, self.max_candidates), a(c_rat, self.max_candidates))


def pair_of(counts: Sequence[int], index: int) -> tuple[int, int]:
    """QSL index -> (ts_idx, query_idx)."""
    for t, n in enumerate(counts):
        if index < n:
            return t, index
        index -= n
    raise IndexError(index)


def _bucket(n: int) -> int:
    """Padded lengths: powers of two from 8, so batches reuse a handful of shapes."""
    return max(8, 1 << max(0, int(n) - 1).bit_length())


def pack(samples: Sequence[Sample], action_weights: Sequence[int]) -> dict[str, np.ndarray]:
    """The model's padded inputs for a batch (model.INPUTS): what the reference's load_item puts in its jagged
    tensors (history and candidate ids, history action bitmasks = action_weights[rating - 1]; the model derives
    the categories), rows padded with zeros to a common length; ``lengths`` is (history, candidates) per row."""
    B = len(samples)
    L = _bucket(max(s.uih_ids.shape[0] for s in samples))
    C = _bucket(max(s.cand_ids.shape[0] for s in samples))
    uih = np.zeros((B, L), np.int64)
    act = np.zeros((B, L), np.int64)
    cand = np.zeros((B, C), np.int64)
    lens = np.zeros((B, 2), np.int64)
    aw = np.asarray((0,) + tuple(action_weights), np.int64)
    for b, s in enumerate(samples):
        n, c = s.uih_ids.shape[0], s.cand_ids.shape[0]
        uih[b, :n], cand[b, :c] = s.uih_ids, s.cand_ids
        act[b, :n] = aw[np.clip(s.uih_ratings, 0, len(aw) - 1)]
        lens[b] = (n, c)
    user = np.asarray([s.user_id for s in samples], np.int64)
    return {"user_id": user, "uih_ids": uih, "uih_actions": act, "cand_ids": cand, "lengths": lens}


class StreamingQSL(QSL):
    """Every inference (ts_idx, query_idx) of the set, parsed into memory on ``load``."""

    def __init__(self, data: Streaming, performance_count: int = 0, percentage: float = 1.0):
        self.data = data
        self.counts = data.counts(percentage)
        self.total_count = sum(self.counts)
        self.performance_count = min(performance_count or self.total_count, self.total_count)
        self.samples: dict[int, Sample] = {}
        self._requests: dict[int, list[int]] = {}

    def pair(self, index: int) -> tuple[int, int]:
        return pair_of(self.counts, index)

    def read(self, index: int) -> Sample:
        t, q = self.pair(index)
        if t not in self._requests:
            self._requests[t] = self.data.requests(self.data.train_ts + t)
        return self.data.read(t, q, self._requests[t])

    def load(self, indices: Sequence[int]) -> None:
        for i in indices:
            if i not in self.samples:
                self.samples[i] = self.read(i)

    def unload(self, indices: Sequence[int]) -> None:
        for i in indices:
            self.samples.pop(i, None)

    def sample(self, index: int) -> Sample:
        s = self.samples.get(index)
        return s if s is not None else self.read(index)


# --- the tiny set ------------------------------------------------------------------------------------
def tiny_users(seed: int = K.TINY_SEED) -> tuple[list[list[str]], list[list[int]]]:
    """(per user: the 4 x (total_ts + 2) fields, candidate ratings left "" for the inference slots; per timestamp:
    the requested users), drawn from ``seed``."""
    L = K.TINY_DATA
    rng = np.random.default_rng(seed)
    users, slots = L["num_users"], L["total_ts"] + 2
    lines = []
    for _ in range(users):
        fields = []
        for _s in range(slots):
            nc, nh = int(rng.integers(6, 17)), int(rng.integers(2, 9))
            cands = rng.choice(L["num_items"], nc, replace=False)       # distinct: no tied predictions in a request
            hist = rng.integers(0, L["num_items"], nh)
            fields += [",".join(map(str, cands)), ",".join(map(str, rng.integers(1, 6, nc))),
                       ",".join(map(str, hist)), ",".join(map(str, rng.integers(1, 6, nh)))]
        lines.append(fields)
    requests = [sorted(rng.choice(users, int(rng.integers(users // 2 - 4, users // 2 + 1)), replace=False).tolist())
                for _ in range(L["total_ts"])]
    return lines, requests


def set_candidate_ratings(lines: list[list[str]], ts: int, user: int, labels: np.ndarray, seed: int) -> None:
    """Slot ts+2's candidate ratings of ``user``: 4-5 for a positive label, 1-3 for a negative one."""
    rng = np.random.default_rng([seed, ts, user])
    r = np.where(labels > 0, rng.integers(4, 6, labels.shape[0]), rng.integers(1, 4, labels.shape[0]))
    lines[user][1 + 4 * (ts + 2)] = ",".join(map(str, r))


def write_streaming(root: Path, lines: list[list[str]], requests: list[list[int]], layout: dict) -> None:
    """The reference's files for ``lines`` (one file) and ``requests``, each staged and renamed into place."""
    d = Path(root) / layout["prefix"]
    d.mkdir(parents=True, exist_ok=True)

    def csv_line(fields: list[str]) -> str:
        import io

        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(fields)
        return buf.getvalue()

    body, offsets, pos = [], [], 0
    for fields in lines:
        s = csv_line(fields)
        offsets.append(pos)
        body.append(s)
        pos += len(s.encode())
    req, roffs, pos = [], [], 0
    for r in requests:
        s = csv_line([json.dumps(r)])
        roffs.append(pos)
        req.append(s)
        pos += len(s.encode())
    files = {"0.csv": "".join(body), "offset.csv": csv_line([json.dumps(offsets)]),
             "requests_per_ts.csv": "".join(req), "requests_per_ts_offset.csv": csv_line([json.dumps(roffs)]),
             "users_cumsum_per_ts.csv": "".join(csv_line([json.dumps([len(r)])]) for r in requests)}
    for name, text in files.items():
        with staged_path(d / name, suffix=".csv") as tmp:
            Path(tmp).write_text(text)
