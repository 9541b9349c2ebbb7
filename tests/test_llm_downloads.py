"""LLM downloads (code.common.llm.download, code.gptj.download, code.llama2_70b.download) with the
network mocked: R2 metadata and files are served from 127.0.0.1 through $MLPERF_DOWNLOAD_MIRROR (the
real urllib/fileio code paths), Hugging Face through fake huggingface_hub functions. The pinned
checksums and sample counts are swapped for the fixtures' own; the code paths are the real ones."""
from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from code.common.errors import HarnessError
from code.common.llm import download as dl


# --- fixtures -------------------------------------------------------------------------------------

def md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


def sibling(name: str, body: bytes, lfs: bool = False):
    if lfs:
        return SimpleNamespace(rfilename=name, size=len(body), blob_id=None,
                               lfs=SimpleNamespace(size=len(body), sha256=hashlib.sha256(body).hexdigest()))
    return SimpleNamespace(rfilename=name, size=len(body), blob_id=hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest(),
                           lfs=None)


class FakeHub:
    """Stands in for huggingface_hub's HfApi / snapshot_download / hf_hub_download: one repo per id,
    served from memory. ``error``: an exception repo_info raises. ``corrupt``: names served wrong."""

    def __init__(self, monkeypatch, tmp_path: Path):
        import huggingface_hub

        self.repos: dict[str, tuple[str, dict[str, bytes], set[str]]] = {}
        self.error: BaseException | None = None
        self.corrupt: set[str] = set()
        self.calls: list[tuple] = []
        self.cache = tmp_path / "hf-cache"
        hub = self

        class Api:
            def repo_info(self, repo_id, revision=None, repo_type=None, files_metadata=False, token=None):
                hub.calls.append(("repo_info", repo_id, revision, repo_type, token))
                if hub.error is not None:
                    raise hub.error
                sha, files, lfs = hub.repos[repo_id]
                return SimpleNamespace(sha=sha, siblings=[sibling(n, b, n in lfs) for n, b in files.items()])

        def snapshot_download(repo_id, repo_type=None, revision=None, local_dir=None, allow_patterns=None, token=None, **kw):
            hub.calls.append(("snapshot_download", repo_id, revision, tuple(allow_patterns or ())))
            sha, files, _ = hub.repos[repo_id]
            assert revision == sha, "files must be fetched at the resolved commit"
            for n in allow_patterns:
                p = Path(local_dir) / n
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(files[n] + (b"!" if n in hub.corrupt else b""))
            return local_dir

        def hf_hub_download(repo_id, filename, repo_type=None, revision=None, token=None, **kw):
            hub.calls.append(("hf_hub_download", repo_id, filename, revision))
            sha, files, _ = hub.repos[repo_id]
            assert revision == sha
            p = hub.cache / repo_id / filename
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(files[filename])
            return str(p)

        monkeypatch.setattr(huggingface_hub, "HfApi", Api)
        monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
        monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)

    def add(self, repo_id: str, files: dict[str, bytes], lfs=(), sha: str = "c0ffee" * 6 + "abcd") -> str:
        self.repos[repo_id] = (sha, files, set(lfs))
        return sha


@pytest.fixture()
def hub(monkeypatch, tmp_path):
    return FakeHub(monkeypatch, tmp_path)


def http_error(cls, status: int, url: str = "https://huggingface.co/api/models/x"):
    import httpx2

    return cls(f"{status} Client Error", response=httpx2.Response(status, request=httpx2.Request("GET", url)))


def no_network(*a, **k):
    raise AssertionError("no network access expected here")


# --- R2 protocol ----------------------------------------------------------------------------------

def test_parse_md5_list_formats_and_rejections():
    text = ("d41d8cd98f00b204e9800998ecf8427e  ./a.bin\n"
            "0123456789ABCDEF0123456789abcdef *sub/dir/b c.json\r\n\n"
            "ffffffffffffffffffffffffffffffff\tplain.txt\n")
    assert dl.parse_md5_list(text) == [("d41d8cd98f00b204e9800998ecf8427e", "a.bin"),
                                       ("0123456789abcdef0123456789abcdef", "sub/dir/b c.json"),
                                       ("ffffffffffffffffffffffffffffffff", "plain.txt")]
    with pytest.raises(HarnessError) as e:
        dl.parse_md5_list("not a line\n", "x.md5")
    assert "x.md5:1" in e.value.cause and e.value.fix
    with pytest.raises(HarnessError) as e:
        dl.parse_md5_list("d41d8cd98f00b204e9800998ecf8427e  ../../etc/passwd\n")
    assert "unsafe path" in e.value.cause and e.value.fix


