"""--backend=pytorch for SDXL: the four components as eager torch modules, loaded straight from the
diffusers pipeline folder.

Why not the generic pytorch backend's saved programs: saving a torch.export archive of the real unet
(2.6B parameters) costs minutes and ~10 GB of disk for no runtime gain. These engines honour the
same Engine contract (host numpy in, host float32 numpy out, code.sdxl.model's tensor names).

Device transfers: an input passed as a read-only numpy array (the pipeline marks its per-batch
constants, e.g. the text embeddings, read-only) is copied to the device once and reused while the
same array object is passed again. Writable inputs are copied on every call.
Thread safety: one engine per worker thread (Engine contract); CPU thread count is applied per
calling thread because torch's intra-op pool size is per thread.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Mapping

import numpy as np

from code.common.backends.base import Engine
from code.common.errors import HarnessError
from code.sdxl.export import IO, wrap

SUBFOLDER = {"clip1": "text_encoder", "clip2": "text_encoder_2", "unet": "unet", "vae": "vae"}
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def load_component(pipeline_dir: Path, component: str, dtype, device):
    """The diffusers/transformers module behind one component, on device in dtype."""
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    from code.sdxl.download import weights_variant

    cls = {"clip1": CLIPTextModel, "clip2": CLIPTextModelWithProjection, "unet": UNet2DConditionModel,
           "vae": AutoencoderKL}[component]
    mod = cls.from_pretrained(str(pipeline_dir / SUBFOLDER[component]), variant=weights_variant(pipeline_dir),
                              dtype=dtype)
    return mod.to(device).eval()


class TorchComponentEngine(Engine):
    def __init__(self, component: str, module, device, dtype, threads: int = 0):
        self.component = component
        self.input_names, self.output_names = IO[component]
        self.module = module
        self.device = device
        self.dtype = dtype
        self.threads = threads if str(device) == "cpu" else 0
        self._tls = threading.local()
        self._cache: dict[str, tuple[np.ndarray, object]] = {}

    def _to_device(self, name: str, a: np.ndarray):
        import torch

        hit = self._cache.get(name)
        if hit is not None and hit[0] is a:
            return hit[1]
        t = torch.from_numpy(np.array(a, copy=True) if not a.flags.writeable else np.ascontiguousarray(a))
        t = t.to(self.device, non_blocking=False)
        if t.is_floating_point():
            t = t.to(self.dtype)
        if not a.flags.writeable:
            self._cache[name] = (a, t)   # holding ``a`` keeps its identity from being reused
        return t

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        if self.threads and getattr(self._tls, "threads", None) != self.threads:
            torch.set_num_threads(self.threads)
            self._tls.threads = self.threads
        args = [self._to_device(n, feeds[n]) for n in self.input_names]
        with torch.inference_mode():
            out = self.module(*args)
        out = out if isinstance(out, tuple) else (out,)
        return {n: o.float().cpu().numpy() for n, o in zip(self.output_names, out)}

    def close(self) -> None:
        self.module = None
        self._cache.clear()


def load_engines(pipeline_dir: str | Path, precisions: Mapping[str, str], *, device: str | None = None,
                 threads: int = 0) -> dict[str, Engine]:
    """{"clip1","clip2","unet","vae"} -> TorchComponentEngine. device: "cuda:N", "cpu" or None (cuda:0 if any)."""
    import torch

    dev = torch.device(device or ("cuda:0" if torch.cuda.is_available() else "cpu"))
    engines = {}
    for comp, prec in precisions.items():
        if prec not in DTYPES:
            raise HarnessError(f"--backend=pytorch runs SDXL's {comp} in fp32/fp16/bf16, not {prec}",
                               "use --precision=fp16 (or --backend=tensorrt for int8/fp8)")
        dtype = getattr(torch, DTYPES[prec])
        if dev.type == "cpu" and dtype != torch.float32:
            dtype = torch.float32  # half-precision convs are slow or missing on CPU
        mod = load_component(Path(pipeline_dir), comp, dtype, dev)
        engines[comp] = TorchComponentEngine(comp, wrap(comp, {SUBFOLDER[comp]: mod}), dev, dtype, threads)
    return engines
