"""Every real download the harness does, against fixture files served from 127.0.0.1 through
$MLPERF_DOWNLOAD_MIRROR: right file, wrong checksum, truncated response (then resumed), 404, a
server that stalls. The checksums the code pins are swapped for the fixtures' own (the real files
cannot be fetched here); the code paths are the real ones."""
from __future__ import annotations

import hashlib
import time

import pytest

from code.common.errors import HarnessError
from code.common.fileio import download


BLOB = bytes(range(256)) * 4096          # 1 MiB
SHA = hashlib.sha256(BLOB).hexdigest()
URL = "https://example.org/models/blob.bin"


def _err(excinfo) -> str:
    return f"{excinfo.value.cause} | {excinfo.value.fix}"


def test_download_right_file_is_fetched_then_reused(mirror, tmp_path):
    mirror.routes["/example.org/models/blob.bin"] = BLOB
    dest = download(URL, tmp_path / "blob.bin", sha256=SHA)
    assert dest.read_bytes() == BLOB and oct(dest.stat().st_mode & 0o777) != oct(0o600)
    mirror.routes.clear()                      # a verified present file is not fetched again
    assert download(URL, tmp_path / "blob.bin", sha256=SHA) == dest


def test_download_wrong_checksum_leaves_nothing(mirror, tmp_path):
    mirror.routes["/example.org/models/blob.bin"] = BLOB[:-1] + b"x"
    with pytest.raises(HarnessError, match="checksum mismatch") as e:
        download(URL, tmp_path / "blob.bin", sha256=SHA)
    assert e.value.exit_code == 3 and not list(tmp_path.iterdir())


def test_download_truncated_response_is_an_error_and_resumes(mirror, tmp_path):
    mirror.routes["/example.org/models/blob.bin"] = BLOB
    mirror.modes["/example.org/models/blob.bin"] = "truncate"
    with pytest.raises(HarnessError, match="could not download") as e:
        download(URL, tmp_path / "blob.bin", sha256=SHA)
    assert not (tmp_path / "blob.bin").exists(), _err(e)
    assert (tmp_path / ".blob.bin.download").stat().st_size == len(BLOB) // 2
    assert download(URL, tmp_path / "blob.bin", sha256=SHA).read_bytes() == BLOB
    assert mirror.ranges == [f"bytes={len(BLOB) // 2}-"]         # the second call resumed
    assert not (tmp_path / ".blob.bin.download").exists()


def test_download_404_names_the_url_and_the_fix(mirror, tmp_path):
    with pytest.raises(HarnessError, match="404") as e:
        download(URL, tmp_path / "blob.bin", sha256=SHA, fix="make download_model BENCHMARKS=x")
    assert "make download_model BENCHMARKS=x" in e.value.fix and "MLPERF_DOWNLOAD_MIRROR" in e.value.fix
    assert not list(tmp_path.iterdir())


def test_download_stalled_server_times_out(mirror, tmp_path):
    mirror.routes["/example.org/models/blob.bin"] = BLOB
    mirror.modes["/example.org/models/blob.bin"] = "stall"
    t0 = time.time()
    with pytest.raises(HarnessError, match="could not download"):
        download(URL, tmp_path / "blob.bin", sha256=SHA, timeout=1)
    assert time.time() - t0 < 10 and not (tmp_path / "blob.bin").exists()


def test_download_unverifiable_present_file_is_fetched_again(mirror, tmp_path):
    """The val_map bug: a present file with no checksum was taken as downloaded."""
    (tmp_path / "f.txt").write_text("")
    mirror.routes["/example.org/models/f.txt"] = b"fresh"
    assert download("https://example.org/models/f.txt", tmp_path / "f.txt").read_bytes() == b"fresh"


# --- the harness's own downloads --------------------------------------------------------------------

def _val_map(n: int) -> bytes:
    return "".join(f"ILSVRC2012_val_{i + 1:08d}.JPEG {i % 1000}\n" for i in range(n)).encode()


def _bench(name: str, tmp_path, monkeypatch, *extra):
    monkeypatch.setenv("MLPERF_SCRATCH_PATH", str(tmp_path / "scratch"))
    monkeypatch.setenv("MLPERF_DATA_MAPS_DIR", str(tmp_path / "data_maps"))
    monkeypatch.delenv("MLPERF_FAKE_SYSTEM", raising=False)
    from code.common.benchmarks import implementation, resolve
    from code.main import plan

    _, settings = plan([f"--action=download_data", f"--benchmarks={name}", *extra])
    return implementation(resolve(name))(settings[0])


def test_resnet50_download_data_val_map(mirror, tmp_path, monkeypatch):
    from code.resnet50.harness import VAL_MAP_URL

    path = "/" + VAL_MAP_URL.split("://", 1)[1]
    mirror.routes[path] = _val_map(1000)                      # not the 50000-line map: refused
    b = _bench("resnet50", tmp_path, monkeypatch)
    with pytest.raises(HarnessError, match="50000-line"):
        b.download_data()
    assert not b.val_map.exists()
    mirror.routes[path] = _val_map(50000)
    b.download_data()
    assert b.val_map.read_bytes() == _val_map(50000)


