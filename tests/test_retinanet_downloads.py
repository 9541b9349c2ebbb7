"""RetinaNet's real downloads against fixture files served from 127.0.0.1 ($MLPERF_DOWNLOAD_MIRROR):
the MLPerf ONNX from its Zenodo record (md5 from the record API), and the OpenImages CSVs, image list,
images and COCO export of download_data (the expected image count passed in: the real one is the
round table's 24,781)."""
from __future__ import annotations

import hashlib
import io
import json

import pytest

from code.common.errors import HarnessError, MissingDataError
from tests.conftest import route


def _jpeg(w: int, h: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (w, h), (120, 30, 200)).save(buf, format="JPEG")
    return buf.getvalue()


def _fixture(mirror):
    from code.retinanet import dataset as D

    classes = "".join(f"/m/c{i},{name}\n" for i, name in enumerate(D.MLPERF_CLASSES)) + "/m/zz,Not an MLPerf class\n"
    rows = [",".join(D.BBOX_HEADER)]
    # image b has the first box, a comes later: the export sorts images by ImageID
    for img, label, box in (("bbbb", "/m/c5", "0.1,0.5,0.2,0.6"), ("aaaa", "/m/c0", "0.0,1.0,0.0,0.5"),
                            ("cccc", "/m/zz", "0.1,0.2,0.1,0.2"), ("aaaa", "/m/c263", "0.5,0.75,0.25,0.5")):
        rows.append(f"{img},xclick,{label},1,{box},0,1,0,0,0")
    mirror.routes[route(D.MAP_CLASSES_URL)] = classes.encode()
    mirror.routes[route(D.BBOX_ANNOTATIONS_URL)] = ("\n".join(rows) + "\n").encode()
    mirror.routes[route(D.IMAGE_URL.format("aaaa"))] = _jpeg(200, 100)
    mirror.routes[route(D.IMAGE_URL.format("bbbb"))] = _jpeg(64, 48)
    return D


def test_retinanet_download_data_openimages(mirror, tmp_path):
    D = _fixture(mirror)
    dest = D.download_openimages(tmp_path, expected_images=2, log=lambda *_: None)
    ann = json.loads(dest.read_text())
    assert [im["file_name"] for im in ann["images"]] == ["aaaa.jpg", "bbbb.jpg"]
    assert [(im["id"], im["width"], im["height"]) for im in ann["images"]] == [(1, 200, 100), (2, 64, 48)]
    assert len(ann["categories"]) == 264 and ann["categories"][263]["name"] == "Zucchini"
    a = [x for x in ann["annotations"] if x["image_id"] == 1]
    assert sorted(x["category_id"] for x in a) == [0, 263]
    assert next(x for x in a if x["category_id"] == 263)["bbox"] == pytest.approx([100.0, 25.0, 50.0, 25.0])
    b = next(x for x in ann["annotations"] if x["image_id"] == 2)
    assert b["category_id"] == 5 and b["IsTruncated"] == 1 and b["iscrowd"] == b["IsGroupOf"] == 0
    assert (tmp_path / "annotations" / "openimages-mlperf-images.txt").read_text() == "validation/bbbb\nvalidation/aaaa\n"


def test_retinanet_download_data_wrong_count_and_missing_images(mirror, tmp_path):
    D = _fixture(mirror)
    with pytest.raises(MissingDataError, match="select 2 images, not the MLPerf 24781"):
        D.download_openimages(tmp_path, expected_images=24781, log=lambda *_: None)
    img = mirror.routes.pop(route(D.IMAGE_URL.format("bbbb")))
    with pytest.raises(MissingDataError) as e:
        D.download_openimages(tmp_path, expected_images=2, log=lambda *_: None)
    assert "could not be fetched" in e.value.cause and str(tmp_path / "validation" / "data") in e.value.fix
    assert "openimages-mlperf-images.txt" in e.value.fix
    assert not (tmp_path / D.ANNOTATIONS).exists()
    assert not list((tmp_path / "validation" / "data").glob("bbbb*"))
    mirror.routes[route(D.IMAGE_URL.format("bbbb"))] = b"not a jpeg"        # damaged upstream: refused
    with pytest.raises(MissingDataError):
        D.download_openimages(tmp_path, expected_images=2, log=lambda *_: None)
    mirror.routes[route(D.IMAGE_URL.format("bbbb"))] = img                  # resumed: aaaa is kept
    D.download_openimages(tmp_path, expected_images=2, log=lambda *_: None)
    assert (tmp_path / D.ANNOTATIONS).is_file()


def test_retinanet_class_map_without_mlperf_classes_is_refused(mirror, tmp_path):
    D = _fixture(mirror)
    mirror.routes[route(D.MAP_CLASSES_URL)] = b"/m/zz,Not an MLPerf class\n"
    with pytest.raises(MissingDataError, match="lacks 264 of the 264 MLPerf classes"):
        D.download_openimages(tmp_path, expected_images=2, log=lambda *_: None)
    assert not (tmp_path / "annotations" / "class-descriptions-boxable.csv").exists()


def test_retinanet_download_model_pinned_md5(mirror, tmp_path, monkeypatch):
    """The served fixtures are not the real files: under the shipped pins they are refused (one line);
    with the fixtures' own md5s pinned they are fetched (the checkpoint only with_checkpoint); a corrupt
    copy under that pin is refused and nothing is left."""
    from code.retinanet import model

    body = {model.ONNX_NAME: b"not really onnx" * 1000, model.PTH_NAME: b"not really a checkpoint" * 100}
    for name, data in body.items():
        mirror.routes[route(model.DOWNLOADS[name][0])] = data
    name = model.ONNX_NAME
    with pytest.raises(HarnessError, match=f"md5 is not {model.DOWNLOADS[name][1]}") as e:
        model.download_real(tmp_path, log=lambda *_: None)
    assert "\n" not in e.value.cause and not (tmp_path / name).exists()
    for n, data in body.items():
        monkeypatch.setitem(model.DOWNLOADS, n, (model.DOWNLOADS[n][0], hashlib.md5(data).hexdigest()))
    assert model.download_real(tmp_path, log=lambda *_: None).read_bytes() == body[name]
    assert not (tmp_path / model.PTH_NAME).exists()
    model.download_real(tmp_path, with_checkpoint=True, log=lambda *_: None)
    assert (tmp_path / model.PTH_NAME).read_bytes() == body[model.PTH_NAME]
    assert not [h for h in mirror.hits if "/api/" in h]                   # no record API lookup
    (tmp_path / name).unlink()
    mirror.routes[route(model.DOWNLOADS[name][0])] = body[name][:-1]      # corrupt upstream: the pin catches it
    with pytest.raises(HarnessError, match="md5") as e:
        model.download_real(tmp_path, log=lambda *_: None)
    assert "\n" not in e.value.cause and not (tmp_path / name).exists()
