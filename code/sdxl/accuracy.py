"""SDXL accuracy: CLIP score and FID of the images in mlperf_log_accuracy.json.

Follows the MLCommons reference (text_to_image/tools/accuracy_coco.py): the first entry per
qsl_idx wins, caption = captions[qsl_idx], CLIP score = mean over images of 100 x cosine,
FID = pytorch-fid's Frechet distance between the reference statistics and the generated images'
pool3 statistics, printed as ``Accuracy Results: {'FID_SCORE': '…', 'CLIP_SCORE': '…'}``.

Unlike the reference it streams the log (a 5000-image 1024x1024 log is ~30 GB of hex) and keeps
only per-sample scores and 2048-float activations, ordered by qsl_idx so the result does not
depend on completion order. Outputs under ``out_dir``: ``accuracy.txt`` (written last, atomically,
only on success) and ``images/`` (the compliance PNGs named ``<qsl_idx>.png`` plus captions.txt,
swapped in whole).
"""
from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import warnings
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from code.common.errors import RunError
from code.common.fileio import staged_dir, write_text
from code.sdxl import scorers

_MAX_ENTRY_CHARS = 256 << 20               # one entry larger than this means a corrupt log
_FIX_RERUN = "rerun the harness with --test_mode=AccuracyOnly"


# --- reading mlperf_log_accuracy.json ---------------------------------------------------------

def iter_log_entries(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the entries of a LoadGen accuracy log one by one without loading the whole file.

    LoadGen writes one entry per line; any other valid JSON array of objects also works.
    Raises RunError for a missing, truncated or malformed log.
    """
    path = Path(path)
    if not path.is_file():
        raise RunError(f"accuracy log not found: {path}", _FIX_RERUN)
    dec = json.JSONDecoder()
    started = closed = False
    buf, consumed = "", 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            buf += line
            pos = 0
            while True:
                while pos < len(buf) and (buf[pos].isspace() or (started and buf[pos] == ",")):
                    pos += 1
                if pos == len(buf):
                    break
                if not started:
                    if buf[pos] != "[":
                        raise _corrupt(path, consumed + pos, "it does not start with '['")
                    started, pos = True, pos + 1
                    continue
                if closed:
                    raise _corrupt(path, consumed + pos, "text after the closing ']'")
                if buf[pos] == "]":
                    closed, pos = True, pos + 1
                    continue
                try:
                    obj, pos = dec.raw_decode(buf, pos)
                except json.JSONDecodeError:
                    break           # incomplete entry: read on
                if not isinstance(obj, dict):
                    raise _corrupt(path, consumed + pos, "an entry is not an object")
                yield obj
            consumed += pos
            buf = buf[pos:]
            if len(buf) > _MAX_ENTRY_CHARS:
                raise _corrupt(path, consumed, "an entry never ends")
    if buf.strip() or not started or not closed:
        raise _corrupt(path, consumed, "it is empty or truncated")


def _corrupt(path: Path, offset: int, why: str) -> RunError:
    return RunError(f"corrupt accuracy log {path} near character {offset}: {why}", _FIX_RERUN)


def iter_unique_images(path: str | os.PathLike, image_size: tuple[int, int]) -> Iterator[tuple[int, np.ndarray]]:
    """(qsl_idx, uint8 [H, W, 3]) for the first entry of every qsl_idx, in log order."""
    h, w = image_size
    seen: set[int] = set()
    for e in iter_log_entries(path):
        idx, data = e.get("qsl_idx"), e.get("data")
        if not isinstance(idx, int) or not isinstance(data, str):
            raise RunError(f"accuracy log {path}: entry without integer qsl_idx and hex data: "
                           f"{str(e)[:120]}", _FIX_RERUN)
        if idx in seen:
            continue
        seen.add(idx)
        try:
            raw = bytes.fromhex(data)
        except ValueError:
            raise RunError(f"accuracy log {path}: qsl_idx {idx} data is not hex", _FIX_RERUN) from None
        if len(raw) != h * w * 3:
            raise RunError(f"accuracy log {path}: qsl_idx {idx} holds {len(raw)} bytes, expected "
                           f"{h}x{w}x3={h * w * 3} for a uint8 HWC image",
                           "check that the run and the accuracy step use the same model variant")
        yield idx, np.frombuffer(raw, np.uint8).reshape(h, w, 3)


# --- pure scores (also used by the fidelity test) -----------------------------------------------

def clip_score(images: np.ndarray, captions: Sequence[str], *, scorer: scorers.ClipScorer,
               batch_size: int = 16) -> float:
    """Mean over images of 100 x cosine(image i, caption i); images uint8 [N, H, W, 3]."""
    if len(images) == 0:
        raise ValueError("clip_score needs at least one image")
    s = [scorer.scores(images[i:i + batch_size], captions[i:i + batch_size])
         for i in range(0, len(images), batch_size)]
    return float(np.mean(np.concatenate(s)))


def fid_from_images(images: np.ndarray, stats_path: str | os.PathLike, *,
                    inception: scorers.FidInception) -> float:
    """FID of uint8 images [N, H, W, 3] against an npz of (mu, sigma)."""
    return frechet_distance(inception.activations(images), Path(stats_path))


def frechet_distance(acts: np.ndarray, stats_path: Path) -> float:
    """pytorch-fid's calculate_frechet_distance(reference, generated), as the reference calls it."""
    from pytorch_fid.fid_score import calculate_frechet_distance

    mu1, sigma1 = scorers.load_fid_stats(stats_path)
    mu2, sigma2 = scorers.activation_stats(acts)
    if mu1.shape != mu2.shape or sigma1.shape != sigma2.shape:
        raise RunError(f"FID statistics {stats_path} have shape {mu1.shape}, features have {mu2.shape}",
                       "use the statistics file that matches the scorer (val2014.npz for the real one)")
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):  # its own prints
        warnings.simplefilter("ignore")      # scipy's sqrtm(disp=...) deprecation
        try:
            return float(calculate_frechet_distance(mu1, sigma1, mu2, sigma2))
        except ValueError as e:              # "Imaginary component": too few images
            raise RunError(f"FID is numerically undefined for {len(acts)} images: {e}",
                           "run the accuracy test over more samples") from None


