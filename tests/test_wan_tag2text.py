"""Tag2Text (code.wan.tag2text), VBench's scene captioner, against VBench 0.1.5's own code.

The oracle is the vbench==0.1.5 package (``make venv`` installs it with --no-deps: its declared dependencies pin
transformers 4.33.2 and decord, which would replace this environment's). Its Tag2Text modules
(``vbench/third_party/tag2Text``: BLIP's hand-written BERT ``med.py``, Microsoft's Swin, ``tag2text.py``) and
``vbench/scene.py`` run here with these stand-ins, none of which touches their arithmetic:
- imports their CPU path never calls: fairscale (ViT activation checkpointing), decord (the video reader: a stand-in
  serves our frames, already at the 384 x 384 VBench asks decord for);
- transformers 4.x helpers that 5.x moved or dropped: ``apply_chunking_to_forward`` / ``prune_linear_layer`` (the
  same functions, now in ``pytorch_utils``), ``invert_attention_mask``, ``get_head_mask`` (no head mask),
  ``init_weights`` (4.x's: initialise every module, tie the LM head to the word embeddings), the tokenizer's
  ``additional_special_tokens_ids``;
- downloads: ``BertTokenizer.from_pretrained('bert-base-uncased')`` returns the tiny vocabulary (the same one ours
  uses), ``BertModel.from_pretrained`` builds from the config (its BERT weights are overwritten anyway);
- generation: their caption decoder gets ``GenerationMixin`` (4.x's PreTrainedModel had it) and runs without a
  key/value cache (the whole prefix each step: the same logits); the beam search is transformers' in both.
Their Tag2Text_Caption is built at the TINY widths (two width literals VBench writes as 768, the tag head's input
and the decoder's cross-attention input, are rebuilt at the tiny width with their own classes), its random weights
moved (x0.1 noise) so that captions depend on the image, and its state dict loaded into ours by name.
Without the package the oracle tests skip with that reason.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from code.wan import tag2text as T2T
from code.wan import vbench
from tests.vbench_oracle import decord_stand_in, mounted, vbench_root

# two tiny scene videos of 384 x 384 frames (bars over colours), 6 and 7 frames: VBench pads 16 'middle' indices
COLOURS = ([250, 10, 10], [10, 250, 10], [10, 10, 250], [250, 250, 10], [120, 120, 120], [0, 0, 0], [200, 60, 160])


def _video(n: int, shift: int) -> np.ndarray:
    v = np.stack([np.full((T2T.IMAGE_SIZE, T2T.IMAGE_SIZE, 3), COLOURS[(i + shift) % len(COLOURS)], np.uint8)
                  for i in range(n)])
    v[:, :: 8 + shift] = 255 - v[:, :: 8 + shift]
    return v


VIDEOS = {"v0.mp4": _video(6, 0), "v1.mp4": _video(7, 3)}


def _stand_ins(root: Path):
    """The vbench package without its __init__, decord's stand-in, and fairscale's checkpoint wrapper (the identity)
    where fairscale is not installed; restored on exit."""
    absent = {}
    if importlib.util.find_spec("fairscale") is None:
        absent = {n: types.SimpleNamespace(__path__=[], checkpoint_wrapper=lambda m, **k: m)
                  for n in ("fairscale", "fairscale.nn", "fairscale.nn.checkpoint",
                            "fairscale.nn.checkpoint.checkpoint_activations")}
    return mounted(root, {**absent, "decord": decord_stand_in(VIDEOS, (T2T.IMAGE_SIZE, T2T.IMAGE_SIZE))})


def _transformers4_helpers(med):
    """What BLIP's med.py takes from transformers 4.x (see the module docstring), on med's own classes."""
    def init_weights(self):
        self.apply(self._init_weights)
        if isinstance(self, med.BertLMHeadModel):
            self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def invert_attention_mask(self, m):
        m = m[:, None, :, :] if m.dim() == 3 else m[:, None, None, :]
        return (1.0 - m.to(torch.float32)) * torch.finfo(torch.float32).min

    med.BertPreTrainedModel.init_weights = init_weights
    med.BertPreTrainedModel.invert_attention_mask = invert_attention_mask
    med.BertPreTrainedModel.get_head_mask = lambda self, head_mask, n: [None] * n
    med.BertModel.from_pretrained = classmethod(lambda cls, name, config=None, **kw: cls(config, **kw))


def _tiny_configs(d: Path, vocab: int) -> Path:
    """config_swinB_384.json, q2l_config.json and med_config.json at the TINY widths (VBench's keys)."""
    a = T2T.TINY

    def bert(layers, heads):
        return {"architectures": ["BertModel"], "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
                "hidden_dropout_prob": 0.1, "hidden_size": a.hidden, "initializer_range": 0.02,
                "intermediate_size": a.intermediate, "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
                "model_type": "bert", "num_attention_heads": heads, "num_hidden_layers": layers, "pad_token_id": 0,
                "type_vocab_size": 2, "vocab_size": vocab, "encoder_width": a.hidden, "add_cross_attention": True}
    (d / "config_swinB_384.json").write_text(json.dumps(
        {"vision_width": a.embed_dim * 8, "image_res": 384, "window_size": a.window_size, "embed_dim": a.embed_dim,
         "depths": list(a.depths), "num_heads": list(a.swin_heads)}))
    (d / "q2l_config.json").write_text(json.dumps(bert(a.q2l_layers, a.q2l_heads)))
    (d / "med_config.json").write_text(json.dumps(bert(a.layers, a.heads)))
    return d / "med_config.json"


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    """VBench's tag2text / med / scene / utils modules and their Tag2Text_Caption at TINY widths (seeded, moved
    weights), plus its state dict saved as VBench's checkpoint file."""
    root = vbench_root("third_party/tag2Text/tag2text.py")
    import transformers.modeling_utils as mu
    import transformers.pytorch_utils as pu
    from transformers import BertTokenizer, GenerationConfig, GenerationMixin

    added = [n for n in ("apply_chunking_to_forward", "prune_linear_layer", "find_pruneable_heads_and_indices")
             if not hasattr(mu, n)]
    for n in added:
        setattr(mu, n, getattr(pu, n, lambda *a: None))
    try:
        with _stand_ins(root):
            tag2text = importlib.import_module("vbench.third_party.tag2Text.tag2text")
            med = importlib.import_module("vbench.third_party.tag2Text.med")
            scene = importlib.import_module("vbench.scene")
            utils = importlib.import_module("vbench.utils")
    finally:
        for n in added:
            delattr(mu, n)
    _transformers4_helpers(med)

    class Tok(BertTokenizer):                   # transformers 5 dropped additional_special_tokens_ids
        @property
        def additional_special_tokens_ids(self):
            return [self.convert_tokens_to_ids("[ENC]")]

    tag2text.BertTokenizer = types.SimpleNamespace(
        from_pretrained=lambda name: Tok(vocab={t: i for i, t in enumerate(T2T.TINY_VOCAB)}))
    d = tmp_path_factory.mktemp("tag2text")
    med_config = _tiny_configs(d, len(T2T.tiny_tokenizer()))
    tag2text.CUR_DIR = str(d)                   # where Tag2Text_Caption reads its Swin and Q2L configs

    class Gen(med.BertLMHeadModel, GenerationMixin):
        def prepare_inputs_for_generation(self, input_ids, encoder_hidden_states=None, encoder_attention_mask=None,
                                          **kw):
            return {"input_ids": input_ids, "attention_mask": input_ids.new_ones(input_ids.shape),
                    "past_key_values": None, "encoder_hidden_states": encoder_hidden_states,
                    "encoder_attention_mask": encoder_attention_mask, "is_decoder": True, "use_cache": False}

        def _reorder_cache(self, past, beam_idx):
            return past

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        model = tag2text.Tag2Text_Caption(med_config=str(med_config), image_size=384, vit="swin_b")
        model.fc = tag2text.GroupWiseLinear(T2T.NUM_CLASS, T2T.TINY.hidden, bias=True)
        dc = med.BertConfig.from_json_file(str(med_config))
        dc.encoder_width = T2T.TINY.hidden
        model.text_decoder = med.BertLMHeadModel(config=dc)
        g = torch.Generator().manual_seed(2)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.1 * torch.randn(p.shape, generator=g))
    model.text_decoder.__class__ = Gen
    model.text_decoder.generation_config = GenerationConfig()
    model.tag_array = np.array(T2T.tiny_tags())
    model.eval()
    ckpt = d / T2T.CHECKPOINT
    torch.save({"model": model.state_dict()}, ckpt)
    return types.SimpleNamespace(root=root, tag2text=tag2text, med=med, scene=scene, utils=utils, model=model,
                                 ckpt=ckpt)


