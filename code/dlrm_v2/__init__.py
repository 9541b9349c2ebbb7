"""DLRM-v2 (MLPerf "dlrm-v2": DLRM-DCNv2 on the synthetic multi-hot Criteo 1TB day-23 set, 330,067
aggregated user queries). Lightweight: no heavy imports.

DLRM-v2 is in rounds v5.0 and v5.1 only (gone from v6.0 and v6.1), so runs take ``--round=v5.1``.
The work is in ``code.dlrm_v2.harness:DLRMBenchmark``; accuracy variants dlrm-v2-99 / dlrm-v2-99.9
come from the round table (``--accuracy_target=99.9`` or config_ver high_accuracy).
"""
from code.common.benchmark import BenchmarkSpec
from code.common.fields import Field, parse_str

SPEC = BenchmarkSpec(
    name="dlrm_v2",
    mlperf_name="dlrm-v2",
    loadgen_model="dlrm-v2",
    aliases=("dlrm-v2", "dlrm", "dlrmv2", "dlrm-dcnv2", "dlrm_dcn"),
    scenarios=("Offline", "Server"),
    impl="code.dlrm_v2.harness:DLRMBenchmark",
    fields=(
        Field("dlrm_embedding_sharding", parse_str, "auto",
              "Where the 26 embedding tables live: none (one copy on the worker's device: CPU EmbeddingBags on a "
              "CPU system), row (each table's rows split in contiguous ranges over all the system's GPUs, lookups "
              "routed to the shard holding the row, partial sums added; one copy per process shared by the "
              "workers), host (GPU systems whose GPUs cannot hold the ~100 GB of tables: lookups in host memory, "
              "pooled embeddings copied to the GPU), auto (row on a system with more than one GPU, else none).",
              choices=("auto", "none", "row", "host"), benchmarks=("dlrm_v2",)),
    ),
    precisions=("fp32", "fp16"),
    starting_weights="dlrm-v2 model_weights (MLCommons R2 dlrm-v2-model-weights.uri, torchsnapshot, 97.31 GB)",
    input_data_types={"fp16": "fp32"},
    watchdog_s=600.0,              # loading the real 40M-row tables takes minutes before the first sample
    scratch_gb=300,                 # models + data + preprocessed data of the reference variant
)
