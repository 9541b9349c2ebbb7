"""Running the MLCommons reference's language/bert scripts (create_squad_data, accuracy-squad.py,
run.py) from a checkout named by $MLPERF_INFERENCE_DIR: for the comparison tests and scripts/bench_bert.py.

create_squad_data and accuracy-squad import Google BERT's ``tokenization`` module (BasicTokenizer,
whitespace_tokenize, printable_text) from the DeepLearningExamples submodule. When that submodule is
not checked out, a stand-in on transformers' legacy BasicTokenizer (the same algorithm: the Hugging Face
port of Google's) is written and put on the path, and the caller says so.
"""
from __future__ import annotations

from pathlib import Path

TOKENIZATION_STANDIN = '''\
"""Stand-in for Google BERT's tokenization.py (the DeepLearningExamples submodule is not checked out)."""
from transformers.models.bert.tokenization_bert_legacy import BasicTokenizer as _B, whitespace_tokenize  # noqa: F401


def BasicTokenizer(do_lower_case=True):
    return _B(do_lower_case=do_lower_case)


def printable_text(text):
    return text
'''


def tokenization_checked_out(bert_dir: Path) -> bool:
    return (bert_dir / "DeepLearningExamples" / "PyTorch" / "LanguageModeling" / "BERT" / "tokenization.py").is_file()


def reference_pythonpath(bert_dir: Path, work: Path) -> list[str]:
    """The PYTHONPATH entries the reference's scripts need: language/bert itself, and (when the submodule
    is missing) a folder under ``work`` holding the tokenization stand-in."""
    paths = [str(bert_dir)]
    if not tokenization_checked_out(bert_dir):
        shim = work / "tokenization_standin"
        shim.mkdir(parents=True, exist_ok=True)
        (shim / "tokenization.py").write_text(TOKENIZATION_STANDIN)
        paths.append(str(shim))
    return paths