@pytest.fixture(scope="module")
def ours(official):
    m = T2T.build_tiny(0)
    T2T.load_checkpoint(m, str(official.ckpt))
    return m


@pytest.fixture(scope="module")
def frames():
    """Six normalised 384 x 384 frames, as VBench's scene feeds them (the first video's)."""
    return T2T.frames_tensor(VIDEOS["v0.mp4"])[:6]


def _maxdiff(a, b) -> float:
    return float((a - b).abs().max())


# --- settings and inputs ----------------------------------------------------------------------------------

def test_wan_tag2text_settings_match_vbench(official):
    """Image size, Swin-B / BERT / tag-head configs, tag count and list, threshold, removed tags, prompt, beam
    settings, frames and checkpoint: VBench's files and signatures against our constants."""
    r, t = official.root / "third_party" / "tag2Text", official.tag2text
    swin = json.loads((r / "config_swinB_384.json").read_text())
    medc, q2l = json.loads((r / "med_config.json").read_text()), json.loads((r / "q2l_config.json").read_text())
    a = T2T.SWIN_B
    assert (swin["image_res"], swin["embed_dim"], tuple(swin["depths"]), tuple(swin["num_heads"]),
            swin["window_size"], swin["vision_width"]) == (T2T.IMAGE_SIZE, a.embed_dim, a.depths, a.swin_heads,
                                                           a.window_size, a.embed_dim * 8)
    assert (medc["hidden_size"], medc["num_hidden_layers"], medc["num_attention_heads"], medc["intermediate_size"],
            medc["vocab_size"]) == (a.hidden, a.layers, a.heads, a.intermediate, 30522 + 2)
    assert (q2l["hidden_size"], q2l["num_hidden_layers"], q2l["num_attention_heads"], q2l["intermediate_size"]) == \
        (a.hidden, a.q2l_layers, a.q2l_heads, a.intermediate)
    assert official.model.num_class == T2T.NUM_CLASS and official.model.threshold == T2T.THRESHOLD
    assert official.model.prompt == T2T.PROMPT and sorted(t.delete_tag_index) == sorted(T2T.DELETE_TAG_INDEX)
    assert T2T.load_tags(str(r / "tag_class.py")) == list(t.tra_array) and len(t.tra_array) == T2T.NUM_CLASS
    g = inspect.signature(t.Tag2Text_Caption.generate).parameters
    assert (g["sample"].default, g["num_beams"].default, g["max_length"].default, g["min_length"].default,
            g["repetition_penalty"].default) == (False, T2T.NUM_BEAMS, T2T.MAX_LENGTH, T2T.MIN_LENGTH,
                                                 T2T.REPETITION_PENALTY)
    assert "max_length=40" in inspect.getsource(t.Tag2Text_Caption.generate) and T2T.TAG_MAX_TOKENS == 40
    src = inspect.getsource(official.scene.scene)
    assert f"num_frames={T2T.FRAMES}" in src and "tag2text_transform(384)" in src and "width=384, height=384" in src
    u = (official.root / "utils.py").read_text()
    assert T2T.CHECKPOINT_URL in u and f"caption_model/{T2T.CHECKPOINT}" in u
    assert '"image_size":384' in u.replace(" ", "") and '"vit":"swin_b"' in u.replace(" ", "")