def test_resnet50_download_model_pinned_md5(mirror, tmp_path, monkeypatch):
    """The served fixture is not the real ONNX: under the shipped pin it is refused (one line, nothing
    left); with the fixture's own md5 pinned it is fetched; a corrupt copy under that pin is refused."""
    from code.resnet50 import model
    from tests.conftest import no_partials, route

    onnx = b"not really onnx" * 1000
    url, pin = model.DOWNLOADS[model.ONNX_NAME]
    mirror.routes[route(url)] = onnx
    with pytest.raises(HarnessError, match=f"md5 is not {pin}") as e:
        model.download_real(tmp_path / "m", log=lambda *_: None)
    assert "\n" not in e.value.cause and not (tmp_path / "m" / model.ONNX_NAME).exists()
    monkeypatch.setitem(model.DOWNLOADS, model.ONNX_NAME, (url, hashlib.md5(onnx).hexdigest()))
    dest = model.download_real(tmp_path / "m", log=lambda *_: None)
    assert dest.read_bytes() == onnx and not [h for h in mirror.hits if "/api/" in h]   # no record API lookup
    mirror.routes[route(url)] = onnx[:-1]   # corrupt upstream: the pinned md5 catches it
    dest.unlink()
    with pytest.raises(HarnessError, match="md5") as e:
        model.download_real(tmp_path / "m", log=lambda *_: None)
    assert "\n" not in e.value.cause and not dest.exists()
    no_partials(tmp_path)


def test_sdxl_download_data_pinned_mlcommons_files(mirror, tmp_path, monkeypatch):
    from code.sdxl import download as d

    files = {}
    for name, (repo_path, kind, _) in list(d.DATA_FILES.items()):
        body = f"fixture {name}\n".encode()
        want = hashlib.sha256(body).hexdigest() if kind == "sha256" else \
            hashlib.sha1(f"blob {len(body)}\0".encode() + body).hexdigest()
        files[name] = (repo_path, kind, want)
        mirror.routes["/" + (d.RAW_BASE + repo_path).split("://", 1)[1]] = body
    monkeypatch.setattr(d, "DATA_FILES", files)
    mirror.modes["/" + (d.RAW_BASE + files["val2014.npz"][0]).split("://", 1)[1]] = "404"  # optional: warns
    lines: list[str] = []
    d.fetch_reference_data(tmp_path / "data", None, log=lines.append)
    assert (tmp_path / "data" / "captions_source.tsv").read_bytes() == b"fixture captions_source.tsv\n"
    assert not (tmp_path / "data" / "val2014.npz").exists() and any("val2014.npz not fetched" in x for x in lines)
    d.fetch_reference_data(tmp_path / "data", None, log=lines.append)          # git-blob checked, fetched now
    assert (tmp_path / "data" / "val2014.npz").read_bytes() == b"fixture val2014.npz\n"
    files["latents.npy"] = (files["latents.npy"][0], "sha256", "0" * 64)       # a changed upstream file
    (tmp_path / "data" / "latents.npy").unlink()
    with pytest.raises(HarnessError, match="checksum mismatch"):
        d.fetch_reference_data(tmp_path / "data", None, log=lines.append)


def test_sdxl_download_scorer_weights(mirror, tmp_path, monkeypatch):
    from code.sdxl import scorers

    for url, attr in ((scorers.CLIP_URL, "CLIP_SHA256"), (scorers.INCEPTION_URL, "INCEPTION_SHA256")):
        body = f"weights {attr}".encode()
        mirror.routes["/" + url.split("://", 1)[1]] = body
        monkeypatch.setattr(scorers, attr, hashlib.sha256(body).hexdigest())
    files = scorers.download_scorer_weights(tmp_path / "models")
    assert files.clip.read_bytes() == b"weights CLIP_SHA256" and files.inception.exists()


def test_zenodo_pins_are_md5s_of_the_reference_files():
    """Every Zenodo file ResNet50, RetinaNet, BERT and 3D-UNet download has a pinned 32-hex md5 (none shared)
    and a URL naming that very file in a Zenodo record; each benchmark's model file is in the record its
    SPEC.starting_weights names, and where the official tree lists the file (language/bert and 3d-unet-kits19
    Makefiles; $MLPERF_INFERENCE_DIR) it lists that record."""
    import os
    import re
    import urllib.parse
    from pathlib import Path

    from code.bert import SPEC as BERT, model as bert
    from code.resnet50 import SPEC as RESNET, model as resnet
    from code.retinanet import SPEC as RETINANET, model as retinanet
    from code.unet3d import SPEC as UNET, model as unet

    official = os.environ.get("MLPERF_INFERENCE_DIR")
    listed = ""
    for mk in ("language/bert/Makefile", "vision/medical_imaging/3d-unet-kits19/Makefile"):
        if official and (Path(official) / mk).is_file():
            listed += (Path(official) / mk).read_text()
    md5s = []
    for spec, mod in ((RESNET, resnet), (RETINANET, retinanet), (BERT, bert), (UNET, unet)):
        assert mod.ONNX_NAME in mod.DOWNLOADS, spec.name
        for name, (url, md5) in mod.DOWNLOADS.items():
            assert re.fullmatch(r"[0-9a-f]{32}", md5), (name, md5)
            md5s.append(md5)
            u = urllib.parse.urlsplit(url)
            m = re.fullmatch(r"/records/(\d+)/files/(.+)", u.path)
            assert u.scheme == "https" and u.netloc == "zenodo.org" and m and m.group(2) == name, url
            if name == mod.ONNX_NAME:
                assert spec.starting_weights.startswith(name) and f"zenodo {m.group(1)}" in spec.starting_weights, \
                    (spec.starting_weights, url)
            if name in listed:
                assert f"zenodo.org/record/{m.group(1)}/files/{name}" in listed, (name, url)
    assert len(set(md5s)) == len(md5s) == 8