def test_r2_metadata_urls_as_the_script_forms_them():
    assert dl.r2_metadata_urls("https://inference.mlcommons-storage.org/metadata/gpt-j-model-checkpoint.uri") == (
        "https://inference.mlcommons-storage.org/metadata/gpt-j-model-checkpoint.uri",
        "https://inference.mlcommons-storage.org/metadata/gpt-j-model-checkpoint.md5")
    with pytest.raises(HarnessError) as e:
        dl.r2_metadata_urls("https://inference.mlcommons-storage.org/metadata/x.json")
    assert e.value.fix


URI = "https://r2.example.org/metadata/demo-set.uri"
BASE = "https://r2.example.org/demo/folder"


def test_r2_download_fetches_every_listed_file_verified_then_reuses(mirror, tmp_path):
    files = {"a.bin": b"A" * 1000, "sub/b c.json": b'{"x": 1}'}
    mirror.add_r2(URI, BASE, files)
    out = dl.r2_download(URI, tmp_path / "d", log=lambda *a: None)
    assert [p.relative_to(tmp_path / "d").as_posix() for p in out] == ["a.bin", "sub/b c.json"]
    assert (tmp_path / "d/sub/b c.json").read_bytes() == b'{"x": 1}'
    assert "/r2.example.org/demo/folder/sub/b%20c.json" in mirror.hits      # <base URL>/<path>, quoted
    listing = (tmp_path / "d/demo-set.md5").read_text()                         # the record, md5sum -c format
    assert dl.parse_md5_list(listing) == [(md5(b), p) for p, b in files.items()]
    n = len(mirror.hits)
    dl.r2_download(URI, tmp_path / "d", log=lambda *a: None)
    assert all(not h.startswith("/r2.example.org/demo/") for h in mirror.hits[n:])   # verified files are reused


def test_r2_download_checksum_mismatch_leaves_nothing(mirror, tmp_path):
    mirror.add_r2(URI, BASE, {"a.bin": b"good bytes"}, md5={"a.bin": md5(b"other bytes")})
    with pytest.raises(HarnessError) as e:
        dl.r2_download(URI, tmp_path / "d", log=lambda *a: None)
    assert "checksum mismatch" in e.value.cause and "md5" in e.value.cause
    assert "mlc-r2-downloader.sh" in e.value.fix
    assert not (tmp_path / "d/a.bin").exists() and not (tmp_path / "d/demo-set.md5").exists()


def test_r2_download_include_and_pins(mirror, tmp_path):
    files = {"want.gz": b"w", "skip.json": b"s"}
    mirror.add_r2(URI, BASE, files)
    out = dl.r2_download(URI, tmp_path / "d", log=lambda *a: None, include=lambda p: p.endswith(".gz"),
                         expect_md5={"want.gz": md5(b"w")})
    assert [p.name for p in out] == ["want.gz"] and not (tmp_path / "d/skip.json").exists()
    with pytest.raises(HarnessError) as e:
        dl.r2_download(URI, tmp_path / "e", log=lambda *a: None, expect_md5={"want.gz": "0" * 32})
    assert "pins" in e.value.cause and e.value.fix


def test_r2_members_only_bucket_names_the_official_command(mirror, tmp_path):
    mirror.redirects["/r2.example.org/metadata/demo-set.uri"] = \
        "https://mlcommons.cloudflareaccess.com/cdn-cgi/access/login/r2.example.org"
    with pytest.raises(HarnessError) as e:
        dl.r2_download(URI, tmp_path / "d", log=lambda *a: None)
    assert "Cloudflare Access" in e.value.cause
    assert "mlc-r2-downloader.sh" in e.value.fix and URI in e.value.fix and str(tmp_path / "d") in e.value.fix


