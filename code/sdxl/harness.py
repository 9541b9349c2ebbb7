"""SDXL actions: model and data, per-component engines, QSL, processors and accuracy.

Folders (variant = "reference" | "tiny"):
  models_dir("sdxl", variant)/pipeline/   diffusers folder (the real download, or the seeded tiny build)
  models_dir("sdxl", variant)/onnx/       <component>.onnx (+ .json: which pipeline files it came from)
  models_dir("sdxl", variant)/clip|fid/   accuracy scorers (code.sdxl.scorers)
  data_dir("sdxl", variant)/              raw files (code.sdxl.download)
  preprocessed_dir("sdxl", variant)/      token ids and latent (code.sdxl.dataset)
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
from typing import Mapping

from code.common import calibration, paths
from code.common.backends import EngineSpec, get_backend
from code.common.backends.base import ModelSource
from code.common.benchmark import Benchmark, Processor
from code.common.engines import get_or_build
from code.common.errors import HarnessError, MissingDataError
from code.common.fileio import write_json
from code.sdxl import SPEC, download, model
from code.sdxl.constants import COMPONENTS, IMAGE_SIZE, SUBFOLDER, TINY_CAL_CAPTIONS, TINY_SEED, VAE_SCALE, input_shapes
from code.sdxl.dataset import SDXLData, SDXLQSL, preprocess



def _fingerprint(folder: Path) -> list:
    """What an ONNX export depends on: the component folder's files (name, size, mtime)."""
    return sorted([str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns]
                  for p in folder.rglob("*") if p.is_file())


