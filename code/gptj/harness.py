"""GPT-J actions on the shared LLM layer: the reference's data, prompts, generation and metrics."""
from __future__ import annotations

from typing import Any

import numpy as np

from code.common.llm.harness import Generation, LLMBenchmark
from code.gptj import SPEC, dataset

# language/gpt-j/backend_PyTorch.py: max_new_tokens 128, min_new_tokens 30, num_beams 4 ("only beam size 4
# is allowed for official submission"), early_stopping. The tiny model decodes greedily so that the
# streaming scheduler (in-flight batching) is what its runs exercise; beams are tested on it separately.
REAL = Generation(max_new_tokens=128, min_new_tokens=30, num_beams=4)
TINY = Generation(max_new_tokens=32, min_new_tokens=4, num_beams=1)


class GPTJBenchmark(LLMBenchmark):
    spec = SPEC
    tiny_kind = "gptj"
    tiny_context = 1024
    tiny_samples = 120

    def generation(self) -> Generation:
        return TINY if self.tiny else REAL

    def make_tiny_raw(self, tokenizer, out_dir, targets=None):
        from code.common.llm.tiny import SEED

        dataset.make_tiny(out_dir, self.tiny_samples, SEED + 1, targets)

    def read_raw(self, tokenizer, folder):
        records = dataset.read(folder / dataset.CNN_EVAL, self.fix("download_data"))
        max_length = (self.tiny_context - TINY.max_new_tokens - 1) if self.tiny else dataset.REAL_MAX_LENGTH
        return dataset.tokenize(tokenizer, records, max_length), [r["output"] for r in records]

    def download_real_model(self) -> None:
        from code.gptj import download

        download.download_model(self.checkpoint)

    def download_real_data(self) -> None:
        from code.gptj import download

        download.download_data(self.raw_dir, self.settings.values.get("data_dir"))

    def metrics(self, preds, targets, tokens) -> dict[str, Any]:
        """language/gpt-j/evaluation.py: ROUGE, gen_len (characters of the postprocessed predictions), gen_num."""
        from code.common.llm import rouge

        out: dict[str, Any] = rouge.rouge(preds, targets)
        out["gen_len"] = int(np.sum([len(p) for p in preds]))
        out["gen_num"] = len(preds)
        return out
