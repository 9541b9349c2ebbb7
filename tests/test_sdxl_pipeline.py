"""The SDXL denoising loop (code.sdxl.pipeline) on the tiny model, CPU only.

Checks the scheduler arithmetic against diffusers' EulerDiscreteScheduler, the reference's
post-processing, per-component batching (clip/vae chunks, unet splits), the Processor contract,
and the --backend=pytorch engines against the ORT engines.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from code.common.backends import get_backend
from code.common.backends.base import EngineSpec
from code.sdxl import dataset, export, model, pipeline
from code.sdxl.constants import COMPONENTS, NEGATIVE_PROMPT, SCHEDULER_CONFIG
from tests.conftest import REPO

CAPTIONS = ["A red bus on a city street.", "Two dogs playing in the snow.", "A bowl of fruit on a wooden table.",
            "A man riding a wave on top of a surfboard.", "A clock tower under a blue sky."]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("sdxl_pipe")
    d = model.save_tiny(root / "pipeline", seed=0)
    pipe = model.load_pipeline(d)
    onnx = {c: export.export_onnx(c, pipe, root / f"{c}.onnx", log=lambda *_: None) for c in COMPONENTS}
    t1, t2 = model.load_tokenizers(d)
    toks = (dataset.tokenize(t1, CAPTIONS), dataset.tokenize(t2, CAPTIONS))
    neg = (dataset.tokenize(t1, [NEGATIVE_PROMPT]), dataset.tokenize(t2, [NEGATIVE_PROMPT]))
    return {"dir": d, "pipe": pipe, "onnx": onnx, "toks": toks, "neg": neg, "latent": dataset.make_latent(16)}


def ort_pipeline(tiny, bs: dict[str, int]) -> pipeline.SDXLPipeline:
    be = get_backend("onnxruntime")
    engines = {c: be.load(str(tiny["onnx"][c]), EngineSpec(name=c, batch_size=bs[c], intra_op_threads=2))
               for c in COMPONENTS}
    return pipeline.SDXLPipeline(engines, latent=tiny["latent"], neg_ids=tiny["neg"], batch_sizes=bs, image_size=128)


def test_sdxl_euler_schedule_matches_diffusers():
    from diffusers import EulerDiscreteScheduler

    ours = pipeline.EulerSchedule(SCHEDULER_CONFIG, 20)
    ref = EulerDiscreteScheduler.from_config(SCHEDULER_CONFIG)
    ref.set_timesteps(20)
    assert [float(t[0]) for t in ours.timesteps] == ref.timesteps.tolist()
    assert np.float32(ref.init_noise_sigma) == ours.init_noise_sigma
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 8, 8)).astype(np.float32)
    xt = torch.from_numpy(x.copy())
    for i, t in enumerate(ref.timesteps):
        eps = rng.standard_normal(x.shape).astype(np.float32)
        np.testing.assert_array_equal(ours.scale_input(x, i), ref.scale_model_input(xt, t).numpy())
        x = ours.step(eps, i, x)
        xt = ref.step(torch.from_numpy(eps), t, xt, return_dict=False)[0]
        np.testing.assert_allclose(x, xt.numpy(), rtol=0, atol=1e-6)
        assert x.dtype == np.float32


def test_sdxl_euler_schedule_cache_holds_diffusers_values_exactly(tmp_path):
    """The build folder's schedule cache: the first pipeline computes it with diffusers, later ones read it, value for
    value the same (a performance and an accuracy run must compute the same images), and a process that reads it
    imports neither diffusers nor torch."""
    first = pipeline.EulerSchedule(SCHEDULER_CONFIG, 20, tmp_path)
    again = pipeline.EulerSchedule(SCHEDULER_CONFIG, 20, tmp_path)
    plain = pipeline.EulerSchedule(SCHEDULER_CONFIG, 20)
    assert not first.cached and again.cached and len(list(tmp_path.iterdir())) == 1
    for a in ("timesteps", "sigmas", "in_scale"):
        assert [np.asarray(x).tobytes() for x in getattr(again, a)] == [np.asarray(x).tobytes() for x in getattr(plain, a)]
    assert again.init_noise_sigma.tobytes() == plain.init_noise_sigma.tobytes()
    assert not pipeline.EulerSchedule(SCHEDULER_CONFIG, 4, tmp_path).cached      # another step count: its own entry
    code = ("import sys; from code.sdxl import pipeline; from code.sdxl.constants import SCHEDULER_CONFIG as C; "
            f"s = pipeline.EulerSchedule(C, 20, {str(tmp_path)!r}); assert s.cached; "
            "print(sorted(m for m in ('torch', 'diffusers') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_sdxl_postprocess_matches_reference():
    img = np.random.default_rng(1).uniform(-1.3, 1.3, size=(2, 3, 8, 8)).astype(np.float32)
    t = (torch.from_numpy(img) / 2 + 0.5).clamp(0, 1)        # diffusers' denormalize
    ref = np.stack([(x.permute(1, 2, 0).float().numpy() * 255).round().astype(np.uint8) for x in t])  # MLCommons
    out = pipeline.postprocess(img)
    assert out.dtype == np.uint8 and out.shape == (2, 8, 8, 3) and out.flags.c_contiguous
    np.testing.assert_array_equal(out, ref)


def test_sdxl_component_batching_is_transparent(tiny):
    """Same images whether the clips/vae run in chunks and the unet in splits, or all at once."""
    ids1, ids2 = tiny["toks"]
    whole = ort_pipeline(tiny, {"clip1": 8, "clip2": 8, "unet": 8, "vae": 8}).generate(ids1, ids2)
    split = ort_pipeline(tiny, {"clip1": 2, "clip2": 3, "unet": 2, "vae": 1}).generate(ids1, ids2)
    assert whole.shape == (5, 128, 128, 3) and whole.dtype == np.uint8
    assert int(np.abs(whole.astype(int) - split).max()) <= 1
    assert whole.std() > 10, "images should not be flat"
    assert not np.array_equal(whole[0], whole[1]), "different prompts give different images"


def test_sdxl_processor_contract(tiny, tmp_path):
    raw, pre = tmp_path / "raw", tmp_path / "pre"
    download_rows = [{"id": str(i), "image_id": str(i), "caption": c, "height": "128", "width": "128",
                      "file_name": f"{i}.jpg", "coco_url": ""} for i, c in enumerate(CAPTIONS * 3)]
    raw.mkdir()
    dataset.write_captions(raw / "captions_source.tsv", download_rows)
    np.save(raw / "latents.npy", tiny["latent"])
    (raw / "sample_ids.txt").write_text("0\n1\n")
    dataset.preprocess(raw, pre, model.load_tokenizers(tiny["dir"]), variant="tiny", latent_side=16, log=lambda *_: None)
    data = dataset.SDXLData(pre, "tiny")
    proc = pipeline.SDXLProcessor(ort_pipeline(tiny, {"clip1": 4, "clip2": 4, "unet": 4, "vae": 2}), data, 4)
    proc.warmup()
    outs = proc.process([0, 5, 2])
    assert len(outs) == 3
    for o in outs:
        assert o.shape == (128, 128, 3) and o.dtype == np.uint8 and o.flags.c_contiguous
    np.testing.assert_array_equal(outs[0], outs[1])     # captions 0 and 5 are the same text
    direct = proc.pipeline.generate(data.ids_1[[2]], data.ids_2[[2]])[0]
    assert int(np.abs(direct.astype(int) - outs[2]).max()) <= 1
    proc.close()


def test_sdxl_pytorch_engines_match_ort(tiny, tmp_path, monkeypatch):
    """--backend=pytorch goes through the backend and the engine cache (eager format: a manifest
    naming code.sdxl.torch_engines:component_module and the component folder)."""
    from code.common.backends import EngineSpec, get_backend
    from code.common.backends.base import ModelSource
    from code.common.engines import get_or_build
    from code.sdxl.constants import SUBFOLDER

    monkeypatch.setenv("MLPERF_BUILD_DIR", str(tmp_path))
    ids1, ids2 = tiny["toks"]
    bs = {c: 8 for c in COMPONENTS}
    backend = get_backend("pytorch")
    engines, lines = {}, []
    for c in COMPONENTS:
        spec = EngineSpec(name=c, batch_size=8, intra_op_threads=2)
        src = ModelSource(lambda: pytest.fail("the pytorch backend must not ask for ONNX"),
                          "code.sdxl.torch_engines:component_module", Path(tiny["dir"]) / SUBFOLDER[c])
        path = get_or_build(backend, src, spec, system_id="test", benchmark="sdxl", scenario="Offline", log=lines.append)
        engines[c] = backend.load(str(path), spec)
    assert len(lines) == 4 and all(line.startswith("[engine] build") for line in lines)
    torch_imgs = pipeline.SDXLPipeline(engines, latent=tiny["latent"], neg_ids=tiny["neg"], batch_sizes=bs,
                                       image_size=128).generate(ids1[:2], ids2[:2])
    ort_imgs = ort_pipeline(tiny, bs).generate(ids1[:2], ids2[:2])
    assert int(np.abs(torch_imgs.astype(int) - ort_imgs).max()) <= 1
