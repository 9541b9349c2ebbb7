"""BERT models: the real MLPerf BERT-Large (downloaded) and the tiny seeded variant (built here).

Both follow the MLPerf ``model.onnx`` interface (language/bert, zenodo 3733910): int64 inputs
``input_ids``, ``input_mask``, ``segment_ids`` (batch, seq) and float32 outputs
``output_start_logits``, ``output_end_logits`` (batch, seq); a sample's response is the two
stacked, (seq, 2) float32, as the reference's onnxruntime_SUT emits it.

Real variant (what the reference's Makefile fetches, each file checked against its pinned md5,
``DOWNLOADS``): model.onnx (record 3733910), vocab.txt (record 3733868, the TF checkpoint's
record) and, for --backend=pytorch, model.pytorch (record 3733896, a BertForQuestionAnswering state
dict run with the reference's bert_config.json, ``REAL_CONFIG``). Once downloaded, the ONNX is also
checked by content (its input and output names), since an md5 says nothing about what the file is.

Tiny variant: ``BertForQuestionAnswering`` (hidden 64, 2 layers, 2 heads, max_position 512 so 384
tokens fit) with weights from TINY_SEED, a WordPiece vocabulary built from the synthetic corpus's
words (code.bert.dataset.tiny_vocab: [PAD] [UNK] [CLS] [SEP] [MASK] as BERT's, then letters,
##letters, punctuation and whole words), exported with dynamic batch and sequence axes.
"""
from __future__ import annotations

from pathlib import Path

from code.common.errors import HarnessError, MissingDataError
from code.common.fileio import download, staged_path, write_json

INPUTS = ("input_ids", "input_mask", "segment_ids")
OUTPUTS = ("output_start_logits", "output_end_logits")
ONNX_NAME = "model.onnx"
VOCAB_NAME = "vocab.txt"
TORCH_NAME = "model.pytorch"
# file name -> (url, md5). md5s pinned from mlcommons/mlperf-automations
# script/get-ml-model-bert-large-squad/meta.yaml: "onnx,fp32" (model.onnx, record 3733910), "pytorch,fp32"
# (model.pytorch, record 3733896) and the vocab.txt of record 3733868 (its "packed" prehook_deps).
DOWNLOADS = {
    ONNX_NAME: ("https://zenodo.org/records/3733910/files/model.onnx?download=1", "819b25b19cd8e59080c10892689750ca"),
    VOCAB_NAME: ("https://zenodo.org/records/3733868/files/vocab.txt?download=1", "64800d5d8528ce344256daf115d4965e"),
    TORCH_NAME: ("https://zenodo.org/records/3733896/files/model.pytorch?download=1",
                 "00fbcbfaebfa20d87ac9885120a6e9b4"),
}
TINY_WEIGHTS = "tiny_bert.pt"
TINY_SEED = 20261201
TINY_CONFIG = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128,
               "max_position_embeddings": 512, "type_vocab_size": 2, "hidden_act": "gelu"}
# language/bert/bert_config.json of the reference (BERT-Large, uncased vocabulary of 30522)
REAL_CONFIG = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
               "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 4096,
               "max_position_embeddings": 512, "num_attention_heads": 16, "num_hidden_layers": 24,
               "type_vocab_size": 2, "vocab_size": 30522}
FIX_REAL = "make download_model BENCHMARKS=bert"


# --- downloads ---------------------------------------------------------------------------------------

def check_onnx(path: Path, fix: str) -> None:
    """Content check: an ONNX with the MLPerf BERT inputs and outputs (the graph only, not the weights)."""
    import onnx

    try:
        m = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - a damaged or foreign file: one line
        raise MissingDataError(f"{path} is not a readable ONNX model ({type(e).__name__}: {e})".replace("\n", " "),
                               fix) from None
    inits = {i.name for i in m.graph.initializer}
    ins = [i.name for i in m.graph.input if i.name not in inits]
    outs = [o.name for o in m.graph.output]
    if sorted(ins) != sorted(INPUTS) or sorted(outs) != sorted(OUTPUTS):
        raise MissingDataError(f"{path} is not the MLPerf BERT ONNX: inputs {ins}, outputs {outs} (expected "
                               f"{list(INPUTS)} -> {list(OUTPUTS)})", fix)


def download_real(model_dir: Path, with_torch: bool = False, log=print) -> Path:
    """model.onnx and vocab.txt (and model.pytorch for --backend=pytorch), each checked against its pinned
    md5 (a mismatch: one-line error, file discarded); the ONNX also by content."""
    for name in [ONNX_NAME, VOCAB_NAME] + ([TORCH_NAME] if with_torch else []):
        url, md5 = DOWNLOADS[name]
        log(f"[download_model] {url} -> {model_dir / name} (md5 {md5})")
        check = (lambda p: check_onnx(p, FIX_REAL)) if name == ONNX_NAME else None
        download(url, model_dir / name, md5=md5, check=check, fix=FIX_REAL)
    return model_dir / ONNX_NAME


# --- torch models ------------------------------------------------------------------------------------

def _qa(config: dict, vocab_size: int | None = None):
    from transformers import BertConfig, BertForQuestionAnswering

    cfg = dict(config)
    if vocab_size is not None:
        cfg["vocab_size"] = vocab_size
    return BertForQuestionAnswering(BertConfig(**cfg)).eval()


def _wrapper():
    import torch

    class Logits(torch.nn.Module):
        """(input_ids, input_mask, segment_ids) -> (start logits, end logits): the ONNX contract."""

        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, input_ids, input_mask, segment_ids):
            o = self.net(input_ids=input_ids, attention_mask=input_mask, token_type_ids=segment_ids, return_dict=True)
            return o.start_logits, o.end_logits

    return Logits