class SDXLBenchmark(Benchmark):
    spec = SPEC
    _pipe = None   # torch pipeline loaded for ONNX export, only during generate_engines

    # --- locations ---------------------------------------------------------------------------------
    @property
    def variant(self) -> str:
        return self.settings.model_variant

    @property
    def pipeline_dir(self) -> Path:
        return self.model_dir / "pipeline"

    @property
    def raw_dir(self) -> Path:
        return paths.data_dir("sdxl", self.variant)

    @property
    def pre_dir(self) -> Path:
        return paths.preprocessed_dir("sdxl", self.variant)

    @property
    def image_size(self) -> int:
        return IMAGE_SIZE[self.variant]

    def _require_pipeline(self) -> Path:
        complete = self.variant == "tiny" or (self.pipeline_dir / download.COMPLETE).exists()
        if model.is_pipeline_dir(self.pipeline_dir) and complete:
            return self.pipeline_dir
        if self.variant == "tiny":  # seeded and offline: build it rather than fail
            self.download_model()
            return self.pipeline_dir
        raise MissingDataError(f"SDXL model not found in {self.pipeline_dir}", self.fix("download_model"))

    # --- data and model ------------------------------------------------------------------------------
    def download_model(self) -> None:
        from code.sdxl import scorers

        if self.variant == "tiny":
            seed_file = self.pipeline_dir / "SEED"
            if not (model.is_pipeline_dir(self.pipeline_dir) and seed_file.read_text().strip() == str(TINY_SEED)):
                model.save_tiny(self.pipeline_dir, TINY_SEED)
            scorers.build_tiny_scorers(self.model_dir, TINY_SEED)
            print(f"[download_model] tiny SDXL (seed {TINY_SEED}) -> {self.pipeline_dir}")
        else:
            download.download_reference_model(self.pipeline_dir, self.settings.sdxl_model_dtype)
            scorers.download_scorer_weights(self.model_dir)

    def download_data(self) -> None:
        if self.variant == "tiny":
            download.make_tiny_data(self.raw_dir, self.settings.data_dir, paths.data_dir("sdxl"))
        else:
            download.fetch_reference_data(self.raw_dir, self.settings.data_dir)

    def preprocess_data(self) -> None:
        if self.variant == "tiny" and not (self.raw_dir / "captions_source.tsv").exists():
            self.download_data()
        pipe_dir = self._require_pipeline()
        preprocess(self.raw_dir, self.pre_dir, model.load_tokenizers(pipe_dir), variant=self.variant,
                   latent_side=self.image_size // VAE_SCALE, tokenizer_source=str(pipe_dir))

    # --- engines -------------------------------------------------------------------------------------
    def batch_sizes(self) -> dict[str, int]:
        """Per component. The unet's counts prompts (its engine runs 2x rows: prompt + negative)."""
        s = self.settings
        out = {}
        for c in COMPONENTS:
            try:
                out[c] = s.batch_size(c)
            except KeyError:
                raise HarnessError(f"gpu_batch_size has no entry for SDXL component '{c}'",
                                   "give all four, e.g. --gpu_batch_size=clip1:8,clip2:8,unet:8,vae:2") from None
        return out

    def precisions(self) -> dict[str, str]:
        """Engine precision per component: the CLIPs fp16 (fp32 when --precision=fp32 or the backend has no fp16), the unet at
        --precision, the vae at sdxl_vae_precision. The backend says whether it builds them."""
        from code.common.backends import backend_class

        s = self.settings
        # fp16 CLIPs wherever the backend builds fp16 (ONNX Runtime's CPU int8 runs them at fp32)
        clip = "fp16" if s.precision != "fp32" and "fp16" in backend_class(s.backend).precisions else "fp32"
        out = {"clip1": clip, "clip2": clip, "unet": s.precision, "vae": s.sdxl_vae_precision}
        for c, p in out.items():
            if p not in calibration.QUANTIZED:      # int8/fp8: calibration.engine_source checks the backend
                backend_class(s.backend).check_precision(p, f"SDXL's {c}")
        return out

    def engine_specs(self, device_id: int = 0) -> dict[str, EngineSpec]:
        cfg = self._component_configs()
        bs, prec = self.batch_sizes(), self.precisions()
        specs = {}
        for c in COMPONENTS:
            rows = 2 * bs[c] if c == "unet" else bs[c]
            specs[c] = self.engine_spec_for(c, rows, input_shapes(c, cfg), device_id, precision=prec[c])
        return specs

    def _component_configs(self) -> dict[str, dict]:
        """Configs the shapes need, read from the pipeline folder's json (no weights loaded)."""
        d = self._require_pipeline()
        return {k: json.loads((d / k / "config.json").read_text()) for k in ("unet", "vae", "text_encoder_2")}

    def onnx_path(self, component: str) -> Path:
        """Export the component to ONNX unless an export of the same pipeline files exists."""
        pipe_dir = self._require_pipeline()
        path = self.model_dir / "onnx" / f"{component}.onnx"
        meta = path.with_name(path.name + ".json")
        fp = _fingerprint(pipe_dir / SUBFOLDER[component])
        if not (path.exists() and meta.exists() and json.loads(meta.read_text()).get("source") == fp):
            from code.sdxl.export import export_onnx      # torch: only when there is something to export

            if self._pipe is None:
                self._pipe = model.load_pipeline(pipe_dir)
            export_onnx(component, self._pipe, path)
            write_json(meta, {"source": fp, "pipeline": str(pipe_dir)})
        return path

    def sources(self) -> dict[str, ModelSource]:
        """Per component: its ONNX export, or the eager torch module (code.sdxl.torch_engines) for backends
        that run torch modules; the backend picks."""
        pipe_dir = self._require_pipeline()
        return {c: ModelSource(functools.partial(self.onnx_path, c), "code.sdxl.torch_engines:component_module",
                               pipe_dir / SUBFOLDER[c], fix=self.fix("download_model")) for c in COMPONENTS}

    def generate_engines(self) -> dict[str, str]:
        s = self.settings
        specs, sources = self.engine_specs(), self.sources()
        for c in COMPONENTS:         # the calibrated unet (int8/fp8) is resolved before any backend is needed
            sources[c], specs[c] = calibration.engine_source(self, c, sources[c], specs[c])
        backend = get_backend(s.backend)
        self._pipe = None
        out = {c: str(get_or_build(backend, sources[c], specs[c], system_id=s.system_id, benchmark="sdxl",
                                   scenario=s.scenario)) for c in COMPONENTS}
        self._pipe = None   # the exporter's torch pipeline, if one was loaded
        return out

    # --- quantization ----------------------------------------------------------------------------------
    # NVIDIA's SDXL recipe (TensorRT Model Optimizer's diffusers example) quantizes the unet's convs and
    # linear layers and keeps these in higher precision: the first and last convs, the time and added-
    # condition embeddings, and the residual shortcut convs. Attention's softmax and its activation x
    # activation matmuls stay float (only MatMuls with constant weights are quantized).
    UNET_KEEP = (r"conv_in", r"conv_out", r"time_emb", r"time_embedding", r"add_embedding", r"conv_shortcut")

    def calibration_recipes(self, precision: str) -> dict[str, calibration.Recipe]:
        if precision == "int8":
            return {"unet": calibration.Recipe("int8", "minmax", keep=self.UNET_KEEP)}
        if precision == "fp8":          # ORT's float8 calibrator is its Distribution one
            return {"unet": calibration.Recipe("fp8", "distribution", keep=self.UNET_KEEP)}
        return {}

    @property
    def cal_list(self) -> Path:
        return self.raw_dir / download.CAL_LIST

    def calibration_set(self) -> calibration.CalibrationSet:
        if self.variant == "tiny":
            if not self.cal_list.exists():
                self.download_data()
            return calibration.CalibrationSet.from_list_file(f"tiny SDXL captions (first {TINY_CAL_CAPTIONS})",
                                                             self.cal_list, self.fix("download_data"))
        if not self.cal_list.exists():
            download.fetch_one(download.CAL_LIST, self.raw_dir, download.local_data_dir(self.settings.data_dir))
        return calibration.CalibrationSet.from_list_file(
            f"COCO-2014 {download.CAL_LIST} (mlcommons/inference@{download.INFERENCE_COMMIT[:7]})", self.cal_list,
            f"delete {self.cal_list} and rerun {download.CAL_FIX}")

    def calibration_model(self, component: str) -> Path:
        return self.onnx_path(component)

    def calibration_feeds(self, component: str, cset: calibration.CalibrationSet):
        """The unet's inputs at every one of the 20 steps, for each calibration caption, from the float
        pipeline (ONNX Runtime engines of the fp32 exports; CUDA when ORT has it): one caption at a
        time, so memory holds 20 steps, never the whole set."""
        from code.sdxl.dataset import read_captions, tokenize

        if self.variant == "tiny":
            rows = {r["id"]: r["caption"] for r in read_captions(self.raw_dir / "captions_source.tsv")}
            missing = [i for i in cset.items if i not in rows]
            if missing:
                raise MissingDataError(f"{len(missing)} calibration caption ids of {cset.source} are not in the tiny "
                                       f"captions (e.g. {missing[0]})", self.fix("download_data"))
            captions = [rows[i] for i in cset.items]
        else:
            got = download.calibration_captions(self.raw_dir, list(cset.items), self.settings.calibration_dir)
            captions = [got[i] for i in cset.items]
        pipe = self._float_pipeline()
        tok = model.load_tokenizers(self._require_pipeline())
        ids_1, ids_2 = tokenize(tok[0], captions), tokenize(tok[1], captions)
        recorded: list[dict] = []
        pipe.engines["unet"] = _Recording(pipe.engines["unet"], recorded)
        try:
            for i in range(len(captions)):
                hidden, pooled = pipe.encode(ids_1[i:i + 1], ids_2[i:i + 1])
                pipe.denoise(hidden, pooled)
                yield from recorded
                recorded.clear()
        finally:
            pipe.close()

    def _float_pipeline(self):
        """An SDXLPipeline over fp32 ONNX Runtime engines of the exports, batch 1 (built once, cached
        under build/engines/<system>/sdxl/calibration/)."""
        import dataclasses

        from code.common.backends.onnxruntime import OnnxRuntimeBackend

        ort_backend = OnnxRuntimeBackend()
        specs, sources = self.engine_specs(), self.sources()
        engines = {}
        for c in COMPONENTS:
            spec = dataclasses.replace(specs[c], precision="fp32", batch_size=2 if c == "unet" else 1,
                                       extra={"ort_providers": ["CUDAExecutionProvider", "CPUExecutionProvider"]})
            path = get_or_build(ort_backend, sources[c], spec, system_id=self.settings.system_id, benchmark="sdxl",
                                scenario="calibration")
            engines[c] = ort_backend.load(str(path), spec)
        return self._pipeline(engines, SDXLData(self.pre_dir, self.variant), dict.fromkeys(COMPONENTS, 1))

    # --- run -------------------------------------------------------------------------------------------
    def make_qsl(self) -> SDXLQSL:
        data = SDXLData(self.pre_dir, self.variant, self.settings.sdxl_sample_count)
        self.qsl = SDXLQSL(data, self.settings.performance_sample_count or None)
        return self.qsl

    def make_pipeline(self, engines: Mapping[str, str], device_id: int = 0, data: SDXLData | None = None):
        backend = get_backend(self.settings.backend)
        specs = self.engine_specs(device_id)
        loaded = {c: backend.load(engines[c], specs[c]) for c in COMPONENTS}
        return self._pipeline(loaded, data or self.qsl.data, self.batch_sizes())

    def _pipeline(self, loaded: Mapping, data: SDXLData, batch_sizes: Mapping[str, int]):
        """An SDXLPipeline over loaded engines, with this model's scheduler config and the data's latent
        and negative prompt."""
        from code.sdxl.pipeline import SDXLPipeline

        sched = self.pipeline_dir / "scheduler" / "scheduler_config.json"
        return SDXLPipeline(loaded, latent=data.latent, neg_ids=(data.neg_1, data.neg_2), batch_sizes=batch_sizes,
                            image_size=self.image_size,
                            scheduler_config=json.loads(sched.read_text()) if sched.exists() else None,
                            schedule_cache=paths.build_dir() / "cache" / "sdxl_schedule")

    def make_processors(self, qsl, engines) -> list[Processor]:
        from code.sdxl.pipeline import SDXLProcessor

        bs = self.batch_sizes()["unet"]
        return [SDXLProcessor(self.make_pipeline(engines, dev, qsl.data), qsl.data, bs) for dev in self.workers()]

    def accuracy(self, accuracy_log: str, out_dir: str) -> dict:
        from code.sdxl.accuracy import evaluate

        data = SDXLData(self.pre_dir, self.variant, self.settings.sdxl_sample_count)
        return evaluate(accuracy_log, out_dir, captions=data.captions, variant=self.variant,
                        models_dir=self.model_dir, data_dir=self.raw_dir,
                        image_size=(self.image_size, self.image_size), sample_ids=data.sample_ids, fid_stats=None,
                        entry=self.settings.round_entry())


class _Recording:
    """An engine that also appends a copy of each call's feeds to ``sink`` (the unet's calibration inputs)."""

    def __init__(self, engine, sink: list):
        self.engine, self.sink = engine, sink

    def infer(self, feeds):
        self.sink.append({k: np.array(v) for k, v in feeds.items()})
        return self.engine.infer(feeds)

    def close(self) -> None:
        self.engine.close()