def test_wan_tag2text_frames_match_vbench(official):
    """'middle' frame indices == vbench.utils.get_frame_indices; a 384-px frame through our transform ==
    vbench.utils.tag2text_transform(384) exactly."""
    for n, vlen in ((16, 5), (16, 6), (16, 16), (16, 81), (16, 100), (8, 3)):
        assert T2T.middle_indices(n, vlen) == list(official.utils.get_frame_indices(n, vlen, sample="middle")), vlen
    v = VIDEOS["v1.mp4"]
    want = torch.stack([official.utils.tag2text_transform(384)(f) for f in v[T2T.middle_indices(16, len(v))]])
    assert torch.equal(T2T.frames_tensor(v), want)


# --- the checkpoint's names -----------------------------------------------------------------------------------

def test_wan_tag2text_checkpoint_loads_by_name(official, ours, tmp_path):
    """VBench's state dict, saved as its checkpoint file, loads strictly into ours (no missing, no unexpected
    keys), every tensor where the name map puts it; a checkpoint short of one weight is refused."""
    sd, mine = official.model.state_dict(), ours.state_dict()
    only_theirs = {k for k in set(sd) - set(mine)
                   if not k.endswith(("position_ids", "relative_position_index", "attn_mask"))}
    # the names differ only where timm moved the patch merging (stage i's end -> stage i + 1's start)
    assert only_theirs == {k for k in sd if k.startswith("visual_encoder.layers.0.downsample.")} != set()
    for k, v in sd.items():
        if k.endswith(("position_ids", "relative_position_index", "attn_mask")):
            continue
        if ".downsample." in k:                  # stage i's patch merging is timm's stage i + 1's
            i = int(k.split(".")[2])
            k = k.replace(f"layers.{i}.downsample", f"layers.{i + 1}.downsample")
        assert torch.equal(mine[k], v), k
    assert not mine["tag_encoder.embeddings.token_type_embeddings.weight"].any()
    assert (ours.tag_encoder.encoder.layer[1].output.dense.weight is
            ours.vision_multi.encoder.layer[1].output.dense.weight)        # VBench's tie_encoder_decoder_weights
    short = dict(sd)
    short.pop("vision_multi.encoder.layer.0.crossattention.self.query.weight")
    short.pop("tag_encoder.encoder.layer.0.crossattention.self.query.weight")
    torch.save({"model": short}, tmp_path / "short.pth")
    with pytest.raises(RuntimeError, match="Missing key"):
        T2T.load_checkpoint(T2T.build_tiny(0), str(tmp_path / "short.pth"))