def test_r2_members_only_bucket_runs_a_local_official_script_then_verifies(mirror, tmp_path, monkeypatch):
    mirror.redirects["/r2.example.org/metadata/demo-set.uri"] = "https://mlcommons.cloudflareaccess.com/x"
    script = tmp_path / "mlc-r2-downloader.sh"                  # stands in for the official script
    script.write_text('while getopts "d:st" o; do case $o in d) D="$OPTARG";; esac; done\n'
                      'mkdir -p "$D" && printf good > "$D/a.bin"\n'
                      'echo "%s  ./a.bin" > "$D/demo-set.md5"\n' % md5(b"good"))
    monkeypatch.setenv(dl.R2_SCRIPT_ENV, str(script))
    monkeypatch.setattr(dl.shutil, "which", lambda t: "/usr/bin/" + t)
    out = dl.r2_download(URI, tmp_path / "d", log=lambda *a: None)
    assert [p.read_bytes() for p in out] == [b"good"]
    script.write_text(script.read_text().replace("printf good", "printf bad"))
    with pytest.raises(HarnessError) as e:
        dl.r2_download(URI, tmp_path / "e", log=lambda *a: None)
    assert "a.bin" in e.value.cause and "md5" in e.value.cause and "mlc-r2-downloader.sh" in e.value.fix


def test_r2_unreachable_metadata_is_one_line_error(mirror, tmp_path):
    with pytest.raises(HarnessError) as e:
        dl.r2_download("https://r2.example.org/metadata/absent.uri", tmp_path / "d", log=lambda *a: None)
    assert "HTTP 404" in e.value.cause and "\n" not in e.value.cause and e.value.fix


# --- Hugging Face ---------------------------------------------------------------------------------

