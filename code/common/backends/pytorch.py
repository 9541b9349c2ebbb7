"""PyTorch backend: the reference path, for fidelity checks and for GPUs without TensorRT.

The "engine" (.pt2) is a saved torch program, one of three archive formats, tried in this order
(``extra["torch_format"]`` = "export" | "jit" | "pickle" forces one):
  export  torch.export ExportedProgram (torch.export.save), batch dim dynamic;
  jit     torch.jit.trace + torch.jit.save;
  pickle  torch.save of the whole module (its class must stay importable).
Each archive carries harness.json: input names (call order), output names, format.

A fourth format, ``eager``, is chosen when the benchmark offers a module factory for the component
(``ModelSource.module_factory``; see ``prepare``): the engine file is then a JSON manifest naming the
factory and the source folder, and ``load`` builds the module eagerly from the weights. This is the
path for models whose saved program would cost minutes and gigabytes for no runtime gain (the SDXL
unet); it goes through the same engine cache, so a changed source folder rebuilds the manifest.
An eager factory is ``f(source_dir, spec, device, dtype) -> (module, input_names, output_names)``.

Where the module comes from:
  * ``extra["torch_factory"] = "pkg.module:function"``: called as function(onnx_path, spec) and
    returns (torch.nn.Module, example_inputs: dict name -> tensor). The module is called with the
    inputs as positional arguments in the dict's order. Examples should have batch >= 2 so the
    batch dim can be exported as dynamic (batch 1 examples are repeated to 2).
  * otherwise the ONNX is converted with onnx2torch (pinned in requirements.txt).

Outputs are named by position with the ONNX output names (or ``extra["output_names"]``), so a
caller sees what the ORT and TensorRT engines return; a module returning a dict (Hugging Face
style) is matched by order.

Precision: fp32, or fp16 = torch.autocast(float16) on CUDA (fp32 on CPU; float outputs are cast
back to float32, so callers always see the fp32 contract). int8/fp8 are TensorRT's business.
Device: cuda:<spec.device_id> when torch sees a GPU, else CPU (``extra["torch_device"]="cpu"``
forces CPU). On CPU the intra-op thread count is spec.intra_op_threads or all cores in affinity,
applied on every thread that calls ``infer`` (OpenMP's thread count is per calling thread).

Thread safety: a TorchEngine is used by one thread at a time (the Engine contract).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import threading
import warnings
import zipfile
from typing import Mapping

import numpy as np

from code.common.backends.base import Backend, Engine, EngineSpec
from code.common.errors import HarnessError

META = "harness.json"
FORMATS = ("export", "jit", "pickle")


def _threads(spec: EngineSpec) -> int:
    return spec.intra_op_threads if spec.intra_op_threads > 0 else max(1, len(os.sched_getaffinity(0)))


def _load_factory(ref: str):
    mod, _, attr = str(ref).partition(":")
    if not attr:
        raise HarnessError(f"torch_factory '{ref}' is not 'module:function'", "write it as pkg.module:function")
    try:
        return getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as e:
        raise HarnessError(f"cannot import torch_factory '{ref}': {e}", "check the module path in the engine spec") from None


def _onnx_names(onnx_path: str) -> tuple[list[str], list[str], dict]:
    import onnx

    m = onnx.load(onnx_path, load_external_data=False)
    init = {i.name for i in m.graph.initializer}
    ins = [i for i in m.graph.input if i.name not in init]
    return [i.name for i in ins], [o.name for o in m.graph.output], {i.name: i for i in ins}


def _from_onnx(onnx_path: str, spec: EngineSpec):
    """(module, example_inputs) by converting the ONNX with onnx2torch."""
    try:
        from onnx2torch import convert
    except ImportError:
        raise HarnessError("the pytorch backend needs a torch model: no torch_factory in the engine spec and "
                           "onnx2torch is not installed", "pip install onnx2torch==1.5.15, or give "
                           "extra['torch_factory']='module:function'") from None
    import onnx
    import torch

    names, _, infos = _onnx_names(onnx_path)
    module = convert(_inline_shared_initializers(onnx.load(onnx_path)))
    examples = {}
    for n in names:
        t = infos[n].type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
        want = list(spec.input_shapes.get(n, dims))
        # a dynamic dim's example size: 2 where the batch may vary (torch.export keeps a size-1 dim static),
        # 1 for a batch-1 engine, whose program is saved static at its example's shape
        shape = [(2 if spec.batch_size > 1 else 1) if w < 0 else w for w in want]
        dtype = torch.from_numpy(np.zeros(0, onnx.helper.tensor_dtype_to_np_dtype(t.elem_type))).dtype
        examples[n] = torch.zeros(shape, dtype=dtype) if not dtype.is_floating_point else torch.randn(shape).to(dtype)
    return module, examples


def _inline_shared_initializers(model):
    """Identity nodes fed by an initializer become initializers of their own. torch's ONNX exporter shares equal
    weights that way (a random-weight ResNet50's zero conv biases came out as ``Identity(onnx::Conv_500)``), and
    onnx2torch looks a conv's weights up among the initializers only (KeyError 'onnx::Conv_503' on an H200)."""
    import onnx

    init = {i.name: i for i in model.graph.initializer}
    keep = []
    for node in model.graph.node:
        if node.op_type == "Identity" and node.input[0] in init:
            copy = onnx.TensorProto()
            copy.CopyFrom(init[node.input[0]])
            copy.name = node.output[0]
            model.graph.initializer.append(copy)
            init[copy.name] = copy
        else:
            keep.append(node)
    if len(keep) != len(model.graph.node):
        del model.graph.node[:]
        model.graph.node.extend(keep)
    return model


def _archive_format(path: str) -> str:
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    if any(n.endswith("/archive_format") or n == "archive_format" for n in names):
        return "export"
    if any("/code/" in n or n.endswith("constants.pkl") for n in names):
        return "jit"
    return "pickle"


def _batched(spec: EngineSpec, name: str, x) -> bool:
    """Does input ``name`` (example ``x``) carry the batch dim (dim 0 dynamic in the spec's input shapes)?"""
    return x.dim() > 0 and tuple(spec.input_shapes.get(name, (-1,)))[:1] == (-1,)


def _dynamic_batch(spec: EngineSpec, examples: dict) -> tuple[dict, tuple | None]:
    """Examples with batch >= 2 and torch.export dynamic_shapes marking dim 0 of batched inputs."""
    import torch

    if spec.batch_size <= 1:
        return examples, None
    out, dyn = {}, []
    for n, x in examples.items():
        batched = _batched(spec, n, x)
        if batched and x.shape[0] == 1:
            x = x.repeat(2, *([1] * (x.dim() - 1)))
        out[n] = x
        dyn.append({0: torch.export.Dim.AUTO} if batched else None)
    return out, tuple(dyn)


def _other_batches(spec: EngineSpec, examples: dict) -> list[tuple]:
    """Inputs at batch 1 and 3 (batched inputs only): a saved program must run at sizes other than its examples'.
    torch.export's Dim.AUTO silently specialises a batch dim the graph fixes (onnx2torch's conversion of ResNet50's
    ONNX came out fixed at the example batch of 2 and failed every other batch at run time)."""
    if spec.batch_size <= 1:
        return []
    out = []
    for b in (1, 3):
        out.append(tuple(x[:1].repeat(b, *([1] * (x.dim() - 1))) if _batched(spec, n, x) else x
                         for n, x in examples.items()))
    return out


def _save(module, examples: dict, spec: EngineSpec, meta: dict, path: str) -> str:
    """Write the first format that works at every batch size (checked at batch 1 and 3 before it is written);
    returns its name. Raises HarnessError listing failures."""
    import torch

    forced = spec.extra.get("torch_format")
    order = (forced,) if forced else FORMATS
    if forced and forced not in FORMATS:
        raise HarnessError(f"unknown torch_format '{forced}'", f"use one of {', '.join(FORMATS)}")
    errors = []
    for fmt in order:
        m = dict(meta, format=fmt)
        try:
            if fmt == "export":
                ex, dyn = _dynamic_batch(spec, examples)
                ep = torch.export.export(module, tuple(ex.values()), dynamic_shapes=dyn)
                with torch.no_grad():
                    for args in _other_batches(spec, ex):
                        ep.module()(*args)
                with open(path, "wb") as f:  # a file object: the staged name need not end in .pt2
                    torch.export.save(ep, f, extra_files={META: json.dumps(m)})
            elif fmt == "jit":
                with torch.no_grad(), warnings.catch_warnings():
                    warnings.simplefilter("ignore", FutureWarning)  # jit is deprecated; it is our fallback
                    tr = torch.jit.trace(module, tuple(examples.values()), strict=False, check_trace=False)
                    for args in _other_batches(spec, examples):
                        tr(*args)
                    torch.jit.save(tr, path, _extra_files={META: json.dumps(m)})
            else:
                torch.save({"meta": m, "module": module}, path)
            return fmt
        except Exception as e:  # each format has its own failure modes; try the next
            errors.append(f"{fmt}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    raise HarnessError(f"could not save a torch program for {spec.name}: " + " | ".join(errors),
                       "make the torch_factory module exportable, or force extra['torch_format']", 4)


class PyTorchBackend(Backend):
    name = "pytorch"
    short = "PyT"
    engine_suffix = ".pt2"
    precisions = ("fp32", "fp16", "bf16")
    library = "torch"
    display = "PyTorch"
    runs_modules = True
    preference = {"gpu": 1, "cpu": 1}

    def prepare(self, source, spec: EngineSpec):
        """Prefer the benchmark's eager module factory (no saved program); else its ONNX."""
        if source.module_factory:
            extra = dict(spec.extra, torch_format="eager", torch_factory=source.module_factory)
            return source.module_dir, dataclasses.replace(spec, extra=extra)
        return super().prepare(source, spec)

    def build(self, onnx_path: str, engine_path: str, spec: EngineSpec) -> None:
        import torch

        if spec.precision not in self.precisions:
            raise HarnessError(f"the pytorch backend runs {'/'.join(self.precisions)}, not {spec.precision} ({spec.name})",
                               "use --backend=tensorrt for int8/fp8, or set precision fp16")
        factory = spec.extra.get("torch_factory")
        if spec.extra.get("torch_format") == "eager":
            _load_factory(factory)   # fail at build time, not in the timed run
            with open(engine_path, "w") as f:
                json.dump({"format": "eager", "factory": factory, "source": str(onnx_path),
                           "torch": torch.__version__}, f, indent=2)
            return
        module, examples = _load_factory(factory)(onnx_path, spec) if factory else _from_onnx(onnx_path, spec)
        module = module.eval()
        out_names = list(spec.extra.get("output_names") or [])
        if not out_names and onnx_path and os.path.exists(onnx_path):
            out_names = _onnx_names(onnx_path)[1]
        meta = {"input_names": list(examples), "output_names": out_names, "torch": torch.__version__}
        _save(module, examples, spec, meta, engine_path)

    def load(self, engine_path: str, spec: EngineSpec) -> Engine:
        if not zipfile.is_zipfile(engine_path):
            with open(engine_path) as f:
                return EagerTorchEngine(json.load(f), spec)
        return TorchEngine(engine_path, spec)


def _device(spec: EngineSpec):
    import torch

    want_cpu = spec.extra.get("torch_device") == "cpu"
    return torch.device("cpu" if want_cpu or not torch.cuda.is_available() else f"cuda:{spec.device_id}")


class EagerTorchEngine(Engine):
    """A module built by an eager factory (format ``eager``), on cuda:<device_id> or the CPU.

    Device transfers: an input passed as a read-only numpy array (callers mark per-batch constants,
    e.g. SDXL's text embeddings, read-only) is copied to the device once and reused while the same
    array object is passed again; writable inputs are copied on every call. Outputs are host float32
    (the Engine contract), whatever the compute dtype. Half precision runs only on CUDA.
    """

    DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}

    def __init__(self, manifest: dict, spec: EngineSpec):
        import torch

        self.device = _device(spec)
        self.dtype = getattr(torch, self.DTYPES[spec.precision]) if self.device.type == "cuda" else torch.float32
        self.threads = _threads(spec) if self.device.type == "cpu" else 0
        self._tls = threading.local()
        module, ins, outs = _load_factory(manifest["factory"])(manifest["source"], spec, self.device, self.dtype)
        module = module.to(self.device)
        if self.dtype != torch.float32 and any(p.dtype == torch.float32 for p in module.parameters()):
            module = module.to(self.dtype)     # the inputs are cast to the compute dtype: so are fp32-built weights
        self.module = module.eval()
        self.input_names, self.output_names = tuple(ins), tuple(outs)
        self._cache: dict[str, tuple[np.ndarray, object]] = {}

    def _to_device(self, name: str, a: np.ndarray):
        import torch

        hit = self._cache.get(name)
        if hit is not None and hit[0] is a:
            return hit[1]
        t = torch.from_numpy(np.array(a, copy=True) if not a.flags.writeable else np.ascontiguousarray(a))
        t = t.to(self.device)
        if t.is_floating_point():
            t = t.to(self.dtype)
        if not a.flags.writeable:
            self._cache[name] = (a, t)   # holding ``a`` keeps its identity from being reused
        return t

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        _apply_threads(self)
        args = [self._to_device(n, feeds[n]) for n in self.input_names]
        with torch.inference_mode():
            out = self.module(*args)
        out = out if isinstance(out, tuple) else (out,)
        return {n: o.float().cpu().numpy() for n, o in zip(self.output_names, out)}

    def close(self) -> None:
        self.module = None
        self._cache.clear()


