"""Post-training quantization: a calibration set -> an explicitly quantized (Q/DQ) ONNX model.

One calibrated component lives in one folder, written whole or not at all (staged, then renamed):

  models_dir(<benchmark>, <variant>)/calibrated/<component>-<precision>/
      model.onnx      QuantizeLinear/DequantizeLinear model for TensorRT: weights int8 (or fp8 E4M3)
                      per output channel, activations per tensor, symmetric (zero point 0), as its
                      explicit quantization wants; biases stay float (no int32 DequantizeLinear there)
      model_cpu.onnx  int8 only: the same ranges with uint8 activations, for ONNX Runtime's CPU kernels
      ranges.json     the activation ranges the calibration measured (ONNX Runtime's calibration cache:
                      tensor -> lowest/highest)
      record.json     written last: the reuse key, the calibration set (name, source, item count,
                      sha256 of its list and of the tensors fed), the method, the recipe (op types,
                      layers kept in higher precision), tool versions, and the model's sha256

The quantization itself is ONNX Runtime's static quantization (``quantize_static``, QDQ format); fp8
uses nvidia-modelopt's ONNX PTQ when it imports (NVIDIA's recipe, requirements-gpu.txt), else ONNX
Runtime's float8 QDQ. Re-running with the same source model, recipe, calibration list and tool
versions reuses the folder; ``--force_calibration`` redoes it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

import numpy as np

from code.common import paths
from code.common.errors import HarnessError, MissingDataError
from code.common.fileio import clean_stale_partials, sha256_file, staged_dir, write_json

QUANTIZED = ("int8", "fp8")
METHODS = ("minmax", "entropy", "percentile", "distribution")
RECORD = "record.json"
RANGES = "ranges.json"
FORMAT = 2                  # bump when the folder's layout or recipe semantics change


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How one component is quantized. ``keep`` names nodes left in higher precision (NVIDIA keeps
    e.g. the SDXL unet's first and last convs so); op types outside ``op_types`` (Softmax, norms,
    activations) are never quantized."""

    precision: str                                      # int8 | fp8
    method: str = "minmax"                              # METHODS
    op_types: tuple[str, ...] = ("Conv", "MatMul", "Gemm")
    keep: tuple[str, ...] = ()                          # regexes over node names (re.search)
    # op types whose output stays float: a per-tensor int8 logits tensor (ResNet50's fc) has a step of
    # max|logit|/127, so near-ties flip the argmax; MatMul outputs feed softmax/residual adds
    float_outputs: tuple[str, ...] = ("Gemm", "MatMul")
    percentile: float = 99.999

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class CalibrationSet:
    """The items a component is calibrated on: an official list (or the tiny variant's fixed slice)."""

    name: str                      # "ImageNet cal_image_list_option_1.txt (mlcommons/inference@b66003e)"
    source: str                    # where the list was read
    items: tuple[str, ...]         # image names, caption ids, ...
    list_sha256: str               # of the list as read

    @classmethod
    def from_list_file(cls, name: str, path: Path, fix: str) -> "CalibrationSet":
        """A one-item-per-line list; a missing or empty one is a one-line error with ``fix``."""
        if not path.is_file():
            raise MissingDataError(f"calibration list {path} not found", fix)
        text = path.read_text(encoding="utf-8", errors="replace")
        items = tuple(ln.strip() for ln in text.splitlines() if ln.strip())
        if not items:
            raise MissingDataError(f"calibration set of size 0: {path} lists no items", fix)
        return cls(name, str(path), items, hashlib.sha256(text.encode()).hexdigest())


def folder(benchmark: str, variant: str, component: str, precision: str) -> Path:
    return paths.models_dir(benchmark, variant) / "calibrated" / f"{component}-{precision}"


def calibrate_fix(benchmark: str, precision: str, variant: str, force: bool = False) -> str:
    args = f"--benchmarks={benchmark} --precision={precision}" + (" --model_variant=tiny" if variant == "tiny" else "")
    return f'make calibrate RUN_ARGS="{args}{" --force_calibration" if force else ""}"'