def test_hf_snapshot_resolves_commit_verifies_and_records(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    big = bytes(range(256)) * 64
    sha = hub.add("org/model", {"config.json": b"{}", "w.safetensors": big, "other.bin": b"x"}, lfs={"w.safetensors"})
    dest = tmp_path / "m"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    dl.hf_snapshot("org/model", dest, allow_patterns=["*.json", "*.safetensors"], log=lambda *a: None)
    assert (dest / "w.safetensors").read_bytes() == big and not (dest / "other.bin").exists()
    assert (dest / "keep.txt").read_text() == "mine"                       # other files are left alone
    rec = json.loads((dest / "download.json").read_text())
    assert rec["revision"] == sha and rec["files"] == ["config.json", "w.safetensors"]
    assert ("repo_info", "org/model", None, "model", "hf_test") in hub.calls
    assert not list(tmp_path.glob(".m.hf-*"))                              # staging folder gone
    n = len(hub.calls)
    dl.hf_snapshot("org/model", dest, allow_patterns=["*.json", "*.safetensors"], log=lambda *a: None)
    assert not any(c[0] == "snapshot_download" for c in hub.calls[n:])     # verified files not fetched again


def test_hf_snapshot_corrupt_file_is_discarded(hub, tmp_path):
    hub.add("org/model", {"w.safetensors": b"weights"}, lfs={"w.safetensors"})
    hub.corrupt.add("w.safetensors")
    with pytest.raises(HarnessError) as e:
        dl.hf_snapshot("org/model", tmp_path / "m", log=lambda *a: None)
    assert "size" in e.value.cause or "sha256" in e.value.cause
    assert e.value.fix and not (tmp_path / "m/w.safetensors").exists() and not (tmp_path / "m/download.json").exists()


@pytest.mark.parametrize("status", [401, 403])
def test_hf_gated_repo_says_accept_license_and_set_token(hub, tmp_path, status):
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError

    hub.error = http_error(GatedRepoError if status == 403 else HfHubHTTPError, status)
    with pytest.raises(HarnessError) as e:
        dl.hf_snapshot("org/gated", tmp_path / "m", log=lambda *a: None)
    assert f"HTTP {status}" in e.value.cause and "org/gated" in e.value.cause
    assert "accept the license at https://huggingface.co/org/gated" in e.value.fix and "HF_TOKEN" in e.value.fix
    assert e.value.exit_code == 3


def test_hf_offline_is_one_line_error(hub, tmp_path):
    import httpx2

    hub.error = httpx2.ConnectError("[Errno -3] Temporary failure in name resolution")
    with pytest.raises(HarnessError) as e:
        dl.hf_snapshot("org/model", tmp_path / "m", log=lambda *a: None)
    assert "cannot reach https://huggingface.co" in e.value.cause and "network" in e.value.fix


def test_copy_local_checks_and_copies(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f.bin").write_bytes(b"data")
    out = dl.copy_local(src, tmp_path / "dst", ["f.bin"], md5={"f.bin": md5(b"data")}, log=lambda *a: None)
    assert out[0].read_bytes() == b"data"
    with pytest.raises(HarnessError) as e:
        dl.copy_local(src, tmp_path / "dst2", ["f.bin"], md5={"f.bin": "0" * 32}, log=lambda *a: None)
    assert "md5" in e.value.cause and e.value.fix and not (tmp_path / "dst2/f.bin").exists()
    with pytest.raises(HarnessError) as e:
        dl.copy_local(src, tmp_path / "dst3", ["absent"], log=lambda *a: None)
    assert "not found" in e.value.cause and e.value.fix


# --- GPT-J ----------------------------------------------------------------------------------------

def gptj_checkpoint() -> dict[str, bytes]:
    index = {"metadata": {}, "weight_map": {"a": "pytorch_model-00001-of-00002.bin", "b": "pytorch_model-00002-of-00002.bin"}}
    return {
        "config.json": json.dumps({"model_type": "gptj", "n_embd": 8, "n_head": 2, "n_layer": 1, "rotary_dim": 2,
                                   "vocab_size": 64}).encode(),
        "pytorch_model.bin.index.json": json.dumps(index).encode(),
        "pytorch_model-00001-of-00002.bin": b"w1" * 100, "pytorch_model-00002-of-00002.bin": b"w2" * 100,
        "vocab.json": b'{"a": 0}', "merges.txt": b"#version: 0.2\n", "tokenizer_config.json": b'{"r2": true}',
    }


def test_gptj_download_model_r2_checkpoint_plus_hub_tokenizer(mirror, hub, tmp_path, monkeypatch):
    from code.gptj import download as g

    files = gptj_checkpoint()
    base = "https://inference.mlcommons-storage.org/gpt-j/checkpoint-final"
    mirror.add_r2(g.CHECKPOINT_URI, base, files)
    monkeypatch.setattr(g, "CHECKPOINT_MD5", {p: md5(b) for p, b in files.items()})
    sha = hub.add(g.TOKENIZER_REPO, {"vocab.json": files["vocab.json"], "merges.txt": files["merges.txt"],
                                     "tokenizer_config.json": b'{"hub": true}', "tokenizer.json": b'{"fast": 1}',
                                     "special_tokens_map.json": b"{}"})
    dest = tmp_path / "checkpoint"
    g.download_model(dest, log=lambda *a: None)
    assert (dest / "tokenizer.json").read_bytes() == b'{"fast": 1}'            # added: vocab identical
    assert (dest / "tokenizer_config.json").read_bytes() == b'{"r2": true}'    # the checkpoint's is kept
    rec = json.loads((dest / g.COMPLETE).read_text())
    assert rec["source"] == "mlcommons-r2" and rec["tokenizer"]["revision"] == sha
    assert set(rec["tokenizer"]["added"]) == {"tokenizer.json", "special_tokens_map.json"}
    assert rec["files_md5"]["config.json"] == md5(files["config.json"])
    n = len(mirror.hits)
    g.download_model(dest, log=lambda *a: None)                               # complete: nothing fetched
    assert len(mirror.hits) == n


def test_gptj_checkpoint_checks(tmp_path):
    from code.gptj import download as g

    d = tmp_path / "c"
    d.mkdir()
    for n, b in gptj_checkpoint().items():
        (d / n).write_bytes(b)
    g.check_checkpoint(d)
    (d / "pytorch_model-00002-of-00002.bin").unlink()
    with pytest.raises(HarnessError) as e:
        g.check_checkpoint(d)
    assert "1 of 2 weight shards" in e.value.cause and e.value.fix == g.FIX_MODEL
    (d / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(HarnessError) as e:
        g.check_checkpoint(d)
    assert "not 'gptj'" in e.value.cause and e.value.fix


def fake_parquet(path: Path, articles, highlights):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"article": articles, "highlights": highlights, "id": [str(i) for i in range(len(articles))]}),
                   path)
    return path.read_bytes()


ARTICLES = ["First article — with “quotes” and é.", "Second\narticle\twith \"escapes\" \\ ", "Third 日本語 \u2028 line"]
HIGHLIGHTS = ["h1", "h2\nmore", "h3"]


