"""SDXL model pieces on CPU: tokenizers, the seeded tiny pipeline, ONNX export (ORT vs torch per
component), the fixed latent, data files and preprocessing. Everything is built here; nothing is
downloaded. The official data files are used only when $MLPERF_SDXL_DATA_DIR names a folder of them.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from code.common.backends import get_backend
from code.common.backends.base import EngineSpec
from code.common.engines import get_or_build
from code.common.errors import HarnessError, MissingDataError
from code.sdxl import dataset, download, export, model
from code.sdxl.constants import COMPONENTS, NEGATIVE_PROMPT

OFFICIAL = os.environ.get("MLPERF_SDXL_DATA_DIR")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("sdxl_model") / "pipeline"
    model.save_tiny(d, seed=0)
    return d, model.load_pipeline(d)


def test_sdxl_tokenizers_are_real_clip_bpe():
    t1, t2 = model.clip_bpe_tokenizer(), model.clip_bpe_tokenizer(pad_token="!")
    assert t1("a photo of a cat").input_ids == [49406, 320, 1125, 539, 320, 2368, 49407]
    ids1 = dataset.tokenize(t1, ["a photo of a cat"])
    ids2 = dataset.tokenize(t2, ["a photo of a cat"])
    assert ids1.shape == ids2.shape == (1, 77) and ids1.dtype == np.int32
    assert ids1[0, 7:].tolist() == [49407] * 70          # tokenizer pads with <|endoftext|>
    assert ids2[0, 7:].tolist() == [0] * 70              # tokenizer_2 pads with "!"
    long = dataset.tokenize(t1, ["cat " * 200])
    assert long.shape == (1, 77) and long[0, -1] == 49407  # truncated, still ends with EOS


def test_sdxl_tiny_pipeline_is_sdxl_shaped_and_seeded(tiny, tmp_path):
    d, pipe = tiny
    assert model.is_pipeline_dir(d)
    for m in (pipe.text_encoder, pipe.text_encoder_2, pipe.unet, pipe.vae):
        assert 0.5e6 <= model.count_params(m) <= 2.5e6, type(m).__name__
    assert pipe.unet.config.addition_embed_type == "text_time"
    assert pipe.unet.config.cross_attention_dim == pipe.text_encoder.config.hidden_size + pipe.text_encoder_2.config.hidden_size
    assert pipe.vae_scale_factor == 8 and pipe.unet.config.sample_size * 8 == 128
    # same seed, same weights
    other = model.build_components("tiny", seed=0)["unet"].state_dict()
    for k, v in pipe.unet.state_dict().items():
        assert np.array_equal(v.numpy(), other[k].numpy()), k


@pytest.mark.parametrize("component", COMPONENTS)
def test_sdxl_onnx_export_matches_torch(tiny, tmp_path, component):
    """Each exported component through the real ORT backend and engine cache vs the torch wrapper."""
    _, pipe = tiny
    onnx_path = export.export_onnx(component, pipe, tmp_path / f"{component}.onnx", log=lambda *_: None)
    backend = get_backend("onnxruntime")
    spec = EngineSpec(name=component, batch_size=4, intra_op_threads=1,
                      input_shapes=export.input_shapes(component, export.configs_of(pipe)))
    os.environ["MLPERF_BUILD_DIR"] = str(tmp_path / "build")
    engine = backend.load(str(get_or_build(backend, onnx_path, spec, system_id="test", benchmark="sdxl",
                                           scenario="Offline", log=lambda *_: None)), spec)
    assert engine.input_names == export.IO[component][0] and engine.output_names == export.IO[component][1]
    for batch in (1, 3):   # dynamic batch axis
        args = export.example_inputs(component, pipe, batch)
        feeds = {n: a.numpy() for n, a in zip(export.IO[component][0], args)}
        ref = export.torch_reference(component, pipe, feeds)
        out = engine.infer(feeds)
        for name, r in ref.items():
            assert out[name].shape == r.shape and r.shape[0] == batch
            np.testing.assert_allclose(out[name], r, rtol=1e-4, atol=2e-5, err_msg=f"{component}.{name}")


def test_sdxl_latent_rule():
    a, b = dataset.make_latent(16), dataset.make_latent(16)
    assert a.shape == (1, 4, 16, 16) and a.dtype == np.float32 and np.array_equal(a, b)
    assert abs(float(a.std()) - 1.0) < 0.15


@pytest.mark.skipif(not OFFICIAL, reason="set MLPERF_SDXL_DATA_DIR to a folder with the official SDXL files")
def test_sdxl_latent_rule_reproduces_official_latent():
    official = np.load(Path(OFFICIAL) / "latents.npy")
    assert official.shape == (1, 4, 128, 128)
    np.testing.assert_allclose(dataset.make_latent(128), official, atol=1e-6, rtol=0)


def test_sdxl_git_blob_checksum(tmp_path):
    p = tmp_path / "hello"
    p.write_bytes(b"hello\n")
    assert download.git_blob_sha1(p) == "ce013625030ba8dba906f756967f9e9ca394464a"  # `git hash-object`


def test_sdxl_local_data_folder_is_checksummed(tmp_path):
    local, dest = tmp_path / "local", tmp_path / "dest"
    local.mkdir()
    (local / "sample_ids.txt").write_text("1\n2\n")   # not the official file
    with pytest.raises(MissingDataError) as e:
        download.fetch_one("sample_ids.txt", dest, local, log=lambda *_: None)
    assert "checksum" in e.value.cause and not (dest / "sample_ids.txt").exists()
    with pytest.raises(MissingDataError):
        download.local_data_dir(str(tmp_path / "missing"))


@pytest.mark.skipif(not OFFICIAL, reason="set MLPERF_SDXL_DATA_DIR to a folder with the official SDXL files")
def test_sdxl_official_files_copy_from_local_folder(tmp_path):
    for name in download.REQUIRED:
        assert download.fetch_one(name, tmp_path, Path(OFFICIAL), log=lambda *_: None).exists()
    rows = dataset.read_captions(tmp_path / "captions_source.tsv")
    assert len(rows) == 5000 and rows[0]["caption"] == "A city at night with people walking around."
    assert len(dataset.read_sample_ids(tmp_path / "sample_ids.txt")) == 10


def test_sdxl_tiny_data_and_preprocess(tiny, tmp_path):
    d, _ = tiny
    raw, pre = tmp_path / "raw", tmp_path / "pre"
    download.make_tiny_data(raw, None, tmp_path / "no_real_data", n=40, log=lambda *_: None)
    assert json.loads((raw / "SOURCE.json").read_text())["count"] == 40
    dataset.preprocess(raw, pre, model.load_tokenizers(d), variant="tiny", latent_side=16, log=lambda *_: None)
    data = dataset.SDXLData(pre, "tiny")
    assert len(data) == 40 and data.ids_1.shape == data.ids_2.shape == (40, 77) and data.ids_1.dtype == np.int32
    t1, t2 = model.load_tokenizers(d)
    assert np.array_equal(data.neg_1, dataset.tokenize(t1, [NEGATIVE_PROMPT]))
    assert np.array_equal(data.neg_2, dataset.tokenize(t2, [NEGATIVE_PROMPT]))
    assert np.array_equal(data.ids_1[3], dataset.tokenize(t1, [data.captions[3]])[0])
    assert data.latent.shape == (1, 4, 16, 16) and data.sample_ids == list(range(10))
    assert not data.ids_1.flags.writeable
    sub = dataset.SDXLData(pre, "tiny", count=12)
    qsl = dataset.SDXLQSL(sub)
    assert qsl.total_count == qsl.performance_count == 12 and len(sub.captions) == 12
    qsl.load([1, 2]), qsl.unload([1])
    assert qsl.loaded == {2}
    # wrong latent size for the variant: one-line error with the fix
    with pytest.raises(MissingDataError) as e:
        dataset.preprocess(raw, tmp_path / "pre2", model.load_tokenizers(d), variant="reference", latent_side=128)
    assert "latents.npy" in e.value.cause and "download_data" in e.value.fix
    assert not (tmp_path / "pre2").exists()


def test_sdxl_missing_preprocessed_data_names_the_fix(tmp_path):
    with pytest.raises(HarnessError) as e:
        dataset.SDXLData(tmp_path / "nothing", "tiny")
    assert e.value.exit_code == 3 and "preprocess_data" in e.value.fix and "MODEL_VARIANT=tiny" in e.value.fix
