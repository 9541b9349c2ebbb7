"""BERT against the MLCommons reference (language/bert), run as separate processes from the read-only
official tree ($MLPERF_INFERENCE_DIR; cwd and every output in tmp).

What the reference needs that is not here, and what it gets instead:
* the vocabulary: our tiny WordPiece vocab.txt, through the reference's own ``BertTokenizer(vocab)``
  (create_squad_data's caller) and accuracy-squad.py's ``--vocab_file``;
* Google BERT's ``tokenization`` module (the DeepLearningExamples submodule, not in the tree): a
  stand-in on transformers' BasicTokenizer (code.bert.official), used only by get_final_text and,
  unavoidably, the same class our squad.get_final_text uses.

The set is synthetic SQuAD v1.1 made to hit the conversion's edges: contexts of 3-6 windows (doc
stride 128), a question longer than max_query_length 64, whitespace the reference splits on (tab,
CR, LF, U+202F) and some it does not (U+00A0), accents, CJK characters, zero-width and control
characters, words that tokenise to nothing, unknown words ([UNK]), several paragraphs and questions.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import official_root

# create_squad_data's conversion of two SQuAD files; per feature what our features.npz/json hold
CONVERT = textwrap.dedent('''\
    import json, sys
    from transformers import BertTokenizer
    from create_squad_data import read_squad_examples, convert_examples_to_features
    tok = BertTokenizer(sys.argv[1])
    out = {}
    for name, path in zip(sys.argv[3::2], sys.argv[4::2]):
        feats = []
        convert_examples_to_features(read_squad_examples(path, False, False), tok, 384, 128, 64, False,
                                     feats.append, False)
        out[name] = [dict(e=f.example_index, s=f.doc_span_index, tokens=f.tokens, ids=f.input_ids, mask=f.input_mask,
                          seg=f.segment_ids, map={str(k): v for k, v in f.token_to_orig_map.items()},
                          max={str(k): v for k, v in f.token_is_max_context.items()}) for f in feats]
    json.dump(out, open(sys.argv[2], "w"))
    ''')


def edge_squad(seed: int = 5) -> dict:
    """Synthetic SQuAD v1.1 over the tiny vocabulary's words with the edge cases listed above."""
    from code.bert.dataset import tiny_words

    rng = np.random.default_rng(seed)
    words = tiny_words()
    odd = ["caf\u00e9", "na\u00efve", "\u4e2d\u6587", "x\u200by", "\u200b", "\x07", "qqq", "Zz\u00c9", "(1895-1943).",
           "a\u00a0b", "\u00bd", "---", "K\u00f6nig"]
    seps = [" "] * 20 + ["\t", "\n", "\r\n", "\u202f", "  "]
    articles = []
    for a, n_words in enumerate([520, 60, 300, 35, 700]):
        paragraphs = []
        for p in range(1 + a % 2):
            toks = [str(rng.choice(odd)) if rng.random() < 0.06 else str(rng.choice(words)) for _ in range(n_words)]
            toks = [t.capitalize() if rng.random() < 0.1 else t for t in toks]
            context, starts = "", []
            for t in toks:
                starts.append(len(context))
                context += t + str(rng.choice(seps))
            qas = []
            for q in range(3):
                k, m = int(rng.integers(len(toks) - 4)), int(rng.integers(1, 4))
                text = context[starts[k]:starts[k + m - 1] + len(toks[k + m - 1])]
                n_q = 90 if (a, p, q) == (0, 0, 1) else int(rng.integers(3, 12))     # one question past 64 tokens
                question = " ".join(str(rng.choice(words)) for _ in range(n_q)) + "?"
                qas.append({"id": f"e{a}{p}{q}", "question": question,
                            "answers": [{"text": text, "answer_start": starts[k]}]})
            paragraphs.append({"context": context, "qas": qas})
        articles.append({"title": f"edge_{a}", "paragraphs": paragraphs})
    return {"version": "1.1", "data": articles}


def ours(squad_json: Path, vocab: Path, out: Path):
    """What our preprocess_data writes for ``squad_json`` (the same calls BertBenchmark.preprocess_data
    makes): the feature arrays and the post-processing metadata, read back from disk."""
    from code.bert import dataset, squad

    _, examples = dataset.read_squad(squad_json, "x")
    dataset.write_preprocessed(out, examples, squad.convert(examples, dataset.tokenizer(vocab)), {})
    ex, feats = dataset.load_meta(out, "x")
    return ex, feats, dict(np.load(out / dataset.FEATURES_NPZ))