def tool_versions(precision: str) -> dict[str, str | None]:
    from importlib import metadata

    out = {}
    for pkg in ("onnxruntime", "onnx") + (("nvidia-modelopt",) if precision == "fp8" else ()):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def reuse_key(source_sha256: str, recipe: Recipe, cset: CalibrationSet) -> str:
    blob = json.dumps({"format": FORMAT, "source": source_sha256, "recipe": recipe.as_dict(),
                       "set": [cset.name, cset.list_sha256, len(cset.items)],
                       "versions": tool_versions(recipe.precision)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def read_record(out: Path) -> dict | None:
    try:
        rec = json.loads((out / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


class _Reader:
    """ONNX Runtime's CalibrationDataReader over an iterable of feed dicts; counts and hashes what it
    hands out (the record's ``data_sha256``)."""

    def __init__(self, feeds: Iterable[Mapping[str, np.ndarray]]):
        self._it: Iterator = iter(feeds)
        self.count = 0
        self.sha = hashlib.sha256()

    def get_next(self):
        feed = next(self._it, None)
        if feed is None:
            return None
        self.count += 1
        for k in sorted(feed):
            a = np.ascontiguousarray(feed[k])
            self.sha.update(k.encode())
            self.sha.update(a.tobytes())
        return dict(feed)

    def rewind(self):  # ORT calls it between passes of some calibrators; one pass is all ours need
        return None


# The Q/DQ model each backend builds from. TensorRT's explicit quantization wants symmetric int8
# activations (zero point 0); ONNX Runtime's x86 kernels fuse Q/DQ into QLinearConv only with uint8
# activations (its CPU guidance: QUInt8 activations, QInt8 weights), 2.2x fp32 on full-size ResNet50
# here against 0.8x with int8 ones. Both come from the same measured ranges (ranges.json).
MODELS = {"tensorrt": "model.onnx", "onnxruntime": "model_cpu.onnx"}


def _resolve_keep(src: Path, recipe: Recipe) -> list[str]:
    import re

    import onnx

    pats = [re.compile(k) for k in recipe.keep]
    g = onnx.load(str(src), load_external_data=False).graph
    return [n.name for n in g.node if n.op_type in recipe.op_types and any(p.search(n.name) for p in pats)]


def _ort_quantize(src: Path, dst: Path, ranges: Path, reader, recipe: Recipe, keep: list[str], large: bool,
                  target: str) -> None:
    """ONNX Runtime's static QDQ quantization. The first call measures the ranges (reader) and writes
    them to ``ranges``; a later call with the same ``ranges`` file reuses them and reads no data."""
    import logging

    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    wtype = QuantType.QFLOAT8E4M3FN if recipe.precision == "fp8" else QuantType.QInt8
    atype = QuantType.QUInt8 if target == "onnxruntime" else wtype
    method = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
              "percentile": CalibrationMethod.Percentile, "distribution": CalibrationMethod.Distribution}[recipe.method]
    extra = {"ActivationSymmetric": target != "onnxruntime", "WeightSymmetric": True, "QuantizeBias": False,
             "MatMulConstBOnly": True, "OpTypesToExcludeOutputQuantization": list(recipe.float_outputs),
             "CalibPercentile": recipe.percentile}
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)          # ORT's "consider pre-processing" advice on every call
    try:
        quantize_static(str(src), str(dst), reader, quant_format=QuantFormat.QDQ,
                        op_types_to_quantize=list(recipe.op_types), per_channel=True, activation_type=atype,
                        weight_type=wtype, nodes_to_exclude=keep, use_external_data_format=large,
                        calibrate_method=method, extra_options=extra, calibration_cache_path=str(ranges))
    finally:
        root.setLevel(level)


def _modelopt_quantize(src: Path, dst: Path, ranges: Path, reader: _Reader, recipe: Recipe, keep: list[str],
                       large: bool) -> bool:
    """fp8 with nvidia-modelopt's ONNX PTQ (NVIDIA's recipe; requirements-gpu.txt) when it imports; False
    when it does not. Newer releases read the data through ``calibration_data_reader`` (one step at a
    time); older ones take the whole set as arrays."""
    import inspect

    try:
        from modelopt.onnx.quantization import quantize as mo_quantize
    except Exception:  # noqa: BLE001 - not installed, or a broken install: ONNX Runtime's float8 QDQ instead
        return False
    kw = dict(onnx_path=str(src), quantize_mode="fp8", calibration_method="max", nodes_to_exclude=keep,
              op_types_to_quantize=list(recipe.op_types), use_external_data_format=large, output_path=str(dst))
    if "calibration_data_reader" in inspect.signature(mo_quantize).parameters:
        kw["calibration_data_reader"] = reader
    else:
        batches = list(iter(reader.get_next, None))
        if not batches:
            return True                      # the caller reports the empty set
        kw["calibration_data"] = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    mo_quantize(**kw)
    write_json(ranges, {"note": "nvidia-modelopt keeps the fp8 scales in the model's Q/DQ nodes"})
    return True


def calibrate(src: Path, out: Path, recipe: Recipe, cset: CalibrationSet,
              feeds: Callable[[], Iterable[Mapping[str, np.ndarray]]], *, fix: str, force: bool = False,
              log: Callable[[str], None] = print) -> dict:
    """Quantize ``src`` into the folder ``out`` (see the module doc); reuse it when its record's key
    matches and its models are intact. ``feeds()`` yields the calibration inputs (one dict of input
    name -> array per step), computed only when the models are (re)built. Returns the record."""
    if recipe.precision not in QUANTIZED:
        raise HarnessError(f"calibration is for int8/fp8 engines, not {recipe.precision}", "use --precision=int8 or fp8")
    if recipe.method not in METHODS:
        raise HarnessError(f"unknown calibration method '{recipe.method}'", f"use one of {', '.join(METHODS)}")
    if not cset.items:
        raise MissingDataError(f"calibration set of size 0 ({cset.name})", fix)
    source_sha = sha256_file(src)
    key = reuse_key(source_sha, recipe, cset)
    targets = ("tensorrt",) if recipe.precision == "fp8" else tuple(MODELS)
    rec = read_record(out)
    if rec and rec.get("key") == key and not force and all(_intact(out, rec, t) for t in targets):
        log(f"[calibrate] reuse {out} (key {key})")
        return rec
    clean_stale_partials(out.parent)
    log(f"[calibrate] {recipe.precision} {out.name}: {len(cset.items)} items of {cset.name}, method {recipe.method}")
    large = src.stat().st_size > (1 << 30) or Path(f"{src}.data").exists()   # external data (the real unet)
    keep = _resolve_keep(src, recipe)
    reader = _Reader(feeds())
    with staged_dir(out) as tmp:
        ranges = tmp / RANGES
        tool = "onnxruntime.quantization.quantize_static"
        if recipe.precision == "fp8" and _modelopt_quantize(src, tmp / MODELS["tensorrt"], ranges, reader, recipe, keep,
                                                                    large):
            tool = "modelopt.onnx.quantization.quantize"
        else:
            for t in targets:        # the first measures the ranges, the second reuses them
                _ort_quantize(src, tmp / MODELS[t], ranges, reader if t == targets[0] else None, recipe, keep, large, t)
        if reader.count == 0:
            raise MissingDataError(f"calibration set of size 0: {cset.name} produced no inputs", fix)
        models = {t: {"file": MODELS[t], "sha256": sha256_file(tmp / MODELS[t]), "stat": _stat(tmp / MODELS[t]),
                      "qdq": qdq_summary(tmp / MODELS[t])} for t in targets}   # os.replace of the folder keeps stat
        rec = {"key": key, "format": FORMAT, "component": out.name, "source_model": str(src), "source_sha256": source_sha,
               "precision": recipe.precision, "method": recipe.method, "recipe": recipe.as_dict(), "kept": keep,
               "tool": tool, "versions": tool_versions(recipe.precision), "models": models,
               "calibration_set": {"name": cset.name, "source": cset.source, "items": len(cset.items),
                                   "list_sha256": cset.list_sha256, "inputs_fed": reader.count,
                                   "data_sha256": reader.sha.hexdigest()}}
        write_json(tmp / RECORD, rec)
    q = models["tensorrt"]["qdq"]
    log(f"[calibrate] wrote {out} ({', '.join(MODELS[t] for t in targets)}; {q['quantize_nodes']} Q / "
        f"{q['dequantize_nodes']} DQ nodes, {len(keep)} layers kept in higher precision)")
    return rec


def _stat(p: Path) -> list:
    st = p.stat()
    return [st.st_size, st.st_mtime_ns]


def _intact(out: Path, rec: dict, target: str) -> bool:
    """The target's model is the one the record names: same size and mtime, else the same sha256 (a
    real SDXL unet is gigabytes: not hashed on every engine build)."""
    m = rec.get("models", {}).get(target)
    path = out / MODELS[target]
    if not m or not path.is_file():
        return False
    return m.get("stat") == _stat(path) or sha256_file(path) == m.get("sha256")


def target_of(backend: str) -> str:
    from code.common.backends import backend_class

    return backend_class(backend).qdq_target


def calibrated_model(out: Path, precision: str, target: str, fix: str, force_fix: str) -> tuple[Path, dict]:
    """The calibrated model a ``target`` backend builds its int8/fp8 engine from, and the record.
    Missing: exit 3 with the ``make calibrate`` command; damaged (not the bytes its record names):
    exit 3 with the command that redoes it."""
    rec = read_record(out)
    path = out / MODELS[target]
    if rec is None or not path.is_file():
        raise MissingDataError(f"no calibrated {precision} model for {target} in {out}", fix)
    if not _intact(out, rec, target):
        raise MissingDataError(f"calibrated model {path} is damaged (not the file its record.json names)", force_fix)
    return path, rec


def qdq_summary(path: Path) -> dict:
    """What a Q/DQ model holds, for the record and for checks: node counts, each quantized weight's
    axis and element type, which Conv/MatMul/Gemm nodes keep float weights, and any Softmax fed by a
    DequantizeLinear (none should be)."""
    import onnx

    g = onnx.load(str(path), load_external_data=False).graph
    inits = {i.name: i for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    dq = [n for n in g.node if n.op_type == "DequantizeLinear"]
    weights = {}
    for n in dq:
        if n.input[0] in inits:
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
            scale = inits.get(n.input[1])
            per_channel = scale is not None and len(scale.dims) == 1 and scale.dims[0] > 1
            weights[n.input[0]] = {"axis": axis if per_channel else None, "dtype": onnx.TensorProto.DataType.Name(
                inits[n.input[0]].data_type), "shape": list(inits[n.input[0]].dims)}

    def from_dq(name: str) -> bool:
        return producer.get(name) is not None and producer[name].op_type == "DequantizeLinear"

    # a compute node runs quantized when its weight (input 1) is a dequantized int8/fp8 constant
    compute = [n for n in g.node if n.op_type in ("Conv", "ConvTranspose", "MatMul", "Gemm") and len(n.input) > 1]
    weighted = [n for n in compute if n.input[1] in inits or from_dq(n.input[1])]
    plain = [n.name for n in weighted if not from_dq(n.input[1])]
    softmax_q = [n.name for n in g.node if n.op_type == "Softmax" and any(from_dq(i) for i in n.input)]
    return {"quantize_nodes": sum(n.op_type == "QuantizeLinear" for n in g.node), "dequantize_nodes": len(dq),
            "quantized_weights": len(weights), "weights": weights, "float_weight_nodes": plain,
            "quantized_softmax_nodes": softmax_q}


# --- the framework side: `make calibrate` and the engines built from its output --------------------

FP8_ARCHS = ("Ada", "Hopper", "Blackwell")     # compute capability 8.9 and up: TensorRT builds fp8 there


def precision_to_calibrate(settings) -> str:
    """``--precision`` when it is int8/fp8; int8 when the precision is a float one from config.json (``make
    calibrate`` on a system whose config asks for fp16/fp32 prepares the int8 model). A float precision given
    on the command line is a mistake said so, never an int8 calibration done in its place."""
    if settings.precision in QUANTIZED:
        return settings.precision
    if settings.sources.get("precision") == "cli":
        name = settings.spec.name
        raise HarnessError(f"--precision={settings.precision} needs no calibration: make calibrate makes int8 and fp8 "
                           "models", f'make calibrate RUN_ARGS="--benchmarks={name} --precision=int8" (or fp8); '
                           f'{settings.precision} engines build from the model as it is (make generate_engines)')
    return "int8"


def recipe_for(bench, component: str, precision: str) -> Recipe:
    recipes = bench.calibration_recipes(precision)
    if component not in recipes:
        have = ", ".join(recipes) or "none"
        raise HarnessError(f"{bench.spec.name} has no {precision} recipe for {component} (quantized components: {have})",
                           "use --precision=fp16 (GPU) or --precision=fp32")
    recipe = recipes[component]
    method = bench.settings.values.get("calibration_method")
    return dataclasses.replace(recipe, method=method) if method else recipe


def run(bench, *, force: bool = False, log: Callable[[str], None] = print) -> list[dict]:
    """``make calibrate`` for one benchmark: every component its recipes quantize, at the precision
    ``precision_to_calibrate`` picks. Returns the records."""
    s = bench.settings
    precision = precision_to_calibrate(s)
    recipes = bench.calibration_recipes(precision)
    if not recipes:
        raise HarnessError(f"{bench.spec.name} has no {precision} calibration recipe yet: its engines run at fp16/fp32",
                           f"use --precision=fp16 (GPU) or fp32 for {bench.spec.name}")
    cset = bench.calibration_set()
    out = []
    for comp in recipes:
        recipe = recipe_for(bench, comp, precision)
        fix = calibrate_fix(bench.spec.name, precision, s.model_variant)
        out.append(calibrate(Path(bench.calibration_model(comp)), folder(bench.spec.name, s.model_variant, comp, precision),
                             recipe, cset, lambda c=comp: bench.calibration_feeds(c, cset), fix=fix, force=force, log=log))
    return out


def engine_source(bench, component: str, source, spec):
    """(ModelSource, EngineSpec) an engine of ``spec.precision`` is built from. Float precisions: as
    given. int8/fp8: the calibrated Q/DQ model, with its record's key in the spec (so the engine's
    build key covers the calibration). Refused, in this order, each with its fix: fp8 where no
    backend here builds it, a component without a recipe, no (or a damaged) calibrated model, and a
    GPU system whose backend cannot build quantized engines (TensorRT not installed)."""
    from code.common.backends import backend_class
    from code.common.backends.base import ModelSource

    p = spec.precision
    if p not in QUANTIZED:
        return source, spec
    s = bench.settings
    gpu = s.system.accelerator == "gpu"
    if p == "fp8" and gpu and s.system.arch not in FP8_ARCHS:
        raise HarnessError(f"fp8 engines need an Ada, Hopper or Blackwell GPU (compute capability 8.9+); "
                           f"{s.system.system_id} is {s.system.arch}", "use --precision=int8 (or fp16)")
    if p == "fp8" and not gpu:
        raise HarnessError(f"fp8 runs on TensorRT on Ada/Hopper/Blackwell GPUs; {s.system.system_id} has none, and "
                           f"--backend={s.backend} has no fp8 kernels", "use --precision=int8 (ONNX Runtime's int8 "
                           "kernels run on CPUs) or fp32")
    recipe_for(bench, component, p)
    out = folder(bench.spec.name, s.model_variant, component, p)
    model, rec = calibrated_model(out, p, target_of(s.backend), calibrate_fix(bench.spec.name, p, s.model_variant),
                                  calibrate_fix(bench.spec.name, p, s.model_variant, force=True))
    cls = backend_class(s.backend)
    if p not in cls.precisions:
        if gpu:
            ok, why = backend_class("tensorrt").available()
            raise HarnessError(f"{p} engines on GPUs are built by TensorRT, which is not usable here "
                               f"({why or 'installed'}; --backend={s.backend} builds {'/'.join(cls.precisions)})",
                               "make prebuild GPU_EXTRAS=1 (installs TensorRT), then --backend=tensorrt; or "
                               "--precision=fp16")
        cls.check_precision(p, f"{bench.spec.name}'s {component}")
    spec = dataclasses.replace(spec, extra={**spec.extra, "calibration": rec["key"]})
    return ModelSource(lambda m=model: m, fix=calibrate_fix(bench.spec.name, p, s.model_variant, force=True)), spec


def of_engines(engines: Mapping[str, str]) -> dict[str, dict]:
    """For a run's metadata.json: component -> what its engine was calibrated with (from the engine's
    build record and the calibrated folder's record.json); components built from float models are absent."""
    out = {}
    for comp, path in engines.items():
        try:
            src = Path(json.loads(Path(f"{path}.json").read_text())["source"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        rec = read_record(src.parent)
        if rec is None or src.name not in MODELS.values():
            continue
        out[comp] = {"key": rec.get("key"), "precision": rec.get("precision"), "method": rec.get("method"),
                     "tool": rec.get("tool"), "kept": rec.get("kept", []), "model": str(src),
                     "calibration_set": rec.get("calibration_set")}
    return out
