"""Mixtral-8x7B actions on the shared LLM layer: the reference's data, generation, stop sequences and
the three sub-metrics (ROUGE on OpenOrca, GSM8K exact match, MBXP pass rate)."""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from code.common.llm.harness import Generation, LLMBenchmark, text_or_none, token_ids
from code.mixtral_8x7b import SPEC, dataset

# language/mixtral-8x7b/SUT.py: greedy, max_new_tokens 1024, min_new_tokens 2; MBXP samples stop after
# "\n```\n"; the outputs are reported without their trailing EOS (dataset.py remove_trailing_twos).
REAL = Generation(max_new_tokens=1024, min_new_tokens=2, strip_eos=True)
TINY = Generation(max_new_tokens=48, min_new_tokens=2, strip_eos=True)


class MixtralBenchmark(LLMBenchmark):
    spec = SPEC
    tiny_kind = "mixtral"
    tiny_context = 1024
    tiny_samples = 60                      # 20 of each kind
    tiny_judged = ("rouge", "gsm8k", "mbxp")
    # digits' output rows x1.15: about two in three GSM8K answers of the tiny model then hold a number
    tiny_build_options = {"boost": tuple("0123456789"), "boost_scale": 1.15}

    def generation(self) -> Generation:
        return TINY if self.tiny else REAL

    # --- data ---------------------------------------------------------------------------------------
    def make_tiny_raw(self, tokenizer, out_dir, targets=None, stop=None):
        from code.common.llm.tiny import SEED

        samples = dataset.tiny_samples(self.tiny_samples, SEED + 3)
        if targets is not None:
            for s, t in zip(samples, targets):
                s["gt_output"] = t
        stop = stop or tokenizer("\n```\n", add_special_tokens=False)["input_ids"]
        dataset.write_tiny(out_dir, tokenizer, samples, stop)

    def _df(self, folder):
        return dataset.read(folder / dataset.DATASET_PKL, self.fix("download_data"))

    def read_raw(self, tokenizer, folder):
        df = self._df(folder)
        return [token_ids(t) for t in df["tok_input"]], [text_or_none(x) for x in df["gt_output"]]

    def read_extra(self, tokenizer, folder):
        df = self._df(folder)
        return {"stops": dataset.stops(df), "dataset": [str(x) for x in df["dataset"]], "ids": [str(x) for x in df["id"]]}

    def download_data(self) -> None:
        """Tiny: as the LLM layer's, with two additions. (1) MBXP samples stop after a token pair the tiny
        model actually emits (the most frequent pair in its MBXP outputs), since a random model never writes
        "\\n```\\n": the stop path of every scheduler is then exercised. (2) GSM8K answers come from plain
        ``model.generate``'s own output: the number the reference extraction finds in it for three samples
        in four, a wrong one for the fourth, so GSM8K accuracy moves with every token a harness changes.
        OpenOrca references are built as the layer builds them; MBXP tests stay the hand-written ones."""
        if not self.tiny:
            self.download_real_data()
            self.download_punkt_tab()
            return
        self.download_punkt_tab()
        from code.common.llm import tiny
        from code.common.llm.generation import cut_at_stop
        from code.common.llm.harness import save_prompts
        from code.mixtral_8x7b import gsm8k

        out_dir, tok, prompts, _ = self._tiny_raw()
        kinds = self.read_extra(tok, out_dir)["dataset"]
        full = self._plain_generate(prompts)
        stop = self._frequent_pair([o for o, k in zip(full, kinds) if k == "MBXP"])
        gen = self.generation()
        outs = [cut_at_stop(o, stop, gen.min_new_tokens) if k == "MBXP" else o for o, k in zip(full, kinds)]
        texts = tok.batch_decode(outs, skip_special_tokens=True)
        g = np.random.default_rng(tiny.SEED + 4)
        samples = dataset.tiny_samples(self.tiny_samples, tiny.SEED + 3)
        targets = []
        for i, (s, t) in enumerate(zip(samples, texts)):
            if s["dataset"] == "OpenOrca":
                targets.append(f"{s['question'].split('.')[0]}. {t[:max(1, int(len(t) * 0.6))].strip()}")
            elif s["dataset"] == "GSM8K":
                found = gsm8k.find_number(t.split("\nQ:")[0]).replace(",", "")
                num = float(found) if _is_number(found) else None
                if num is None:
                    targets.append(str(int(g.integers(100, 999))))
                else:
                    targets.append(_fmt(num + 1) if i % 4 == 3 else _fmt(num))
            else:
                targets.append(s["gt_output"])
        self.make_tiny_raw(tok, out_dir, targets, stop)
        save_prompts(out_dir / "generate_reference.npz", outs)
        n = Counter(kinds)
        print(f"[download_data] {len(prompts)} synthetic samples ({', '.join(f'{n[k]} {k}' for k in dataset.KINDS)}; "
              f"MBXP stop sequence {stop}) -> {out_dir}")

    @staticmethod
    def _frequent_pair(outs) -> list[int]:
        pairs = Counter((int(a), int(b)) for o in outs for a, b in zip(o[1:-1], o[2:]))     # never at position 0
        if not pairs:
            return [13, 13]
        best = max(pairs.values())
        return list(min(p for p, c in pairs.items() if c == best))

    def download_real_model(self) -> None:
        from code.mixtral_8x7b import download

        download.download_model(self.checkpoint)

    def download_real_data(self) -> None:
        from code.mixtral_8x7b import download

        download.download_data(self.raw_dir, self.settings.values.get("data_dir"))

    # --- accuracy -----------------------------------------------------------------------------------
    def score(self, idx, tokens, preds, targets) -> dict[str, Any]:
        """language/mixtral-8x7b/evaluate-accuracy.py: ROUGE over the OpenOrca samples, GSM8K accuracy,
        MBXP pass rate (``code.mixtral_8x7b.mbxp``: the reference's evaluator when mxeval is installed, else
        ours; the reference's denominator, a problem whose language has no runtime here counted as failed and
        the score marked unofficial), gen_len (characters of the OpenOrca predictions), gen_num, gen_tok_len
        (every output token; the EOS is not in the outputs) and tokens_per_sample."""
        from code.common.llm import rouge
        from code.mixtral_8x7b import gsm8k, mbxp

        refs = self.references()
        kinds, ids = refs["dataset"], refs["ids"]
        by = {k: [j for j, i in enumerate(idx) if kinds[i] == k] for k in dataset.KINDS}
        out: dict[str, Any] = {}
        if by["OpenOrca"]:
            pp, tt = rouge.postprocess_text([preds[j] for j in by["OpenOrca"]], [targets[j] for j in by["OpenOrca"]],
                                            self.variant)
            out.update(rouge.rouge(pp, tt))
            self.mark_unofficial(rouge.unofficial_reasons(self.variant, self.fix("download_data")))
            gen_len = int(np.sum([len(p) for p in pp]))
        else:
            gen_len = 0
        g = gsm8k.score([preds[j] for j in by["GSM8K"]], [targets[j] for j in by["GSM8K"]])
        out["gsm8k"] = g["gsm8k"]
        problems = []
        for j in by["MBXP"]:
            lang, entry = ids[idx[j]].split("_", 1)
            problems.append({"lang": lang, "entry_point": entry, "test_code": targets[j], "response": preds[j]})
        m = mbxp.evaluate(problems, workers=int(self.settings.values.get("mbxp_workers") or 2),
                          timeout=float(self.settings.values.get("mbxp_timeout_s") or 20)) if problems else None
        out["mbxp"] = m["mbxp"] if m else 0.0
        self.mark_unofficial(m["unofficial"] if m else [])
        gen_tok_len = int(sum(len(t) for t in tokens))
        out.update({"gen_len": gen_len, "gen_num": len(idx), "gen_tok_len": gen_tok_len,
                    "tokens_per_sample": round(gen_tok_len / max(1, len(idx)), 1)})
        self.score_notes = [f"GSM8K: {g['correct']} of {g['total']} correct ({g['no_answer']} without a number)",
                            mbxp.summary(m) if m else "MBXP: no samples"]
        return out


def _is_number(x: str) -> bool:
    try:
        float(x)
        return True
    except ValueError:
        return False


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)
