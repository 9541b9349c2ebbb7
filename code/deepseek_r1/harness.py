"""DeepSeek-R1 actions on the shared LLM layer: the reference's data (the question through the chat template),
generation (greedy, up to 20,000 new tokens) and exact-match scoring (``code.common.llm.exact_match``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from code.common.llm.harness import Generation, LLMBenchmark, text_or_none
from code.common.llm.sampling import Sampling
from code.deepseek_r1 import SPEC, dataset

# language/deepseek-r1/utils/backend_registry.py: temperature 0 (greedy), top_p 1.0, seed 42 (vllm, sglang),
# max_new_tokens / max_tokens MAX_OSL = 20,000.
# The tiny model asks for at least 2 tokens: LoadGen with use_token_latencies logs an error for a 1-token answer.
REAL = Generation(max_new_tokens=20_000, min_new_tokens=1, sampling=Sampling(temperature=0.0, top_p=1.0, seed=42))
TINY = Generation(max_new_tokens=64, min_new_tokens=2)
DIALECT = "plain"                  # code.common.llm.exact_match: the reference's rules over the whole text
LCB_RELEASE = "release_v1"         # eval_accuracy.py's lcb_runner release_version


class DeepSeekR1Benchmark(LLMBenchmark):
    spec = SPEC
    tiny_kind = "deepseek_v3"
    tiny_context = 1024
    tiny_samples = 30                      # 10 each of GPQA, MMLU-Pro and AIME
    tiny_judged = ("exact_match",)
    uses_rouge = False
    # the whole-answer tokens likelier, so that most tiny answers hold one the reference's extraction finds (and
    # every changed token can change the score)
    tiny_build_options = {"boost": dataset.TINY_ANSWERS, "boost_scale": 1.25}

    def generation(self) -> Generation:
        return TINY if self.tiny else REAL

    # --- data ---------------------------------------------------------------------------------------
    def tiny_tokenizer_dir(self) -> Path:
        """The shared tiny tokenizer plus DeepSeek-R1's chat markers and a chat template of the real one's shape."""
        from code.common import paths
        from code.common.fileio import staged_dir
        from code.common.llm import tiny

        d = paths.models_dir("deepseek_r1_tokenizer", "tiny")
        if not (d / "tokenizer.json").exists():
            tok = tiny.load_tokenizer(super().tiny_tokenizer_dir())
            tok.add_special_tokens({"additional_special_tokens": list(dataset.TINY_SPECIALS)})
            tok.add_tokens(list(dataset.TINY_ADDED))
            tok.chat_template = dataset.TINY_CHAT_TEMPLATE
            with staged_dir(d) as tmp:
                tok.save_pretrained(str(tmp))
        return d

    def make_tiny_raw(self, tokenizer, out_dir, targets=None):
        from code.common.llm.tiny import SEED

        samples = dataset.tiny_samples(self.tiny_samples, SEED + 11)
        for s, t in zip(samples, targets or ()):
            s["ground_truth"] = t
        dataset.write(Path(out_dir) / dataset.DATASET_PKL, samples)

    def _df(self, folder):
        return dataset.read(Path(folder) / dataset.DATASET_PKL, self.fix("download_data"))

    def read_raw(self, tokenizer, folder):
        df = self._df(folder)
        return ([dataset.chat_prompt(tokenizer, str(t)) for t in df["text_input"]],
                [text_or_none(x) for x in df[dataset.truth_column(df)]])

    def read_extra(self, tokenizer, folder):
        from code.common.llm import exact_match

        kinds = [str(x) for x in self._df(folder)["dataset"]]
        for i, k in enumerate(kinds):
            try:
                exact_match.family_key(k, DIALECT)
            except ValueError:
                from code.common.errors import MissingDataError

                raise MissingDataError(f"sample {i} is from dataset {k!r}, which no DeepSeek-R1 scorer reads (gpqa, "
                                       "mmlu_pro, math500, aime, livecodebench)", self.fix("download_data")) from None
        return {"dataset": kinds}

    def download_data(self) -> None:
        """Tiny: seeded questions whose ground truth is what the reference's extraction reads in plain
        ``model.generate``'s answer, for three samples in four (a wrong one for the fourth); a sample whose answer
        holds nothing to extract keeps a seeded truth and scores 0. Exact match then moves with every token a
        harness changes in an answer."""
        if not self.tiny:
            self.download_real_data()
            return
        self._tiny_exact_match_set(DIALECT)

    def download_real_model(self) -> None:
        from code.deepseek_r1 import download

        download.download_model(self.checkpoint)

    def download_real_data(self) -> None:
        from code.deepseek_r1 import download

        download.download_data(self.raw_dir, self.settings.values.get("data_dir"))
        from code.common.llm import livecodebench

        livecodebench.download(livecodebench.folder_of(self.raw_dir), LCB_RELEASE, fix=self.fix("download_data"))

    # --- accuracy -----------------------------------------------------------------------------------
    def score(self, idx, tokens, preds, targets) -> dict[str, Any]:
        """language/deepseek-r1/eval_accuracy.py: exact_match (the mean of 100 / 0 per sample over every sample
        of the log), tokens_per_sample (the mean output length in tokens) and num-samples. MATH500 answers are
        judged by PRM800K's grader (``code.common.llm.math_grader``), LiveCodeBench programs by running their
        tests (``code.common.llm.livecodebench``, release_v1 as the reference)."""
        from code.common.llm import exact_match, livecodebench

        kinds = self.references()["dataset"]
        r = exact_match.score([kinds[i] for i in idx], preds, targets, DIALECT,
                              code_judge=livecodebench.benchmark_judge(self.raw_dir, LCB_RELEASE,
                                                                       self.fix("download_data")))
        self.score_notes = [f"{k}: {f['right']} of {f['samples']} right, an answer found in {f['answered']}"
                            for k, f in r["families"].items()]
        return {"exact_match": r["exact_match"],
                "tokens_per_sample": float(np.mean([len(t) for t in tokens])) if tokens else 0.0,
                "num-samples": len(idx)}
