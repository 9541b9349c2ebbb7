"""GPT-OSS-120B actions on the shared LLM layer: the reference's pre-tokenized harmony prompts (the accuracy set for
AccuracyOnly runs, the performance set for every other), generation (up to 32,768 new tokens for accuracy and
10,240 for performance, as the reference's generation configs) and exact-match scoring
(``code.common.llm.exact_match``, harmony rules, sub-datasets weighted by 1 / their repeats).

Decoding: as the reference (generation_config.json, README "Generation Configuration"), sampling at temperature
1.0 with top_p 1.0 and top_k off (its -1 / 0); each sample draws from its own stream seeded from the run's seed and
its index (``code.common.llm.sampling``; the reference names no seed: 0). The tiny variant decodes greedily: its
reference is plain ``model.generate``. The text scored keeps the special tokens (the reference decodes the
log with ``skip_special_tokens=False``): its extraction reads the harmony ``final`` channel by its markers.
LiveCodeBench answers are judged by running the question's tests (``code.common.llm.livecodebench``, lcb_runner's
rules, code_generation_lite ``release_v6`` as the reference, fetched by ``download_data`` beside the data).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from code.common.errors import MissingDataError
from code.common.fileio import read_json, write_json
from code.common.llm.harness import Generation, LLMBenchmark, load_prompts, save_prompts, text_or_none
from code.common.llm.sampling import Sampling
from code.gpt_oss_120b import SPEC, dataset

# language/gpt-oss-120b README "Generation Configuration": max_output_len 32768 (accuracy) / 10240 (performance);
# temperature 1.0, top_p 1.0, top_k 0 (generation_config.json: -1, disabled).
SAMPLING = Sampling(temperature=1.0, top_k=0, top_p=1.0, seed=0)
ACCURACY = Generation(max_new_tokens=32_768, min_new_tokens=1, sampling=SAMPLING)
PERFORMANCE = Generation(max_new_tokens=10_240, min_new_tokens=1, sampling=SAMPLING)
# The tiny model asks for at least 2 tokens: LoadGen with use_token_latencies logs an error for a 1-token answer.
TINY = Generation(max_new_tokens=48, min_new_tokens=2)
DIALECT = "harmony"                # code.common.llm.exact_match: the final channel first
LCB_RELEASE = "release_v6"         # eval_accuracy.py's lcb_runner release_version
PERF_PROMPTS = "perf_prompts.npz"
# TEST07's own set (acc/acc_eval_compliance_gpqa.parquet), preprocessed beside the accuracy set's files
COMPLIANCE_PROMPTS = "compliance_prompts.npz"
COMPLIANCE_REFERENCES = "compliance_references.json"
# tiny: plain generate's TEST07 score and TEST09 mean output length, the tiny audits' reference values
TINY_AUDIT_REFERENCE = "tiny_audit_reference.json"


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
        # TEST07's set: GPQA questions at reasoning effort high (the reference README's compliance table)
        dataset.write(Path(out_dir) / dataset.COMPLIANCE_GPQA_FILE, [x for x in samples if x["dataset"] == "gpqa_diamond"],
                      tokenizer, dataset.EFFORT["accuracy"])

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
        path = self.raw_dir / dataset.COMPLIANCE_GPQA_FILE
        df = self._df(self.raw_dir, dataset.COMPLIANCE_GPQA_FILE)
        prompts = dataset.prompts_of(df, path, self.fix("download_data"))
        targets = [text_or_none(x) for x in df["ground_truth"]]
        self.check_dataset(prompts, targets, self.fix("download_data"), f"the dataset in {path}")
        save_prompts(self.pre_dir / COMPLIANCE_PROMPTS, prompts)
        write_json(self.pre_dir / COMPLIANCE_REFERENCES, {"targets": targets, "source": str(path),
                                                          "dataset": [str(x) for x in df["dataset"]]})
        print(f"[preprocess_data] {len(prompts)} TEST07 prompts -> {self.pre_dir / COMPLIANCE_PROMPTS}")
        ref = self.raw_dir / TINY_AUDIT_REFERENCE
        if self.tiny and ref.exists():
            write_json(self.pre_dir / TINY_AUDIT_REFERENCE, read_json(ref, self.fix("download_data")))

    def prompts(self) -> list[np.ndarray]:
        """AccuracyOnly: the accuracy set; a TEST07 audit: its GPQA compliance set; any other run: the performance
        set (the reference's input files)."""
        if self.test_mode == "AccuracyOnly":
            return super().prompts()
        p = self.pre_dir / (COMPLIANCE_PROMPTS if self.audit_test == "TEST07" else PERF_PROMPTS)
        if not p.exists():
            raise MissingDataError(f"preprocessed performance prompts not found: {p}", self.fix("preprocess_data"))
        prompts = load_prompts(p, self.fix("preprocess_data"))
        n = self.settings.values.get("llm_sample_count") or 0
        return prompts[:n] if n else prompts

    def references(self) -> dict[str, Any]:
        """The accuracy set's references, or in a TEST07 audit its compliance set's."""
        if self.audit_test != "TEST07":
            return super().references()
        p = self.pre_dir / COMPLIANCE_REFERENCES
        if not p.exists():
            raise MissingDataError(f"preprocessed TEST07 references not found: {p}", self.fix("preprocess_data"))
        return read_json(p, self.fix("preprocess_data"))

    # --- audits -------------------------------------------------------------------------------------
    def audit_score(self, accuracy_log: str) -> tuple[dict[str, Any], str]:
        """TEST07: exact match of the audit's log over the compliance set, printed as eval_mlperf_accuracy.py does."""
        self.audit_test = "TEST07"
        idx, tokens, preds, targets = self.decode_log(accuracy_log)
        self.score_notes, self.score_unofficial = [], []
        report = self.report_dict(self.score(idx, tokens, preds, targets))
        return report, "".join(f"{k!r}: {v}\n" for k, v in report.items())

    def official_accuracy_command(self, root: Path, test: str) -> str | None:
        """compliance/TEST07/README's example: eval_mlperf_accuracy.py over the compliance set, this tokenizer."""
        import shlex
        import sys

        script = Path(root) / "language" / "gpt-oss-120b" / "eval_mlperf_accuracy.py"
        if test != "TEST07" or not script.is_file():
            return None
        return " ".join([shlex.quote(sys.executable), shlex.quote(str(script)), "--mlperf-log", "{accuracy_log}",
                         "--reference-data", shlex.quote(str(self.raw_dir / dataset.COMPLIANCE_GPQA_FILE)),
                         "--tokenizer", shlex.quote(str(self.checkpoint)),
                         "--output-file", "/dev/null"])

    def audit_overrides(self, test: str) -> dict[str, float]:
        """Tiny: its sets' sizes, and thresholds from plain generate on the same weights as the tiny variant judges
        accuracy (TEST07: 99% of generate's score; TEST09: generate's mean output length +/- 10%, as the official
        bounds are the reference's 1,278.2 +/- 10%)."""
        if not self.tiny or test not in ("TEST07", "TEST09"):
            return {}
        ref = read_json(self.pre_dir / TINY_AUDIT_REFERENCE, self.fix("preprocess_data"))
        if test == "TEST07":
            n = len(load_prompts(self.pre_dir / COMPLIANCE_PROMPTS, self.fix("preprocess_data")))
            return {"min_query_count": n, "accuracy_log_sampling_target": n,
                    "test07_accuracy_threshold": round(0.99 * ref["TEST07"]["exact_match"], 3)}
        n = len(load_prompts(self.pre_dir / PERF_PROMPTS, self.fix("preprocess_data")))
        m = ref["TEST09"]["mean_output_tokens"]
        return {"min_query_count": n, "test09_min_output_tokens": round(0.9 * m, 2),
                "test09_max_output_tokens": round(1.1 * m, 2)}

    def download_data(self) -> None:
        """Tiny: seeded questions whose ground truth is what the reference's extraction reads in plain
        ``model.generate``'s answer (decoded with the special tokens, as the reference decodes), for three samples
        in four (a wrong one for the fourth); a sample whose answer holds nothing to extract keeps a seeded truth
        and scores 0. Exact match then moves with every token a harness changes in an answer."""
        if not self.tiny:
            self.download_real_data()
            return
        self._tiny_exact_match_set(DIALECT, "synthetic harmony questions")
        self._tiny_audit_reference()

    def _tiny_audit_reference(self) -> None:
        """Plain generate's TEST07 score over the tiny compliance set (its GPQA questions, whose answers the accuracy
        set's generate pass already holds) and mean output length over the tiny performance set (one more pass)."""
        from code.common.llm import exact_match, tiny

        out_dir = Path(self.raw_dir)
        tok = tiny.load_tokenizer(self.tiny_tokenizer_dir())
        acc = self._df(out_dir)
        outs = load_prompts(out_dir / "generate_reference.npz")
        rows = [i for i, k in enumerate(acc["dataset"]) if k == "gpqa_diamond"]
        texts = tok.batch_decode([outs[i].tolist() for i in rows], skip_special_tokens=self.skip_special_tokens)
        em = exact_match.score([acc["dataset"][i] for i in rows], texts, [str(acc["ground_truth"][i]) for i in rows],
                               DIALECT, repeats=dataset.REPEATS)["exact_match"]
        path = out_dir / dataset.PERFORMANCE_FILE
        perf = self._plain_generate(dataset.prompts_of(dataset.read(path, self.fix("download_data"), ("dataset",)),
                                                       path, self.fix("download_data")))
        osl = float(np.mean([len(o) for o in perf]))
        write_json(out_dir / TINY_AUDIT_REFERENCE, {"TEST07": {"exact_match": em, "samples": len(rows)},
                                                    "TEST09": {"mean_output_tokens": osl, "samples": len(perf)}})
        print(f"[download_data] tiny audit references: TEST07 exact_match {em:.4g} over {len(rows)} GPQA questions, "
              f"TEST09 mean output length {osl:.2f} tokens over {len(perf)} -> {out_dir / TINY_AUDIT_REFERENCE}")

    def download_real_model(self) -> None:
        from code.gpt_oss_120b import download

        download.download_model(super().checkpoint)

    def download_real_data(self) -> None:
        from code.gpt_oss_120b import download

        download.download_data(self.raw_dir, self.settings.values.get("data_dir"))
        from code.common.llm import livecodebench

        livecodebench.download(livecodebench.folder_of(self.raw_dir), LCB_RELEASE, fix=self.fix("download_data"))

    # --- accuracy -----------------------------------------------------------------------------------
    def score(self, idx, tokens, preds, targets) -> dict[str, Any]:
        """language/gpt-oss-120b/eval_mlperf_accuracy.py: exact_match = 100 x sum over sub-datasets of right / repeats
        over sum of samples / repeats (dataset.REPEATS), plus tokens_per_sample (the mean output length, which the
        checker holds under its upper limit) and num-samples."""
        from code.common.llm import exact_match, livecodebench

        kinds = self.references()["dataset"]
        ks = [kinds[i] for i in idx]
        r = exact_match.score(ks, preds, targets, DIALECT, repeats=dataset.REPEATS,
                              code_judge=livecodebench.benchmark_judge(self.raw_dir, LCB_RELEASE,
                                                                       self.fix("download_data")))
        self.score_notes = [f"{k}: {f['right']} of {f['samples']} right, an answer found in {f['answered']}"
                            for k, f in r["families"].items()]
        return {"exact_match": r["exact_match"],
                "tokens_per_sample": float(np.mean([len(t) for t in tokens])) if tokens else 0.0,
                "num-samples": len(idx)}
