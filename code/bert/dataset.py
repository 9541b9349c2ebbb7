"""SQuAD v1.1 dev: download (checksummed), the tiny synthetic set, preprocessing into features, the QSL.

Preprocessed layout (``preprocessed_data/squad[/tiny]``):
  features.npz   input_ids, input_mask, segment_ids (N, 384) int32 and seq_len (N,) int32, the
                 reference's zero-padded features in order (LoadGen's qsl_idx = row);
  features.json  what post-processing needs: per example qas_id, doc words, answers; per feature
                 example index, tokens, doc offset, token->word map, max-context flags;
  manifest.json  what they were made from (input fingerprints): a stale set is rebuilt.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from code.bert import squad
from code.common.benchmark import QSL
from code.common.errors import MissingDataError
from code.common.fileio import download, staged_dir

# The reference's Makefile URL (a GitHub blob with ?raw=true, redirected to raw.githubusercontent.com)
# and the file's sha256 (not in the reference; the one published for this file by, e.g.,
# tensorflow_datasets' SQuAD checksums: 4,854,279 bytes).
SQUAD_URL = "https://github.com/rajpurkar/SQuAD-explorer/blob/master/dataset/dev-v1.1.json?raw=true"
SQUAD_SHA256 = "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9"
SQUAD_NAME = "dev-v1.1.json"
FEATURES_NPZ = "features.npz"
FEATURES_JSON = "features.json"
MANIFEST = "manifest.json"

# --- tiny synthetic corpus -------------------------------------------------------------------------
TINY_SEED = 20261202
TINY_PARAGRAPHS = 40
TINY_LONG = 6                  # paragraphs long enough to need 2-3 windows (doc_stride matters)
TINY_QUESTIONS = 5             # per paragraph
_ONSETS = ("b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "pl", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "é")
_SUFFIXES = ("ing", "ed", "er", "ly", "s", "tion")
_PUNCT = list(".,;:!?()'\"-")


def tiny_words() -> list[str]:
    """The synthetic corpus's 400 distinct word stems (seeded)."""
    rng = np.random.default_rng(TINY_SEED)
    words: list[str] = []
    while len(words) < 400:
        w = "".join(_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))]
                    for _ in range(int(rng.integers(1, 4))))
        if w not in words:
            words.append(w)
    return words


def tiny_vocab() -> list[str]:
    """BERT-style WordPiece vocabulary for the tiny corpus: the five specials at BERT's names, then
    punctuation, digits, letters, ##letters, ##suffixes and the first 250 stems whole (the other 150
    and every inflected form are split into pieces, so token->word maps and ##-joining matter)."""
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    digits = [str(d) for d in range(10)]
    stems = [w.replace("é", "e") for w in tiny_words()[:250]]   # lower-cased, accents stripped: as tokenised
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *_PUNCT, *digits, *letters,
             *("##" + c for c in letters + digits), *("##" + s for s in _SUFFIXES)]
    vocab += [w for w in dict.fromkeys(stems) if w not in vocab]
    return vocab


def _tiny_paragraph(rng, words: list[str], n_words: int) -> str:
    out, sentence = [], 0
    for i in range(n_words):
        w = words[int(rng.integers(len(words)))]
        r = rng.random()
        if r < 0.08:
            w += _SUFFIXES[int(rng.integers(len(_SUFFIXES)))]
        elif r < 0.11:
            w = str(int(rng.integers(1000, 2100)))
        elif r < 0.13:
            w = f"({w})"
        if sentence == 0 or rng.random() < 0.08:
            w = w[:1].upper() + w[1:]
        sentence += 1
        if sentence > 6 and rng.random() < 0.15 or i == n_words - 1:
            w += "." if rng.random() < 0.8 else "!"
            sentence = 0
        elif rng.random() < 0.07:
            w += ","
        out.append(w)
    return " ".join(out)


