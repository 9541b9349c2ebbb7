"""3D-UNet (MLPerf "3d-unet", KiTS19 kidney/tumour segmentation, 43 CT volumes). Lightweight: no heavy imports.

The work is in ``code.unet3d.harness:UNet3DBenchmark``. Accuracy variants 3d-unet-99 / 3d-unet-99.9
come from the round table (``--accuracy_target=99.9`` or config_ver high_accuracy).
"""
from code.common.benchmark import BenchmarkSpec
from code.common.fields import Field, parse_int

SPEC = BenchmarkSpec(
    name="unet3d",
    mlperf_name="3d-unet",
    loadgen_model="3d-unet",
    aliases=("3d-unet", "3dunet", "unet3d-kits19", "3d-unet-kits19", "3d_unet"),
    scenarios=("Offline", "SingleStream"),
    impl="code.unet3d.harness:UNet3DBenchmark",
    fields=(
        Field("unet3d_patch_batch_size", parse_int, 4,
              "Sliding-window patches (128^3; 32^3 for the tiny variant) per engine call. One LoadGen sample is "
              "a whole volume, so gpu_batch_size stays 1; this is the engine's batch dimension.",
              benchmarks=("unet3d",), minimum=1, maximum=1024),
    ),
    precisions=("fp32", "fp16", "int8"),
    starting_weights="3dunet_kits19_128x128x128_dynbatch.onnx (MLCommons reference, zenodo 5597155)",
    input_data_types={"int8": "int8", "fp16": "fp16"},
    watchdog_s=900.0,              # one real volume is up to ~100 patches of 128^3: minutes on a CPU
    scratch_gb=30,                 # models + data + preprocessed data of the reference variant
)