def test_gptj_cnn_eval_built_like_download_cnndm(hub, tmp_path, monkeypatch):
    from code.gptj import download as g

    body = fake_parquet(tmp_path / "v.parquet", ARTICLES, HIGHLIGHTS)
    other = fake_parquet(tmp_path / "t.parquet", ["x"], ["y"])
    sha = hub.add(g.CNN_REPO, {"3.0.0/validation-00000-of-00001.parquet": body, "3.0.0/train-00000-of-00003.parquet": other,
                               "1.0.0/validation-00000-of-00001.parquet": other, "README.md": b"#"},
                  lfs={"3.0.0/validation-00000-of-00001.parquet"})
    monkeypatch.setattr(g, "VALIDATION_SAMPLES", 3)
    out = g.download_data(tmp_path / "data", log=lambda *a: None)
    expected = [{"instruction": "Summarize the following news article:", "input": a, "output": h}
                for a, h in zip(ARTICLES, HIGHLIGHTS)]
    assert out.read_text(encoding="utf-8") == json.dumps(expected, indent=4, ensure_ascii=False)
    assert list(json.loads(out.read_text())[0]) == ["instruction", "input", "output"]
    assert "日本語" in out.read_text(encoding="utf-8")                          # ensure_ascii=False
    rec = json.loads((tmp_path / "data" / g.DATA_RECORD).read_text())
    assert rec["revision"] == sha and rec["files"] == ["3.0.0/validation-00000-of-00001.parquet"]
    assert [c[2] for c in hub.calls if c[0] == "hf_hub_download"] == ["3.0.0/validation-00000-of-00001.parquet"]


def test_gptj_cnn_eval_wrong_row_count_is_an_error(hub, tmp_path):
    from code.gptj import download as g

    body = fake_parquet(tmp_path / "v.parquet", ARTICLES, HIGHLIGHTS)
    hub.add(g.CNN_REPO, {"3.0.0/validation-00000-of-00001.parquet": body})
    with pytest.raises(HarnessError) as e:
        g.download_data(tmp_path / "data", log=lambda *a: None)
    assert "has 3 rows, expected 13368" in e.value.cause and "--data_dir" in e.value.fix
    assert not (tmp_path / "data" / g.CNN_EVAL).exists()


def test_gptj_cnn_eval_from_data_dir(tmp_path, monkeypatch):
    from code.gptj import download as g

    monkeypatch.setattr(g, "VALIDATION_SAMPLES", 3)
    monkeypatch.setattr("huggingface_hub.HfApi", no_network)
    src = tmp_path / "local"
    src.mkdir()
    g.write_cnn_eval(src / g.CNN_EVAL, g.cnn_samples(ARTICLES, HIGHLIGHTS))
    out = g.download_data(tmp_path / "data", data_dir=str(src), log=lambda *a: None)
    assert out.read_bytes() == (src / g.CNN_EVAL).read_bytes()
    g.write_cnn_eval(src / g.CNN_EVAL, g.cnn_samples(ARTICLES[:2], HIGHLIGHTS[:2]))
    with pytest.raises(HarnessError) as e:
        g.download_data(tmp_path / "data2", data_dir=str(src), log=lambda *a: None)
    assert "holds 2 samples, expected 3" in e.value.cause and "--data_dir" in e.value.fix
    (src / g.CNN_EVAL).write_text(json.dumps([{"input": "a", "instruction": g.INSTRUCTION, "output": "b"}] * 3))
    with pytest.raises(HarnessError) as e:                                      # key order matters
        g.download_data(tmp_path / "data3", data_dir=str(src), log=lambda *a: None)
    assert "entry 0" in e.value.cause and e.value.fix


# --- Llama-2-70B ----------------------------------------------------------------------------------

def orca_pickle(path: Path, rows: int = 4, drop: str | None = None) -> bytes:
    import pandas as pd

    df = pd.DataFrame({"id": [f"cot.{i}" for i in range(rows)], "input": [f"<s>[INST] q{i} [/INST]" for i in range(rows)],
                       "tok_input": [[1, 2, 3, i, 29871] for i in range(rows)], "output": [f"a{i}" for i in range(rows)]})
    if drop:
        df = df.drop(columns=[drop])
    df.to_pickle(path)
    return path.read_bytes()


