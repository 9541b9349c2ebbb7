"""RetinaNet against the official reference (vision/classification_and_detection): its pre-processing
(openimages.py's cv2.imread + dataset.py's pre_process_openimages_retinanet) and its accuracy script
(tools/accuracy-openimages.py, pycocotools), each run as a separate process from a temporary folder,
compared with ours. (tests/test_retinanet_harness.py::test_retinanet_official_script_agrees scores the
tiny end-to-end run's log too.)"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.conftest import official_env, official_root, run_official

# The reference's OpenImages dataset class itself (python/openimages.py) reads the annotated JPEGs with
# cv2.imread, runs dataset.pre_process_openimages_retinanet and caches one .npy per image under cache_dir.
DRIVER = """
import sys
import numpy as np
ref, images, annotations, cache, out = sys.argv[1:6]
sys.path.insert(0, ref)
import dataset, openimages
res = {}
for size in (800, 256):
    ds = openimages.OpenImages(data_path=images, image_list=annotations, name="openimages", image_format="NCHW",
                               pre_process=dataset.pre_process_openimages_retinanet, cache_dir=f"{cache}/{size}",
                               image_size=[size, size, 3], threads=1)
    res[str(size)] = np.stack([ds.get_item(i)[0] for i in range(len(ds.image_list))])
np.savez(out, **res)
"""


def _images(folder: Path) -> list[dict]:
    """JPEGs as OpenImages has them: landscape and portrait, one larger than 800 (downscaled), one small,
    one grayscale, one CMYK; smooth content plus noise. Returns their COCO "images" entries."""
    from PIL import Image

    rng = np.random.default_rng(12)
    specs = [("RGB", 1024, 683), ("RGB", 683, 1024), ("RGB", 120, 90), ("L", 500, 375), ("RGB", 801, 799),
             ("CMYK", 640, 480)]
    folder.mkdir(parents=True)
    images = []
    for n, (mode, w, h) in enumerate(specs):
        base = rng.integers(0, 256, size=(8, 8, 3)).astype(np.uint8)
        img = np.asarray(Image.fromarray(base).resize((w, h), Image.Resampling.BICUBIC)).astype(np.int16)
        img = Image.fromarray(np.clip(img + rng.integers(-30, 31, size=img.shape), 0, 255).astype(np.uint8))
        name = f"{n:016x}.jpg"
        img.convert(mode).save(folder / name, format="JPEG", quality=90)
        images.append({"id": n + 1, "file_name": name, "height": h, "width": w})
    return images


def test_retinanet_preprocessing_equals_reference_pre_process_openimages(tmp_path):
    """Our decode + to_model_input equal the reference's float32 CHW arrays at the real 800 and the tiny 256
    input sizes, on six JPEGs of different shapes and colour modes. Fails for any departure in decoding,
    the interpolation (e.g. torch's bilinear instead of cv2.INTER_LINEAR), the colour order or the scaling."""
    from code.retinanet.dataset import decode, to_model_input

    ref = official_root("vision", "classification_and_detection", "python")
    images = _images(tmp_path / "data")
    ann = tmp_path / "openimages-mlperf.json"
    ann.write_text(json.dumps({"images": images, "annotations": [], "categories": [{"id": 0, "name": "Airplane"}]}))
    run_official(["-c", DRIVER, ref, tmp_path / "data", ann, tmp_path / "cache", tmp_path / "ref.npz"], tmp_path,
                 timeout=300)
    want = np.load(tmp_path / "ref.npz")
    worst = 0.0
    for size in (800, 256):
        ours = np.stack([to_model_input(decode(tmp_path / "data" / im["file_name"]), size) for im in images])
        assert ours.dtype == want[str(size)].dtype == np.float32
        assert ours.shape == want[str(size)].shape == (len(images), 3, size, size)
        worst = max(worst, float(np.abs(ours - want[str(size)]).max()))
    print(f"FIGURE retinanet preprocessing max|diff|={worst:.3g} over {len(images)} images x 2 sizes (800, 256) "
          "vs reference pre_process_openimages_retinanet")
    assert worst == 0.0


def _synthetic_set(rng, n_images: int = 24) -> tuple[dict, list[dict]]:
    """COCO-format annotations (a few classes, 1-5 boxes an image, some crowd) and a LoadGen accuracy log
    of float32 (idx, ymin, xmin, ymax, xmax, score, label) rows in [0, 1]: jittered true boxes, some with
    the wrong class, false positives, images with no detections, and samples logged twice (the second
    answer different)."""
    images, anns, entries = [], [], []
    for i in range(n_images):
        w, h = (int(v) for v in rng.integers(200, 1025, 2))
        images.append({"id": i + 1, "file_name": f"{i:016x}.jpg", "height": h, "width": w})
        rows = []
        for _ in range(int(rng.integers(1, 6))):
            bw, bh = rng.uniform(0.1, 0.5) * w, rng.uniform(0.1, 0.5) * h
            x0, y0 = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
            cat = int(rng.integers(0, 6))
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": cat, "bbox": [x0, y0, bw, bh],
                         "area": bw * bh, "iscrowd": int(rng.random() < 0.1)})
            if rng.random() < 0.85:
                j = rng.normal(0, 0.08, 4) * [bw, bh, bw, bh]
                lab = cat if rng.random() < 0.85 else int(rng.integers(0, 6))
                rows.append([i, (y0 + j[1]) / h, (x0 + j[0]) / w, (y0 + bh + j[3]) / h, (x0 + bw + j[2]) / w,
                             rng.uniform(0.3, 1.0), lab])
        for _ in range(int(rng.integers(0, 4))):               # false positives
            x0, y0 = rng.uniform(0, 0.7, 2)
            rows.append([i, y0, x0, y0 + 0.2, x0 + 0.25, rng.uniform(0.05, 0.6), int(rng.integers(0, 6))])
        if i % 7 == 3:
            rows = []                                            # an image without detections
        data = np.array(rows, np.float32).tobytes().hex()
        entries.append({"seq_id": len(entries), "qsl_idx": i, "data": data})
    for i in (1, 5, 9):                                         # logged twice: the first answer counts
        other = np.array([[i, 0.1, 0.1, 0.9, 0.9, 0.99, 0]], np.float32).tobytes().hex()
        entries.append({"seq_id": len(entries), "qsl_idx": i, "data": other})
    cats = [{"id": c, "name": f"class {c}", "supercategory": None} for c in range(264)]
    return {"images": images, "annotations": anns, "categories": cats}, entries


