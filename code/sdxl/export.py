"""Per-component torch wrappers with the harness's I/O contract, and their ONNX export.

The wrappers (see code.sdxl.model for the tensor contract) are used twice: to export ONNX, and by
``code.sdxl.torch_engines`` to run the same graphs eagerly in torch. Exported graphs have a dynamic
batch axis "B" on every input and output (except ``timestep``, which is shared by the batch).
"""
from __future__ import annotations

import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from code.common.fileio import staged_path
from code.sdxl.constants import MAX_TOKENS, input_shapes

try:
    import torch
    from torch import nn
except ImportError:  # pragma: no cover - torch is a hard dependency of the sdxl package
    raise


class Clip1(nn.Module):
    def __init__(self, text_encoder):
        super().__init__()
        self.m = text_encoder

    def forward(self, input_ids):
        out = self.m(input_ids.to(torch.int64), output_hidden_states=True)
        return out.hidden_states[-2]


class Clip2(nn.Module):
    def __init__(self, text_encoder_2):
        super().__init__()
        self.m = text_encoder_2

    def forward(self, input_ids):
        out = self.m(input_ids.to(torch.int64), output_hidden_states=True)
        return out.hidden_states[-2], out.text_embeds


class Unet(nn.Module):
    def __init__(self, unet):
        super().__init__()
        self.m = unet

    def forward(self, sample, timestep, encoder_hidden_states, text_embeds, time_ids):
        return self.m(sample, timestep, encoder_hidden_states=encoder_hidden_states,
                      added_cond_kwargs={"text_embeds": text_embeds, "time_ids": time_ids}, return_dict=False)[0]


class VaeDecoder(nn.Module):
    def __init__(self, vae):
        super().__init__()
        self.m = vae
        self.scaling_factor = float(vae.config.scaling_factor)

    def forward(self, latent):
        return self.m.decode(latent / self.scaling_factor, return_dict=False)[0]


IO = {
    "clip1": (("input_ids",), ("hidden_states",)),
    "clip2": (("input_ids",), ("hidden_states", "text_embeds")),
    "unet": (("sample", "timestep", "encoder_hidden_states", "text_embeds", "time_ids"), ("noise_pred",)),
    "vae": (("latent",), ("image",)),
}


def wrap(component: str, comps) -> nn.Module:
    """comps: a StableDiffusionXLPipeline or a dict with its component attributes."""
    get = (lambda k: comps[k]) if isinstance(comps, dict) else (lambda k: getattr(comps, k))
    mod = {"clip1": lambda: Clip1(get("text_encoder")), "clip2": lambda: Clip2(get("text_encoder_2")),
           "unet": lambda: Unet(get("unet")), "vae": lambda: VaeDecoder(get("vae"))}[component]()
    return mod.eval()


def configs_of(comps) -> dict[str, dict]:
    """{"unet","vae","text_encoder_2"} -> plain config dict, from a pipeline or a dict of its modules."""
    get = (lambda k: comps[k]) if isinstance(comps, dict) else (lambda k: getattr(comps, k))
    te2 = get("text_encoder_2").config
    return {"unet": dict(get("unet").config), "vae": dict(get("vae").config),
            "text_encoder_2": te2.to_dict() if hasattr(te2, "to_dict") else dict(te2)}


def example_inputs(component: str, comps, batch: int = 2) -> tuple:
    shapes = input_shapes(component, configs_of(comps))
    out = []
    for name, shp in shapes.items():
        shp = tuple(batch if d == -1 else d for d in shp)
        if name == "input_ids":
            out.append(torch.randint(0, 49408, shp, dtype=torch.int32))
        elif name == "timestep":
            out.append(torch.tensor([999.0], dtype=torch.float32))
        elif name == "time_ids":
            out.append(torch.tensor([[128.0, 128.0, 0.0, 0.0, 128.0, 128.0]]).repeat(batch, 1))
        else:
            out.append(torch.randn(shp, dtype=torch.float32))
    return tuple(out)


def export_onnx(component: str, comps, out_path: str | Path, *, opset: int = 17, log=print) -> Path:
    """Export one component (fp32) to ONNX with a dynamic batch axis; atomic (staged + renamed).

    Uses the TorchScript exporter: it is fast for these graphs and keeps the names above. Models over
    2 GB (the real unet) are written with external data next to the .onnx file. The component
    module is converted to fp32 in place.
    """
    out_path = Path(out_path)
    ins, outs = IO[component]
    mod = wrap(component, comps).float()
    args = example_inputs(component, comps)
    dyn = {n: {0: "B"} for n in ins if n != "timestep"}
    dyn.update({n: {0: "B"} for n in outs})
    t0 = time.time()
    big = sum(p.numel() for p in mod.parameters()) * 4 > (1 << 31) - (64 << 20)
    # Shape checks in diffusers/transformers become trace-time constants; they only assert or pick
    # a memory layout, so their TracerWarnings are noise here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        _export(mod, args, ins, outs, dyn, opset, out_path, big)
    log(f"[sdxl] exported {component} -> {out_path} ({time.time() - t0:.1f}s)")
    return out_path


def _export(mod, args, ins, outs, dyn, opset: int, out_path: Path, big: bool) -> None:
    import onnx

    if not big:
        with staged_path(out_path, suffix=".onnx") as tmp, torch.inference_mode():
            torch.onnx.export(mod, args, str(tmp), input_names=list(ins), output_names=list(outs),
                              dynamic_axes=dyn, opset_version=opset, do_constant_folding=True, dynamo=False)
    else:  # > 2 GB: export into a scratch folder, then save as <name>.onnx + one <name>.onnx.data file
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out_path.parent, prefix=".export.") as scratch:
            with torch.inference_mode():
                torch.onnx.export(mod, args, os.path.join(scratch, "model.onnx"), input_names=list(ins),
                                  output_names=list(outs), dynamic_axes=dyn, opset_version=opset,
                                  do_constant_folding=True, dynamo=False)
            model = onnx.load(os.path.join(scratch, "model.onnx"))
            data_name = out_path.name + ".data"
            # The data file is written under its final name first; the .onnx that refers to it
            # appears (renamed into place) only once both are complete.
            with staged_path(out_path, suffix=".onnx") as tmp:
                onnx.save_model(model, str(tmp), save_as_external_data=True, all_tensors_to_one_file=True,
                                location=data_name)


def torch_reference(component: str, comps, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run a component's wrapper in torch on numpy feeds (used by tests to check the ONNX export)."""
    ins, outs = IO[component]
    mod = wrap(component, comps)
    with torch.inference_mode():
        res = mod(*[torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in ins])
    res = res if isinstance(res, tuple) else (res,)
    return {n: r.float().numpy() for n, r in zip(outs, res)}