def test_check_pickle_names_the_file_by_default(tmp_path):
    """Without a name, each error of check_pickle names the file (read_dataframe's checks and the row count)."""
    from code.common.errors import MissingDataError
    from code.llama2_70b import download as ll

    orca_pickle(tmp_path / "orca.pkl", 3)
    with pytest.raises(MissingDataError) as e:
        ll.check_pickle(tmp_path / "orca.pkl", 4)
    assert e.value.cause == "orca.pkl holds 3 rows, expected 4"
    orca_pickle(tmp_path / "orca.pkl", 3, drop="output")
    with pytest.raises(MissingDataError) as e:
        ll.check_pickle(tmp_path / "orca.pkl", 3)
    assert e.value.cause.startswith("orca.pkl: no column(s) output")


@pytest.fixture()
def orca(mirror, tmp_path, monkeypatch):
    """The OpenOrca R2 dataset served from the mirror: 4-row dataset, 2-row calibration set."""
    from code.llama2_70b import download as ll

    pkl = orca_pickle(tmp_path / "d.pkl", 4)
    cal = orca_pickle(tmp_path / "c.pkl", 2)
    files = {ll.DATASET_PKL + ".gz": gzip.compress(pkl), ll.CALIBRATION_PKL + ".gz": gzip.compress(cal),
             "mlperf_log_accuracy.json": b"[]"}
    mirror.add_r2(ll.DATASET_URI, "https://inference.mlcommons-storage.org/open_orca", files)
    monkeypatch.setattr(ll, "GZ_MD5", {n: md5(b) for n, b in files.items() if n.endswith(".gz")})
    monkeypatch.setattr(ll, "DATASET_MD5", md5(pkl))
    monkeypatch.setattr(ll, "SAMPLES", 4)
    monkeypatch.setattr(ll, "CALIBRATION_SAMPLES", 2)
    return SimpleNamespace(ll=ll, pkl=pkl, cal=cal, files=files)


def test_llama2_openorca_from_r2_gunzipped_and_checked(orca, mirror, tmp_path):
    ll = orca.ll
    out = ll.download_data(tmp_path / "data", log=lambda *a: None)
    assert out.read_bytes() == orca.pkl and (tmp_path / "data" / ll.CALIBRATION_PKL).read_bytes() == orca.cal
    assert not (tmp_path / "data/mlperf_log_accuracy.json").exists()          # not needed, not fetched
    rec = json.loads((tmp_path / "data" / ll.DATA_RECORD).read_text())
    assert rec["files"][ll.DATASET_PKL]["md5"] == md5(orca.pkl)
    n = len(mirror.hits)
    ll.download_data(tmp_path / "data", log=lambda *a: None)
    assert len(mirror.hits) == n                                               # present and md5-valid: reused


def test_llama2_openorca_md5_mismatch(orca, tmp_path, monkeypatch):
    ll = orca.ll
    monkeypatch.setattr(ll, "DATASET_MD5", "0" * 32)
    with pytest.raises(HarnessError) as e:
        ll.download_data(tmp_path / "data", log=lambda *a: None)
    assert f"md5 {md5(orca.pkl)}, expected {'0' * 32}" in e.value.cause and "mlc-r2-downloader.sh" in e.value.fix
    assert not (tmp_path / "data" / ll.DATASET_PKL).exists()


def test_llama2_openorca_columns_and_rows_checked(tmp_path, monkeypatch):
    from code.llama2_70b import download as ll

    monkeypatch.setattr("huggingface_hub.HfApi", no_network)
    local = tmp_path / "local"
    local.mkdir()
    body = orca_pickle(local / ll.DATASET_PKL, 4, drop="tok_input")
    monkeypatch.setattr(ll, "DATASET_MD5", md5(body))
    monkeypatch.setattr(ll, "SAMPLES", 4)
    with pytest.raises(HarnessError) as e:
        ll.download_data(tmp_path / "data", data_dir=str(local), log=lambda *a: None)
    assert "no column(s) tok_input" in e.value.cause and "--data_dir" in e.value.fix
    assert not (tmp_path / "data" / ll.DATASET_PKL).exists()
    body = orca_pickle(local / ll.DATASET_PKL, 3)
    monkeypatch.setattr(ll, "DATASET_MD5", md5(body))
    with pytest.raises(HarnessError) as e:
        ll.download_data(tmp_path / "data", data_dir=str(local), log=lambda *a: None)
    assert "holds 3 rows, expected 4" in e.value.cause and e.value.fix


