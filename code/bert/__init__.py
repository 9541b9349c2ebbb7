"""BERT-Large question answering (MLPerf "bert", SQuAD v1.1 dev, 10,833 features of 384 tokens).
Lightweight: no heavy imports.

The work is in ``code.bert.harness:BertBenchmark``. Accuracy variants bert-99 / bert-99.9 (F1 >=
90.874 x 0.99 / x 0.999) come from the round table (``--accuracy_target=99.9`` or config_ver
high_accuracy). The round table lists bert for the edge category (SingleStream, Offline); Server
runs too (LoadGen's mlperf.conf bounds bert's Server latency at 130 ms).
"""
from code.common.benchmark import BenchmarkSpec
from code.common.fields import Field, parse_int, parse_str

SPEC = BenchmarkSpec(
    name="bert",
    mlperf_name="bert",
    loadgen_model="bert",
    aliases=("bert-large", "bert-99", "bert-99.9", "bert-squad", "bert_large"),
    scenarios=("Offline", "Server", "SingleStream"),
    impl="code.bert.harness:BertBenchmark",
    fields=(
        Field("bert_seqlen_batching", parse_str, "bucketed",
              "How a batch of features reaches the engine. padded: every feature padded to 384 tokens (what the "
              "reference does). bucketed (NVIDIA-style seqlen-aware batching): the batch is sorted by true length "
              "and run as sub-batches padded only to their bucket (a multiple of bert_bucket_step up to 384; each "
              "bucket a TensorRT engine of its own); logits past a feature's true length are emitted as -10000.",
              choices=("bucketed", "padded"), benchmarks=("bert",)),
        Field("bert_bucket_step", parse_int, 64,
              "Bucket granularity in tokens for bert_seqlen_batching=bucketed (buckets step, 2*step, ..., 384).",
              benchmarks=("bert",), minimum=8, maximum=384, unit="tokens"),
    ),
    precisions=("fp32", "fp16", "int8"),
    starting_weights="model.onnx (MLCommons reference, BERT-Large SQuAD v1.1 fp32 384, zenodo 3733910)",
    input_data_types={"fp32": "int32", "fp16": "int32", "int8": "int32"},
    watchdog_s=300.0,
    scratch_gb=3,                 # models + data + preprocessed data of the reference variant
)
