"""The eager torch factory for SDXL's components (the pytorch backend's ``eager`` format).

Why not the generic pytorch backend's saved programs: saving a torch.export archive of the real unet
(2.6B parameters) costs minutes and ~10 GB of disk for no runtime gain. The backend
(``code.common.backends.pytorch.EagerTorchEngine``) calls ``component_module`` with the component's
folder inside the diffusers pipeline folder, and runs the wrapper with the harness's tensor contract
(``code.sdxl.export``: the same graphs the ONNX export writes).
"""
from __future__ import annotations

from pathlib import Path

from code.sdxl.constants import SUBFOLDER

CLASSES = {"clip1": ("transformers", "CLIPTextModel"), "clip2": ("transformers", "CLIPTextModelWithProjection"),
           "unet": ("diffusers", "UNet2DConditionModel"), "vae": ("diffusers", "AutoencoderKL")}


def load_component(folder: Path, component: str, dtype, device):
    """The diffusers/transformers module of one component, loaded from its folder, on device in dtype."""
    import importlib

    from code.sdxl.download import weights_variant

    pkg, name = CLASSES[component]
    cls = getattr(importlib.import_module(pkg), name)
    mod = cls.from_pretrained(str(folder), variant=weights_variant(folder.parent), dtype=dtype)
    return mod.to(device).eval()


def component_module(source: str, spec, device, dtype):
    """Eager factory: (wrapped module, input names, output names) for EngineSpec ``spec.name``."""
    from code.sdxl.export import IO, wrap

    comp = spec.name
    mod = load_component(Path(source), comp, dtype, device)
    ins, outs = IO[comp]
    return wrap(comp, {SUBFOLDER[comp]: mod}), ins, outs
