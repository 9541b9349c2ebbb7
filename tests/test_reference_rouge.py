"""rougeLsum's sentence splitter: NLTK's trained punkt_tab, fetched as ``nltk.download`` fetches it, loaded
as ``nltk.sent_tokenize`` loads it, and a score without it marked unofficial.

There is no network here, so the punkt_tab package is made locally: NLTK's PunktTrainer trained on local
text (code.common.llm.download.tiny_punkt_params), written in the punkt_tab format, zipped as NLTK's
package (members under ``punkt_tab/``) and listed in an index XML with its size and checksums; both are
served from 127.0.0.1 at NLTK's own URLs through $MLPERF_DOWNLOAD_MIRROR (the ``mirror`` fixture).

Also the helpers the reference tests of the LLMs share (official_env, run_official): the official scripts
run as they are, in a temporary folder, with NLTK_DATA at the punkt_tab folder our scorer used."""
from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from code.common.errors import HarnessError
from code.common.llm import download as dl
from code.common.llm import rouge
from tests.conftest import PY, no_partials, route

PKG_URL = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/tokenizers/punkt_tab.zip"
ABBREV_TEXT = ("Mr. Smith met Dr. Brown at the station. They talked for an hour. Mrs. Jones was late again. "
               "Prof. Lee spoke. It rained in St. Paul all day.")


# --- shared by the reference tests ---------------------------------------------------------------------

SHIM_EVALUATE = '''
"""Stand-in for `evaluate` (evaluate.load("rouge") fetches the metric's script from the Hugging Face hub):
its rouge metric with use_aggregator=False is rouge-score's RougeScorer F-measure per sample."""
from rouge_score import rouge_scorer


class _Rouge:
    def compute(self, predictions, references, rouge_types=None, use_aggregator=True, use_stemmer=False, tokenizer=None):
        types = rouge_types or ["rouge1", "rouge2", "rougeL", "rougeLsum"]
        sc = rouge_scorer.RougeScorer(types, use_stemmer=use_stemmer, tokenizer=tokenizer)
        scores = [sc.score(r, p) for r, p in zip(references, predictions)]
        return {t: [s[t].fmeasure for s in scores] for t in types}


def load(name, *a, **k):
    assert name == "rouge", name
    return _Rouge()
'''


def official_env(tmp_path: Path, nltk_data: Path, *extra_path: Path) -> dict:
    """The environment of an official script: PYTHONPATH with the `evaluate` stand-in and a `datasets`
    stub (imported, never used, by the scoring scripts), then ``extra_path``; NLTK_DATA at ``nltk_data``
    (the folder our scorer loaded punkt_tab from: both sides split sentences with the same model, NLTK's
    own loading path on theirs); no bytecode written (the official tree is read-only in CI)."""
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "evaluate.py").write_text(SHIM_EVALUATE)
    if not (shim / "datasets.py").exists():
        (shim / "datasets.py").write_text("def load_dataset(*a, **k):\n    raise RuntimeError('offline')\n\n"
                                          "load_from_disk = load_dataset\nconcatenate_datasets = load_dataset\n")
    assert (rouge.punkt_dir(nltk_data) / rouge.LANGUAGE).is_dir(), nltk_data
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), *map(str, extra_path)]),
            "NLTK_DATA": str(nltk_data), "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1",
            "TRANSFORMERS_OFFLINE": "1"}