def logits_module(net):
    return _wrapper()(net).eval()


def vocab_size(model_dir: Path) -> int:
    p = model_dir / VOCAB_NAME
    if not p.is_file():
        raise MissingDataError(f"vocabulary not found: {p}", "make download_model BENCHMARKS=bert MODEL_VARIANT=tiny")
    return sum(1 for _ in p.open(encoding="utf-8"))


def load_tiny_torch(model_dir: Path):
    import torch

    p = model_dir / TINY_WEIGHTS
    fix = "make download_model BENCHMARKS=bert MODEL_VARIANT=tiny"
    if not p.is_file():
        raise MissingDataError(f"model not found: {p}", fix)
    net = _qa(TINY_CONFIG, vocab_size(model_dir))
    net.load_state_dict(torch.load(p, weights_only=True))
    return net.eval()


def load_real_torch(model_dir: Path):
    import torch

    p = model_dir / TORCH_NAME
    if not p.is_file():
        raise MissingDataError(f"PyTorch checkpoint not found: {p}",
                               "make download_model BENCHMARKS=bert RUN_ARGS=--backend=pytorch")
    net = _qa(REAL_CONFIG)
    state = torch.load(p, map_location="cpu", weights_only=False)
    state = state.get("model", state) if isinstance(state, dict) else state
    # the reference loads with strict=False; here only buffers may be missing (position_ids, which
    # newer transformers versions build themselves): a missing weight is a wrong checkpoint
    res = net.load_state_dict(state, strict=False)
    missing = [k for k in res.missing_keys if not k.endswith("position_ids")]
    if missing:
        raise MissingDataError(f"{p} is not the MLPerf BERT-Large checkpoint: {len(missing)} weights missing "
                               f"(e.g. {missing[0]})", "make download_model BENCHMARKS=bert RUN_ARGS=--backend=pytorch")
    return net.eval()


def eager_factory(source_dir, spec, device, dtype):
    """The pytorch backend's eager module: BertForQuestionAnswering on the weights in ``source_dir``."""
    d = Path(source_dir)
    net = load_tiny_torch(d) if (d / TINY_WEIGHTS).exists() and spec.extra.get("variant") == "tiny" else load_real_torch(d)
    return logits_module(net), INPUTS, OUTPUTS


def _calibrate(net, vocab: int) -> None:
    """Make the seeded model behave like a trained one where post-processing can tell: [PAD]
    positions get low logits (about -8, real tokens' top 20 are above +3) and real tokens' logits
    spread (std ~2). Random weights leave padding logits among the top 20 over 384 positions, where
    the reference's n-best would depend on padding, and near-equal span scores (std 0.1) that float
    rounding reorders. [PAD]'s embedding is set along one seeded direction (so the final hidden
    state at padding is one tight cluster), the span head is scaled x10 and pushed away from it."""
    import torch

    g = torch.Generator().manual_seed(TINY_SEED + 1)
    h = TINY_CONFIG["hidden_size"]
    with torch.no_grad():
        d = torch.randn(h, generator=g)
        net.bert.embeddings.word_embeddings.weight[0] = d / d.norm() * 20
        ids = torch.randint(5, vocab, (8, 384), generator=g)
        mask = torch.zeros(8, 384, dtype=torch.long)
        for i in range(8):
            mask[i, :60 + 40 * i] = 1
        hid = net.bert(input_ids=ids * mask, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).last_hidden_state
        u = hid[mask == 0].mean(0) - hid[mask == 1].mean(0)
        net.qa_outputs.weight.mul_(10).sub_(12 * u / u.norm() ** 2)
        net.qa_outputs.bias.zero_()


def build_tiny(model_dir: Path, vocab: list[str], log=print) -> Path:
    """Write the tiny vocabulary, the seeded weights and the ONNX (dynamic batch and sequence axes)."""
    import warnings

    import torch

    model_dir.mkdir(parents=True, exist_ok=True)
    with staged_path(model_dir / VOCAB_NAME, suffix=".txt") as tmp:
        tmp.write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    torch.manual_seed(TINY_SEED)
    net = _qa(TINY_CONFIG, len(vocab))
    _calibrate(net, len(vocab))
    with staged_path(model_dir / TINY_WEIGHTS, suffix=".pt") as tmp:
        torch.save(net.state_dict(), tmp)
    x = torch.ones(2, 384, dtype=torch.int64)
    dest = model_dir / ONNX_NAME
    axes = {n: {0: "batch_size", 1: "seq_len"} for n in INPUTS + OUTPUTS}
    with staged_path(dest, suffix=".onnx") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(logits_module(net), (x, x, x), str(tmp), input_names=list(INPUTS),
                          output_names=list(OUTPUTS), dynamic_axes=axes, opset_version=17, dynamo=False)
    write_json(model_dir / "model.json", {"variant": "tiny", "seed": TINY_SEED, "config": TINY_CONFIG,
                                          "vocab_size": len(vocab)})
    log(f"[download_model] built tiny bert ({len(vocab)}-token vocabulary) -> {dest}")
    return dest


def onnx_seq_dim(path: Path) -> int | None:
    """The ONNX's sequence length when static (the MLPerf export fixes 384), None when dynamic."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    for i in m.graph.input:
        if i.name == INPUTS[0]:
            dims = i.type.tensor_type.shape.dim
            if len(dims) == 2 and dims[1].HasField("dim_value"):
                return int(dims[1].dim_value)
            return None
    raise HarnessError(f"{path} has no input {INPUTS[0]}", FIX_REAL, 4)


def read_vocab(model_dir: Path, fix: str) -> Path:
    p = model_dir / VOCAB_NAME
    if not p.is_file():
        raise MissingDataError(f"vocabulary not found: {p}", fix)
    return p

