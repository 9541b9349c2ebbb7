"""Vision-language generation on the LLM layer: chat messages with an image (OpenAI ``image_url`` content, base64
data URLs, as the MLCommons clients send them) in, tokens out, through the same contract as every LLM backend.

* ``ChatInputs``: a checkpoint's processor (its chat template, tokenizer and image processor): messages -> the
  prompt's token ids with the image placeholder expanded to the image's visual tokens, and the image's pixel inputs.
  The harness's prompts (preprocess_data), its server (``code.common.llm.serve``) and the worker all use it, so a
  prompt and its pixels always agree.
* ``GenRequest.media``: ``{"messages": [...]}``, the sample's chat messages (the prompt's token ids already hold the
  expanded placeholder); the HTTP client sends the messages as they are, the in-process worker decodes the image.
* ``VisionProcessor``: the in-process worker for the transformers backend. Static batches through
  ``model.generate`` with the batch's pixel inputs. Not the step model of ``code.common.llm.hf``: a Qwen-VL prefill
  gives every row multimodal rotary positions (three axes, image tokens by row and column) and one position offset
  per row (``rope_deltas``) that the model keeps for the decode steps of that batch; rows that join a running batch
  would need those offsets merged row by row, which transformers' model does not expose. ``generate`` computes
  them for its own batch. At batch 1 its tokens are plain ``generate``'s (tests prove it). A sampling request
  (Qwen3-VL's reference: temperature 0.7, top_p 0.8, top_k 20) draws each token from its own stream
  (``code.common.llm.sampling``: ``choose`` with a ``RowSampler`` seeded per sample index, as the text engine's
  rows), through a logits processor that leaves only the drawn token: its tokens do not depend on its batch.
"""
from __future__ import annotations

import base64
import io
import threading
import time
from typing import Sequence

import numpy as np

from code.common.llm.generation import GenRequest, NullStepModel, Scheduler, decoding


def data_url_image(url: str):
    """The RGB PIL image of a ``data:image/<fmt>;base64,...`` URL (what vLLM decodes and converts)."""
    from PIL import Image

    head, _, b64 = url.partition(",")
    if not head.startswith("data:image/") or not head.endswith(";base64"):
        raise ValueError(f"image_url is not a base64 image data URL ({head[:40]!r})")
    return Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB")


def images_of(messages: Sequence[dict]) -> list:
    """The images of the messages' ``image_url`` parts, in order."""
    out = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict) and part.get("type") == "image_url":
                out.append(data_url_image((part.get("image_url") or {}).get("url", "")))
    return out


def has_images(messages) -> bool:
    return isinstance(messages, list) and any(
        isinstance(m, dict) and isinstance(m.get("content"), list)
        and any(isinstance(p, dict) and p.get("type") == "image_url" for p in m["content"]) for m in messages)