def _apply_threads(engine) -> None:
    """torch's intra-op pool size is per calling thread: set it on each worker thread once."""
    if engine.threads and getattr(engine._tls, "threads", None) != engine.threads:
        import torch

        torch.set_num_threads(engine.threads)
        engine._tls.threads = engine.threads


@contextlib.contextmanager
def one_thread():
    """torch on one intra-op thread inside (this thread's setting, restored after): small ops (a tiny model's
    matmuls and convolutions, host post-processing) with an OpenMP team of 2 on a busy 2-core machine wait for
    descheduled peers. Measured here: the tiny detector's batch of 4 3.4 s against 0.11 s; the tiny DLRM-v2 set's
    forward 5.8 s against 0.25 s; the tiny Llama's EOS search 1.9 CPU-s a scale against 0.2. Switching costs ~2 us."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


class TorchEngine(Engine):
    """A loaded torch program on one device. ``format`` says which archive it came from."""

    def __init__(self, path: str, spec: EngineSpec):
        import torch

        self.device = _device(spec)
        self.threads = _threads(spec) if self.device.type == "cpu" else 0
        self._tls = threading.local()
        _apply_threads(self)
        self.format = _archive_format(path)
        extra = {META: ""}
        if self.format == "export":
            with open(path, "rb") as f:
                ep = torch.export.load(f, extra_files=extra)
            if self.device.type != "cpu":
                from torch.export.passes import move_to_device_pass

                ep = move_to_device_pass(ep, self.device)
            self.module = ep.module()
            meta = json.loads(extra[META])
        elif self.format == "jit":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                self.module = torch.jit.load(path, map_location=self.device, _extra_files=extra)
            meta = json.loads(extra[META])
        else:
            blob = torch.load(path, map_location=self.device, weights_only=False)
            self.module, meta = blob["module"].to(self.device), blob["meta"]
        if self.format != "export":
            self.module.eval()
        self.input_names = tuple(meta["input_names"])
        self.output_names = tuple(meta["output_names"])
        self.autocast = spec.precision == "fp16" and self.device.type == "cuda"

    def _name_outputs(self, out) -> dict:
        import torch

        # Outputs take the ONNX output names by position, so callers see what the ORT and
        # TensorRT engines return; without a name for each leaf, a dict's keys or output_<i>.
        if isinstance(out, Mapping):
            keys, leaves = list(out.keys()), list(out.values())
        else:
            leaves = torch.utils._pytree.tree_leaves(out)
            keys = [f"output_{i}" for i in range(len(leaves))]
        names = list(self.output_names) if len(self.output_names) == len(leaves) else keys
        items = list(zip(names, leaves))
        res = {}
        for k, v in items:
            if self.autocast and v.is_floating_point() and v.dtype != torch.float32:
                v = v.float()
            res[k] = v.detach().cpu().numpy()
        return res

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        _apply_threads(self)
        args = []
        for n in self.input_names:
            a = np.asarray(feeds[n])
            if not a.flags.writeable or not a.flags.c_contiguous:
                a = np.array(a)  # torch.from_numpy wants a writable, contiguous array
            args.append(torch.from_numpy(a).to(self.device))
        amp = torch.autocast("cuda", dtype=torch.float16) if self.autocast else contextlib.nullcontext()
        with torch.inference_mode(), amp:
            out = self.module(*args)
        return self._name_outputs(out)

    def close(self) -> None:
        self.module = None