def tiny_squad_planted() -> dict:
    """Synthetic SQuAD v1.1 JSON with planted answers: contexts of 20-90 words (TINY_LONG of
    130-200 words, 2-3 windows), TINY_QUESTIONS questions each, whose answer is a 1-3 word span of the context
    (its punctuation stripped) and whose words come from around it."""
    rng = np.random.default_rng(TINY_SEED + 1)
    words = tiny_words()
    data = []
    for p in range(TINY_PARAGRAPHS):
        n = int(rng.integers(130, 200)) if p < TINY_LONG else int(rng.integers(20, 90))
        context = _tiny_paragraph(rng, words, n)
        spans, pos = [], 0
        for w in context.split(" "):
            spans.append((pos, w))
            pos += len(w) + 1
        qas = []
        for q in range(TINY_QUESTIONS):
            k = int(rng.integers(len(spans) - 3))
            m = int(rng.integers(1, 4))
            start, first = spans[k]
            text = " ".join(w for _, w in spans[k:k + m]).strip(".,;:!?()'\"-")
            if not text:
                text = first.strip(".,;:!?()'\"-") or first
            begin = context.index(text, start)
            near = [w.strip(".,;:!?()'\"-").lower() for _, w in spans[max(0, k - 6):k + 8]]
            question = "what " + " ".join(near[i] for i in sorted(rng.choice(len(near), min(6, len(near)), replace=False))) + "?"
            qas.append({"id": f"tiny{p:03d}{q}", "question": question,
                        "answers": [{"text": text, "answer_start": begin}]})
        data.append({"title": f"tiny_{p:03d}", "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": "1.1", "data": data}


# --- download ----------------------------------------------------------------------------------------

def download_squad(dest_dir: Path, log=print) -> Path:
    dest = dest_dir / SQUAD_NAME
    log(f"[download_data] {SQUAD_URL} -> {dest} (sha256 {SQUAD_SHA256[:16]}...)")
    return download(SQUAD_URL, dest, sha256=SQUAD_SHA256, fix="make download_data BENCHMARKS=bert")


def read_squad(path: Path, fix: str, check_answers: bool = True) -> tuple[dict, list[squad.Example]]:
    if not path.is_file():
        raise MissingDataError(f"SQuAD file not found: {path}", fix)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise MissingDataError(f"{path} is not readable JSON ({type(e).__name__}: {e})".replace("\n", " "), fix) from None
    try:
        return data, squad.read_examples(data, check_answers)
    except squad.SquadFormatError as e:
        raise MissingDataError(f"{path}: {e}", fix) from None


def tokenizer(vocab: Path):
    from transformers import BertTokenizer

    return BertTokenizer(str(vocab))


def features_arrays(features: Sequence[squad.Feature]) -> dict[str, np.ndarray]:
    n = len(features)
    ids = np.zeros((n, squad.MAX_SEQ), np.int32)
    mask = np.zeros_like(ids)
    seg = np.zeros_like(ids)
    lens = np.zeros(n, np.int32)
    for i, f in enumerate(features):
        ids[i] = f.input_ids
        mask[i, :f.seq_len] = 1
        seg[i, f.doc_offset:f.seq_len] = 1
        lens[i] = f.seq_len
    return {"input_ids": ids, "input_mask": mask, "segment_ids": seg, "seq_len": lens}


def write_preprocessed(out: Path, examples, features, manifest: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with staged_dir(out) as stage:
        np.savez(stage / FEATURES_NPZ, **features_arrays(features))
        meta = {"examples": [{"id": e.qas_id, "words": e.doc_tokens, "answers": e.answers} for e in examples],
                "features": [{"e": f.example_index, "s": f.doc_span_index, "tokens": f.tokens, "o": f.doc_offset,
                              "map": f.token_to_orig, "max": [int(x) for x in f.max_context], "n": f.seq_len}
                             for f in features]}
        (stage / FEATURES_JSON).write_text(json.dumps(meta), encoding="utf-8")
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def is_current(out: Path, manifest: dict) -> bool:
    try:
        return (json.loads((out / MANIFEST).read_text()) == manifest and (out / FEATURES_NPZ).is_file()
                and (out / FEATURES_JSON).is_file())
    except (OSError, ValueError):
        return False


def fingerprint(p: Path) -> list:
    st = p.stat()
    return [p.name, st.st_size, st.st_mtime_ns]


def load_meta(pre: Path, fix: str) -> tuple[list[squad.Example], list[squad.Feature]]:
    """Examples and features (without input ids) for post-processing, from features.json."""
    p = pre / FEATURES_JSON
    if not p.is_file():
        raise MissingDataError(f"preprocessed SQuAD features not found: {p}", fix)
    try:
        meta = json.loads(p.read_text(encoding="utf-8"))
        examples = [squad.Example(e["id"], "", e["words"], e["answers"], -1) for e in meta["examples"]]
        features = [squad.Feature(f["e"], f["s"], f["tokens"], f["o"], f["map"], [bool(x) for x in f["max"]], [],
                                  f["n"]) for f in meta["features"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise MissingDataError(f"{p} is damaged ({type(e).__name__}: {e})", fix) from None
    return examples, features


class SquadQSL(QSL):
    """All features are read when the QSL is made (int32, 4.5 KiB each: the whole dev set is 50 MB),
    so load/unload only record which samples LoadGen holds."""

    def __init__(self, pre: Path, performance_count: int, fix: str):
        p = pre / FEATURES_NPZ
        if not p.is_file():
            raise MissingDataError(f"preprocessed SQuAD features not found: {p}", fix)
        try:
            with np.load(p) as z:
                self.input_ids = np.ascontiguousarray(z["input_ids"])
                self.input_mask = np.ascontiguousarray(z["input_mask"])
                self.segment_ids = np.ascontiguousarray(z["segment_ids"])
                self.seq_len = np.ascontiguousarray(z["seq_len"])
        except Exception as e:  # noqa: BLE001 - truncated or foreign file: one line
            raise MissingDataError(f"{p} is damaged ({type(e).__name__}: {e})".replace("\n", " "), fix) from None
        n = len(self.seq_len)
        if self.input_ids.shape != (n, squad.MAX_SEQ) or n == 0:
            raise MissingDataError(f"{p}: input_ids has shape {self.input_ids.shape}, expected ({n}, {squad.MAX_SEQ})", fix)
        self.total_count = n
        self.performance_count = min(performance_count or n, n)
        self.loaded: set[int] = set()

    def load(self, indices: Sequence[int]) -> None:
        self.loaded = set(int(i) for i in indices)

    def unload(self, indices: Sequence[int]) -> None:
        self.loaded = set()