class ChatInputs:
    """A checkpoint's processor; thread-safe (one lock: image processing is CPU work either way)."""

    def __init__(self, folder: str):
        from transformers import AutoProcessor

        self.proc = AutoProcessor.from_pretrained(str(folder))
        self.image_token_id = int(self.proc.image_token_id)
        self.merge = int(self.proc.image_processor.merge_size) ** 2
        self._lock = threading.Lock()

    def text(self, messages: Sequence[dict]) -> str:
        return self.proc.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)

    def encode(self, messages: Sequence[dict]) -> tuple[list[int], dict]:
        """(prompt token ids, pixel inputs as torch tensors: pixel_values, image_grid_thw)."""
        images = images_of(messages)
        with self._lock:
            out = self.proc(text=[self.text(messages)], images=images or None, return_tensors="pt")
        pix = {k: out[k] for k in ("pixel_values", "image_grid_thw") if k in out}
        return out["input_ids"][0].tolist(), pix

    def pixels(self, messages: Sequence[dict], prompt: np.ndarray) -> dict:
        """The pixel inputs of the messages' images, checked against the visual tokens ``prompt`` holds."""
        images = images_of(messages)
        with self._lock:
            pix = dict(self.proc.image_processor(images=images, return_tensors="pt")) if images else {}
        want = int(sum(int(g.prod()) // self.merge for g in pix["image_grid_thw"])) if pix else 0
        have = int(np.count_nonzero(np.asarray(prompt) == self.image_token_id))
        if want != have:
            raise ValueError(f"the prompt holds {have} image tokens but its image makes {want}: the prompts were "
                             "preprocessed with another processor or image")
        return {k: pix[k] for k in ("pixel_values", "image_grid_thw")} if pix else {}


def load_model(model_dir: str, dtype, device: str):
    from transformers import AutoModelForImageTextToText

    return AutoModelForImageTextToText.from_pretrained(str(model_dir), dtype=dtype).to(device).eval()


def mm_inputs(model, ids, pixels: Sequence[dict]) -> dict:
    """The batch's pixel inputs for ``model``: pixel_values and image_grid_thw in row order, and
    mm_token_type_ids (1 at each image token, 0 elsewhere, as the processor marks them; Qwen-VL's multimodal
    positions are computed from it)."""
    import torch

    if not any(pixels):
        return {}
    dev = next(model.parameters()).device
    return {"pixel_values": torch.cat([p["pixel_values"] for p in pixels if p]).to(dev, model.dtype),
            "image_grid_thw": torch.cat([p["image_grid_thw"] for p in pixels if p]).to(dev),
            "mm_token_type_ids": (ids == int(model.config.image_token_id)).long().to(dev)}


class RowDraws:
    """A ``generate`` logits processor: each sampling row's token drawn from its own stream (``sampling.choose``
    after generate's own processors, min_new_tokens' EOS suppression included); every other score at -inf, so
    generate's argmax takes the draw. Greedy rows (``None``) keep their scores."""

    def __init__(self, how: Sequence, device):
        from code.common.llm.sampling import RowSampler

        self.samplers = [None if h is None else RowSampler(h[0], h[1], device) for h in how]

    def __call__(self, input_ids, scores):
        import torch

        from code.common.llm.sampling import choose

        rows = [i for i, s in enumerate(self.samplers) if s is not None]
        picks = choose(scores.float(), self.samplers)
        out = scores.clone()
        sel = torch.as_tensor(rows, device=scores.device)
        out[sel] = -float("inf")
        out[sel, torch.as_tensor([picks[i] for i in rows], device=scores.device)] = 0.0
        return out


def generate(model, prompts: Sequence[np.ndarray], pixels: Sequence[dict], *, max_new_tokens: int,
             min_new_tokens: int, eos_token_id, pad_token_id: int, sampling: Sequence | None = None) -> list[list[int]]:
    """``model.generate`` over a batch of prompts (left-padded) with their pixel inputs: greedy, or per row
    ``sampling`` (None: greedy, else its Sampling and stream seed, as ``generation.decoding`` gives them); each
    row's tokens end at its first EOS (kept), as the step models report them."""
    import torch

    dev = next(model.parameters()).device
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.as_tensor(np.asarray(p, dtype=np.int64))
        mask[i, width - len(p):] = 1
    kw = mm_inputs(model, ids, pixels)
    if sampling is not None and any(sampling):
        from transformers import LogitsProcessorList

        kw["logits_processor"] = LogitsProcessorList([RowDraws(sampling, dev)])
    with torch.inference_mode():
        out = model.generate(input_ids=ids.to(dev), attention_mask=mask.to(dev), do_sample=False, num_beams=1,
                             max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens,
                             eos_token_id=eos_token_id, pad_token_id=pad_token_id, **kw)
    eos = set(eos_token_id if isinstance(eos_token_id, (list, tuple)) else [eos_token_id]) - {None}
    rows = []
    for row in out[:, width:].tolist():
        for j, t in enumerate(row):
            if t in eos:
                row = row[:j + 1]
                break
        rows.append(row)
    return rows


class VisionProcessor(Scheduler):
    """Static batches of multimodal requests through ``model.generate`` (see the module doc for why); a request's
    first token is reported with its completion (``generate`` does not stream)."""

    def __init__(self, model, inputs: ChatInputs, spec, init):
        super().__init__(NullStepModel(spec.eos_token_id), spec.max_batch_size, mode="static",
                         batch_timeout_s=spec.batch_timeout_s, name=spec.name, thread_init=init, sampling=spec.sampling)
        self.hf, self.inputs, self.spec = model, inputs, spec
        self.extra_eos = tuple(spec.extra_eos)

    def warmup(self) -> None:
        return None

    def _iterate(self, joiners: list[GenRequest]) -> None:
        if not joiners:
            return
        spec = self.spec
        pixels = [self.inputs.pixels((r.media or {}).get("messages") or [], r.prompt) for r in joiners]
        eos = [spec.eos_token_id, *spec.extra_eos] if spec.extra_eos else spec.eos_token_id
        out = generate(self.hf, [r.prompt for r in joiners], pixels, max_new_tokens=max(r.max_new_tokens for r in joiners),
                       min_new_tokens=max(r.min_new_tokens for r in joiners), eos_token_id=eos,
                       pad_token_id=spec.pad_token_id, sampling=[decoding(r, self.sampling) for r in joiners])
        self.counters["steps"] += 1
        self.counters["joins"] += 1
        self.counters["row_steps"] += len(joiners)
        self.counters["max_rows"] = max(self.counters["max_rows"], len(joiners))
        for r, row in zip(joiners, out):
            r.tokens = row[:r.max_new_tokens]
            r.first_at = time.monotonic()
            self.on_first(r, r.tokens[0] if r.tokens else 0)
            self._finish(r)
