"""RetinaNet object detection (MLPerf "retinanet": ResNeXt50-32x4d FPN, 800x800, OpenImages MLPerf
subset of 24,781 images, 264 classes). Lightweight: no heavy imports.

RetinaNet is in rounds v5.0, v5.1 and v6.0 (v6.0: the "datacenter,edge" category only) and gone from
v6.1, so runs take ``--round=v6.0`` (or v5.1) with a LoadGen that carries v6.1.
"""
from code.common.benchmark import BenchmarkSpec
from code.common.fields import Field, parse_str

SPEC = BenchmarkSpec(
    name="retinanet",
    mlperf_name="retinanet",
    loadgen_model="retinanet",
    aliases=("retina-net", "retinanet-800", "ssd-resnext50"),
    scenarios=("Offline", "Server", "SingleStream", "MultiStream"),
    impl="code.retinanet.harness:RetinaNetBenchmark",
    fields=(
        Field("retinanet_postprocess", parse_str, "auto",
              "Where decode/top-k/NMS run: model (inside the engine, the MLPerf ONNX as is), host (the engine "
              "runs backbone and heads, torchvision's postprocessing runs on the host: fixed-shape engine "
              "outputs, what TensorRT needs), auto (host for tensorrt, else model).",
              choices=("auto", "model", "host"), benchmarks=("retinanet",)),
    ),
    precisions=("fp32", "fp16", "int8"),
    starting_weights="resnext50_32x4d_fpn.onnx (MLCommons reference, zenodo 6617879)",
    input_data_types={"int8": "int8", "fp16": "fp16"},
    scratch_gb=200,                 # models + data + preprocessed data of the reference variant
)