@pytest.mark.parametrize("gz", [False, True])
def test_llama2_openorca_from_data_dir(tmp_path, monkeypatch, gz):
    from code.llama2_70b import download as ll

    monkeypatch.setattr("huggingface_hub.HfApi", no_network)
    local = tmp_path / "local" / "open_orca"                               # as the R2 downloader names it
    local.mkdir(parents=True)
    body = orca_pickle(tmp_path / "x.pkl", 4)
    (local / (ll.DATASET_PKL + (".gz" if gz else ""))).write_bytes(gzip.compress(body) if gz else body)
    monkeypatch.setattr(ll, "DATASET_MD5", md5(body))
    monkeypatch.setattr(ll, "SAMPLES", 4)
    out = ll.download_data(tmp_path / "data", data_dir=str(tmp_path / "local"), log=lambda *a: None)
    assert out.read_bytes() == body


def llama_folder(d: Path) -> dict[str, bytes]:
    index = {"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    files = {"config.json": json.dumps({"model_type": "llama"}).encode(), "model.safetensors.index.json": json.dumps(index).encode(),
             "model-00001-of-00002.safetensors": b"s1" * 50, "model-00002-of-00002.safetensors": b"s2" * 50,
             "tokenizer.json": b"{}", "tokenizer.model": b"sp", "tokenizer_config.json": b"{}"}
    d.mkdir(parents=True, exist_ok=True)
    for n, b in files.items():
        (d / n).write_bytes(b)
    return files


def test_llama2_model_gated_error_names_license_token_and_membersroute(hub, tmp_path):
    from huggingface_hub.errors import GatedRepoError

    from code.llama2_70b import download as ll

    hub.error = http_error(GatedRepoError, 403)
    with pytest.raises(HarnessError) as e:
        ll.download_model(tmp_path / "m", log=lambda *a: None)
    assert "access denied (HTTP 403)" in e.value.cause and "meta-llama/Llama-2-70b-chat-hf" in e.value.cause
    fix = e.value.fix
    assert "https://huggingface.co/meta-llama/Llama-2-70b-chat-hf" in fix and "HF_TOKEN" in fix
    assert ll.MEMBERS_URI in fix and "mlc-r2-downloader.sh" in fix and "llama2.mlcommons.org" in fix


def test_llama2_model_from_hub_checks_shards(hub, tmp_path):
    from code.llama2_70b import download as ll

    src = llama_folder(tmp_path / "src")
    sha = hub.add(ll.MODEL_REPO, {**src, "pytorch_model-00001-of-00002.bin": b"bin"},
                  lfs={n for n in src if n.endswith(".safetensors")})
    dest = tmp_path / "m"
    ll.download_model(dest, log=lambda *a: None)
    assert json.loads((dest / ll.COMPLETE).read_text())["revision"] == sha
    assert not (dest / "pytorch_model-00001-of-00002.bin").exists()           # safetensors only
    (dest / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(HarnessError) as e:
        ll.check_model(dest)
    assert "1 of 2 safetensors shards" in e.value.cause and e.value.fix


def test_llama2_model_index_listing_absent_shard_is_not_complete(hub, tmp_path):
    from code.llama2_70b import download as ll

    src = llama_folder(tmp_path / "src")
    del src["model-00002-of-00002.safetensors"]                                # the Hub lacks a shard the index names
    hub.add(ll.MODEL_REPO, src)
    with pytest.raises(HarnessError) as e:
        ll.download_model(tmp_path / "m", log=lambda *a: None)
    assert "missing or empty" in e.value.cause and e.value.fix
    assert not (tmp_path / "m" / ll.COMPLETE).exists()


def test_llama2_model_members_r2_copy_verified_offline(tmp_path, monkeypatch):
    from code.llama2_70b import download as ll

    monkeypatch.setattr("huggingface_hub.HfApi", no_network)
    dest = tmp_path / "m"
    files = llama_folder(dest)
    listing = "".join(f"{md5(b)}  {n}\n" for n, b in files.items()) + f"{'1' * 32}  .git/lfs/objects/aa/bb/x\n"
    (dest / ll.MEMBERS_LIST).write_text(listing)
    ll.download_model(dest, log=lambda *a: None)
    assert json.loads((dest / ll.COMPLETE).read_text())["source"].startswith("mlcommons-r2")
    (dest / ll.COMPLETE).unlink()
    (dest / "tokenizer.model").write_bytes(b"tampered")
    with pytest.raises(HarnessError) as e:
        ll.download_model(dest, log=lambda *a: None)
    assert "tokenizer.model" in e.value.cause and "md5" in e.value.cause and e.value.fix