# --- the accuracy step --------------------------------------------------------------------------

def evaluate(accuracy_log: str, out_dir: str, *, captions: list[str], variant: str,
             models_dir: Path, data_dir: Path, image_size: tuple[int, int],
             sample_ids: list[int] | None, fid_stats: str | None,
             device: str | None = None, batch_size: int = 8, entry=None) -> dict:
    """Score the log, write accuracy.txt and images/ into out_dir.

    fid_stats: npz with mu/sigma; default data_dir/val2014.npz (reference variant) or the tiny
    scorers' statistics. sample_ids: qsl indices of the compliance images (None: none saved).
    entry: the round entry whose accuracy bounds apply (default: the installed LoadGen's round).
    Returns {"metrics": {"FID_SCORE", "CLIP_SCORE"}, "passed": bool | None, "text": str}.
    Raises HarnessError subclasses, leaving no accuracy.txt and no partial images/.
    """
    out = Path(out_dir)
    stats = Path(fid_stats) if fid_stats else (scorers.scorer_files(models_dir, "tiny").fid_stats
                                               if variant == "tiny" else Path(data_dir) / "val2014.npz")
    scorers.load_fid_stats(stats)                      # fail before the slow part
    if not Path(accuracy_log).is_file():
        raise RunError(f"accuracy log not found: {accuracy_log}", _FIX_RERUN)
    if device is None:
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
    scorers.require_scorer_files(models_dir, variant)
    # the scorers load with the first batch: a log that is bad from its start fails without loading them
    load = functools.partial(scorers.load_scorers, models_dir, variant, device)
    wanted = list(dict.fromkeys(sample_ids or []))
    with _all_cores(), (staged_dir(out / "images") if wanted else contextlib.nullcontext()) as img_dir:
        scores, acts = _score_log(accuracy_log, captions, image_size, load, set(wanted), img_dir, batch_size)
        order = sorted(scores)
        clip_value = float(np.mean([scores[i] for i in order]))
        fid_value = frechet_distance(np.stack([acts[i] for i in order]), stats)
        saved = [i for i in wanted if i in scores]
        if img_dir is not None:
            write_text(img_dir / "captions.txt",
                       "".join(f"{i}  {captions[i]}\n" for i in wanted if 0 <= i < len(captions)))
    text = report_text(fid_value, clip_value, variant, len(order), wanted, saved, entry)
    write_text(out / "accuracy.txt", text)
    passed = None if variant == "tiny" else within_closed_range(clip_value, fid_value, entry)
    return {"metrics": {"FID_SCORE": fid_value, "CLIP_SCORE": clip_value}, "passed": passed, "text": text}


