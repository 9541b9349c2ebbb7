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
from typing import Mapping

from code.common import paths
from code.common.backends import EngineSpec, get_backend
from code.common.backends.base import ModelSource, cpu_spin
from code.common.benchmark import Benchmark, Processor
from code.common.engines import get_or_build
from code.common.errors import HarnessError, MissingDataError
from code.common.fileio import write_json
from code.sdxl import SPEC, download, model
from code.sdxl.constants import COMPONENTS, IMAGE_SIZE, SUBFOLDER, TINY_SEED, VAE_SCALE
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
    def model_dir(self) -> Path:
        return paths.models_dir("sdxl", self.variant)

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
        """Engine precision per component: the CLIPs fp16 (fp32 when --precision=fp32), the unet at
        --precision, the vae at sdxl_vae_precision. The backend says whether it builds them."""
        from code.common.backends import backend_class

        s = self.settings
        clip = "fp32" if s.precision == "fp32" else "fp16"
        out = {"clip1": clip, "clip2": clip, "unet": s.precision, "vae": s.sdxl_vae_precision}
        for c, p in out.items():
            backend_class(s.backend).check_precision(p, f"SDXL's {c}")
        return out

    def engine_specs(self, device_id: int = 0) -> dict[str, EngineSpec]:
        from code.sdxl.export import input_shapes

        s = self.settings
        cfg = self._component_configs()
        bs, prec = self.batch_sizes(), self.precisions()
        workers = len(self.workers())
        threads = self.intra_op_threads()
        specs = {}
        for c in COMPONENTS:
            rows = 2 * bs[c] if c == "unet" else bs[c]
            specs[c] = EngineSpec(name=c, batch_size=rows, precision=prec[c], input_shapes=input_shapes(c, cfg),
                                  workspace_bytes=s.workspace_size, intra_op_threads=threads, device_id=device_id,
                                  allow_spinning=cpu_spin(s.cpu_spin_wait, workers))
        return specs

    def _component_configs(self) -> dict[str, dict]:
        """Configs the shapes need, read from the pipeline folder's json (no weights loaded)."""
        d = self._require_pipeline()
        return {k: json.loads((d / k / "config.json").read_text()) for k in ("unet", "vae", "text_encoder_2")}

    def onnx_path(self, component: str) -> Path:
        """Export the component to ONNX unless an export of the same pipeline files exists."""
        from code.sdxl.export import export_onnx

        pipe_dir = self._require_pipeline()
        path = self.model_dir / "onnx" / f"{component}.onnx"
        meta = path.with_name(path.name + ".json")
        fp = _fingerprint(pipe_dir / SUBFOLDER[component])
        if not (path.exists() and meta.exists() and json.loads(meta.read_text()).get("source") == fp):
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
        backend = get_backend(s.backend)
        specs, sources = self.engine_specs(), self.sources()
        self._pipe = None
        out = {c: str(get_or_build(backend, sources[c], specs[c], system_id=s.system_id, benchmark="sdxl",
                                   scenario=s.scenario)) for c in COMPONENTS}
        self._pipe = None   # the exporter's torch pipeline, if one was loaded
        return out

    # --- run -------------------------------------------------------------------------------------------
    def make_qsl(self) -> SDXLQSL:
        data = SDXLData(self.pre_dir, self.variant, self.settings.sdxl_sample_count)
        self.qsl = SDXLQSL(data, self.settings.performance_sample_count or None)
        return self.qsl

    def make_pipeline(self, engines: Mapping[str, str], device_id: int = 0, data: SDXLData | None = None):
        from code.sdxl.pipeline import SDXLPipeline

        data = data or self.qsl.data
        backend = get_backend(self.settings.backend)
        specs = self.engine_specs(device_id)
        loaded = {c: backend.load(engines[c], specs[c]) for c in COMPONENTS}
        sched = self.pipeline_dir / "scheduler" / "scheduler_config.json"
        return SDXLPipeline(loaded, latent=data.latent, neg_ids=(data.neg_1, data.neg_2),
                            batch_sizes=self.batch_sizes(), image_size=self.image_size,
                            scheduler_config=json.loads(sched.read_text()) if sched.exists() else None)

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
