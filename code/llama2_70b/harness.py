"""Llama2-70B actions on the shared LLM layer: the reference's data, generation and metrics."""
from __future__ import annotations

from typing import Any

import numpy as np

from code.common.llm.harness import Generation, LLMBenchmark, text_or_none, token_ids
from code.llama2_70b import SPEC, dataset

# language/llama2-70b/SUT.py: greedy, max_new_tokens 1024, min_new_tokens 1. The tiny model asks for at
# least 2 tokens: LoadGen with use_token_latencies logs an error for a 1-token answer (TPOT needs two).
REAL = Generation(max_new_tokens=1024, min_new_tokens=1)
TINY = Generation(max_new_tokens=48, min_new_tokens=2)


class Llama2Benchmark(LLMBenchmark):
    spec = SPEC
    tiny_kind = "llama"
    tiny_context = 1024
    tiny_samples = 240

    def generation(self) -> Generation:
        return TINY if self.tiny else REAL

    def make_tiny_raw(self, tokenizer, out_dir, targets=None):
        from code.common.llm.tiny import SEED

        dataset.make_tiny(out_dir, tokenizer, self.tiny_samples, SEED + 2, targets)

    def read_raw(self, tokenizer, folder):
        df = dataset.read(folder / dataset.DATASET_PKL, self.fix("download_data"))
        return [token_ids(t) for t in df["tok_input"]], [text_or_none(x) for x in df["output"]]

    def download_real_model(self) -> None:
        from code.llama2_70b import download

        download.download_model(self.checkpoint)

    def download_real_data(self) -> None:
        from code.llama2_70b import download

        download.download_data(self.raw_dir, self.settings.values.get("data_dir"))

    def metrics(self, preds, targets, tokens) -> dict[str, Any]:
        """language/llama2-70b/evaluate-accuracy.py: ROUGE, gen_len (characters), gen_num, gen_tok_len
        (every output token, the EOS included) and tokens_per_sample."""
        from code.common.llm import rouge

        out: dict[str, Any] = rouge.rouge(preds, targets)
        gen_tok_len = int(sum(len(t) for t in tokens))
        out.update({"gen_len": int(np.sum([len(p) for p in preds])), "gen_num": len(preds),
                    "gen_tok_len": gen_tok_len, "tokens_per_sample": round(gen_tok_len / max(1, len(preds)), 1)})
        return out
