"""DLRM-v3 (MLPerf "dlrm-v3": the HSTU generative recommender on the synthetic streaming data set, rounds v6.0 on,
datacenter Server and Offline). Lightweight: no heavy imports.

The work is in ``code.dlrm_v3.harness:DLRMv3Benchmark``. A sample is one (inference timestamp, request): the user's
interaction history up to that timestamp and its candidates; the answer is one click probability per candidate.
Audited by TEST08 (accuracy in performance mode, samples matched on (ts_idx, query_idx)).
"""
from code.common.benchmark import BenchmarkSpec

SPEC = BenchmarkSpec(
    name="dlrm_v3",
    mlperf_name="dlrm-v3",
    loadgen_model="dlrm-v3",
    aliases=("dlrm-v3", "dlrmv3", "hstu", "dlrm_hstu"),
    scenarios=("Offline", "Server"),
    impl="code.dlrm_v3.harness:DLRMv3Benchmark",
    precisions=("fp32", "fp16", "bf16"),
    starting_weights="dlrm-v3 checkpoint (MLCommons R2 dlrm-v3-checkpoint.uri, torch.distributed.checkpoint, ~1 TB)",
    input_data_types={"fp16": "int64", "bf16": "int64", "fp32": "int64"},
    backends=("pytorch",),          # jagged sequences and 1e9-row tables: an eager torch module, no ONNX
    watchdog_s=900.0,               # loading ~1 TB of tables takes minutes before the first sample
    scratch_gb=1200,                # the checkpoint (~1 TB) and the sampled streaming data
)