def test_wan_tag2text_build_real_loads_checkpoint(official, tmp_path, frames):
    """build_real: a vocab.txt folder (bert-base-uncased's layout) + the checkpoint file + the tag list, at the
    TINY widths here (Swin-B would take minutes): the same tags as VBench's model."""
    (tmp_path / "vocab.txt").write_text("\n".join(T2T.TINY_VOCAB) + "\n")
    m = T2T.build_real(str(official.ckpt), str(tmp_path), T2T.tiny_tags(), arch=T2T.TINY)
    assert len(m.tokenizer) == len(T2T.TINY_VOCAB) + 2
    with torch.no_grad():
        e = official.model.visual_encoder(frames)
        le = official.model.label_embed.weight.unsqueeze(0).repeat(len(frames), 1, 1)
        q = official.model.vision_multi(encoder_embeds=le, encoder_hidden_states=e,
                                        encoder_attention_mask=torch.ones(e.shape[:-1], dtype=torch.long),
                                        return_dict=False, mode="mlr")
        assert m.tags(m.tag_logits(m.image_embeds(frames))) == m.tags(official.model.fc(q[0]))


# --- forward and captions -----------------------------------------------------------------------------------

def test_wan_tag2text_forward_matches_vbench(official, ours, frames):
    """Image tokens, tag logits and tags, the tag encoding, the caption decoder's logits (teacher-forced): ours
    against VBench's modules with the same weights."""
    theirs = official.model
    with torch.no_grad():
        e_t, e_o = theirs.visual_encoder(frames), ours.image_embeds(frames)
        le = theirs.label_embed.weight.unsqueeze(0).repeat(len(frames), 1, 1)
        atts = torch.ones(e_t.shape[:-1], dtype=torch.long)
        q = theirs.vision_multi(encoder_embeds=le, encoder_hidden_states=e_t, encoder_attention_mask=atts,
                                return_dict=False, mode="mlr")
        lg_t, lg_o = theirs.fc(q[0]), ours.tag_logits(e_o)
        tags = ours.tags(lg_o)
        tok = ours.tokenizer(tags, padding="max_length", truncation=True, max_length=40, return_tensors="pt")
        ids = tok.input_ids.clone()
        ids[:, 0] = ours.tokenizer.enc_token_id
        enc_t = theirs.tag_encoder(ids, attention_mask=tok.attention_mask, encoder_hidden_states=e_t,
                                   encoder_attention_mask=atts, return_dict=True).last_hidden_state
        enc_o = ours.tag_encoding(tags, e_o)
        dec = ours.tokenizer(["a picture of a street at night"] * len(frames), return_tensors="pt").input_ids
        dec[:, 0] = ours.tokenizer.bos_token_id
        l_t = theirs.text_decoder(dec, attention_mask=torch.ones_like(dec), encoder_hidden_states=enc_t,
                                  return_dict=True, mode="multimodal").logits
        l_o = ours.text_decoder(dec, encoder_hidden_states=enc_o).logits
    diffs = {"image tokens": (_maxdiff(e_t, e_o), float(e_t.abs().max())),
             "tag logits": (_maxdiff(lg_t, lg_o), float(lg_t.abs().max())),
             "tag encoding": (_maxdiff(enc_t, enc_o), float(enc_t.abs().max())),
             "decoder logits": (_maxdiff(l_t, l_o), float(l_t.abs().max()))}
    for k, (d, scale) in diffs.items():
        print(f"[fidelity] tag2text {k}: max |VBench - ours| {d:.3g} (max |VBench| {scale:.3g})")
        assert d <= 1e-5 * max(1.0, scale), k
    assert ours.tags(lg_t) == tags and len(set(tags)) == len(frames) and all(tags)


