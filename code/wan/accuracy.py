"""Wan 2.2 accuracy: the videos in mlperf_log_accuracy.json scored on VBench's dimensions.

The response of a sample is its video as uint8 [frames, H, W, 3] RGB (what ``export_to_video`` writes from the
pipeline's float frames: ``(frame * 255).astype(uint8)``). Each prompt is scored on the dimensions its
VBench_full_info.json entry lists, restricted to the reference's six (run_evaluation.py's default); the score is the
mean of the dimension scores (run_evaluation.py's "Overall Average") x 100, ``vbench_score`` in accuracy.txt (the
checker's pattern ``'vbench_score': <float>``; its target 70.48 x 0.99 is on that 0-100 scale).

Writes ``videos/<qsl_idx>.mp4`` for the round's required sample ids (the checker's extra-files check) and
``<out>/vbench_eval_results.json`` in VBench's results layout ({dimension: [score, per-video list]}).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from code.common.errors import RunError
from code.common.fileio import staged_dir, write_json, write_text
from code.wan import vbench
from code.wan.constants import DIMENSIONS, FPS

_FIX_RERUN = "rerun the harness with --test_mode=AccuracyOnly"
# every dimension has its model here (motion_smoothness AMT, code.wan.amt; scene Tag2Text, code.wan.tag2text);
# STAND_IN: any dimension scored with a stand-in model, NOT_RUN: any left out (with the reason)
STAND_IN: dict[str, str] = {}
NOT_RUN: dict[str, str] = {}


def iter_videos(path: str | os.PathLike, shape: tuple[int, int, int]) -> Iterator[tuple[int, np.ndarray]]:
    """(qsl_idx, uint8 [F, H, W, 3]) for the first entry of each qsl_idx, streaming the log a line at a time
    (LoadGen writes one entry per line; a real video is ~224 MB of bytes). ``shape``: (height, width, frames),
    as code.wan.constants.geometry."""
    h, w, f_ = shape
    want = f_ * h * w * 3
    seen: set[int] = set()
    p = Path(path)
    if not p.is_file():
        raise RunError(f"accuracy log not found: {p}", _FIX_RERUN)
    with open(p) as fh:
        for line in fh:
            line = line.strip().rstrip(",")
            if not line.startswith("{"):
                continue
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                raise RunError(f"accuracy log {p}: malformed entry {line[:80]}", _FIX_RERUN) from None
            idx, data = e.get("qsl_idx"), e.get("data")
            if idx in seen:
                continue
            seen.add(idx)
            raw = bytes.fromhex(data)
            if len(raw) != want:
                raise RunError(f"accuracy log {p}: qsl_idx {idx} holds {len(raw)} bytes, expected {f_}x{h}x{w}x3",
                               "check that the run and the accuracy step use the same model variant")
            yield idx, np.frombuffer(raw, np.uint8).reshape(f_, h, w, 3)


def write_mp4(path: Path, video: np.ndarray, fps: int = FPS) -> None:
    """The reference's writer (diffusers export_to_video: imageio-ffmpeg where installed, else OpenCV's mp4v), given
    the uint8 frames as images (its float path would multiply them by 255 again)."""
    from diffusers.utils import export_to_video
    from PIL import Image

    export_to_video([Image.fromarray(f) for f in video], str(path), fps=fps)


def write_vbench_videos(accuracy_log: str, out_dir: Path, prompts: Sequence[str], shape: tuple[int, int, int],
                        ids: set[int], ids_dir: Path, fps: int = FPS) -> int:
    """Every video of the log as ``<prompt>-0.mp4`` (the reference's run_inference.py naming, VBench's standard
    mode) into out_dir, for the official run_evaluation.py, and those of ``ids`` as ``<id>.mp4`` into ids_dir (the
    checker's required files), in one pass over the log. Returns the count."""
    n = 0
    with staged_dir(out_dir) as d, staged_dir(ids_dir) as req:
        for idx, v in iter_videos(accuracy_log, shape):
            write_mp4(d / f"{prompts[idx]}-0.mp4", v, fps)
            if idx in ids:
                write_mp4(req / f"{idx}.mp4", v, fps)
            n += 1
        write_text(req / "captions.txt", "")
    return n


def official_vbench(videos: Path, out_dir: Path, root: Path, gpus: int) -> tuple[float, str]:
    """The reference's run_evaluation.py (VBench's evaluate.py, its submodule) on ``videos``: (Overall Average x 100,
    its output)."""
    import re
    import subprocess
    import sys

    script = root / "text_to_video" / "wan-2.2-t2v-a14b" / "run_evaluation.py"
    r = subprocess.run([sys.executable, str(script), f"--videos-path={videos}", f"--output-path={out_dir}",
                        f"--num-gpus={gpus}"], cwd=script.parent, capture_output=True, text=True)
    m = re.search(r"Overall Average\s*:\s*([\d.]+)", r.stdout)
    if r.returncode or not m:
        raise RunError(f"run_evaluation.py failed (exit {r.returncode}): {(r.stderr.strip().splitlines() or [''])[-1]}",
                       f"see {out_dir}; VBench's checkpoints must be in ~/.cache/vbench (--load_ckpt_from_local)")
    return 100.0 * float(m.group(1)), r.stdout


def score_videos(videos: dict[int, np.ndarray], vbench_info: Sequence[dict], models: dict, fps: float,
                 dimensions: Sequence[str] = DIMENSIONS) -> dict[str, tuple[float, list]]:
    """{dimension: (score, per-video results)} over the videos whose prompt VBench scores on that dimension."""
    out: dict[str, tuple[float, list]] = {}
    for dim in dimensions:
        idx = [i for i in sorted(videos) if dim in vbench_info[i]["dimension"]]
        if not idx or dim in NOT_RUN:
            continue
        vids = [videos[i] for i in idx]
        if dim == "subject_consistency":
            s, per = vbench.subject_consistency(models["dino"], vids)
        elif dim == "background_consistency":
            s, per = vbench.background_consistency(models["clip"], vids)
        elif dim == "appearance_style":
            styles = [vbench_info[i]["auxiliary_info"]["appearance_style"]["appearance_style"] for i in idx]
            s, per = vbench.appearance_style(models["clip"], models["clip_tokenizer"], vids, styles)
        elif dim == "dynamic_degree":
            s, per = vbench.dynamic_degree(models["raft"], vids, fps)
        elif dim == "motion_smoothness":
            s, per = vbench.motion_smoothness(models["interpolate"], vids)
        elif dim == "scene":          # VBench_full_info.json: auxiliary_info.scene = {"scene": {"scene": name}}
            scenes = [vbench_info[i]["auxiliary_info"]["scene"]["scene"]["scene"] for i in idx]
            s, per = vbench.scene(models["tag2text"], vids, scenes)
        else:
            raise RunError(f"VBench dimension {dim} has no scorer", "see code/wan/vbench.py")
        out[dim] = (float(s), [{"qsl_idx": i, "video_results": r} for i, r in zip(idx, per)])
    return out


def overall(results: dict[str, tuple[float, list]]) -> float:
    """run_evaluation.py's Overall Average (mean of the dimension scores), x 100."""
    return 100.0 * sum(v[0] for v in results.values()) / len(results)


def evaluate(accuracy_log: str, out_dir: str, *, vbench_info: Sequence[dict], shape: tuple[int, int, int],
             variant: str, models: dict, sample_ids: Sequence[int] = (), entry=None, fps: float = FPS) -> dict:
    """Score the log; write accuracy.txt, vbench_eval_results.json and videos/ into out_dir."""
    import torch

    out = Path(out_dir)
    wanted = set(sample_ids)
    videos: dict[int, np.ndarray] = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
    try:
        with staged_dir(out / "videos") as vdir:
            for idx, v in iter_videos(accuracy_log, shape):
                if not 0 <= idx < len(vbench_info):
                    raise RunError(f"accuracy log {accuracy_log}: qsl_idx {idx} is not a prompt "
                                   f"({len(vbench_info)} prompts)", "check the run used the same dataset")
                videos[idx] = v
                if idx in wanted:
                    write_mp4(vdir / f"{idx}.mp4", v, int(fps))
            if not videos:
                raise RunError(f"accuracy log {accuracy_log} holds no samples", _FIX_RERUN)
            write_text(vdir / "captions.txt", "")
        results = score_videos(videos, vbench_info, models, fps)
    finally:
        torch.set_num_threads(threads)
    value = overall(results)
    write_json(out / "vbench_eval_results.json", {k: [v[0], v[1]] for k, v in results.items()})
    target = (entry.accuracy_min.get("vbench_score") if entry else None)
    lines = [f"Accuracy Results: {{'vbench_score': {value}}}"]
    lines += [f"  {d:30s}: {results[d][0]:6.4f}" + (f"  (stand-in: {STAND_IN[d]})" if d in STAND_IN else "")
              for d in sorted(results)]
    missing = [d for d in DIMENSIONS if d not in results]
    if missing:
        lines.append("Not scored: " + ", ".join(f"{d} ({NOT_RUN.get(d, 'no video of its prompts')})"
                                                for d in missing))
    if variant == "tiny":
        lines.append("Accuracy check: NOT APPLICABLE (tiny variant: random-weight DINO/CLIP/RAFT/AMT/Tag2Text scorers "
                     "of the VBench architectures; the numbers compare only with videos scored the same way)")
        passed = None
    else:
        passed = not missing and not (set(results) & set(STAND_IN)) and target is not None and value >= target
        lines.append(f"Accuracy check: {'PASSED' if passed else 'FAILED'} (vbench_score={value:.4f} >= {target})")
    lines.append(f"Samples scored: {len(videos)}")
    text = "\n".join(lines) + "\n"
    write_text(out / "accuracy.txt", text)
    metrics = {"vbench_score": value, "videos": len(videos), **{d: results[d][0] for d in results}}
    return {"metrics": metrics, "passed": passed, "text": text}
