"""ResNet50 against the official reference (vision/classification_and_detection): its pre-processing
(imagenet.py's cv2.imread + dataset.py's pre_process_vgg) and its accuracy script (tools/accuracy-imagenet.py),
each run as a separate process from a temporary folder, compared with ours."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.conftest import official_root, run_official

# The reference's Imagenet dataset class itself (python/imagenet.py) reads the listed JPEGs with cv2.imread,
# runs dataset.pre_process_vgg and caches one .npy per image under cache_dir (here a temporary folder).
DRIVER = """
import sys
import numpy as np
ref, images, val_map, cache, out = sys.argv[1:6]
sys.path.insert(0, ref)
import dataset, imagenet
res = {}
for crop in (224, 64):
    ds = imagenet.Imagenet(data_path=images, image_list=val_map, name="imagenet", image_format="NCHW",
                           pre_process=dataset.pre_process_vgg, cache_dir=f"{cache}/{crop}",
                           image_size=[crop, crop, 3], threads=1)
    res[str(crop)] = np.stack([ds.get_item(i)[0] for i in range(len(ds.image_list))])
np.savez(out, **res)
"""


def _images(folder: Path) -> list[str]:
    """JPEGs as ImageNet has them: landscape and portrait of odd sizes, one under 256 px (upscaled), one
    grayscale, one CMYK; smooth content plus noise, so the interpolation and the crop offsets show."""
    from PIL import Image

    rng = np.random.default_rng(11)
    specs = [("rgb", 500, 375), ("rgb", 333, 500), ("rgb", 200, 150), ("L", 300, 300), ("rgb", 641, 257),
             ("CMYK", 375, 500)]
    names = []
    folder.mkdir(parents=True)
    for n, (mode, w, h) in enumerate(specs):
        base = rng.integers(0, 256, size=(6, 6, 3)).astype(np.uint8)
        img = np.asarray(Image.fromarray(base).resize((w, h), Image.Resampling.BICUBIC)).astype(np.int16)
        img = Image.fromarray(np.clip(img + rng.integers(-30, 31, size=img.shape), 0, 255).astype(np.uint8))
        if mode != "rgb":
            img = img.convert(mode)
        names.append(f"ILSVRC2012_val_{n + 1:08d}.JPEG")
        img.save(folder / names[-1], format="JPEG", quality=90)
    return names


def test_resnet50_preprocessing_equals_reference_pre_process_vgg(tmp_path):
    """Our preprocess_image (uint8, then float32 minus the means as the QSL loads it) equals the reference's
    float32 NCHW arrays at the real 224 crop and the tiny 64 crop, on six JPEGs of different shapes and
    colour modes. Fails for any departure in decoding, interpolation, the truncated resize sizes or the crop."""
    from code.resnet50.dataset import MEANS, preprocess_image

    ref = official_root("vision", "classification_and_detection", "python")
    names = _images(tmp_path / "images")
    (tmp_path / "val_map.txt").write_text("".join(f"{n} {i}\n" for i, n in enumerate(names)))
    run_official(["-c", DRIVER, ref, tmp_path / "images", tmp_path / "val_map.txt", tmp_path / "cache",
                  tmp_path / "ref.npz"], tmp_path, timeout=300)
    want = np.load(tmp_path / "ref.npz")
    worst = 0.0
    for crop in (224, 64):
        ours = np.stack([preprocess_image(tmp_path / "images" / n, crop) for n in names]).astype(np.float32) - MEANS
        assert ours.shape == want[str(crop)].shape == (len(names), 3, crop, crop)
        worst = max(worst, float(np.abs(ours - want[str(crop)]).max()))
    print(f"FIGURE resnet50 preprocessing max|diff|={worst:.3g} over {len(names)} images x 2 crops (224, 64) "
          "vs reference pre_process_vgg")
    assert worst == 0.0


def _log(path: Path, entries: list[tuple[int, int]]) -> None:
    """An mlperf_log_accuracy.json with one int32 label per entry, as our harness writes it."""
    path.write_text(json.dumps([{"seq_id": s, "qsl_idx": i, "data": np.array([p], np.int32).tobytes().hex()}
                                for s, (i, p) in enumerate(entries)]))


def test_resnet50_accuracy_equals_official_accuracy_imagenet(tmp_path):
    """One LoadGen accuracy log (997 samples, about 3 in 4 right, shuffled, 40 samples logged twice with the
    second answer differing, as TEST01's extra logging does) scored by the official accuracy-imagenet.py
    (--dtype int32: our harness returns int32 labels, as NVIDIA's does; the reference's own SUT writes
    float32) and by ours: the same accuracy line, good and total."""
    from code.resnet50.accuracy import score

    tool = official_root("vision", "classification_and_detection", "tools", "accuracy-imagenet.py")
    rng = np.random.default_rng(7)
    n = 997
    labels = rng.integers(0, 1000, n)
    (tmp_path / "val_map.txt").write_text("".join(f"ILSVRC2012_val_{i + 1:08d}.JPEG {lab}\n"
                                                  for i, lab in enumerate(labels)))
    preds = np.where(rng.random(n) < 0.75, labels, (labels + rng.integers(1, 999, n)) % 1000)
    entries = [(int(i), int(preds[i])) for i in rng.permutation(n)]
    for i in rng.choice(n, 40, replace=False):
        entries.append((int(i), int((preds[i] + 1) % 1000) if preds[i] == labels[i] else int(labels[i])))
    _log(tmp_path / "mlperf_log_accuracy.json", entries)
    r = run_official([tool, "--mlperf-accuracy-file", tmp_path / "mlperf_log_accuracy.json",
                      "--imagenet-val-file", tmp_path / "val_map.txt", "--dtype", "int32"], tmp_path, timeout=120)
    official = r.stdout.strip().splitlines()[-1]
    ours = score(tmp_path / "mlperf_log_accuracy.json", labels, tmp_path / "accuracy.txt", 75.695)
    mine = ours["text"].splitlines()[0]
    print(f"FIGURE resnet50 accuracy official {official!r} ours {mine!r}")
    assert official == mine
    assert f"{float(official.split('=')[1].split('%')[0]):.4g}" == f"{ours['metrics']['acc']:.4g}"
