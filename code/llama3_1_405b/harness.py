"""Llama3.1-405B actions on the shared LLM layer: the reference's data, generation (greedy, 2,000 new tokens at
most) and the per-row metrics (``code.llama3_1_405b.accuracy``)."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from code.common.llm.harness import Generation, LLMBenchmark, text_or_none, token_ids
from code.common.llm.sampling import Sampling
from code.llama3_1_405b import SPEC, dataset

# language/llama3.1-405b/SUT_VLLM.py: temperature 1, top_k 1 (greedy whatever the rest), seed 42, max_tokens 2000,
# min_tokens 1 (its top_p 0 is vLLM's no-op beside top_k 1: 1.0 here). The tiny model asks for at least 2 tokens:
# LoadGen with use_token_latencies logs an error for a 1-token answer.
REAL = Generation(max_new_tokens=2000, min_new_tokens=1,
                  sampling=Sampling(temperature=1.0, top_k=1, top_p=1.0, seed=42))
TINY = Generation(max_new_tokens=32, min_new_tokens=2)


class Llama405Benchmark(LLMBenchmark):
    spec = SPEC
    tiny_kind = "llama"
    tiny_context = 1024
    tiny_samples = 30                      # 10 of each metric
    tiny_judged = ("rougeL", "exact_match")

    def generation(self) -> Generation:
        return TINY if self.tiny else REAL

    # --- data ---------------------------------------------------------------------------------------
    def make_tiny_raw(self, tokenizer, out_dir, targets=None):
        from code.common.llm.tiny import SEED

        samples = dataset.tiny_samples(self.tiny_samples, SEED + 13)
        for s, t in zip(samples, targets or ()):
            s["gt_output"] = t
        dataset.write(Path(out_dir) / dataset.DATASET_PKL, tokenizer, samples)

    def _df(self, folder):
        return dataset.read(Path(folder) / dataset.DATASET_PKL, self.fix("download_data"))

    def read_raw(self, tokenizer, folder):
        df = self._df(folder)
        return [token_ids(t) for t in df["tok_input"]], [text_or_none(x) for x in df["gt_output"]]

    def read_extra(self, tokenizer, folder):
        return {"metric": [str(x) for x in self._df(folder)["metric"]]}

    def download_data(self) -> None:
        """Tiny: seeded samples of the three metrics. Summaries get the layer's reference (the lead sentence and the
        first 60% of plain ``model.generate``'s answer); QA answers are a word of plain generate's (postprocessed)
        answer for three samples in four, a word it lacks for the fourth; needle answers keep their UUIDs (a random
        model writes none, so they score 0 on both sides)."""
        if not self.tiny:
            self.download_real_data()
            self.download_punkt_tab()
            return
        self.download_punkt_tab()
        from code.common.llm import rouge
        from code.common.llm.harness import save_prompts
        from code.common.llm.tiny import SEED

        out_dir, tok, prompts, truths = self._tiny_raw()
        kinds = self.read_extra(tok, out_dir)["metric"]
        samples = dataset.tiny_samples(self.tiny_samples, SEED + 13)
        outs = self._plain_generate(prompts)
        texts, _ = rouge.postprocess_text(tok.batch_decode(outs, skip_special_tokens=True), [""] * len(outs), "tiny")
        targets = []
        for i, (k, t, truth, s) in enumerate(zip(kinds, texts, truths, samples)):
            if k == "rouge":
                targets.append(f"{s['input'].split(chr(10))[-1].split('.')[0]}. {t[:max(1, int(len(t) * 0.6))].strip()}")
            elif k == "qa_em":
                words = [w for w in re.findall(r"[a-z]{4,}", t.lower())]
                targets.append(f"{words[len(words) // 2]}|zzzz" if words and i % 4 != 3 else f"{truth}qx")
            else:
                targets.append(truth)
        self.make_tiny_raw(tok, out_dir, targets)
        save_prompts(out_dir / "generate_reference.npz", outs)
        n = Counter(kinds)
        print(f"[download_data] {len(prompts)} synthetic samples ({', '.join(f'{v} {k}' for k, v in n.items())}) -> "
              f"{out_dir}")

    def download_real_model(self) -> None:
        from code.llama3_1_405b import download

        download.download_model(self.checkpoint)

    def download_real_data(self) -> None:
        from code.llama3_1_405b import download

        download.download_data(self.raw_dir, self.settings.values.get("data_dir"))

    # --- accuracy -----------------------------------------------------------------------------------
    def score(self, idx, tokens, preds, targets) -> dict[str, Any]:
        """language/llama3.1-405b/evaluate-accuracy.py (see code.llama3_1_405b.accuracy), after the layer's
        postprocessing (the reference's: strip, one sentence per line with NLTK's punkt_tab)."""
        from code.common.llm import rouge
        from code.llama3_1_405b import accuracy

        pp, tt = rouge.postprocess_text(preds, targets, self.variant)
        self.mark_unofficial(rouge.unofficial_reasons(self.variant, self.fix("download_data")))
        kinds = self.references()["metric"]
        metrics = [kinds[i] for i in idx]
        out = accuracy.score(pp, tt, metrics, [len(t) for t in tokens])
        n = Counter(metrics)
        self.score_notes = [f"{n['rouge']} rouge, {n['niah_em']} niah_em, {n['qa_em']} qa_em samples"]
        return out
