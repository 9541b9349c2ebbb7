"""ONNX Runtime backend: the CPU default. The "engine" is the ORT-optimised ONNX model file."""
from __future__ import annotations

import os
from typing import Mapping

import numpy as np

from code.common.backends.base import Backend, Engine, EngineSpec


def _threads(spec: EngineSpec) -> int:
    if spec.intra_op_threads > 0:
        return spec.intra_op_threads
    return max(1, len(os.sched_getaffinity(0)))


def session_options(spec: EngineSpec, optimized_model_path: str | None = None):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = _threads(spec)
    so.inter_op_num_threads = max(1, spec.inter_op_threads)
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Spinning pool threads wake faster between parallel regions (ResNet50 on 2 cores: harness/raw
    # 1.00 with it, 0.96 without) but starve other sessions' threads when several workers share the
    # cores, so it follows EngineSpec.allow_spinning (schema field cpu_spin_wait).
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spec.allow_spinning else "0")
    cores = (spec.extra or {}).get("cpu_cores")
    if cores:                # pinned instance: one pool thread per core after the caller's (ORT ids are 1-based)
        so.intra_op_num_threads = len(cores)
        if len(cores) > 1:
            so.add_session_config_entry("session.intra_op_thread_affinities", ";".join(str(c + 1) for c in cores[1:]))
    if optimized_model_path:
        so.optimized_model_filepath = optimized_model_path
    so.log_severity_level = 3
    return so


class OrtEngine(Engine):
    def __init__(self, path: str, spec: EngineSpec):
        import onnxruntime as ort

        so = session_options(spec)
        # The file is already optimised; skip re-optimisation at load time.
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        providers = ["CPUExecutionProvider"]
        want = spec.extra.get("ort_providers") if spec.extra else None
        if want:
            providers = [p for p in want if p in ort.get_available_providers()] or providers
        self.session = ort.InferenceSession(path, so, providers=providers)
        self.input_names = tuple(i.name for i in self.session.get_inputs())
        self.output_names = tuple(o.name for o in self.session.get_outputs())

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        outs = self.session.run(None, dict(feeds))
        return dict(zip(self.output_names, outs))


def has_qdq(onnx_path: str) -> bool:
    """Whether the model carries QuantizeLinear/DequantizeLinear nodes (an explicitly quantized model)."""
    import onnx

    g = onnx.load(onnx_path, load_external_data=False).graph
    return any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in g.node)


class OnnxRuntimeBackend(Backend):
    """fp32, and int8 from a Q/DQ model (``make calibrate``): ORT's graph optimisation fuses the
    Q/DQ pairs around Conv/MatMul into its int8 kernels (QLinearConv, MatMulIntegerToFloat, ...)."""

    name = "onnxruntime"
    short = "ORT"
    engine_suffix = ".onnx"
    library = "onnxruntime"
    precisions = ("fp32", "int8")
    display = "ONNX Runtime"
    qdq_target = "onnxruntime"
    preference = {"cpu": 0}

    def build(self, onnx_path: str, engine_path: str, spec: EngineSpec) -> None:
        """Run ORT's full graph optimisation once and save the result as the engine."""
        import onnxruntime as ort

        self.check_precision(spec.precision, spec.name)
        if spec.precision == "int8" and not has_qdq(onnx_path):
            from code.common.errors import HarnessError

            raise HarnessError(f"int8 {spec.name} needs an explicitly quantized (Q/DQ) model; {onnx_path} has no "
                               "QuantizeLinear/DequantizeLinear nodes", "make calibrate RUN_ARGS=\"--benchmarks=<it>\" makes one "
                               "where the benchmark has a calibration recipe; otherwise use --precision=fp32", 3)
        so = session_options(spec, optimized_model_path=engine_path)
        ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        if not os.path.exists(engine_path):
            raise RuntimeError(f"onnxruntime did not write {engine_path}")

    def load(self, engine_path: str, spec: EngineSpec) -> Engine:
        return OrtEngine(engine_path, spec)
