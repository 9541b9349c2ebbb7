"""Mixtral-8x7B and Llama-3.1-8B downloads (code.mixtral_8x7b.download, code.llama3_1_8b.download) with
the network mocked as in tests/test_llm_downloads.py: R2 metadata and files served from 127.0.0.1 through
$MLPERF_DOWNLOAD_MIRROR (the real urllib/fileio paths), Hugging Face through FakeHub. The pinned md5s and
sample counts are swapped for the fixtures' own with monkeypatch; the code paths are the real ones."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from code.common.errors import HarnessError
from tests.conftest import no_partials, route
from tests.test_llm_downloads import FakeHub, http_error, md5, no_network


def quiet(*a):
    return None


@pytest.fixture()
def hub(monkeypatch, tmp_path):
    return FakeHub(monkeypatch, tmp_path)


def hf_folder(d: Path | None, model_type: str, shards: int = 2, extra: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """A minimal HF safetensors folder (written under ``d`` when given): config, index, shards, tokenizer."""
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    index = {"metadata": {}, "weight_map": {f"w{i}": n for i, n in enumerate(names)}}
    files = {"config.json": json.dumps({"model_type": model_type}).encode(),
             "model.safetensors.index.json": json.dumps(index).encode(),
             **{n: n.encode() * 20 for n in names},
             "tokenizer.json": b'{"version": "1.0"}', "tokenizer_config.json": b"{}", **(extra or {})}
    if d is not None:
        for n, b in files.items():
            (d / n).parent.mkdir(parents=True, exist_ok=True)
            (d / n).write_bytes(b)
    return files


# --- Mixtral-8x7B: data -----------------------------------------------------------------------------

MIX = {"OpenOrca": 2, "GSM8K": 2, "MBXP": 2}


def mixtral_pickle(path: Path, mix: dict[str, int] = MIX, drop: str | None = None, mbxp_id: str | None = None) -> bytes:
    import pandas as pd

    rows = []
    for ds, n in mix.items():
        for i in range(n):
            sid = (mbxp_id or f"python_entry_{i}") if ds == "MBXP" else f"{ds.lower()}.{i}"
            rows.append({"dataset": ds, "id": sid, "question": f"q{i}", "input": f"<s> [INST] {ds} {i} [/INST]",
                         "tok_input": [1, 733, 16289, 28793, i], "gt_output": f"a{i}",
                         "tok_stop_sequence": [13] if ds == "MBXP" else None})
    df = pd.DataFrame(rows)
    if drop:
        df = df.drop(columns=[drop])
    df.to_pickle(path)
    return path.read_bytes()


def calibration_pickle(path: Path) -> bytes:
    import pandas as pd

    pd.DataFrame({"dataset": ["GSM8K"], "input": ["x"], "tok_input": [[1, 2]], "output": ["y"]}).to_pickle(path)
    return path.read_bytes()


@pytest.fixture()
def mixdata(mirror, tmp_path, monkeypatch):
    """The Mixtral validation and calibration sets on the mirror (6 rows, 2 of each dataset; 1 row)."""
    from code.mixtral_8x7b import download as mx

    pkl = mixtral_pickle(tmp_path / "v.pkl")
    cal = calibration_pickle(tmp_path / "c.pkl")
    mirror.add_r2(mx.DATASET_URI, mx.DATA_BASE, {mx.DATASET_PKL: pkl})
    mirror.add_r2(mx.CALIBRATION_URI, mx.DATA_BASE, {mx.CALIBRATION_PKL: cal})
    monkeypatch.setattr(mx, "DATASET_MD5", md5(pkl))
    monkeypatch.setattr(mx, "CALIBRATION_MD5", md5(cal))
    monkeypatch.setattr(mx, "SAMPLES", 6)
    monkeypatch.setattr(mx, "PER_DATASET", dict(MIX))
    return SimpleNamespace(mx=mx, pkl=pkl, cal=cal)


def test_mixtral_data_from_r2_verified_then_reused_calibration_on_request(mixdata, mirror, tmp_path):
    mx = mixdata.mx
    dest = tmp_path / "data"
    out = mx.download_data(dest, log=quiet)
    assert out == dest / mx.DATASET_PKL and out.read_bytes() == mixdata.pkl
    assert not (dest / mx.CALIBRATION_PKL).exists()                          # only with include_calibration
    assert not any("calibration" in h for h in mirror.hits)
    rec = json.loads((dest / mx.DATA_RECORD).read_text())
    assert rec["files"][mx.DATASET_PKL] == {"md5": md5(mixdata.pkl), "source": "mlcommons-r2"}
    n = len(mirror.hits)
    mx.download_data(dest, log=quiet)
    assert len(mirror.hits) == n                                              # present and md5-valid: reused
    mx.download_data(dest, log=quiet, include_calibration=True)
    assert (dest / mx.CALIBRATION_PKL).read_bytes() == mixdata.cal
    assert all(mx.DATASET_PKL not in h for h in mirror.hits[n:])             # only the calibration set fetched
    assert set(json.loads((dest / mx.DATA_RECORD).read_text())["files"]) == {mx.DATASET_PKL, mx.CALIBRATION_PKL}
    df = mx.check_dataset(out)                                                # what the harness calls
    assert len(df) == 6 and set(df["dataset"]) == set(MIX)
    no_partials(dest)


def test_mixtral_data_md5_mismatch_leaves_nothing(mixdata, mirror, tmp_path, monkeypatch):
    mx = mixdata.mx
    mirror.add_r2(mx.DATASET_URI, mx.DATA_BASE, {mx.DATASET_PKL: mixdata.pkl + b"x"}, md5={mx.DATASET_PKL: md5(mixdata.pkl)})
    with pytest.raises(HarnessError) as e:
        mx.download_data(tmp_path / "data", log=quiet)
    assert "checksum mismatch" in e.value.cause and "mlc-r2-downloader.sh" in e.value.fix
    assert not (tmp_path / "data" / mx.DATASET_PKL).exists() and not (tmp_path / "data" / mx.DATA_RECORD).exists()
    no_partials(tmp_path)
    monkeypatch.setattr(mx, "DATASET_MD5", "0" * 32)                          # upstream list disagrees with the pin
    with pytest.raises(HarnessError) as e:
        mx.download_data(tmp_path / "data", log=quiet)
    assert "pins" in e.value.cause and "\n" not in e.value.cause and e.value.fix


@pytest.mark.parametrize("bad, why", [
    (dict(mix={"OpenOrca": 2, "GSM8K": 2, "MBXP": 1}), "holds 5 rows, expected 6"),
    (dict(drop="gt_output"), "no column(s) gt_output"),
    (dict(mix={"OpenOrca": 2, "GSM8K": 3, "MBXP": 1}), "dataset mix is GSM8K 3, MBXP 1, OpenOrca 2, expected"),
    (dict(mix={"OpenOrca": 2, "GSM8K": 2, "HumanEval": 2}), "dataset mix is"),
    (dict(mbxp_id="pythonentry"), "is not <lang>_<entry_point>"),
])
def test_mixtral_data_content_checked_one_line_error(tmp_path, monkeypatch, bad, why):
    from code.mixtral_8x7b import download as mx

    monkeypatch.setattr("huggingface_hub.HfApi", no_network)
    local = tmp_path / "local"
    local.mkdir()
    body = mixtral_pickle(local / mx.DATASET_PKL, **bad)
    monkeypatch.setattr(mx, "DATASET_MD5", md5(body))                         # the md5 passes: content decides
    monkeypatch.setattr(mx, "SAMPLES", 6)
    monkeypatch.setattr(mx, "PER_DATASET", dict(MIX))
    with pytest.raises(HarnessError) as e:
        mx.download_data(tmp_path / "data", data_dir=str(local), log=quiet)
    assert why in e.value.cause and "\n" not in e.value.cause and "--data_dir" in e.value.fix
    assert not (tmp_path / "data").exists() or not list((tmp_path / "data").iterdir())


def test_mixtral_data_bad_content_from_r2_is_removed(mixdata, mirror, tmp_path, monkeypatch):
    mx = mixdata.mx
    monkeypatch.setattr(mx, "SAMPLES", 7)
    with pytest.raises(HarnessError) as e:
        mx.download_data(tmp_path / "data", log=quiet)
    assert "holds 6 rows, expected 7" in e.value.cause and "file removed" in e.value.cause and e.value.fix == mx.FIX_DATA
    assert not (tmp_path / "data" / mx.DATASET_PKL).exists() and not (tmp_path / "data" / mx.DATA_RECORD).exists()


def test_mixtral_data_dir_folder_or_file_copied(tmp_path, monkeypatch, mirror):
    from code.mixtral_8x7b import download as mx

    local = tmp_path / "local" / "mixtral_8x7b"                                # as the R2 downloader names it
    local.mkdir(parents=True)
    body = mixtral_pickle(local / mx.DATASET_PKL)
    cal = calibration_pickle(local / mx.CALIBRATION_PKL)
    monkeypatch.setattr(mx, "DATASET_MD5", md5(body))
    monkeypatch.setattr(mx, "CALIBRATION_MD5", md5(cal))
    monkeypatch.setattr(mx, "SAMPLES", 6)
    monkeypatch.setattr(mx, "PER_DATASET", dict(MIX))
    out = mx.download_data(tmp_path / "d1", data_dir=str(tmp_path / "local"), log=quiet, include_calibration=True)
    assert out.read_bytes() == body and (tmp_path / "d1" / mx.CALIBRATION_PKL).read_bytes() == cal
    renamed = tmp_path / "mine.pkl"                                           # the file itself: its md5 decides
    renamed.write_bytes(body)
    out = mx.download_data(tmp_path / "d2", data_dir=str(renamed), log=quiet)
    assert out == tmp_path / "d2" / mx.DATASET_PKL and out.read_bytes() == body
    assert mirror.hits == []                                                  # nothing fetched
    renamed.write_bytes(body + b"junk")
    with pytest.raises(HarnessError) as e:
        mx.download_data(tmp_path / "d3", data_dir=str(renamed), log=quiet)
    assert "not the official file" in e.value.cause and "--data_dir" in e.value.fix
    with pytest.raises(HarnessError) as e:
        mx.download_data(tmp_path / "d3", data_dir=str(tmp_path / "empty"), log=quiet)
    assert "not found in" in e.value.cause and "--data_dir" in e.value.fix


def test_mixtral_data_plain_url_when_metadata_unreachable(mirror, tmp_path, monkeypatch):
    from code.mixtral_8x7b import download as mx

    body = mixtral_pickle(tmp_path / "v.pkl")
    mirror.routes[route(f"{mx.DATA_BASE}/{mx.DATASET_PKL}")] = body           # no .uri/.md5 published
    monkeypatch.setattr(mx, "DATASET_MD5", md5(body))
    monkeypatch.setattr(mx, "SAMPLES", 6)
    monkeypatch.setattr(mx, "PER_DATASET", dict(MIX))
    out = mx.download_data(tmp_path / "data", log=quiet)
    assert out.read_bytes() == body
    assert json.loads((tmp_path / "data" / mx.DATA_RECORD).read_text())["files"][mx.DATASET_PKL]["source"].startswith("plain URL")
    monkeypatch.setattr(mx, "DATASET_MD5", "1" * 32)
    with pytest.raises(HarnessError) as e:
        mx.download_data(tmp_path / "data2", log=quiet)
    assert "checksum mismatch" in e.value.cause and not (tmp_path / "data2" / mx.DATASET_PKL).exists()


# --- Mixtral-8x7B: model ----------------------------------------------------------------------------

MIX_BASE = "https://inference.mlcommons-storage.org/mixtral_8x7b/mixtral-8x7b-instruct-v0.1"


def test_mixtral_pins_are_the_mlcommons_list():
    from code.mixtral_8x7b import download as mx

    assert len(mx.CHECKPOINT_MD5) == 46
    assert sum(p.endswith(".safetensors") for p in mx.CHECKPOINT_MD5) == 39
    assert {"model.safetensors.index.json", "config.json", "generation_config.json", "tokenizer.json", "tokenizer.model",
            "tokenizer_config.json", "special_tokens_map.json"} <= set(mx.CHECKPOINT_MD5)
    assert all(len(m) == 32 and int(m, 16) >= 0 for m in mx.CHECKPOINT_MD5.values())


def test_mixtral_model_from_r2_every_file_verified_then_reused(mirror, tmp_path, monkeypatch):
    from code.mixtral_8x7b import download as mx

    files = hf_folder(None, "mixtral", extra={"tokenizer.model": b"sp"})
    mirror.add_r2(mx.CHECKPOINT_URI, MIX_BASE, {**files, "unpinned.bin": b"?"})
    monkeypatch.setattr(mx, "CHECKPOINT_MD5", {p: md5(b) for p, b in files.items()})
    dest = tmp_path / "model"
    mx.download_model(dest, log=quiet)
    assert all((dest / p).read_bytes() == b for p, b in files.items())
    assert not (dest / "unpinned.bin").exists()                               # only the pinned files
    rec = json.loads((dest / mx.COMPLETE).read_text())
    assert rec["source"] == "mlcommons-r2" and rec["model_type"] == "mixtral" and len(rec["files_md5"]) == len(files)
    n = len(mirror.hits)
    mx.download_model(dest, log=quiet)                                        # complete: nothing fetched
    assert len(mirror.hits) == n
    no_partials(dest)


def test_mixtral_model_md5_mismatch_leaves_nothing(mirror, tmp_path, monkeypatch):
    from code.mixtral_8x7b import download as mx

    files = hf_folder(None, "mixtral")
    pins = {p: md5(b) for p, b in files.items()}
    shard = "model-00002-of-00002.safetensors"
    mirror.add_r2(mx.CHECKPOINT_URI, MIX_BASE, {**files, shard: b"corrupt"}, md5=pins)
    monkeypatch.setattr(mx, "CHECKPOINT_MD5", pins)
    with pytest.raises(HarnessError) as e:
        mx.download_model(tmp_path / "model", log=quiet)
    assert "checksum mismatch" in e.value.cause and shard in e.value.cause and e.value.fix
    assert not (tmp_path / "model" / shard).exists() and not (tmp_path / "model" / mx.COMPLETE).exists()
    no_partials(tmp_path)


def test_mixtral_checkpoint_checks(tmp_path, mirror, monkeypatch):
    from code.mixtral_8x7b import download as mx

    d = tmp_path / "c"
    files = hf_folder(d, "mixtral")
    assert mx.check_checkpoint(d)["model_type"] == "mixtral"
    (d / "model-00002-of-00002.safetensors").write_bytes(b"")
    with pytest.raises(HarnessError) as e:
        mx.check_checkpoint(d)
    assert "1 of 2 safetensors shards" in e.value.cause and e.value.fix == mx.FIX_MODEL
    (d / "model-00002-of-00002.safetensors").write_bytes(b"ok")
    (d / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(HarnessError) as e:
        mx.check_checkpoint(d)
    assert "not 'mixtral'" in e.value.cause and e.value.fix
    # The R2 copy lacks a shard its index names: verified files, but no completion record.
    del files["model-00002-of-00002.safetensors"]
    mirror.add_r2(mx.CHECKPOINT_URI, MIX_BASE, files)
    monkeypatch.setattr(mx, "CHECKPOINT_MD5", {p: md5(b) for p, b in files.items()})
    with pytest.raises(HarnessError) as e:
        mx.download_model(tmp_path / "m", log=quiet)
    assert "missing or empty" in e.value.cause and not (tmp_path / "m" / mx.COMPLETE).exists()


def test_mixtral_model_verified_offline_when_metadata_unreachable(mirror, tmp_path, monkeypatch):
    from code.mixtral_8x7b import download as mx

    dest = tmp_path / "model"                                                 # e.g. filled by the official script
    files = hf_folder(dest, "mixtral")
    monkeypatch.setattr(mx, "CHECKPOINT_MD5", {p: md5(b) for p, b in files.items()})
    mx.download_model(dest, log=quiet)                                        # the mirror has no metadata: 404
    assert json.loads((dest / mx.COMPLETE).read_text())["source"].startswith("local folder")
    (dest / mx.COMPLETE).unlink()
    (dest / "tokenizer.json").write_bytes(b"tampered")
    with pytest.raises(HarnessError) as e:
        mx.download_model(dest, log=quiet)
    assert "tokenizer.json" in e.value.cause and "md5" in e.value.cause and e.value.fix
    assert not (dest / mx.COMPLETE).exists()


# --- Llama-3.1-8B: data -----------------------------------------------------------------------------

def cnn_json(n: int, drop: str | None = None, tok=None) -> bytes:
    recs = []
    for i in range(n):
        r = {"instruction": {"llama": "Summarize the following news article in 128 tokens.\n{input}"},
             "input": f"article {i} — “quoted”", "tok_input": tok if tok is not None else [128000, 9370, i],
             "output": f"highlights {i}"}
        if drop:
            del r[drop]
        recs.append(r)
    return json.dumps(recs, indent=4, ensure_ascii=False).encode()


@pytest.fixture()
def cnn(mirror, monkeypatch):
    """The Llama-3.1-8B datasets on the mirror: datacenter 3 samples, edge 2, calibration 1."""
    from code.llama3_1_8b import download as l31

    bodies = {"datacenter": cnn_json(3), "edge": cnn_json(2), "calibration": cnn_json(1)}
    for cat, n in (("datacenter", 3), ("edge", 2)):
        uri, name, _, _ = l31.DATASETS[cat]
        monkeypatch.setitem(l31.DATASETS, cat, (uri, name, md5(bodies[cat]), n))
    uri, name, _, _ = l31.CALIBRATION
    monkeypatch.setattr(l31, "CALIBRATION", (uri, name, md5(bodies["calibration"]), None))
    for cat, (uri, name, _, _) in [*l31.DATASETS.items(), ("calibration", l31.CALIBRATION)]:
        mirror.add_r2(uri, l31.DATA_BASE, {name: bodies[cat]})
    return SimpleNamespace(l31=l31, bodies=bodies)


def test_llama31_data_from_r2_verified_then_reused(cnn, mirror, tmp_path):
    l31 = cnn.l31
    dest = tmp_path / "data"
    out = l31.download_data(dest, log=quiet)
    assert set(out) == {"datacenter", "edge"}
    assert (dest / "cnn_eval.json").read_bytes() == cnn.bodies["datacenter"]
    assert (dest / "sample_cnn_eval_5000.json").read_bytes() == cnn.bodies["edge"]
    assert not (dest / "cnn_dailymail_calibration.json").exists()
    assert set(json.loads((dest / l31.DATA_RECORD).read_text())["files"]) == {"cnn_eval.json", "sample_cnn_eval_5000.json"}
    n = len(mirror.hits)
    assert set(l31.download_data(dest, log=quiet, category="edge")) == {"edge"}
    assert len(mirror.hits) == n                                              # md5-valid files reused
    out = l31.download_data(tmp_path / "edge", log=quiet, category="edge", include_calibration=True)
    assert set(out) == {"edge", "calibration"} and not (tmp_path / "edge" / "cnn_eval.json").exists()
    assert not any("cnn-eval.uri" in h for h in mirror.hits[n:])              # datacenter not fetched for edge
    assert len(l31.check_dataset(out["edge"], 2)) == 2
    with pytest.raises(HarnessError) as e:
        l31.download_data(dest, log=quiet, category="mobile")
    assert "mobile" in e.value.cause and "datacenter" in e.value.fix
    no_partials(tmp_path)


def test_llama31_data_md5_mismatch_leaves_nothing(cnn, mirror, tmp_path):
    l31 = cnn.l31
    uri, name, pin, _ = l31.DATASETS["datacenter"]
    mirror.add_r2(uri, l31.DATA_BASE, {name: cnn.bodies["datacenter"] + b" "}, md5={name: pin})
    with pytest.raises(HarnessError) as e:
        l31.download_data(tmp_path / "data", log=quiet, category="datacenter")
    assert "checksum mismatch" in e.value.cause and "mlc-r2-downloader.sh" in e.value.fix
    assert not (tmp_path / "data" / name).exists() and not (tmp_path / "data" / l31.DATA_RECORD).exists()
    no_partials(tmp_path)


@pytest.mark.parametrize("body, why", [
    (cnn_json(2), "holds 2 samples, expected 3"),
    (cnn_json(3, drop="tok_input"), "entry 0 has no tok_input"),
    (cnn_json(3, tok=["128000"]), "tok_input is not a non-empty list of token ids"),
    (b'{"input": "x"}', "expected a JSON list"),
])
def test_llama31_data_content_checked_one_line_error(tmp_path, monkeypatch, body, why):
    from code.llama3_1_8b import download as l31

    local = tmp_path / "local"
    local.mkdir()
    (local / "cnn_eval.json").write_bytes(body)
    uri, name, _, _ = l31.DATASETS["datacenter"]
    monkeypatch.setitem(l31.DATASETS, "datacenter", (uri, name, md5(body), 3))
    with pytest.raises(HarnessError) as e:
        l31.download_data(tmp_path / "data", data_dir=str(local), log=quiet, category="datacenter")
    assert why in e.value.cause and "\n" not in e.value.cause and "--data_dir" in e.value.fix
    assert not (tmp_path / "data" / name).exists()


def test_llama31_data_bad_content_from_r2_is_removed(cnn, tmp_path, monkeypatch):
    l31 = cnn.l31
    uri, name, pin, _ = l31.DATASETS["edge"]
    monkeypatch.setitem(l31.DATASETS, "edge", (uri, name, pin, 5000))
    with pytest.raises(HarnessError) as e:
        l31.download_data(tmp_path / "data", log=quiet, category="edge")
    assert "holds 2 samples, expected 5000" in e.value.cause and "file removed" in e.value.cause
    assert not (tmp_path / "data" / name).exists()


def test_llama31_data_dir_either_or_both(tmp_path, monkeypatch, mirror):
    from code.llama3_1_8b import download as l31

    local = tmp_path / "local"
    local.mkdir()
    edge = cnn_json(2)
    (local / "sample_cnn_eval_5000.json").write_bytes(edge)
    uri, name, _, _ = l31.DATASETS["edge"]
    monkeypatch.setitem(l31.DATASETS, "edge", (uri, name, md5(edge), 2))
    out = l31.download_data(tmp_path / "d1", data_dir=str(local), log=quiet)                  # "both": what is there
    assert set(out) == {"edge"} and out["edge"].read_bytes() == edge
    out = l31.download_data(tmp_path / "d2", data_dir=str(local / name), log=quiet, category="edge")   # the file
    assert out["edge"].read_bytes() == edge
    assert mirror.hits == []
    with pytest.raises(HarnessError) as e:                                    # an explicit category must be there
        l31.download_data(tmp_path / "d3", data_dir=str(local), log=quiet, category="datacenter")
    assert "cnn_eval.json (datacenter) not found" in e.value.cause and "--data_dir" in e.value.fix
    with pytest.raises(HarnessError) as e:
        l31.download_data(tmp_path / "d3", data_dir=str(tmp_path), log=quiet)
    assert "neither cnn_eval.json or sample_cnn_eval_5000.json found" in e.value.cause and e.value.fix


# --- Llama-3.1-8B: model ----------------------------------------------------------------------------

def test_llama31_model_gated_error_names_license_token_and_members_route(hub, tmp_path):
    from huggingface_hub.errors import GatedRepoError

    from code.llama3_1_8b import download as l31

    hub.error = http_error(GatedRepoError, 403)
    with pytest.raises(HarnessError) as e:
        l31.download_model(tmp_path / "m", log=quiet)
    assert "access denied (HTTP 403)" in e.value.cause and l31.MODEL_REPO in e.value.cause
    fix = e.value.fix
    assert "\n" not in e.value.cause and "\n" not in fix and e.value.exit_code == 3
    assert "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct" in fix and "HF_TOKEN" in fix
    assert l31.MEMBERS_URI in fix and "mlc-r2-downloader.sh" in fix and "llama3-1.mlcommons.org" in fix
    assert any(c[:3] == ("repo_info", l31.MODEL_REPO, l31.MODEL_REVISION) for c in hub.calls)   # the pinned revision


def test_llama31_model_from_hub_at_pinned_revision(hub, tmp_path):
    from code.llama3_1_8b import download as l31

    src = hf_folder(tmp_path / "src", "llama", shards=4, extra={"original/consolidated.00.pth": b"pth",
                                                               "original/tokenizer.model": b"sp", "LICENSE": b"L"})
    hub.add(l31.MODEL_REPO, src, lfs={n for n in src if n.endswith((".safetensors", ".pth"))}, sha=l31.MODEL_REVISION)
    dest = tmp_path / "m"
    l31.download_model(dest, log=quiet)
    assert not (dest / "original").exists() and (dest / "LICENSE").read_bytes() == b"L"     # safetensors only
    assert json.loads((dest / l31.COMPLETE).read_text())["revision"] == l31.MODEL_REVISION
    assert [c[2] for c in hub.calls if c[0] in ("repo_info", "snapshot_download")] == [l31.MODEL_REVISION] * 2
    n = len(hub.calls)
    l31.download_model(dest, log=quiet)                                       # complete: reused
    assert len(hub.calls) == n
    (dest / "model-00003-of-00004.safetensors").unlink()
    with pytest.raises(HarnessError) as e:
        l31.check_model(dest)
    assert "1 of 4 safetensors shards" in e.value.cause and e.value.fix == l31.FIX_MODEL
    (dest / "config.json").write_text(json.dumps({"model_type": "mistral"}))
    with pytest.raises(HarnessError) as e:
        l31.check_model(dest)
    assert "not 'llama'" in e.value.cause


def test_llama31_members_r2_copy_verified_offline(tmp_path, monkeypatch):
    from code.llama3_1_8b import download as l31

    monkeypatch.setattr("huggingface_hub.HfApi", no_network)
    dest = tmp_path / "m"
    files = hf_folder(dest, "llama", shards=4, extra={"original/consolidated.00.pth": b"pth", "LICENSE": b"L"})
    pins = {p: md5(b) for p, b in files.items()}
    monkeypatch.setattr(l31, "MEMBERS_MD5", pins)
    (dest / "original/consolidated.00.pth").unlink()                          # not used, so not required
    (dest / l31.MEMBERS_LIST).write_text("".join(f"{m}  ./{p}\n" for p, m in pins.items()))
    l31.download_model(dest, log=quiet)
    rec = json.loads((dest / l31.COMPLETE).read_text())
    assert rec["source"] == "mlcommons-r2 (members)" and "original/consolidated.00.pth" not in rec["verified_md5"]
    (dest / l31.COMPLETE).unlink()
    (dest / "model-00004-of-00004.safetensors").write_bytes(b"tampered")
    with pytest.raises(HarnessError) as e:
        l31.download_model(dest, log=quiet)
    assert "model-00004-of-00004.safetensors" in e.value.cause and "md5" in e.value.cause and e.value.fix
    assert not (dest / l31.COMPLETE).exists()
    (dest / l31.MEMBERS_LIST).write_text(f"{'2' * 32}  config.json\n")       # the script's list disagrees with the pin
    with pytest.raises(HarnessError) as e:
        l31.download_model(dest, log=quiet)
    assert "pins" in e.value.cause and e.value.fix


def test_llama31_pins():
    from code.llama3_1_8b import download as l31

    assert len(l31.MEMBERS_MD5) == 18 and len(l31.MODEL_REVISION) == 40
    from code.common.llm import download as dl

    used = [p for _, p in dl.members_files(l31.MEMBERS_MD5, l31.MODEL_FILES)]
    assert "original/consolidated.00.pth" not in used and "model-00004-of-00004.safetensors" in used
    assert {c: (n, s) for c, (_, n, _, s) in l31.DATASETS.items()} == {
        "datacenter": ("cnn_eval.json", 13368), "edge": ("sample_cnn_eval_5000.json", 5000)}


# --- make download_data also fetches rougeLsum's punkt_tab ------------------------------------------------

@pytest.mark.parametrize("bench", ["mixtral_8x7b", "llama3.1-8b"])
def test_download_data_fetches_punkt_tab(bench, mixdata, cnn, mirror, tmp_path, monkeypatch):
    """``make download_data`` of a benchmark that scores rougeLsum: its dataset, then NLTK's punkt_tab (index
    XML, then the zip) into $MLPERF_SCRATCH_PATH/nltk_data, where the scorer loads it; a second run fetches
    nothing again (both verified in place)."""
    from code.common.benchmarks import implementation, resolve
    from code.common.llm import rouge
    from code.main import plan
    from tests.test_reference_rouge import PKG_URL, publish, punkt_package

    monkeypatch.setenv("MLPERF_SCRATCH_PATH", str(tmp_path / "scratch"))
    publish(mirror, punkt_package())
    _, settings = plan(["--action=download_data", f"--benchmarks={bench}"])
    b = implementation(resolve(bench))(settings[0])
    b.download_data()
    assert route(PKG_URL) in mirror.hits and mirror.hits.index(route(PKG_URL)) == len(mirror.hits) - 1
    assert rouge.splitter().trained and rouge.read_record(rouge.nltk_data_dir())["variant"] == "official"
    assert any(b.raw_dir.iterdir())
    n = len(mirror.hits)
    b.download_data()
    assert route(PKG_URL) not in mirror.hits[n:] and route("https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/"
                                                           "index.xml") not in mirror.hits[n:]
    no_partials(tmp_path)