def test_wan_tag2text_captions_match_vbench(official, ours, frames):
    """VBench's generate on six frames returns, for frame b, the caption of frame b // 3 (its per-beam repeat of
    the tag encoding, repeated again by generate and cut back by BLIP's attention): video_captions == theirs,
    and the per-frame captions differ from theirs (the effect is real, not a no-op)."""
    caps_t, tags_t = official.model.generate(frames, tag_input=None, return_tag_predict=True)
    mine = T2T.video_captions(ours, frames)
    per_frame, tags = ours.generate(frames)
    print(f"[fidelity] tag2text captions, VBench: {caps_t}")
    print(f"[fidelity] tag2text captions, ours per frame: {per_frame}")
    assert mine == caps_t and len(set(per_frame)) > 2
    assert per_frame != caps_t and tags_t == [tags[b // 3] for b in range(len(frames))]


def test_wan_scene_matches_vbench(official, ours):
    """vbench.scene (our dimension: 16 'middle' frames, Tag2Text, the caption check) against VBench's
    scene.scene on the same two videos (its load_video over a stand-in decord reader): the same score and
    per-video results; the scene names chosen so that some frames match and some do not."""
    caps = T2T.video_captions(ours, T2T.frames_tensor(VIDEOS["v0.mp4"]))      # the first video's picks the scene
    words = sorted({w for c in caps for w in c.split()})
    hit = next(w for w in words if 0 < sum(w in c for c in caps) < T2T.FRAMES)
    scenes = [hit, "alley"]
    info = [{"prompt": p, "video_list": [p], "auxiliary_info": {"scene": {"scene": s}}} for p, s in zip(VIDEOS, scenes)]
    with _stand_ins(official.root):
        score_t, per_t = official.scene.scene(official.model, info, "cpu")
    score_o, per_o = vbench.scene(ours, list(VIDEOS.values()), scenes)
    print(f"[fidelity] scene ({scenes}): VBench {score_t:.6f} {[r['video_results'] for r in per_t]}, "
          f"ours {score_o:.6f} {per_o}")
    assert score_o == score_t and per_o == [r["video_results"] for r in per_t] and 0 < score_o < 1


# --- the tiny variant -----------------------------------------------------------------------------------------

def test_wan_tag2text_tiny_seeded():
    """build_tiny: 3429 tags, the same seed the same weights (and a different seed others), the global RNG left
    alone; its docstring says the weights are random."""
    torch.manual_seed(7)
    before = torch.random.get_rng_state()
    a, b, c = T2T.build_tiny(0), T2T.build_tiny(0), T2T.build_tiny(1)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert len(a.tag_array) == T2T.NUM_CLASS == len(set(a.tag_array))
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["fc.W"], sc["fc.W"])
    assert "random" in T2T.build_tiny.__doc__ and "noise" in T2T.__doc__