def run_official(argv: list[str], tmp_path: Path, env: dict, timeout: int = 600) -> str:
    """Run an official script (argv after the interpreter) in ``tmp_path/run``; its stdout."""
    cwd = tmp_path / "run"
    cwd.mkdir(exist_ok=True)
    r = subprocess.run([PY, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def parse_result_dict(text: str) -> dict:
    """The ``{...}`` result line the official evaluators print (numpy scalars unwrapped)."""
    import ast
    import re

    line = [ln for ln in text.splitlines() if ln.startswith("{") and "rouge1" in ln][-1]
    return ast.literal_eval(re.sub(r"np\.\w+\(([^)]*)\)", r"\1", line))


def four_digits(x) -> str:
    return f"{float(x):.4g}"


def write_accuracy_log(path: Path, outputs: dict[int, list[int]], dtype: str = "int32") -> Path:
    """A LoadGen mlperf_log_accuracy.json: one entry per sample, the output token ids as hex."""
    import numpy as np

    entries = [{"seq_id": n, "qsl_idx": int(i), "data": np.asarray(t, dtype=dtype).tobytes().hex(),
                "token_count": len(t)} for n, (i, t) in enumerate(outputs.items())]
    path.write_text(json.dumps(entries))
    return path


# --- a punkt_tab package as NLTK's server publishes it --------------------------------------------------

@functools.lru_cache(maxsize=1)
def punkt_package() -> bytes:
    """punkt_tab.zip: a PunktTrainer model in the punkt_tab format, members under punkt_tab/english/
    (trained once per session)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("punkt_tab/", "")
        z.writestr("punkt_tab/english/", "")
        for name, text in dl.punkt_params_files(dl.tiny_punkt_params()).items():
            z.writestr(f"punkt_tab/english/{name}", text)
    return buf.getvalue()


def index_xml(zip_bytes: bytes, *, size: int | None = None, md5: str | None = None, sha256: str | None = "") -> bytes:
    """NLTK's index.xml with one package entry for punkt_tab (NLTK's attributes: size, unzipped_size,
    checksum (md5), sha256_checksum when given, subdir, unzip)."""
    unzipped = sum(i.file_size for i in zipfile.ZipFile(io.BytesIO(zip_bytes)).infolist())
    sha = hashlib.sha256(zip_bytes).hexdigest() if sha256 == "" else sha256
    attrs = {"id": "punkt_tab", "name": "Punkt Tokenizer Models (tab)", "subdir": "tokenizers", "url": PKG_URL,
             "size": str(len(zip_bytes) if size is None else size), "unzipped_size": str(unzipped),
             "checksum": md5 or hashlib.md5(zip_bytes).hexdigest(), "unzip": "1"}
    if sha:
        attrs["sha256_checksum"] = sha
    pkg = " ".join(f'{k}="{v}"' for k, v in attrs.items())
    return (f'<?xml version="1.0"?>\n<nltk_data>\n<packages>\n<package id="words" url="https://x/words.zip" size="1" '
            f'unzipped_size="1" checksum="0" subdir="corpora"/>\n<package {pkg} />\n</packages>\n'
            f'<collections />\n</nltk_data>\n').encode()


def publish(server, zip_bytes: bytes, **index_kw) -> None:
    server.routes[route(dl.NLTK_INDEX_URL)] = index_xml(zip_bytes, **index_kw)
    server.routes[route(PKG_URL)] = zip_bytes


def nltk_sent_tokenize(nltk_data: Path, texts: list[str]) -> list[list[str]]:
    """nltk.sent_tokenize in a fresh interpreter with NLTK_DATA=nltk_data (NLTK's own search and load)."""
    code = "import json, sys, nltk\nprint(json.dumps([nltk.sent_tokenize(t) for t in json.loads(sys.argv[1])]))"
    r = subprocess.run([PY, "-c", code, json.dumps(texts)], env={**os.environ, "NLTK_DATA": str(nltk_data),
                       "PYTHONDONTWRITEBYTECODE": "1"}, capture_output=True, text=True, timeout=120, cwd=str(nltk_data))
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def quiet(*a):
    return None


# --- the download ---------------------------------------------------------------------------------------

def test_rouge_punkt_tab_fetched_as_nltk_does_through_the_mirror(mirror, tmp_path, monkeypatch):
    """Index XML at NLTK's default URL, then the zip it names, size and sha256 checked, unzipped into
    <scratch>/nltk_data/tokenizers/punkt_tab; then the scorer splits as nltk.sent_tokenize does with
    NLTK_DATA at that folder (and not as the untrained fallback), and a second call fetches nothing."""
    monkeypatch.setenv("MLPERF_SCRATCH_PATH", str(tmp_path / "scratch"))
    z = punkt_package()
    publish(mirror, z)
    got = dl.download_punkt_tab(fix="make download_data BENCHMARKS=llama3_1_8b", log=quiet)
    data = rouge.nltk_data_dir()
    assert data == tmp_path / "scratch" / "nltk_data" and got == data / "tokenizers" / "punkt_tab"
    assert mirror.hits == [route(dl.NLTK_INDEX_URL), route(PKG_URL)]
    assert sorted(p.name for p in (got / "english").iterdir()) == [
        "abbrev_types.txt", "collocations.tab", "ortho_context.tab", "sent_starters.txt"]
    assert (data / "tokenizers" / "punkt_tab.zip").read_bytes() == z            # kept beside it, as NLTK keeps it
    rec = json.loads((data / rouge.RECORD).read_text())
    assert rec["variant"] == "official" and rec["sha256"] == hashlib.sha256(z).hexdigest() and rec["size"] == len(z)
    no_partials(tmp_path)

    split = rouge.splitter()
    assert split.trained and "NLTK punkt_tab (sha256 " in split.name, split.name
    texts = [ABBREV_TEXT, "One. Two three. Dr. Who?"]
    theirs = nltk_sent_tokenize(data, texts)
    ours = [split.split(t) for t in texts]
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    untrained = [PunktSentenceTokenizer().tokenize(t) for t in texts]
    print(f"FIGURE rouge punkt_tab: ours {len(ours[0])} sentences, nltk.sent_tokenize {len(theirs[0])}, "
          f"untrained Punkt {len(untrained[0])}")
    assert ours == theirs and ours != untrained            # the trained model is the one loaded
    assert rouge.unofficial_reasons("reference", "make download_data BENCHMARKS=gptj") == []

    dl.download_punkt_tab(fix="x", log=quiet)
    assert len(mirror.hits) == 2                             # reused: nothing fetched again


@pytest.mark.parametrize("bad", ["sha256", "md5", "size", "member", "missing", "unreachable"])
def test_rouge_punkt_tab_bad_package_leaves_nothing(mirror, tmp_path, bad):
    """NLTK's checks: sha256 when the index has one (else md5), the size, members only under punkt_tab/;
    a failure is a one-line error naming the make command, and nothing is left in place."""
    z = punkt_package()
    if bad == "sha256":
        publish(mirror, z, sha256="0" * 64)
    elif bad == "md5":
        publish(mirror, z, sha256=None, md5="0" * 32)
    elif bad == "size":
        publish(mirror, z, size=len(z) + 1)
    elif bad == "member":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zz:
            zz.writestr("punkt_tab/english/collocations.tab", "")
            zz.writestr("other/evil.txt", "x")
        publish(mirror, buf.getvalue())
    elif bad == "missing":
        mirror.routes[route(dl.NLTK_INDEX_URL)] = index_xml(z).replace(b'id="punkt_tab"', b'id="punkt"')
    data = tmp_path / "nltk_data"
    with pytest.raises(HarnessError) as e:
        dl.download_punkt_tab(data, fix="make download_data BENCHMARKS=mixtral_8x7b", log=quiet)
    why = {"sha256": "sha256", "md5": "md5", "size": "NLTK's index says", "member": "outside punkt_tab/",
           "missing": "lists no package punkt_tab", "unreachable": "could not fetch NLTK's data index"}[bad]
    assert why in e.value.cause and "\n" not in e.value.cause, e.value.cause
    assert "make download_data BENCHMARKS=mixtral_8x7b" in e.value.fix
    assert not (data / "tokenizers" / "punkt_tab").exists() and not (data / rouge.RECORD).exists()
    no_partials(tmp_path)


# --- a score without punkt_tab is unofficial ------------------------------------------------------------

def test_rouge_run_without_punkt_tab_is_unofficial(tiny_llama31, tmp_path, monkeypatch, mirror):
    """The accuracy of Llama3.1-8B's reference variant (the tiny model's tokenizer stands in for Llama 3's;
    a references.json and an accuracy log written here): scored with no punkt_tab, accuracy.txt gets
    the UNOFFICIAL line and accuracy() returns it; after make download_data's punkt_tab fetch, the same
    log scores officially, and rougeLsum moves (the trained model does not end a sentence at "Dr.")."""
    from code.common.benchmarks import implementation
    from code.main import plan

    scratch = tmp_path / "scratch"
    tiny_ckpt = Path(tiny_llama31["MLPERF_SCRATCH_PATH"]) / "models" / "llama3_1_8b" / "tiny" / "checkpoint"
    (scratch / "models" / "llama3_1_8b").mkdir(parents=True)
    (scratch / "models" / "llama3_1_8b" / "checkpoint").symlink_to(tiny_ckpt)
    pre = scratch / "preprocessed_data" / "llama3_1_8b"
    pre.mkdir(parents=True)
    targets = ["On the mat the cat sat.", "He ate soup quickly. Dr. Brown came home late."]
    (pre / "references.json").write_text(json.dumps({"targets": targets}))
    monkeypatch.setenv("MLPERF_SCRATCH_PATH", str(scratch))
    monkeypatch.setenv("MLPERF_BUILD_DIR", str(tmp_path / "build"))
    _, settings = plan(["--action=run_harness", "--benchmarks=llama3.1-8b", "--scenarios=Offline"])
    b = implementation(settings[0].spec)(settings[0])
    tok = b.tokenizer()
    log = write_accuracy_log(tmp_path / "mlperf_log_accuracy.json", {
        0: tok("The cat sat Dr. on the mat.")["input_ids"],
        1: tok("Dr. Brown came home late. he ate Mr. soup quickly")["input_ids"]})

    without = b.accuracy(str(log), str(tmp_path / "a"))
    line = ("UNOFFICIAL: rougeLsum used an untrained sentence splitter (NLTK punkt_tab missing); "
            "run make download_data BENCHMARKS=llama3_1_8b")
    assert without["unofficial"] == [line[len("UNOFFICIAL: "):]]
    assert line + "\n" in (tmp_path / "a" / "accuracy.txt").read_text()

    publish(mirror, punkt_package())
    b.download_punkt_tab()
    with_ = b.accuracy(str(log), str(tmp_path / "b"))
    text = (tmp_path / "b" / "accuracy.txt").read_text()
    print(f"FIGURE rouge unofficial: rougeLsum untrained {without['metrics']['rougeLsum']}, "
          f"punkt_tab {with_['metrics']['rougeLsum']}")
    assert with_["unofficial"] == [] and "UNOFFICIAL" not in text and "NLTK punkt_tab (sha256" in text
    assert with_["metrics"]["rougeLsum"] != without["metrics"]["rougeLsum"]
    assert with_["metrics"]["rouge1"] == without["metrics"]["rouge1"]


def test_rouge_tiny_punkt_tab_is_local_and_marked_tiny(tmp_path, monkeypatch):
    """The tiny variant's download_data writes a locally trained punkt_tab (no network), marked tiny, in its
    own folder; the tiny scorer loads it and is never marked unofficial. (The official scripts load that
    folder through NLTK's own path in tests/test_reference_llama3_1_8b.py and _mixtral.py.)"""
    monkeypatch.setenv("MLPERF_SCRATCH_PATH", str(tmp_path / "scratch"))
    d = rouge.nltk_data_dir("tiny")
    assert rouge.unofficial_reasons("tiny", "x") == [] and not rouge.splitter("tiny").trained
    dl.install_tiny_punkt_tab(log=quiet)
    assert d == tmp_path / "scratch" / "nltk_data" / "tiny" and rouge.read_record(d)["variant"] == "tiny"
    split = rouge.splitter("tiny")
    assert split.trained and "tiny punkt_tab" in split.name and len(split.split(ABBREV_TEXT)) == 5
    assert not rouge.splitter().trained                      # the reference variant's folder is another one
