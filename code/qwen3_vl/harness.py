"""Qwen3-VL-235B-A22B actions on the shared LLM layer: the reference's chat messages (system prompt with the answer's
JSON schema; the product's text, then its image as a base64 data URL), the checkpoint's processor (chat template,
image processor) for the prompt's token ids and the image's pixels, generation in-process
(``code.common.llm.vision``: static batches through ``model.generate``) or through an OpenAI-compatible server
(``--backend=openai``: the messages go to /v1/chat/completions as the reference's client sends them), and the
reference's category hierarchical F1 (``code.qwen3_vl.accuracy``).

LoadGen logs each answer's UTF-8 text (the reference's client logs the content it receives, and its scorer decodes
the log as text), with the answer's token count as ``n_tokens``.

Decoding: the real variant samples as the reference does (``REFERENCE``: temperature 0.7, top_p 0.8, top_k 20,
repetition penalty 1.0 (none), from the model's generation_config.json; the README's "Sampling parameters"), each
sample from its own stream seeded by (--llm_seed, its index), in process and as the request's ``seed`` over HTTP; the
tiny variant decodes greedily (judged against plain ``generate``). The reference sends no max_tokens (vLLM: the rest
of the context); the harness caps an answer at 4,096 tokens, far past a one-line JSON object.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from code.common import paths
from code.common.errors import MissingDataError
from code.common.fileio import staged_path
from code.common.llm.harness import Generation, LLMBenchmark, PromptQSL, save_prompts
from code.common.llm.sampling import Sampling
from code.qwen3_vl import SPEC, dataset

REFERENCE = Sampling(temperature=0.7, top_k=20, top_p=0.8, seed=0)   # the README's; it names no seed
GENERATION = Generation(max_new_tokens=4096, min_new_tokens=1, sampling=REFERENCE)
TINY = Generation(max_new_tokens=2, min_new_tokens=1)   # an answer token, then the EOS or another
MEDIA = "media.npz"          # preprocessed: each sample's re-saved image and its user text (messages are rebuilt)


class MediaQSL(PromptQSL):
    """Prompts (token ids, the image placeholder expanded) plus each sample's chat messages, rebuilt on demand
    from the image bytes and the user text held in memory (the reference holds its messages in host memory too)."""

    def __init__(self, prompts, performance_count: int, media: dict):
        super().__init__(prompts, performance_count)
        self._img, self._off = media["images"], media["offsets"]
        self._fmt, self._text = [str(x) for x in media["formats"]], [str(x) for x in media["texts"]]

    def media(self, index: int) -> dict:
        data = self._img[self._off[index]:self._off[index + 1]].tobytes()
        return {"messages": dataset.messages_for(self._text[index], data, self._fmt[index])}


def save_media(path: Path, images: Sequence[bytes], formats: Sequence[str], texts: Sequence[str]) -> None:
    offsets = np.concatenate([[0], np.cumsum([len(b) for b in images])]).astype(np.int64)
    with staged_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, images=np.frombuffer(b"".join(images), dtype=np.uint8), offsets=offsets,
                 formats=np.array(formats), texts=np.array(texts))


def load_media(path: Path, fix: str) -> dict:
    import zipfile

    try:
        with np.load(path) as z:
            return {k: z[k] for k in ("images", "offsets", "formats", "texts")}
    except FileNotFoundError:
        raise MissingDataError(f"not found: {path}", fix) from None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise MissingDataError(f"{path} is damaged ({type(e).__name__})", fix) from None


class Qwen3VLBenchmark(LLMBenchmark):
    spec = SPEC
    tiny_context = 4096
    tiny_samples = 24
    tiny_judged = ("f1",)
    uses_rouge = False

    def generation(self) -> Generation:
        return TINY if self.tiny else GENERATION

    # --- model ------------------------------------------------------------------------------------------
    def model_config(self) -> dict:
        """config.json with the text model's fields (vocabulary, EOS, context) at the top, where the LLM layer
        reads them."""
        cfg = dict(super().model_config())
        for k, v in (cfg.get("text_config") or {}).items():
            cfg.setdefault(k, v)
        return cfg

    def download_model(self) -> None:
        if not self.tiny:
            self.download_real_model()
            return
        from code.qwen3_vl import model

        rows = dataset.tiny_rows(12, self._seed() + 5, model.CATEGORIES, model.BRANDS)

        def encode(proc):
            from code.common.llm import vision

            out = []
            for r in rows:
                msgs = dataset.messages(r)
                o = proc(text=[proc.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)],
                         images=vision.images_of(msgs), return_tensors="pt")
                out.append((o["input_ids"][0].numpy(), {"pixel_values": o["pixel_values"],
                                                         "image_grid_thw": o["image_grid_thw"]}))
            return out

        rec = model.build(self.checkpoint, super().tiny_tokenizer_dir(), encode, context=self.tiny_context,
                          seed=self._seed())
        print(f"[download_model] tiny Qwen3-VL MoE ({rec['parameters']:,} parameters; calibration: {rec['first_answers']} "
              f"first answers over {rec['calibration_samples']} samples, {rec['end_after_one']} end after one) -> "
              f"{self.checkpoint}")

    @staticmethod
    def _seed() -> int:
        from code.common.llm.tiny import SEED

        return SEED + 31

    def worker_specs(self, model_dir: str, local: bool = False):
        return [dataclasses.replace(w, multimodal=True) for w in super().worker_specs(model_dir, local)]

    def response_bytes(self):
        """Each answer as the UTF-8 text a server returns (special tokens dropped, as vLLM's detokenizer does)."""
        from code.common.llm.tokentext import TokenText

        text = TokenText(str(self.checkpoint))
        return lambda tokens: text.decode(tokens).encode("utf-8")

    # --- data -------------------------------------------------------------------------------------------
    def make_tiny_raw(self, tokenizer, out_dir, targets=None):
        from code.qwen3_vl import model

        rows = dataset.tiny_rows(self.tiny_samples, self._seed() + 13, model.CATEGORIES, model.BRANDS)
        for r, t in zip(rows, targets or ()):
            r.update(t)
        dataset.write(Path(out_dir), rows)

    def _inputs(self):
        from code.common.llm.vision import ChatInputs

        if not (self.checkpoint / "config.json").exists() and self.tiny:
            self.download_model()
        return ChatInputs(str(self.checkpoint))

    def read_raw(self, tokenizer, folder):
        """Prompt token ids through the checkpoint's processor; a target is the sample's ground truth as JSON.
        Keeps each sample's re-saved image and user text for ``preprocess_data`` to write (``MEDIA``)."""
        rows = dataset.read(Path(folder), self.fix("download_data"))
        inputs = self._inputs()
        prompts, targets, self._media = [], [], ([], [], [])
        for r in rows:
            data, fmt = dataset.resaved_image(r)
            text = dataset.user_text(r)
            ids, _ = inputs.encode(dataset.messages_for(text, data, fmt))
            prompts.append(ids)
            targets.append(json.dumps({k: r[k] for k in dataset.TRUTH}))
            for lst, v in zip(self._media, (data, fmt, text)):
                lst.append(v)
        return prompts, targets

    def preprocess_data(self) -> None:
        super().preprocess_data()
        save_media(self.pre_dir / MEDIA, *self._media)
        print(f"[preprocess_data] {len(self._media[0])} images ({sum(map(len, self._media[0])):,} bytes) -> "
              f"{self.pre_dir / MEDIA}")

    def make_qsl(self) -> MediaQSL:
        prompts = self.prompts()
        self.check_prompts(prompts)
        media = load_media(self.pre_dir / MEDIA, self.fix("preprocess_data"))
        self.qsl = MediaQSL(prompts, self.settings.performance_sample_count or len(prompts), media)
        return self.qsl

    def download_data(self) -> None:
        """Tiny: seeded products whose ground truth comes from plain ``generate``'s answer where it parses: the
        same category path (samples 0 mod 4), a sibling leaf (1 mod 4: two levels of three match), another branch
        of the same root (2 mod 4: one level) or another root (3 mod 4: none); brand and flag as answered. A sample
        whose answer does not parse keeps its seeded truth. Writes the set and generate's answers."""
        if not self.tiny:
            self.download_real_data()
            return
        from code.qwen3_vl import accuracy, model

        out_dir, tok, prompts, _ = self._tiny_raw()
        outs = self._plain_generate(prompts)
        texts = self.tokenizer().batch_decode(outs, skip_special_tokens=True)
        rows = dataset.read(out_dir, self.fix("download_data"))
        targets, parsed = [], 0
        for i, (r, t) in enumerate(zip(rows, texts)):
            got = accuracy.parse(t)
            if got is None:
                targets.append({})
                continue
            parsed += 1
            cat = tiny_truth(got[0], i % 4, model.CATEGORIES)
            targets.append({"ground_truth_category": cat, "ground_truth_brand": got[1],
                            "ground_truth_is_secondhand": got[2]})
        self.make_tiny_raw(tok, out_dir, targets)
        save_prompts(out_dir / "generate_reference.npz", outs)
        print(f"[download_data] {len(prompts)} synthetic products ({parsed} answers parse) -> {out_dir}")

    def _plain_generate(self, prompts, stops=None):
        """Plain ``model.generate`` at batch 1 on each tiny sample, from the messages through the processor."""
        from code.common import progress
        from code.common.backends.pytorch import one_thread
        from code.common.llm import vision

        import torch

        model = vision.load_model(str(self.checkpoint), torch.float32, "cpu")
        inputs = self._inputs()
        rows = dataset.read(paths.data_dir(self.spec.name, "tiny"), self.fix("download_data"))
        cfg = self.model_config()
        outs = []
        with progress.bar(len(rows), "plain model.generate (tiny reference)", "sample") as bar, one_thread():
            for r in rows:
                ids, pix = inputs.encode(dataset.messages(r))
                outs += vision.generate(model, [np.asarray(ids)], [pix], max_new_tokens=TINY.max_new_tokens,
                                        min_new_tokens=TINY.min_new_tokens, eos_token_id=cfg["eos_token_id"],
                                        pad_token_id=cfg.get("pad_token_id") or 0)
                bar.update()
        return outs

    def download_real_model(self) -> None:
        from code.qwen3_vl import download

        download.download_model(self.checkpoint)

    def download_real_data(self) -> None:
        from code.qwen3_vl import download

        download.download_data(self.raw_dir, self.settings.values.get("data_dir"),
                               interactive=self.settings.scenario == "Interactive")

    @property
    def raw_dir(self) -> Path:
        """The Interactive scenario reads its own 8k subset (nvidia/Shopify-product-catalogue-8k)."""
        base = super().raw_dir
        if not self.tiny and self.settings.scenario == "Interactive" and not self.settings.values.get("data_dir"):
            return base.parent / f"{base.name}_8k"
        return base

    @property
    def pre_dir(self) -> Path:
        base = super().pre_dir
        return base.parent / f"{base.name}_8k" if not self.tiny and self.settings.scenario == "Interactive" else base

    # --- accuracy -----------------------------------------------------------------------------------------
    def decode_log(self, accuracy_log: str):
        """(indices, token counts as empty arrays, answers' text, truths as JSON) from an accuracy log of text."""
        from code.common.results.loadgen_logs import first_answers

        outs = first_answers(accuracy_log, np.uint8)
        targets = self.targets()
        idx = list(outs)
        preds = [outs[i].tobytes().decode("utf-8", errors="replace") for i in idx]
        return idx, [outs[i] for i in idx], preds, [targets[i] for i in idx]

    def _tiny_judge(self, metrics: dict, idx: list[int]) -> list[str]:
        ref = self.generate_reference()
        if ref is None:
            return ["no plain-generate reference for the tiny variant (run make preprocess_data MODEL_VARIANT=tiny)"]
        preds = self.tokenizer().batch_decode([ref[i].tolist() for i in idx], skip_special_tokens=True)
        targets = self.targets()
        want = self.score(idx, [], preds, [targets[i] for i in idx])
        self._generate_metrics = want
        return [f"f1 = {metrics['f1']:.6g} is below 99% of plain generate's {want['f1']:.6g}"] \
            if metrics["f1"] < 0.99 * want["f1"] else []

    def score(self, idx, tokens, preds, targets) -> dict[str, Any]:
        from code.qwen3_vl import accuracy

        r = accuracy.score(preds, [json.loads(t) for t in targets])
        self.score_notes = [f"brand score {r['brand']:.4f}; {r['unparsable']} of {r['num-samples']} answers do not "
                            "parse as the answer schema (scored as padding levels)"]
        return {"f1": r["f1"]}

    def report_dict(self, metrics: dict) -> dict:
        """The reference's accuracy.txt line: ``{"f1": ...}`` as JSON (the checker's F1_HIERARCHICAL pattern reads
        the double-quoted key)."""
        return JsonLine(f1=float(metrics["f1"]))


class JsonLine(dict):
    """A dict whose repr is the reference's JSON (json.dumps, sorted keys)."""

    def __repr__(self) -> str:
        return json.dumps(self, sort_keys=True)


def tiny_truth(answer_path: str, kind: int, categories: Sequence[str]) -> str:
    """The tiny truth for an answered path: itself (kind 0), a sibling leaf (1), another branch of its root (2),
    another root (3); the first such path of ``categories`` (the answer itself where there is none)."""
    sep = dataset.SEPARATOR
    a = answer_path.split(sep)
    for c in categories:
        b = c.split(sep)
        common = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        if (kind == 0 and c == answer_path) or (kind and common == 3 - kind and len(b) == len(a)):
            return c
    return answer_path
