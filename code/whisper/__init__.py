"""Whisper (MLPerf "whisper", speech-to-text): OpenAI's whisper-large-v3 (``WhisperForConditionalGeneration``,
1.55B parameters, 32+32 layers, 128 mel bins) transcribing LibriSpeech dev-clean + dev-other repacked into 1,633
samples of up to 30 s (each padded to 30 s), scored by word error rate: accuracy = (1 - WER) x 100 >= 99% of the
reference's 97.9329 (96.95). Datacenter and edge, Offline only; results in tokens/s; audited by TEST01. In rounds
v5.1 on. Lightweight: no heavy imports.

Decoding is transformers' ``generate`` on the model itself (greedy, KV cache, batched; ``code.whisper.model``),
not the LLM layer's scheduler (``code.common.llm``): that layer's contract is a prompt of token ids in and a
stream of int32 tokens out, while whisper's input is an audio feature tensor run through an encoder once, and its
answer, as the reference logs it and the official accuracy_eval.py reads it, is the transcript's character indices
(int64), not tokens. Whisper's decoder prompts all have the same 4 tokens and its answers are short (at most 200
tokens), so a static batch loses little to in-flight batching. The work is in
``code.whisper.harness:WhisperBenchmark``; features in ``code.whisper.features``, WER in ``code.whisper.accuracy``.
"""
from code.common.benchmark import BenchmarkSpec
from code.common.fields import Field, parse_str

SPEC = BenchmarkSpec(
    name="whisper",
    mlperf_name="whisper",
    loadgen_model="whisper",
    aliases=("whisper-large-v3", "whisper_large_v3", "speech2text", "asr"),
    scenarios=("Offline",),
    impl="code.whisper.harness:WhisperBenchmark",
    fields=(
        Field("whisper_data_source", parse_str, "librispeech",
              "Where download_data gets the 1,633 samples: 'librispeech' (the reference's native method: the "
              "dev-clean and dev-other tarballs from openslr.org, md5-checked, converted and repacked here) or "
              "'mlcommons' (the reference's preprocessed set through the MLCommons R2 downloader, whisper-dataset.uri, "
              "md5-checked; what the README recommends for an official submission).",
              choices=("librispeech", "mlcommons"), benchmarks=("whisper",), actions=("download_data",)),
    ),
    precisions=("fp32", "fp16", "bf16"),
    starting_weights="openai/whisper-large-v3 (revision 06f233fe06e710322aca913c1bc4249a0d71fce1, MLCommons R2 copy)",
    watchdog_s=1800.0,             # a CPU batch of real 30 s samples runs for minutes
    scratch_gb=15,                 # the checkpoint (~3 GB), LibriSpeech dev (~0.7 GB archives) and 2.5 GB of features
)
