"""The toy model: a seeded linear classifier (``label = argmax(x @ W + b)``) written as ONNX with the
``onnx`` helper API, so no exporter and no torch are needed to build it.

Input ``x`` (N, FEATURES) float32; outputs ``label`` (N,) int64 and ``logits`` (N, CLASSES) float32.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from code.common.fileio import staged_path, write_json

INPUT = "x"
OUTPUTS = ("label", "logits")
ONNX_NAME = "toybench.onnx"
SEED = 20270101
FEATURES = 16
CLASSES = 10
OPSET = 17


def weights() -> tuple[np.ndarray, np.ndarray]:
    """(W, b) from SEED: the same numbers every time, so the model and its labels can be rebuilt."""
    rng = np.random.default_rng(SEED)
    return (rng.standard_normal((FEATURES, CLASSES)).astype(np.float32),
            rng.standard_normal(CLASSES).astype(np.float32))


def logits(x: np.ndarray) -> np.ndarray:
    """The fp32 reference forward pass the labels are made from (numpy, no backend)."""
    w, b = weights()
    return x.astype(np.float32) @ w + b


def build(model_dir: Path, log=print) -> Path:
    """Write the ONNX model (dynamic batch axis) and a model.json saying what it is."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w, b = weights()
    graph = helper.make_graph(
        [helper.make_node("Gemm", [INPUT, "W", "b"], [OUTPUTS[1]]),
         helper.make_node("ArgMax", [OUTPUTS[1]], [OUTPUTS[0]], axis=1, keepdims=0)],
        "toybench",
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, ["batch", FEATURES])],
        [helper.make_tensor_value_info(OUTPUTS[0], TensorProto.INT64, ["batch"]),
         helper.make_tensor_value_info(OUTPUTS[1], TensorProto.FLOAT, ["batch", CLASSES])],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    # IR version 9 (ONNX 1.15): readable by every backend release the harness pins
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=9)
    onnx.checker.check_model(proto)
    dest = model_dir / ONNX_NAME
    with staged_path(dest, suffix=".onnx") as tmp:
        onnx.save(proto, str(tmp))
    write_json(model_dir / "model.json", {"seed": SEED, "features": FEATURES, "classes": CLASSES,
                                          "arch": "linear classifier (Gemm + ArgMax)"})
    log(f"[download_model] built toybench -> {dest}")
    return dest
