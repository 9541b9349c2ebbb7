"""BERT bad input: one line of cause naming the file or question, the fixing command, exit 3, nothing
half-written left behind. Also the real downloads (the Zenodo model files, SQuAD dev-v1.1.json)
against fixture files served from 127.0.0.1 through $MLPERF_DOWNLOAD_MIRROR."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from code.common.errors import HarnessError, MissingDataError
from tests.conftest import no_partials, private_scratch, route, run_main
from tests.test_cli_errors import _assert_user_error

TINY = ("--benchmarks=bert", "--model_variant=tiny")
FIX_DATA = "make download_data BENCHMARKS=bert MODEL_VARIANT=tiny"


@pytest.fixture()
def scratch(tiny_bert, tmp_path):
    return private_scratch(tiny_bert, tmp_path, ("models/bert", "data/squad", "preprocessed_data/squad"))


def _edit_squad(root: Path, edit) -> Path:
    p = root / "data" / "squad" / "tiny" / "dev-v1.1.json"
    data = json.loads(p.read_text())
    edit(data["data"][3]["paragraphs"][0]["qas"][1])
    p.write_text(json.dumps(data))
    return p


def _shift(qa):                     # every answer of the question off by one character
    for a in qa["answers"]:
        a["answer_start"] += 1


def _no_answers(qa):
    qa["answers"] = []


@pytest.mark.parametrize("edit,needle", [
    (_shift, "question tiny0031: answer "),
    (_no_answers, "question tiny0031 has no answers"),
])
def test_squad_file_with_a_missing_answer_span(scratch, edit, needle):
    env, root = scratch
    shutil.rmtree(root / "preprocessed_data")
    p = _edit_squad(root, edit)
    r = run_main("--action=preprocess_data", *TINY, env=env)
    _assert_user_error(r, 3, needle, str(p), FIX_DATA)
    if edit is _shift:
        assert "is not at answer_start" in r.stderr
    assert not (root / "preprocessed_data" / "squad" / "tiny").exists()
    no_partials(root)


def test_squad_file_not_json(scratch):
    env, root = scratch
    (root / "data" / "squad" / "tiny" / "dev-v1.1.json").write_text('{"data": [')
    r = run_main("--action=preprocess_data", *TINY, env=env)
    _assert_user_error(r, 3, "is not readable JSON", FIX_DATA)


def test_tiny_data_needs_the_tiny_model(scratch):
    env, root = scratch
    shutil.rmtree(root / "models")
    r = run_main("--action=download_data", *TINY, env=env)
    _assert_user_error(r, 3, "vocab", "make download_model BENCHMARKS=bert MODEL_VARIANT=tiny")


def test_missing_features_say_preprocess(scratch):
    env, root = scratch
    shutil.rmtree(root / "preprocessed_data")
    r = run_main("--action=run_harness", *TINY, "--scenarios=Offline", "--test_mode=AccuracyOnly", env=env)
    _assert_user_error(r, 3, "features", "make preprocess_data BENCHMARKS=bert MODEL_VARIANT=tiny")


def test_real_local_folder_without_squad_says_where_to_put_it(tmp_path, harness_env):
    (tmp_path / "squad").mkdir()
    env = {**harness_env, "MLPERF_SCRATCH_PATH": str(tmp_path / "scratch")}
    r = run_main("--action=download_data", "--benchmarks=bert", f"--data_dir={tmp_path / 'squad'}", env=env)
    _assert_user_error(r, 3, "dev-v1.1.json", "SQuAD-explorer")


def test_damaged_log_entry_is_one_line(tmp_path):
    from code.bert.accuracy import read_log
    from code.common.errors import RunError

    (tmp_path / "log.json").write_text(json.dumps([{"qsl_idx": 0, "seq_id": 0, "data": "00" * 7}]))
    with pytest.raises(RunError, match="7 bytes"):
        read_log(tmp_path / "log.json", 10)
    (tmp_path / "log.json").write_text(json.dumps([{"qsl_idx": 11, "seq_id": 0, "data": "00" * 8}]))
    with pytest.raises(RunError, match="outside the 10 features"):
        read_log(tmp_path / "log.json", 10)


# --- real downloads against a local mirror -------------------------------------------------------------
def _serve(mirror, monkeypatch, name: str, body: bytes, pin: bool = True) -> None:
    """Serve ``body`` at the URL the code pins for ``name``; ``pin``: pin the fixture's own md5 for it
    (the served fixture is not the real file)."""
    from code.bert import model

    url = model.DOWNLOADS[name][0]
    mirror.routes[route(url)] = body
    if pin:
        monkeypatch.setitem(model.DOWNLOADS, name, (url, hashlib.md5(body).hexdigest()))


def test_bert_download_model_pinned_md5(mirror, tmp_path, tiny_bert, monkeypatch):
    """model.onnx (3733910, pinned md5, then checked by content), vocab.txt (3733868), model.pytorch
    (3733896, only for --backend=pytorch). Under the shipped pin the served fixture is refused (one line)."""
    from code.bert import model

    onnx = (Path(tiny_bert["MLPERF_SCRATCH_PATH"]) / "models" / "bert" / "tiny" / "model.onnx").read_bytes()
    _serve(mirror, monkeypatch, model.ONNX_NAME, onnx, pin=False)
    with pytest.raises(HarnessError, match=f"md5 is not {model.DOWNLOADS[model.ONNX_NAME][1]}") as e:
        model.download_real(tmp_path / "m", log=lambda *_: None)
    assert "\n" not in e.value.cause and not (tmp_path / "m" / "model.onnx").exists()
    _serve(mirror, monkeypatch, model.ONNX_NAME, onnx)
    _serve(mirror, monkeypatch, model.VOCAB_NAME, b"[PAD]\n[UNK]\n")
    _serve(mirror, monkeypatch, model.TORCH_NAME, b"torch state")
    out = tmp_path / "m"
    assert model.download_real(out, log=lambda *_: None).read_bytes() == onnx
    assert (out / "vocab.txt").read_bytes() == b"[PAD]\n[UNK]\n" and not (out / "model.pytorch").exists()
    model.download_real(out, with_torch=True, log=lambda *_: None)
    assert (out / "model.pytorch").read_bytes() == b"torch state"
    (out / "model.onnx").unlink()
    assert not [h for h in mirror.hits if "/api/" in h]           # no record API lookup
    mirror.routes[route(model.DOWNLOADS[model.ONNX_NAME][0])] = onnx[:-10]
    with pytest.raises(HarnessError, match="md5"):                 # truncated upstream: the md5 catches it
        model.download_real(out, log=lambda *_: None)
    assert not (out / "model.onnx").exists()
    bad = b"not an onnx model" * 10                                # right md5, wrong content: the check catches it
    _serve(mirror, monkeypatch, model.ONNX_NAME, bad)
    with pytest.raises(MissingDataError, match="not a readable ONNX|not the MLPerf BERT ONNX"):
        model.download_real(out, log=lambda *_: None)
    assert not (out / "model.onnx").exists()
    no_partials(tmp_path)


def test_bert_download_squad_dev(mirror, tmp_path, monkeypatch):
    from code.bert import dataset

    body = json.dumps({"version": "1.1", "data": []}).encode()
    mirror.routes[route(dataset.SQUAD_URL)] = body
    with pytest.raises(HarnessError, match="sha256"):             # the pinned sha256 of the real file
        dataset.download_squad(tmp_path, log=lambda *_: None)
    assert not (tmp_path / "dev-v1.1.json").exists()
    monkeypatch.setattr(dataset, "SQUAD_SHA256", hashlib.sha256(body).hexdigest())
    assert dataset.download_squad(tmp_path, log=lambda *_: None).read_bytes() == body
    no_partials(tmp_path)