def test_retinanet_accuracy_equals_official_accuracy_openimages(tmp_path):
    """A synthetic LoadGen accuracy log over 24 annotated images (mAP well away from 0 and 100) scored by the
    official accuracy-openimages.py (--openimages-dir: a folder with only annotations/openimages-mlperf.json;
    no images are read) and by ours: the same mAP to the 3 decimals the script prints (4+ significant digits)."""
    from code.retinanet.accuracy import score

    tool = official_root("vision", "classification_and_detection", "tools", "accuracy-openimages.py")
    annotations, entries = _synthetic_set(np.random.default_rng(21))
    (tmp_path / "oi" / "annotations").mkdir(parents=True)
    (tmp_path / "oi" / "annotations" / "openimages-mlperf.json").write_text(json.dumps(annotations))
    (tmp_path / "mlperf_log_accuracy.json").write_text(json.dumps(entries))
    r = run_official([tool, "--mlperf-accuracy-file", tmp_path / "mlperf_log_accuracy.json", "--openimages-dir",
                      tmp_path / "oi", "--output-file", tmp_path / "det.json"], tmp_path,
                     env=official_env(DATASET_ANNOTATIONS_FILE_PATH=None), timeout=120)
    official = float(r.stdout.strip().splitlines()[-1].split("=")[1].rstrip("%"))
    ours = score(tmp_path / "mlperf_log_accuracy.json", annotations, tmp_path / "accuracy.txt", 37.55)["metrics"]["mAP"]
    print(f"FIGURE retinanet mAP official={official:.3f}% ours={ours:.3f}% (synthetic log, {len(entries)} entries)")
    assert 5 < official < 95
    assert f"{ours:.3f}" == f"{official:.3f}"
