"""SQuAD v1.1 for BERT: examples, windowed features, n-best post-processing and the v1.1 metrics.

Written here, to behave as the MLCommons reference does (language/bert/create_squad_data.py,
accuracy-squad.py, evaluate_v1.1.py), with the tokeniser the reference itself uses
(``transformers.BertTokenizer(vocab.txt)``, lower-casing):

* examples: the context split on whitespace (space, tab, CR, LF and U+202F) into ``doc_tokens``;
  one example per question, in file order;
* features: query tokens cut at ``MAX_QUERY`` (64); every doc word WordPiece-tokenised; windows of
  ``384 - len(query) - 3`` doc tokens starting every ``DOC_STRIDE`` (128) tokens (the last window
  ends at the document's end); ``[CLS] query [SEP] window [SEP]``, zero-padded to 384; per window
  token: the doc word it came from and whether this window is its "max context" window
  (min(left, right) context + 0.01 x window length, first best wins);
* predictions: per example, over its features' top-20 start and end logits, the valid spans
  (inside the window's doc part, start's max-context window, end >= start, <= 30 tokens), best by
  start + end logit; the WordPiece text is projected back onto the original words with
  ``get_final_text``; duplicates are skipped; no valid span at all gives "empty";
* metrics: evaluate-v1.1's normalisation (lower case, no punctuation, no articles a/an/the, single
  spaces), EM and token F1, each the max over the question's answers, averaged over all questions
  (unanswered: 0), in percent.
"""
from __future__ import annotations

import collections
import dataclasses
import re
import string
from typing import Iterable, Mapping, Sequence

MAX_SEQ = 384
MAX_QUERY = 64
DOC_STRIDE = 128
N_BEST = 20
MAX_ANSWER = 30


class SquadFormatError(ValueError):
    """A SQuAD file that does not follow the v1.1 format (the message names the question)."""


@dataclasses.dataclass
class Example:
    qas_id: str
    question: str
    doc_tokens: list[str]
    answers: list[str]
    paragraph: int          # index of the paragraph (features of one paragraph share its tokenisation)


@dataclasses.dataclass
class Feature:
    example_index: int
    doc_span_index: int
    tokens: list[str]
    doc_offset: int                 # position of the first doc token (len(query) + 2)
    token_to_orig: list[int]        # per doc token of the window: the doc word index
    max_context: list[bool]         # per doc token of the window
    input_ids: list[int]
    seq_len: int                    # real tokens (the rest is padding)

    @property
    def segment_ids(self) -> list[int]:
        return [0] * self.doc_offset + [1] * (self.seq_len - self.doc_offset) + [0] * (MAX_SEQ - self.seq_len)


def _is_ws(c: str) -> bool:
    return c in " \t\r\n" or ord(c) == 0x202F


def split_words(text: str) -> tuple[list[str], list[int]]:
    """Whitespace words and, per character, the index of the word it belongs to (create_squad_data)."""
    words: list[str] = []
    char_to_word: list[int] = []
    prev_ws = True
    for c in text:
        if _is_ws(c):
            prev_ws = True
        else:
            if prev_ws:
                words.append(c)
            else:
                words[-1] += c
            prev_ws = False
        char_to_word.append(len(words) - 1)
    return words, char_to_word


