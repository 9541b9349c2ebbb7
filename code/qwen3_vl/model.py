"""The tiny Qwen3-VL: ``Qwen3VLMoeForConditionalGeneration`` shrunk (2 text layers of 4 experts top-2 with
interleaved multimodal rotary positions, a 2-block ViT with one deepstack layer, patch 16, merge 2), random weights
from a seed, and a processor built here (the Hub is out of reach): the shared tiny BPE tokenizer plus Qwen's chat
and vision markers, the Qwen3-VL chat template (its system / user / assistant turns; an ``image_url`` part becomes
``<|vision_start|><|image_pad|><|vision_end|>``, as the model's own template renders it), and Qwen's image processor
with the real one's settings but a smaller pixel budget (64x64 to 128x128: 4 to 16 visual tokens).

Answers: a random model never writes JSON. The tiny vocabulary holds whole answers as single tokens (``ANSWERS``: a
JSON object for each of a few category paths, brands and second-hand flags), and the output layer keeps only those
rows and the EOS's (the others are zeroed; ``build`` says how they are set): an answer of one answer token then the
EOS parses, two answer tokens do not, so the tiny set holds parsed and unparsable answers alike.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

CATEGORIES = ("Home > Kitchen > Knives", "Home > Kitchen > Pans", "Home > Garden > Tools", "Home > Garden > Seeds",
              "Sports > Outdoor > Tents", "Sports > Outdoor > Boots", "Sports > Fitness > Weights",
              "Toys > Games > Puzzles")
BRANDS = ("acme", "globex")
ANSWERS = tuple(json.dumps({"category": c, "brand": b, "is_secondhand": s})
                for c in CATEGORIES for b in BRANDS for s in (False, True))
MARKERS = ("<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
TEMPLATE = Path(__file__).with_name("chat_template.jinja")
# Qwen3-VL's preprocessor_config.json but the pixel budget (real: shortest_edge 65,536, longest_edge 16,777,216)
IMAGE_PROCESSOR = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
                   "image_std": [0.5, 0.5, 0.5], "size": {"shortest_edge": 64 * 64, "longest_edge": 128 * 128}}


def build_processor(base_tokenizer_dir: Path, out_dir: Path):
    """The tiny processor (tokenizer + image processor + chat template) saved into ``out_dir``; returns it."""
    from transformers import AutoTokenizer, Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    tok = AutoTokenizer.from_pretrained(str(base_tokenizer_dir))
    tok.add_special_tokens({"additional_special_tokens": list(MARKERS)})
    tok.add_tokens(list(ANSWERS))
    proc = Qwen3VLProcessor(image_processor=Qwen2VLImageProcessor(**IMAGE_PROCESSOR), tokenizer=tok,
                            video_processor=Qwen3VLVideoProcessor(**IMAGE_PROCESSOR),
                            chat_template=TEMPLATE.read_text())
    proc.save_pretrained(str(out_dir))
    return proc


def tiny_config(tok, context: int):
    from transformers import Qwen3VLMoeConfig

    ids = {m: tok.convert_tokens_to_ids(m) for m in MARKERS}
    eos = ids["<|im_end|>"]
    return Qwen3VLMoeConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=4,
                         num_experts_per_tok=2, decoder_sparse_step=1, max_position_embeddings=context,
                         rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [2, 3, 3],
                                          "mrope_interleaved": True},
                         eos_token_id=eos, pad_token_id=tok.pad_token_id, tie_word_embeddings=False),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64, num_position_embeddings=64,
                           deepstack_visual_indexes=[0]),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False)


def _last_hidden(model, ids, pix):
    """The final (normed) hidden state at the last position: what the output layer reads for the next token."""
    import torch

    from code.common.llm.vision import mm_inputs

    x = torch.as_tensor(ids, dtype=torch.long)[None]
    with torch.no_grad():
        return model(input_ids=x, output_hidden_states=True, **mm_inputs(model, x, [pix])).hidden_states[-1][0, -1]


def build(out_dir: Path, base_tokenizer_dir: Path, encode, *, context: int, seed: int) -> dict:
    """The tiny checkpoint (weights from ``seed``, processor files) in ``out_dir``; ``encode(processor)`` gives the
    calibration samples as (prompt ids, pixel inputs). The output layer keeps the answer and EOS rows only:

    * answer rows: random combinations of the directions in which the calibration prompts' last hidden states differ
      (their principal components, made orthogonal to the mean state), so the first answer token follows the image
      and the text rather than a bias every prompt shares;
    * the EOS row: along the mean hidden state after the first answer token, scaled so that half the calibration
      samples end there (a parsable answer) and half write a second answer token (an unparsable one).

    Returns the build record (also tiny_build.json)."""
    import numpy as np
    import torch
    from transformers import Qwen3VLMoeForConditionalGeneration

    from code.common.fileio import staged_dir, write_json
    from code.common.llm.tiny import quiet

    quiet()
    with staged_dir(Path(out_dir)) as tmp:
        proc = build_processor(base_tokenizer_dir, tmp)
        tok = proc.tokenizer
        torch.manual_seed(seed)
        cfg = tiny_config(tok, context)
        model = Qwen3VLMoeForConditionalGeneration(cfg).eval()
        eos = cfg.text_config.eos_token_id
        answers = torch.tensor([tok.convert_tokens_to_ids(a) for a in ANSWERS])
        samples = encode(proc)
        head = model.get_output_embeddings().weight
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            keep = torch.zeros(head.shape[0], dtype=torch.bool)
            keep[answers] = True
            keep[eos] = True
            head[~keep] = 0.0
            h1 = torch.stack([_last_hidden(model, ids, pix) for ids, pix in samples])
            mean = h1.mean(0)
            unit = mean / mean.norm()
            k = min(4, len(samples) - 1)
            dirs = torch.linalg.svd(h1 - mean, full_matrices=False).Vh[:k]
            dirs = dirs - (dirs @ unit)[:, None] * unit
            rows = torch.randn(len(ANSWERS), k, generator=gen) @ dirs
            spread = float((((h1 - mean) @ rows.T).std()) or 1.0)
            head[answers] = rows * (3.0 / spread)
            firsts = answers[(h1 @ head[answers].T).argmax(-1)]
            h2 = torch.stack([_last_hidden(model, np.append(ids, int(f)), pix) for (ids, pix), f in zip(samples, firsts)])
            unit2 = h2.mean(0) / h2.mean(0).norm()
            best = (h2 @ head[answers].T).max(-1).values
            along = h2 @ unit2
            scale = float(torch.quantile(best / along, 0.5)) * 1.0001
            head[eos] = unit2 * scale
        ends = int(((h2 @ head[eos]) > best).sum())
        record = {"kind": "qwen3_vl_moe", "seed": seed, "vocab_size": len(tok), "context": context,
                  "answers": len(ANSWERS), "calibration_samples": len(samples),
                  "first_answers": len(set(firsts.tolist())), "end_after_one": ends, "eos_scale": round(scale, 4),
                  "parameters": sum(p.numel() for p in model.parameters())}
        model.save_pretrained(str(tmp))
        write_json(tmp / "tiny_build.json", record)
    return record
