"""SDXL data: captions, the fixed latent, tokenization, the preprocessed files and the QSL.

Raw files (``paths.data_dir("sdxl", variant)``, written by code.sdxl.download):
  captions_source.tsv   tab-separated, header id, image_id, caption, height, width, file_name, ...
  latents.npy           the fixed initial latent, float32 [1,4,S/8,S/8]
  sample_ids.txt        the 10 dataset indices whose images are kept for compliance
  val2014.npz           FID reference statistics (reference variant only)
Preprocessed files (``paths.preprocessed_dir("sdxl", variant)``, written by ``preprocess``):
  input_ids_1.npy / input_ids_2.npy   int32 [N,77]: every caption through tokenizer / tokenizer_2
  neg_ids_1.npy / neg_ids_2.npy       int32 [1,77]: the fixed negative prompt
  latents.npy                         float32 [1,4,h,w]
  captions.json                       {"ids": [...], "captions": [...], "sample_ids": [...]}
  manifest.json                       what went in (variant, counts, tokenizer folders), written last
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from code.common.benchmark import QSL, make_fix
from code.common.errors import MissingDataError
from code.common.fileio import load_array, read_json, staged_dir
from code.sdxl.constants import LATENT_CHANNELS, LATENT_SEED, MAX_TOKENS, NEGATIVE_PROMPT

PREPROCESSED_FILES = ("input_ids_1.npy", "input_ids_2.npy", "neg_ids_1.npy", "neg_ids_2.npy", "latents.npy",
                      "captions.json", "manifest.json")


# --- raw data --------------------------------------------------------------------------------------

def read_captions(tsv: str | Path) -> list[dict[str, str]]:
    """Rows of captions_source.tsv (csv's default quoting, as pandas.read_csv reads it)."""
    with open(tsv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows or "caption" not in rows[0]:
        raise MissingDataError(f"{tsv} has no 'caption' column", "re-run `make download_data BENCHMARKS=sdxl`")
    return rows


def write_captions(tsv: str | Path, rows: Sequence[dict[str, str]]) -> None:
    from code.common.fileio import staged_path

    fields = list(rows[0].keys())
    with staged_path(tsv) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields, delimiter="\t", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def make_latent(side: int, seed: int = LATENT_SEED) -> np.ndarray:
    """The MLPerf rule for the fixed latent: diffusers randn_tensor([1,4,side,side], Generator(seed)), fp32.

    At side 128 this reproduces the official latents.npy (to ~2e-7).
    """
    import torch
    from diffusers.utils.torch_utils import randn_tensor

    g = torch.Generator().manual_seed(seed)
    return randn_tensor((1, LATENT_CHANNELS, side, side), generator=g, dtype=torch.float32).numpy()


_ADJ = ("red", "small", "old", "wooden", "bright", "wet", "busy", "quiet", "striped", "tall", "empty", "green")
_NOUN = ("cat", "bus", "kitchen", "bicycle", "dog", "clock tower", "pizza", "train", "giraffe", "boat", "bench",
         "laptop", "horse", "umbrella", "skier", "sandwich")
_PLACE = ("on a city street", "in a field", "next to a window", "at the beach", "on a table", "in the snow",
          "under a tree", "near a river", "in a parking lot")


def synthetic_captions(n: int, seed: int = 0) -> list[dict[str, str]]:
    """Deterministic COCO-like captions in captions_source.tsv's row format (tiny variant, offline)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        cap = f"A {_ADJ[rng.integers(len(_ADJ))]} {_NOUN[rng.integers(len(_NOUN))]} {_PLACE[rng.integers(len(_PLACE))]}."
        rows.append({"id": str(i), "image_id": str(i), "caption": cap, "height": "128", "width": "128",
                     "file_name": f"synthetic_{i:06d}.jpg", "coco_url": ""})
    return rows


def read_sample_ids(path: str | Path) -> list[int]:
    return [int(x) for x in Path(path).read_text().split()]


# --- preprocessing ---------------------------------------------------------------------------------

def tokenize(tokenizer, texts: Sequence[str]) -> np.ndarray:
    """int32 [N,77]: padding to max length, truncation, as the reference's Coco.preprocess."""
    ids = tokenizer(list(texts), padding="max_length", max_length=MAX_TOKENS, truncation=True,
                    return_tensors="np").input_ids
    return np.ascontiguousarray(ids, dtype=np.int32)


def preprocess(raw_dir: str | Path, out_dir: str | Path, tokenizers, *, variant: str, latent_side: int,
               tokenizer_source: str = "", log=print) -> Path:
    """Tokenize every caption with both tokenizers; write the preprocessed folder atomically."""
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    need = ("captions_source.tsv", "latents.npy", "sample_ids.txt")
    missing = [n for n in need if not (raw_dir / n).exists()]
    if missing:
        raise MissingDataError(f"missing {', '.join(missing)} in {raw_dir}",
                               make_fix("sdxl", "download_data", variant))
    rows = read_captions(raw_dir / "captions_source.tsv")
    captions = [r["caption"] for r in rows]
    latent = np.load(raw_dir / "latents.npy").astype(np.float32)
    if latent.shape != (1, LATENT_CHANNELS, latent_side, latent_side):
        raise MissingDataError(f"{raw_dir / 'latents.npy'} has shape {latent.shape}, expected "
                               f"(1, {LATENT_CHANNELS}, {latent_side}, {latent_side}) for --model_variant={variant}",
                               make_fix("sdxl", "download_data", variant))
    tok1, tok2 = tokenizers
    with staged_dir(out_dir) as tmp:
        np.save(tmp / "input_ids_1.npy", tokenize(tok1, captions))
        np.save(tmp / "input_ids_2.npy", tokenize(tok2, captions))
        np.save(tmp / "neg_ids_1.npy", tokenize(tok1, [NEGATIVE_PROMPT]))
        np.save(tmp / "neg_ids_2.npy", tokenize(tok2, [NEGATIVE_PROMPT]))
        np.save(tmp / "latents.npy", np.ascontiguousarray(latent))
        sample_ids = read_sample_ids(raw_dir / "sample_ids.txt")
        (tmp / "captions.json").write_text(json.dumps(
            {"ids": [int(r["id"]) for r in rows], "captions": captions, "sample_ids": sample_ids}, indent=1))
        (tmp / "manifest.json").write_text(json.dumps(
            {"variant": variant, "count": len(captions), "latent_shape": list(latent.shape),
             "max_tokens": MAX_TOKENS, "negative_prompt": NEGATIVE_PROMPT, "tokenizers": tokenizer_source,
             "raw_dir": str(raw_dir)}, indent=1))
    log(f"[sdxl] preprocessed {len(captions)} captions -> {out_dir}")
    return out_dir


# --- loading ---------------------------------------------------------------------------------------

class SDXLData:
    """The preprocessed arrays, resident in host memory (about 600 B per sample). Read-only after
    construction, so any number of worker threads may read it concurrently."""

    def __init__(self, pre_dir: str | Path, variant: str, count: int = 0):
        pre_dir = Path(pre_dir)
        missing = [n for n in PREPROCESSED_FILES if not (pre_dir / n).exists()]
        if missing:
            raise MissingDataError(f"preprocessed SDXL data missing in {pre_dir} ({', '.join(missing)})",
                                   make_fix("sdxl", "preprocess_data", variant))
        fix = make_fix("sdxl", "preprocess_data", variant)
        self.dir = pre_dir
        self.manifest = read_json(pre_dir / "manifest.json", fix)
        meta = read_json(pre_dir / "captions.json", fix)
        total = len(meta.get("captions", ()))
        n = total if count <= 0 else min(count, total)
        ids = {name: load_array(pre_dir / name, fix, dtype=np.int32, shape=(rows, MAX_TOKENS))
               for name, rows in (("input_ids_1.npy", total), ("input_ids_2.npy", total),
                                  ("neg_ids_1.npy", 1), ("neg_ids_2.npy", 1))}
        self.ids_1, self.ids_2 = ids["input_ids_1.npy"][:n], ids["input_ids_2.npy"][:n]
        self.neg_1, self.neg_2 = ids["neg_ids_1.npy"], ids["neg_ids_2.npy"]
        self.latent = load_array(pre_dir / "latents.npy", fix, dtype=np.float32, shape=(1, LATENT_CHANNELS, None, None))
        self.captions: list[str] = meta["captions"][:n]
        self.sample_ids: list[int] = [i for i in meta["sample_ids"] if i < n]
        for a in (self.ids_1, self.ids_2, self.neg_1, self.neg_2, self.latent):
            a.setflags(write=False)

    def __len__(self) -> int:
        return len(self.captions)


class SDXLQSL(QSL):
    """All samples stay resident (the whole set is a few MB), so load/unload only record the set.

    ``load``/``unload`` run on LoadGen's thread; workers only read ``data``.
    """

    def __init__(self, data: SDXLData, performance_count: int | None = None):
        self.data = data
        self.total_count = len(data)
        self.performance_count = min(performance_count or self.total_count, self.total_count)
        self.loaded: set[int] = set()

    def load(self, indices: Sequence[int]) -> None:
        self.loaded.update(int(i) for i in indices)

    def unload(self, indices: Sequence[int]) -> None:
        self.loaded.difference_update(int(i) for i in indices)