def _score_log(log, captions, image_size, load, wanted, img_dir, batch_size):
    """Stream the log in batches; return ({qsl_idx: clip score}, {qsl_idx: pool3 activations}).
    ``load()``: the (ClipScorer, FidInception) pair, called once, at the first batch."""
    from PIL import Image

    scores: dict[int, float] = {}
    acts: dict[int, np.ndarray] = {}
    batch: list[tuple[int, np.ndarray]] = []
    models: list = []

    def flush():
        if not models:
            models.extend(load())
        clip, inception = models
        idx = [i for i, _ in batch]
        imgs = np.stack([im for _, im in batch])
        for i, s, a in zip(idx, clip.scores(imgs, [captions[i] for i in idx]), inception.activations(imgs)):
            scores[i], acts[i] = float(s), a
        batch.clear()

    for idx, img in iter_unique_images(log, image_size):
        if not 0 <= idx < len(captions):
            raise RunError(f"accuracy log {log}: qsl_idx {idx} has no caption ({len(captions)} captions)",
                           "check that the run and the accuracy step use the same dataset")
        if idx in wanted:
            Image.fromarray(img).save(img_dir / f"{idx}.png")
        batch.append((idx, img))
        if len(batch) == batch_size:
            flush()
    if batch:
        flush()
    if not scores:
        raise RunError(f"accuracy log {log} holds no samples", _FIX_RERUN)
    return scores, acts


def closed_range(metric: str, entry=None) -> tuple[float, float]:
    """(min, max) of CLIP_SCORE or FID_SCORE for the closed division, from the round table
    (``entry``: a RoundBenchmark; default: SDXL in the installed LoadGen's round)."""
    from code.common import rounds

    e = entry or rounds.entry("sdxl")
    return e.accuracy_min[metric], e.accuracy_max[metric]


def within_closed_range(clip_value: float, fid_value: float, entry=None) -> bool:
    """The closed-division accuracy check (both bounds inclusive)."""
    (clo, chi), (flo, fhi) = closed_range("CLIP_SCORE", entry), closed_range("FID_SCORE", entry)
    return clo <= clip_value <= chi and flo <= fid_value <= fhi


def report_text(fid_value: float, clip_value: float, variant: str, n: int,
                wanted: Sequence[int] = (), saved: Sequence[int] = (), entry=None) -> str:
    """accuracy.txt: the reference's results line, the range check, sample and image counts."""
    # Same construction and formatting as the reference's print (str of numpy float64).
    result = {"FID_SCORE": f"{np.float64(fid_value)}", "CLIP_SCORE": f"{np.float64(clip_value)}"}
    lines = [f"Accuracy Results: {result}"]
    (clo, chi), (flo, fhi) = closed_range("CLIP_SCORE", entry), closed_range("FID_SCORE", entry)
    ranges = f"CLIP_SCORE={clip_value:.8f} in [{clo}, {chi}], FID_SCORE={fid_value:.8f} in [{flo}, {fhi}]"
    if variant == "tiny":
        lines.append("Accuracy check: NOT APPLICABLE (tiny variant: random-weight scorers; the numbers "
                     "are only meaningful compared with another image set scored the same way)")
    else:
        lines.append(f"Accuracy check: {'PASSED' if within_closed_range(clip_value, fid_value, entry) else 'FAILED'} "
                     f"({ranges})")
    lines.append(f"Samples scored: {n}")
    if wanted:
        missing = [i for i in wanted if i not in saved]
        lines.append(f"Compliance images: {len(saved)}/{len(wanted)} saved to images/"
                     + (f"; missing qsl_idx {missing}" if missing else ""))
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _all_cores():
    """Scoring runs after LoadGen finished, so give torch every core this process may use; one thread where other
    work shares the cores (MLPERF_SHARED_CPU): there a second OpenMP thread spin-waits for the core someone else
    holds: the tiny scorers' CLIP cost 2.3x the CPU seconds of one thread here (its scores the same bits; the
    Inception's features within float32 rounding, 2e-7)."""
    import torch

    from code.common.backends.base import shared_cpu

    old = torch.get_num_threads()
    torch.set_num_threads(1 if shared_cpu() else max(1, len(os.sched_getaffinity(0))))
    try:
        yield
    finally:
        torch.set_num_threads(old)
