"""Wan 2.2 prompts: the reference's reading rule, the tiny set, the preprocessed manifest and the QSL.

The reference reads ``vbench_prompts.txt`` as ``[line.strip() for line in f if line.strip()]`` (run_mlperf.py
``load_prompts``); sample i of LoadGen is prompt i. What a prompt is scored on comes from VBench's
``VBench_full_info.json`` (its dimensions, and the style or scene text of appearance_style / scene): the
preprocessed manifest keeps that entry beside each prompt, so accuracy needs no download.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from code.common.benchmark import QSL
from code.common.errors import MissingDataError
from code.common.fileio import read_json, sha256_file, write_json

MANIFEST = "prompts.json"

# The tiny set: prompts 0, 1, 72, 73, 162 and 163 of the real list with their VBench_full_info.json entries (two
# prompts per group of dimensions, so that each of the six dimensions the reference scores has videos).
TINY_FULL_INFO = (
    {"prompt_en": "a person swimming in ocean",
     "dimension": ["subject_consistency", "dynamic_degree", "motion_smoothness"]},
    {"prompt_en": "a person giving a presentation to a room full of colleagues",
     "dimension": ["subject_consistency", "dynamic_degree", "motion_smoothness"]},
    {"prompt_en": "A beautiful coastal beach in spring, waves lapping on sand, Van Gogh style",
     "dimension": ["appearance_style"], "auxiliary_info": {"appearance_style": {"appearance_style": "Van Gogh style"}}},
    {"prompt_en": "A beautiful coastal beach in spring, waves lapping on sand, oil painting",
     "dimension": ["appearance_style"], "auxiliary_info": {"appearance_style": {"appearance_style": "oil painting"}}},
    {"prompt_en": "alley", "dimension": ["scene", "background_consistency"],
     "auxiliary_info": {"scene": {"scene": {"scene": "alley"}}}},
    {"prompt_en": "amusement park", "dimension": ["scene", "background_consistency"],
     "auxiliary_info": {"scene": {"scene": {"scene": "amusement park"}}}},
)


def load_prompts(path: str | Path) -> list[str]:
    """The reference's rule: every non-blank line, stripped."""
    with open(path, "r") as f:
        return [line.strip() for line in f if line.strip()]


def write_tiny_set(raw_dir: Path) -> Path:
    raw_dir.mkdir(parents=True, exist_ok=True)
    (raw_dir / "vbench_prompts.txt").write_text("".join(e["prompt_en"] + "\n" for e in TINY_FULL_INFO))
    write_json(raw_dir / "VBench_full_info.json", list(TINY_FULL_INFO))
    return raw_dir


def preprocess(raw_dir: Path, pre_dir: Path, fixed_latent: Path | None = None) -> dict:
    """prompts.json: the prompts in order, each one's VBench entry, and the sources' sha256."""
    src, info_path = raw_dir / "vbench_prompts.txt", raw_dir / "VBench_full_info.json"
    fix = "make download_data BENCHMARKS=wan"
    for p in (src, info_path):
        if not p.is_file():
            raise MissingDataError(f"{p} not found", fix)
    prompts = load_prompts(src)
    info = {e["prompt_en"]: {k: v for k, v in e.items() if k != "prompt_en"}
            for e in read_json(info_path, fix, expect=list)}
    missing = [p for p in prompts if p not in info]
    if missing:
        raise MissingDataError(f"{len(missing)} prompts have no VBench_full_info.json entry (e.g. {missing[0]!r})", fix)
    rec = {"prompts": prompts, "vbench": [info[p] for p in prompts], "prompts_sha256": sha256_file(src),
           "full_info_sha256": sha256_file(info_path),
           "fixed_latent": str(fixed_latent) if fixed_latent else None,
           "fixed_latent_sha256": sha256_file(fixed_latent) if fixed_latent else None}
    write_json(pre_dir / MANIFEST, rec)
    return rec


class WanData:
    """The preprocessed manifest (read-only, shared by the workers)."""

    def __init__(self, pre_dir: Path, fix: str):
        rec = read_json(Path(pre_dir) / MANIFEST, fix)
        self.prompts: list[str] = rec["prompts"]
        self.vbench: list[dict] = rec["vbench"]
        self.fixed_latent: str | None = rec.get("fixed_latent")


class WanQSL(QSL):
    """Prompts are text: nothing to load. ``performance_count``: the round's 50 (all prompts of a smaller set)."""

    def __init__(self, data: WanData, performance_count: int):
        self.data = data
        self.total_count = len(data.prompts)
        self.performance_count = min(performance_count or self.total_count, self.total_count)

    def load(self, indices: Sequence[int]) -> None:
        return None

    def unload(self, indices: Sequence[int]) -> None:
        return None