def read_examples(data: Mapping, check_answers: bool = True) -> list[Example]:
    """Examples of a SQuAD v1.1 JSON (the parsed file). With ``check_answers`` every question must
    have at least one answer whose text is found at its ``answer_start`` (SquadFormatError otherwise,
    naming the question): the dev set's ground truth is what accuracy is scored against."""
    out: list[Example] = []
    if not isinstance(data, Mapping) or not isinstance(data.get("data"), list):
        raise SquadFormatError('no top-level "data" list (not a SQuAD v1.1 file)')
    p = 0
    for a, article in enumerate(data["data"]):
        for paragraph in article.get("paragraphs", []) if isinstance(article, Mapping) else []:
            context = paragraph.get("context")
            if not isinstance(context, str):
                raise SquadFormatError(f"article {a}: a paragraph without a context string")
            words, char_to_word = split_words(context)
            for qa in paragraph.get("qas", []):
                if not isinstance(qa, Mapping):
                    raise SquadFormatError(f"article {a}: a question that is not an object")
                qid = qa.get("id")
                if not isinstance(qid, str) or not isinstance(qa.get("question"), str):
                    raise SquadFormatError(f"article {a}: a question without an id or question text")
                answers = qa.get("answers")
                if check_answers:
                    if not answers:
                        raise SquadFormatError(f"question {qid} has no answers")
                    bad = None
                    for ans in answers:
                        if not isinstance(ans, Mapping):
                            raise SquadFormatError(f"question {qid}: an answer that is not an object")
                        text, start = ans.get("text"), ans.get("answer_start")
                        if not isinstance(text, str) or not isinstance(start, int) or not text:
                            raise SquadFormatError(f"question {qid}: an answer without text or integer answer_start")
                        if context[start:start + len(text)] != text and bad is None:
                            bad = (f"question {qid}: answer {text!r} is not at answer_start {start} of its context "
                                   f"(found {context[start:start + len(text)]!r})")
                        elif context[start:start + len(text)] == text:
                            bad = ""
                    if bad:          # not one of the question's answers is where it says
                        raise SquadFormatError(bad + ("" if len(answers) == 1 else
                                                      f"; none of its {len(answers)} answers is at its answer_start"))
                out.append(Example(qid, qa["question"], words, [x.get("text", "") for x in answers or []], p))
            p += 1
    if not out:
        raise SquadFormatError("no questions")
    return out


def _max_context(spans: Sequence[tuple[int, int]], cur: int, pos: int) -> bool:
    best, best_i = None, None
    for i, (start, length) in enumerate(spans):
        end = start + length - 1
        if pos < start or pos > end:
            continue
        score = min(pos - start, end - pos) + 0.01 * length
        if best is None or score > best:
            best, best_i = score, i
    return cur == best_i


def convert(examples: Sequence[Example], tokenizer, max_seq: int = MAX_SEQ, stride: int = DOC_STRIDE,
            max_query: int = MAX_QUERY) -> list[Feature]:
    """Windowed features of ``examples`` (see the module docstring). ``tokenizer``: tokenize(str) ->
    WordPiece tokens and convert_tokens_to_ids(list) -> ids (BertTokenizer)."""
    features: list[Feature] = []
    doc_cache: dict[int, tuple[list[str], list[int]]] = {}
    for ei, ex in enumerate(examples):
        query = tokenizer.tokenize(ex.question)[:max_query]
        if ex.paragraph not in doc_cache:
            sub, tok_to_orig = [], []
            for i, w in enumerate(ex.doc_tokens):
                for t in tokenizer.tokenize(w):
                    tok_to_orig.append(i)
                    sub.append(t)
            doc_cache = {ex.paragraph: (sub, tok_to_orig)}
        doc, tok_to_orig = doc_cache[ex.paragraph]
        room = max_seq - len(query) - 3
        spans: list[tuple[int, int]] = []
        start = 0
        while start < len(doc):
            length = min(len(doc) - start, room)
            spans.append((start, length))
            if start + length == len(doc):
                break
            start += min(length, stride)
        for si, (s0, length) in enumerate(spans):
            tokens = ["[CLS]", *query, "[SEP]", *doc[s0:s0 + length], "[SEP]"]
            ids = list(tokenizer.convert_tokens_to_ids(tokens))
            n = len(ids)
            features.append(Feature(ei, si, tokens, len(query) + 2, tok_to_orig[s0:s0 + length],
                                    [_max_context(spans, si, s0 + i) for i in range(length)],
                                    ids + [0] * (max_seq - n), n))
    return features


# --- post-processing ---------------------------------------------------------------------------------

def _basic_tokenizer():
    from transformers.models.bert.tokenization_bert_legacy import BasicTokenizer

    return BasicTokenizer(do_lower_case=True)