def compare(ref: list[dict], feats, z: dict) -> int:
    """Every reference feature equal to ours (ids, mask, segments, tokens, maps); returns the count."""
    assert len(ref) == len(feats) == len(z["input_ids"])
    for i, (a, b) in enumerate(zip(ref, feats)):
        assert (a["e"], a["s"], a["tokens"]) == (b.example_index, b.doc_span_index, b.tokens), i
        assert a["ids"] == z["input_ids"][i].tolist(), i
        assert a["mask"] == z["input_mask"][i].tolist(), i
        assert a["seg"] == z["segment_ids"][i].tolist(), i
        assert a["map"] == {str(b.doc_offset + k): v for k, v in enumerate(b.token_to_orig)}, i
        assert a["max"] == {str(b.doc_offset + k): v for k, v in enumerate(b.max_context)}, i
    return len(ref)


def reference_env(root: Path, work: Path) -> dict:
    import os

    from code.bert.official import reference_pythonpath

    return dict(os.environ, PYTHONPATH=os.pathsep.join(reference_pythonpath(root, work)), PYTHONDONTWRITEBYTECODE="1")


@pytest.fixture()
def edge_set(tmp_path):
    from code.bert.dataset import tiny_vocab

    (tmp_path / "vocab.txt").write_text("\n".join(tiny_vocab()) + "\n")
    (tmp_path / "edge.json").write_text(json.dumps(edge_squad(), ensure_ascii=False))
    return tmp_path / "edge.json", tmp_path / "vocab.txt"


