"""ResNet50-v1.5 image classification (ImageNet 2012 validation). Lightweight: no heavy imports."""
from code.common.benchmark import BenchmarkSpec

SPEC = BenchmarkSpec(
    name="resnet50",
    mlperf_name="resnet50",
    loadgen_model="resnet50",
    aliases=("resnet", "resnet-50", "resnet50-v1.5", "rn50"),
    scenarios=("Offline", "Server", "SingleStream", "MultiStream"),
    impl="code.resnet50.harness:ResNet50Benchmark",
    precisions=("fp32", "fp16", "int8"),
    starting_weights="resnet50_v1.onnx (MLCommons reference, opset 11, zenodo 4735647)",
    input_data_types={"int8": "int8", "fp16": "fp16", "fp8": "fp8"},
    scratch_gb=15,                 # models + data + preprocessed data of the reference variant
)