def get_final_text(pred_text: str, orig_text: str, basic=None) -> str:
    """Project the de-tokenised WordPiece prediction onto the original words: align the basic-
    tokenised original text and ``orig_text`` character by character (spaces removed); when the
    alignment fails, the whole ``orig_text``."""
    basic = basic or _basic_tokenizer()
    tok_text = " ".join(basic.tokenize(orig_text))
    start = tok_text.find(pred_text)
    if start == -1:
        return orig_text
    end = start + len(pred_text) - 1

    def strip(text):
        chars, m = [], {}
        for i, c in enumerate(text):
            if c != " ":
                m[len(chars)] = i
                chars.append(c)
        return "".join(chars), m

    orig_ns, orig_map = strip(orig_text)
    tok_ns, tok_map = strip(tok_text)
    if len(orig_ns) != len(tok_ns):
        return orig_text
    inv = {v: k for k, v in tok_map.items()}
    ns_start, ns_end = inv.get(start), inv.get(end)
    if ns_start is None or ns_start not in orig_map or ns_end is None or ns_end not in orig_map:
        return orig_text
    return orig_text[orig_map[ns_start]:orig_map[ns_end] + 1]


def _top(logits: Sequence[float], n: int) -> list[int]:
    return [i for i, _ in sorted(enumerate(logits), key=lambda x: x[1], reverse=True)[:n]]


def predict(examples: Sequence[Example], features: Sequence[Feature],
            logits: Mapping[int, "tuple[Sequence[float], Sequence[float]]"], n_best: int = N_BEST,
            max_answer: int = MAX_ANSWER) -> dict[str, str]:
    """qas_id -> predicted text, from ``logits``: feature index -> (start logits, end logits) (features
    without logits are skipped, as accuracy-squad.py does for an audit's subset)."""
    by_example: dict[int, list[int]] = collections.defaultdict(list)
    for fi, f in enumerate(features):
        by_example[f.example_index].append(fi)
    basic = _basic_tokenizer()
    out: dict[str, str] = {}
    for ei, ex in enumerate(examples):
        prelim = []
        for fi in by_example.get(ei, ()):
            if fi not in logits:
                continue
            f = features[fi]
            start_l, end_l = logits[fi]
            lo, hi = f.doc_offset, f.doc_offset + len(f.token_to_orig)
            ends = _top(end_l, n_best)
            for s in _top(start_l, n_best):
                if not (lo <= s < hi) or not f.max_context[s - lo]:
                    continue
                for e in ends:
                    if not (lo <= e < hi) or e < s or e - s + 1 > max_answer:
                        continue
                    prelim.append((float(start_l[s]) + float(end_l[e]), fi, s, e))
        prelim.sort(key=lambda x: x[0], reverse=True)   # stable: ties keep the reference's order
        if not prelim:                    # no valid span in any window: the reference's nonce answer
            out[ex.qas_id] = "empty"
            continue
        # the reference reports nbest[0]: the best span (de-duplication only affects later entries)
        _, fi, s, e = prelim[0]
        f = features[fi]
        tok = " ".join(f.tokens[s:e + 1]).replace(" ##", "").replace("##", "")
        tok = " ".join(tok.strip().split())
        o0, o1 = f.token_to_orig[s - f.doc_offset], f.token_to_orig[e - f.doc_offset]
        out[ex.qas_id] = get_final_text(tok, " ".join(ex.doc_tokens[o0:o1 + 1]), basic)
    return out


# --- evaluate-v1.1 ------------------------------------------------------------------------------------

_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def f1_score(pred: str, truth: str) -> float:
    p, t = normalize_answer(pred).split(), normalize_answer(truth).split()
    common = collections.Counter(p) & collections.Counter(t)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)


def evaluate(examples: Iterable[Example], predictions: Mapping[str, str]) -> dict[str, float]:
    """{"exact_match", "f1"} in percent over all questions (an unanswered question scores 0)."""
    em = f1 = 0.0
    n = 0
    for ex in examples:
        n += 1
        if ex.qas_id not in predictions:
            continue
        pred = predictions[ex.qas_id]
        em += max(float(normalize_answer(pred) == normalize_answer(a)) for a in ex.answers)
        f1 += max(f1_score(pred, a) for a in ex.answers)
    return {"exact_match": 100.0 * em / max(n, 1), "f1": 100.0 * f1 / max(n, 1)}