def test_bert_preprocessing_equals_reference_create_squad_data(tiny_bert, edge_set, tmp_path):
    """create_squad_data.read_squad_examples + convert_examples_to_features (doc stride 128, max_seq_length
    384, max_query_length 64) on (a) the tiny set's dev-v1.1.json, against the features.npz the harness
    feeds the model, and (b) the edge-case set, against our preprocessing of it."""
    root = official_root("language", "bert")
    scratch = Path(tiny_bert["MLPERF_SCRATCH_PATH"])
    edge, vocab = edge_set
    tiny_json, tiny_vocab = scratch / "data/squad/tiny/dev-v1.1.json", scratch / "models/bert/tiny/vocab.txt"
    assert tiny_vocab.read_text() == vocab.read_text()      # one vocabulary for both sets
    r = subprocess.run([sys.executable, "-c", CONVERT, str(vocab), str(tmp_path / "ref.json"), "tiny", str(tiny_json),
                        "edge", str(edge)], cwd=tmp_path, env=reference_env(root, tmp_path), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    ref = json.loads((tmp_path / "ref.json").read_text())

    from code.bert import dataset

    pre = scratch / "preprocessed_data" / "squad" / "tiny"
    _, tiny_feats = dataset.load_meta(pre, "x")
    n_tiny = compare(ref["tiny"], tiny_feats, dict(np.load(pre / dataset.FEATURES_NPZ)))
    _, edge_feats, z = ours(edge, vocab, tmp_path / "ours")
    n_edge = compare(ref["edge"], edge_feats, z)
    windows = sum(1 for f in edge_feats if f.doc_span_index > 0)
    assert windows >= 10 and max(f.doc_span_index for f in edge_feats) >= 4     # doc stride really splits
    assert any(f.doc_offset == 64 + 2 for f in edge_feats)                       # the query cut at 64 tokens
    assert (z["input_ids"] == 1).any()                                           # [UNK] pieces
    print(f"FIGURE bert preprocessing identical features (input_ids, input_mask, segment_ids, tokens, maps): "
          f"tiny set {n_tiny}/{len(ref['tiny'])}, edge set {n_edge}/{len(ref['edge'])} ({windows} later windows)")


def answer_words(data: dict) -> list[tuple[int, int]]:
    """Per question (file order): the first and last doc word of its first answer."""
    from code.bert.squad import split_words

    out = []
    for a in data["data"]:
        for p in a["paragraphs"]:
            _, char_to_word = split_words(p["context"])
            for qa in p["qas"]:
                ans = qa["answers"][0]
                out.append((char_to_word[ans["answer_start"]], char_to_word[ans["answer_start"] + len(ans["text"]) - 1]))
    return out


def planted_log(feats, z: dict, words: list[tuple[int, int]], path: Path, seed: int = 11) -> int:
    """An accuracy log for ``feats``: seeded noise logits; for two features in three a peak at the answer's
    first and last token (one token off now and then), some entries as short as the feature (padded by
    the scorers), one feature missing, one logged twice (the reference keeps the last).
    Returns the number of entries."""
    rng = np.random.default_rng(seed)
    entries = []
    for i, f in enumerate(feats):
        if i == 3:
            continue
        x = rng.normal(0, 2.0, (384, 2)).astype(np.float32)
        w0, w1 = words[f.example_index]
        at = [k for k, w in enumerate(f.token_to_orig) if w0 <= w <= w1]
        if i % 3 and at:
            x[f.doc_offset + at[0], 0] += 12
            x[f.doc_offset + at[-1] + int(rng.integers(-1, 2) if rng.random() < 0.3 else 0), 1] += 12
        if i % 5 == 0:
            x = x[:int(z["seq_len"][i])]
        entries.append({"seq_id": len(entries), "qsl_idx": i, "data": x.tobytes().hex().upper()})
    # a feature logged again, peaked at the wrong span (the window's first word): its example's answer
    # follows this entry in accuracy-squad.py, so a scorer that kept the first entry would differ
    per_example = np.bincount([f.example_index for f in feats])
    i = next(i for i, f in enumerate(feats) if i % 3 and per_example[f.example_index] == 1
             and words[f.example_index][0] > f.token_to_orig[0] + 1)
    x = rng.normal(0, 2.0, (384, 2)).astype(np.float32)
    x[feats[i].doc_offset] += 30
    entries.append({"seq_id": len(entries), "qsl_idx": i, "data": x.tobytes().hex().upper()})
    path.write_text(json.dumps(entries))
    return len(entries)


def test_bert_scoring_equals_reference_accuracy_squad(edge_set, tmp_path):
    """accuracy-squad.py (its own feature conversion, n-best 20, max answer 30, get_final_text, then
    evaluate_v1.1.py) and our accuracy.score on one planted log over the edge-case set: F1 and EM equal
    to 4 significant digits (in fact to 1e-6)."""
    root = official_root("language", "bert")
    edge, vocab = edge_set
    ex, feats, z = ours(edge, vocab, tmp_path / "ours")
    log = tmp_path / "mlperf_log_accuracy.json"
    n = planted_log(feats, z, answer_words(json.loads(edge.read_text())), log)
    r = subprocess.run([sys.executable, str(root / "accuracy-squad.py"), "--vocab_file", str(vocab), "--val_data",
                        str(edge), "--log_file", str(log), "--out_file", str(tmp_path / "predictions.json"),
                        "--features_cache_file", str(tmp_path / "eval_features.pickle")],
                       cwd=tmp_path, env=reference_env(root, tmp_path), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    theirs = json.loads(next(x for x in r.stdout.splitlines()[::-1] if x.startswith("{")))

    from code.bert.accuracy import score

    got = score(log, ex, feats, tmp_path / "accuracy.txt", 0.0, tiny=True)["metrics"]
    print(f"FIGURE bert scoring accuracy-squad.py F1 {theirs['f1']:.6f} EM {theirs['exact_match']:.6f}; ours F1 "
          f"{got['F1']:.6f} EM {got['exact_match']:.6f} ({n} log entries, {len(ex)} questions)")
    assert 20 < theirs["f1"] < 90, theirs        # neither all right nor all wrong: the post-processing is exercised
    assert f"{theirs['f1']:.4g}" == f"{got['F1']:.4g}" and f"{theirs['exact_match']:.4g}" == f"{got['exact_match']:.4g}"
    assert abs(theirs["f1"] - got["F1"]) < 1e-6 and abs(theirs["exact_match"] - got["exact_match"]) < 1e-6
    # the predictions themselves, question by question
    preds = json.loads((tmp_path / "predictions.json").read_text())
    from code.bert import accuracy, squad

    mine = squad.predict(ex, feats, accuracy.read_log(log, len(feats)))
    assert mine == preds
