"""R-GAT (MLPerf "rgat"): node classification of IGBH-full paper nodes by a 3-layer relational graph attention
network (rounds v5.0 on, datacenter, Offline only). Lightweight: no heavy imports.

Data: IGBH full (547,306,935 nodes of six types, 5,812,005,639 edges, 2,983 classes) with the reference's
validation split (788,379 paper nodes, ``tools/split_seeds.py``, seed 42). A LoadGen sample is one seed paper;
the SUT samples its 3-hop neighbourhood (fan-outs 15, 10, 5 from the seed outwards, the reference's
``PyGSampler([5, 10, 15])``) and runs the model on it. The work is in ``code.rgat.harness:RGATBenchmark``.
"""
from code.common.benchmark import BenchmarkSpec

SPEC = BenchmarkSpec(
    name="rgat",
    mlperf_name="rgat",
    loadgen_model="rgat",
    aliases=("r-gat", "igbh", "gnn"),
    scenarios=("Offline",),
    impl="code.rgat.harness:RGATBenchmark",
    precisions=("fp32", "fp16"),
    starting_weights="RGAT.pt (MLCommons R2 rgat-model.uri: the reference's DGL RGAT state dict, fp32)",
    input_data_types={"fp16": "fp32"},
    backends=("pytorch",),
    watchdog_s=900.0,              # mapping and indexing the 2.2 TB graph takes minutes before the first sample
    scratch_gb=2500,               # IGBH full (2.2 TB raw) + its CSC index
)
