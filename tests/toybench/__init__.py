"""Toybench: the smallest real benchmark package (tests/test_add_benchmark.py drops it into a copy of
the tree as ``code/toybench``). Lightweight: no heavy imports.

A seeded linear classifier over 16-value vectors, scored by top-1 against its own fp32 predictions.
It borrows LoadGen's "resnet50" settings (``loadgen_model``) because LoadGen's compiled-in
mlperf.conf knows only the official models.
"""
from code.common.benchmark import BenchmarkSpec

SPEC = BenchmarkSpec(
    name="toybench",
    mlperf_name="toybench",
    loadgen_model="resnet50",
    aliases=("toy-bench", "toy"),
    scenarios=("Offline", "SingleStream"),
    impl="code.toybench.harness:ToyBenchmark",
    starting_weights="none: a seeded linear classifier built by make download_model",
    scratch_gb=0.001,              # the model, raw vectors and preprocessed vectors: a few KB
)
