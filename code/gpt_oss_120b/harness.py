"""GPT-OSS-120B actions on the shared LLM layer: the reference's pre-tokenized harmony prompts (the accuracy set for
AccuracyOnly runs, the performance set for every other), generation (up to 32,768 new tokens for accuracy and
10,240 for performance, as the reference's generation configs) and exact-match scoring
(``code.common.llm.exact_match``, harmony rules, sub-datasets weighted by 1 / their repeats).

Decoding: the harness's engines decode greedily; the reference samples at temperature 1.0 (top_p 1, top_k off),
so a real run's answers are the greedy ones. The text scored keeps the special tokens (the reference decodes the
log with ``skip_special_tokens=False``): its extraction reads the harmony ``final`` channel by its markers.
LiveCodeBench answers are not scored here (they need LiveCodeBench's test runner): a log holding any is refused
with the reference command that scores it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from code.common.errors import HarnessError, MissingDataError
from code.common.llm.harness import Generation, LLMBenchmark, load_prompts, save_prompts, text_or_none
from code.gpt_oss_120b import SPEC, dataset

# language/gpt-oss-120b README "Generation Configuration": max_output_len 32768 (accuracy) / 10240 (performance).
ACCURACY = Generation(max_new_tokens=32_768, min_new_tokens=1)
PERFORMANCE = Generation(max_new_tokens=10_240, min_new_tokens=1)
# The tiny model asks for at least 2 tokens: LoadGen with use_token_latencies logs an error for a 1-token answer.
TINY = Generation(max_new_tokens=48, min_new_tokens=2)
DIALECT = "harmony"                # code.common.llm.exact_match: the final channel first
PERF_PROMPTS = "perf_prompts.npz"


class GptOss120BBenchmark(LLMBenchmark):
    spec = SPEC
    tiny_kind = "gpt_oss"
    tiny_context = 1024
    tiny_samples = 24                      # 12 each of AIME25 and GPQA-Diamond
    tiny_judged = ("exact_match",)
    uses_rouge = False
    skip_special_tokens = False
    tiny_build_options = {"boost": (dataset.TINY_SPECIALS[-2], *dataset.TINY_FINALS, *dataset.TINY_ANSWERS),
                          "boost_scale": 1.3}

    def _one_thread(self, fn, *args):
        """The tiny GPT-OSS's eager attention (its sinks rule out SDPA) is many tiny batched matmuls a token; with
        OpenMP threads on a busy 2-core machine each waits for a descheduled peer (8 ms a matmul against 0.1 ms on
        one thread here). Its builds run on one thread, as its config blocks' runs do (cpu_threads 1)."""
        import torch

        n = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn(*args)
        finally:
            torch.set_num_threads(n)

    def download_model(self) -> None:
        self._one_thread(super().download_model)

    def _plain_generate(self, prompts, stops=None):
        return self._one_thread(super()._plain_generate, prompts, stops)

    def generation(self) -> Generation:
        if self.tiny:
            return TINY
        return ACCURACY if self.test_mode == "AccuracyOnly" else PERFORMANCE

    # --- locations ----------------------------------------------------------------------------------
    @property
    def checkpoint(self) -> Path:
        """The real model is the Hugging Face folder inside the R2 copy (download.FOLDER)."""
        base = super().checkpoint
        if self.tiny:
            return base
        from code.gpt_oss_120b.download import FOLDER

        return base / FOLDER

    # --- data ---------------------------------------------------------------------------------------
    def tiny_tokenizer_dir(self) -> Path:
        """The shared tiny tokenizer plus the harmony markers (special) and whole-answer tokens."""
        from code.common import paths
        from code.common.fileio import staged_dir
        from code.common.llm import tiny

        d = paths.models_dir("gpt_oss_120b_tokenizer", "tiny")
        if not (d / "tokenizer.json").exists():
            tok = tiny.load_tokenizer(super().tiny_tokenizer_dir())
            tok.add_special_tokens({"additional_special_tokens": [*dataset.TINY_SPECIALS, *dataset.TINY_FINALS]})
            tok.add_tokens(list(dataset.TINY_ANSWERS))
            with staged_dir(d) as tmp:
                tok.save_pretrained(str(tmp))
        return d

    def make_tiny_raw(self, tokenizer, out_dir, targets=None):
        from code.common.llm.tiny import SEED

        samples = dataset.tiny_samples(self.tiny_samples, SEED + 13)
        for s, t in zip(samples, targets or ()):
            s["ground_truth"] = t
        dataset.write(Path(out_dir) / dataset.ACCURACY_FILE, samples, tokenizer, dataset.EFFORT["accuracy"])
        dataset.write(Path(out_dir) / dataset.PERFORMANCE_FILE, samples, tokenizer, dataset.EFFORT["performance"])

    def _df(self, folder, name=dataset.ACCURACY_FILE):
        return dataset.read(Path(folder) / name, self.fix("download_data"))

    def read_raw(self, tokenizer, folder):
        df = self._df(folder)
        return (dataset.prompts_of(df, Path(folder) / dataset.ACCURACY_FILE, self.fix("download_data")),
                [text_or_none(x) for x in df["ground_truth"]])

    def read_extra(self, tokenizer, folder):
        from code.common.llm import exact_match

        kinds = [str(x) for x in self._df(folder)["dataset"]]
        for i, k in enumerate(kinds):
            try:
                exact_match.family_key(k, DIALECT)
            except ValueError:
                raise MissingDataError(f"sample {i} is from dataset {k!r}, which no GPT-OSS-120B scorer reads "
                                       f"({', '.join(dataset.FAMILIES)})", self.fix("download_data")) from None
        return {"dataset": kinds}

    def preprocess_data(self) -> None:
        """The accuracy set as every LLM's (prompts.npz, references.json), plus the performance set's prompts."""
        super().preprocess_data()
        path = self.raw_dir / dataset.PERFORMANCE_FILE
        prompts = dataset.prompts_of(dataset.read(path, self.fix("download_data"), ("dataset",)), path,
                                     self.fix("download_data"))
        self.check_dataset(prompts, (), self.fix("download_data"), f"the dataset in {path}")
        save_prompts(self.pre_dir / PERF_PROMPTS, prompts)
        print(f"[preprocess_data] {len(prompts)} performance prompts -> {self.pre_dir / PERF_PROMPTS}")

    def prompts(self) -> list[np.ndarray]:
        """AccuracyOnly: the accuracy set; any other run: the performance set (the reference's two input files)."""
        if self.test_mode == "AccuracyOnly":
            return super().prompts()
        p = self.pre_dir / PERF_PROMPTS
        if not p.exists():
            raise MissingDataError(f"preprocessed performance prompts not found: {p}", self.fix("preprocess_data"))
        prompts = load_prompts(p, self.fix("preprocess_data"))
        n = self.settings.values.get("llm_sample_count") or 0
        return prompts[:n] if n else prompts

    def download_data(self) -> None:
        """Tiny: seeded questions whose ground truth is what the reference's extraction reads in plain
        ``model.generate``'s answer (decoded with the special tokens, as the reference decodes), for three samples
        in four (a wrong one for the fourth); a sample whose answer holds nothing to extract keeps a seeded truth
        and scores 0. Exact match then moves with every token a harness changes in an answer."""
        if not self.tiny:
            self.download_real_data()
            return
        self._tiny_exact_match_set(DIALECT, "synthetic harmony questions")

    def download_real_model(self) -> None:
        from code.gpt_oss_120b import download

        download.download_model(super().checkpoint)

    def download_real_data(self) -> None:
        from code.gpt_oss_120b import download

        download.download_data(self.raw_dir, self.settings.values.get("data_dir"))

    # --- accuracy -----------------------------------------------------------------------------------
    def score(self, idx, tokens, preds, targets) -> dict[str, Any]:
        """language/gpt-oss-120b/eval_mlperf_accuracy.py: exact_match = 100 x sum over sub-datasets of right / repeats
        over sum of samples / repeats (dataset.REPEATS), plus tokens_per_sample (the mean output length, which the
        checker holds under its upper limit) and num-samples."""
        from code.common.llm import exact_match

        kinds = self.references()["dataset"]
        ks = [kinds[i] for i in idx]
        lcb = sum(exact_match.family_key(k, DIALECT) == "livecodebench" for k in ks)
        if lcb:
            raise HarnessError(
                f"{lcb} LiveCodeBench answer(s) in the accuracy log: scoring them needs LiveCodeBench's test runner "
                "(language/gpt-oss-120b/submodules/LiveCodeBench), which this harness does not have",
                "score the log with the reference: python3 language/gpt-oss-120b/eval_mlperf_accuracy.py --mlperf-log "
                f"<run>/mlperf_log_accuracy.json --reference-data {self.raw_dir / dataset.ACCURACY_FILE} "
                f"--tokenizer {self.checkpoint}")
        r = exact_match.score(ks, preds, targets, DIALECT, repeats=dataset.REPEATS)
        self.score_notes = [f"{k}: {f['right']} of {f['samples']} right, an answer found in {f['answered']}"
                            for k, f in r["families"].items()]
        return {"exact_match": r["exact_match"],
                "tokens_per_sample": float(np.mean([len(t) for t in tokens])) if tokens else 0.0,
                "num-samples": len(idx)}
