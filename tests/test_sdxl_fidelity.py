"""Fidelity: our SDXL pipeline (ORT engines) against diffusers' StableDiffusionXLPipeline in torch,
on the same tiny weights, prompts and latent, in fp32.

Bar (issue 3): mean PSNR >= 40 dB over >= 8 prompts, no pixel off by more than 8/255, and CLIP/FID
of both image sets equal to 4 significant digits. Checked twice: on the pipeline called directly,
and on the images a harness AccuracyOnly run returned to LoadGen (read back from
mlperf_log_accuracy.json).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from code.common import paths
from code.common.backends import get_backend
from code.common.backends.base import EngineSpec
from code.sdxl import dataset, model, pipeline
from code.sdxl.constants import COMPONENTS, GUIDANCE_SCALE, NEGATIVE_PROMPT, NUM_STEPS
from tests.conftest import run_main

HARNESS_SAMPLES = 16
# diffusers and the scorers on one torch thread (the images do not depend on it; the harness's accuracy step scores
# on one thread under MLPERF_SHARED_CPU too)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def diffusers_images(pipe, captions: list[str], latent: np.ndarray, batch: int = 8) -> np.ndarray:
    """The MLCommons reference's call and post-processing, with text prompts (diffusers tokenizes)."""
    out = []
    torch.manual_seed(0)
    with torch.inference_mode():
        for s in range(0, len(captions), batch):
            caps = captions[s:s + batch]
            imgs = pipe(prompt=caps, negative_prompt=[NEGATIVE_PROMPT] * len(caps), guidance_scale=GUIDANCE_SCALE,
                        num_inference_steps=NUM_STEPS, latents=torch.from_numpy(latent).repeat(len(caps), 1, 1, 1),
                        height=128, width=128, output_type="pt").images
            out += [(t.permute(1, 2, 0).float().numpy() * 255).round().astype(np.uint8) for t in imgs]
    return np.stack(out)


def psnr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    mse = ((a.astype(np.float64) - b.astype(np.float64)) ** 2).reshape(len(a), -1).mean(axis=1)
    return 10 * np.log10(255.0 ** 2 / np.maximum(mse, 1e-10))


def assert_faithful(ours: np.ndarray, ref: np.ndarray) -> None:
    assert ours.shape == ref.shape and len(ours) >= 8
    p = psnr(ours, ref)
    worst = int(np.abs(ours.astype(int) - ref.astype(int)).max())
    print(f"fidelity: mean PSNR {p.mean():.1f} dB (min {p.min():.1f}), max pixel diff {worst}/255")
    assert p.mean() >= 40.0, p
    assert worst <= 8


@pytest.fixture(scope="module")
def tiny(tiny_sdxl) -> dict:
    """The session's tiny SDXL (seed 0): its models folder, with the ONNX exports the harness makes of its pipeline
    (generate_engines writes them, as every run does; a build and export of another copy here cost 8 CPU-s), and the
    diffusers pipeline loaded from the same folder."""
    run_main("--action=generate_engines", "--benchmarks=sdxl", "--model_variant=tiny", "--scenarios=Offline",
             env=tiny_sdxl, check=True)
    models = paths.models_dir("sdxl", "tiny")
    return {"models": models, "pipe": model.load_pipeline(models / "pipeline")}


def test_sdxl_fidelity_pipeline_vs_diffusers(tiny):
    d, pipe = tiny["models"] / "pipeline", tiny["pipe"]
    be = get_backend("onnxruntime")
    engines = {c: be.load(str(tiny["models"] / "onnx" / f"{c}.onnx"),
                          EngineSpec(name=c, batch_size=8, intra_op_threads=2)) for c in COMPONENTS}
    captions = [r["caption"] for r in dataset.synthetic_captions(8, seed=3)]
    t1, t2 = model.load_tokenizers(d)
    latent = dataset.make_latent(16)
    ours = pipeline.SDXLPipeline(engines, latent=latent, batch_sizes={c: 8 for c in COMPONENTS}, image_size=128,
                                 neg_ids=(dataset.tokenize(t1, [NEGATIVE_PROMPT]), dataset.tokenize(t2, [NEGATIVE_PROMPT])))
    assert_faithful(ours.generate(dataset.tokenize(t1, captions), dataset.tokenize(t2, captions)),
                    diffusers_images(pipe, captions, latent))


def test_sdxl_fidelity_harness_Offline_AccuracyOnly_vs_diffusers(tiny, tiny_sdxl, tmp_path):
    from code.sdxl import accuracy, scorers

    log_dir = tmp_path / "logs"
    run_main("--action=run_harness", "--benchmarks=sdxl", "--scenarios=Offline", "--test_mode=AccuracyOnly",
             "--model_variant=tiny", "--fast", f"--sdxl_sample_count={HARNESS_SAMPLES}", f"--log_dir={log_dir}",
             env=tiny_sdxl, check=True)
    acc_log = next(log_dir.rglob("mlperf_log_accuracy.json"))
    meta = json.loads((acc_log.parent / "metadata.json").read_text())
    assert meta["status"] == "ok", meta.get("error")
    got = dict(accuracy.iter_unique_images(acc_log, (128, 128)))
    assert sorted(got) == list(range(HARNESS_SAMPLES))
    ours = np.stack([got[i] for i in range(HARNESS_SAMPLES)])

    pre = paths.preprocessed_dir("sdxl", "tiny")
    captions = json.loads((pre / "captions.json").read_text())["captions"][:HARNESS_SAMPLES]
    models = paths.models_dir("sdxl", "tiny")
    ref = diffusers_images(tiny["pipe"], captions, np.load(pre / "latents.npy"))
    assert_faithful(ours, ref)

    # The scores of both sets, computed the same way, agree to 4 significant digits; the harness's
    # own accuracy step reported the same numbers for its images.
    clip, inception = scorers.load_scorers(models, "tiny")
    stats = scorers.scorer_files(models, "tiny").fid_stats
    c_ours, c_ref = (accuracy.clip_score(x, captions, scorer=clip) for x in (ours, ref))
    f_ours, f_ref = (accuracy.fid_from_images(x, stats, inception=inception) for x in (ours, ref))
    print(f"CLIP {c_ours:.6g} vs {c_ref:.6g}; FID {f_ours:.6g} vs {f_ref:.6g}")
    for a, b in ((c_ours, c_ref), (f_ours, f_ref)):
        assert abs(a - b) <= 5e-5 * max(abs(a), abs(b)), (a, b)
    reported = meta["accuracy"]["metrics"]
    assert abs(reported["CLIP_SCORE"] - c_ours) <= 1e-6 * abs(c_ours)
    assert abs(reported["FID_SCORE"] - f_ours) <= 1e-6 * abs(f_ours)
    assert Path(acc_log.parent / "accuracy.txt").read_text().startswith("Accuracy Results: {'FID_SCORE': '")
