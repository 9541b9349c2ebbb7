"""OpenImages (MLPerf subset): annotations, download, preprocessing and the QSL.

Layout, as the reference's ``tools/openimages_mlperf.sh``: ``<data>/annotations/openimages-mlperf.json``
(COCO format, the 264 MLPerf classes, category ids 0..263) and ``<data>/validation/data/<ImageID>.jpg``.
The QSL's sample i is the i-th entry of the annotation file's "images" list (what the official
``accuracy-openimages.py`` assumes).

Preprocessing is the reference's (python/openimages.py reads with cv2.imread, dataset.py
``pre_process_openimages_retinanet`` / ``maybe_resize``) step for step, with the same library: float32,
BGR -> RGB, cv2.resize to S x S with cv2.INTER_LINEAR, divide by 255, CHW (tests/test_reference_retinanet.py
compares the arrays with the reference's own). The ImageNet mean/std normalisation is inside the model.
One float32 ``<file_name>.npy`` per image (the reference's cache layout).
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from code.common.benchmark import QSL
from code.common.errors import MissingDataError
from code.common.fileio import download, staged_path, write_json

ANNOTATIONS = "annotations/openimages-mlperf.json"
IMAGES = "validation/data"
# tools/openimages.py of the reference: where it reads the boxes and the class names, and the
# public bucket it fetches images from (boto3 unsigned; the same objects over HTTPS here)
BBOX_ANNOTATIONS_URL = "https://storage.googleapis.com/openimages/v5/validation-annotations-bbox.csv"
MAP_CLASSES_URL = "https://storage.googleapis.com/openimages/v5/class-descriptions-boxable.csv"
IMAGE_URL = "https://s3.amazonaws.com/open-images-dataset/validation/{}.jpg"
BBOX_HEADER = ["ImageID", "Source", "LabelName", "Confidence", "XMin", "XMax", "YMin", "YMax", "IsOccluded",
               "IsTruncated", "IsGroupOf", "IsDepiction", "IsInside"]
# tools/openimages_mlperf.sh MLPERF_CLASSES, in its order (category id = position)
MLPERF_CLASSES = (
    "Airplane", "Antelope", "Apple", "Backpack", "Balloon", "Banana", "Barrel", "Baseball bat", "Baseball glove",
    "Bee", "Beer", "Bench", "Bicycle", "Bicycle helmet", "Bicycle wheel", "Billboard", "Book", "Bookcase", "Boot",
    "Bottle", "Bowl", "Bowling equipment", "Box", "Boy", "Brassiere", "Bread", "Broccoli", "Bronze sculpture",
    "Bull", "Bus", "Bust", "Butterfly", "Cabinetry", "Cake", "Camel", "Camera", "Candle", "Candy", "Cannon",
    "Canoe", "Carrot", "Cart", "Castle", "Cat", "Cattle", "Cello", "Chair", "Cheese", "Chest of drawers",
    "Chicken", "Christmas tree", "Coat", "Cocktail", "Coffee", "Coffee cup", "Coffee table", "Coin",
    "Common sunflower", "Computer keyboard", "Computer monitor", "Convenience store", "Cookie", "Countertop",
    "Cowboy hat", "Crab", "Crocodile", "Cucumber", "Cupboard", "Curtain", "Deer", "Desk", "Dinosaur", "Dog",
    "Doll", "Dolphin", "Door", "Dragonfly", "Drawer", "Dress", "Drum", "Duck", "Eagle", "Earrings", "Egg (Food)",
    "Elephant", "Falcon", "Fedora", "Flag", "Flowerpot", "Football", "Football helmet", "Fork", "Fountain",
    "French fries", "French horn", "Frog", "Giraffe", "Girl", "Glasses", "Goat", "Goggles", "Goldfish", "Gondola",
    "Goose", "Grape", "Grapefruit", "Guitar", "Hamburger", "Handbag", "Harbor seal", "Headphones", "Helicopter",
    "High heels", "Hiking equipment", "Horse", "House", "Houseplant", "Human arm", "Human beard", "Human body",
    "Human ear", "Human eye", "Human face", "Human foot", "Human hair", "Human hand", "Human head", "Human leg",
    "Human mouth", "Human nose", "Ice cream", "Jacket", "Jeans", "Jellyfish", "Juice",
    "Kitchen & dining room table", "Kite", "Lamp", "Lantern", "Laptop", "Lavender (Plant)", "Lemon", "Light bulb",
    "Lighthouse", "Lily", "Lion", "Lipstick", "Lizard", "Man", "Maple", "Microphone", "Mirror", "Mixing bowl",
    "Mobile phone", "Monkey", "Motorcycle", "Muffin", "Mug", "Mule", "Mushroom", "Musical keyboard", "Necklace",
    "Nightstand", "Office building", "Orange", "Owl", "Oyster", "Paddle", "Palm tree", "Parachute", "Parrot",
    "Pen", "Penguin", "Personal flotation device", "Piano", "Picture frame", "Pig", "Pillow", "Pizza", "Plate",
    "Platter", "Porch", "Poster", "Pumpkin", "Rabbit", "Rifle", "Roller skates", "Rose", "Salad", "Sandal",
    "Saucer", "Saxophone", "Scarf", "Sea lion", "Sea turtle", "Sheep", "Shelf", "Shirt", "Shorts", "Shrimp",
    "Sink", "Skateboard", "Ski", "Skull", "Skyscraper", "Snake", "Sock", "Sofa bed", "Sparrow", "Spider", "Spoon",
    "Sports uniform", "Squirrel", "Stairs", "Stool", "Strawberry", "Street light", "Studio couch", "Suit",
    "Sun hat", "Sunglasses", "Surfboard", "Sushi", "Swan", "Swimming pool", "Swimwear", "Tank", "Tap", "Taxi",
    "Tea", "Teddy bear", "Television", "Tent", "Tie", "Tiger", "Tin can", "Tire", "Toilet", "Tomato", "Tortoise",
    "Tower", "Traffic light", "Train", "Tripod", "Truck", "Trumpet", "Umbrella", "Van", "Vase",
    "Vehicle registration plate", "Violin", "Wall clock", "Waste container", "Watch", "Whale", "Wheel",
    "Wheelchair", "Whiteboard", "Window", "Wine", "Wine glass", "Woman", "Zebra", "Zucchini")


# --- annotations -------------------------------------------------------------------------------------

def read_annotations(path: Path, fix: str) -> dict:
    """The COCO-format annotation file; missing, unreadable or without images/categories: an error with ``fix``."""
    if not path.is_file():
        raise MissingDataError(f"OpenImages annotations not found: {path}", fix)
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise MissingDataError(f"{path}: not a readable COCO annotation file ({str(e).splitlines()[0][:100]})",
                               fix) from None
    if not isinstance(d, dict) or not d.get("images") or "annotations" not in d or "categories" not in d:
        raise MissingDataError(f"{path}: no images/annotations/categories (not a COCO annotation file)", fix)
    return d


# --- preprocessing -----------------------------------------------------------------------------------

def decode(path: Path) -> np.ndarray:
    """RGB uint8 HWC as cv2.imread + BGR2RGB gives it (3 channels, EXIF orientation applied). A file cv2
    cannot decode: MissingDataError."""
    import cv2

    img = cv2.imread(str(path)) if Path(path).is_file() else None   # (cv2 would print a warning for a missing file)
    if img is None:
        why = "not a readable image" if Path(path).exists() else "no such file"
        raise MissingDataError(f"{path}: {why}", "put the original JPEG there, then make "
                               "preprocess_data BENCHMARKS=retinanet")
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def to_model_input(rgb: np.ndarray, size: int) -> np.ndarray:
    """HWC uint8 RGB -> float32 CHW in [0, 1], resized to size x size as maybe_resize does it: in float32,
    cv2.INTER_LINEAR (the colour swap the reference does first commutes with the per-channel resize)."""
    import cv2

    x = cv2.resize(np.asarray(rgb, dtype=np.float32), (size, size), interpolation=cv2.INTER_LINEAR)
    return np.ascontiguousarray((x / 255.0).transpose(2, 0, 1), dtype=np.float32)


def preprocessed_file(out_dir: Path, file_name: str) -> Path:
    return out_dir / f"{file_name}.npy"


def check_preprocessed(path: Path, size: int, fix: str, mmap: bool = True) -> np.ndarray:
    from code.common.fileio import load_array

    return load_array(path, fix, dtype=np.float32, shape=(3, size, size), mmap=mmap)


def preprocess_all(image_dir: Path, images: Sequence[dict], size: int, out_dir: Path, fix: str, log=print) -> int:
    """Write every missing or damaged ``<file_name>.npy``; returns how many were written."""
    return write_missing(image_dir, images, out_dir, fix, lambda dest: check_preprocessed(dest, size, fix),
                         lambda im: to_model_input(decode(image_dir / im["file_name"]), size), "OpenImages")


def write_missing(image_dir: Path, images: Sequence[dict], out_dir: Path, fix: str, check, convert, dataset: str) -> int:
    """Every image of ``images`` must be in ``image_dir``; each ``<file_name>.npy`` in ``out_dir`` that ``check``
    rejects (MissingDataError: absent or damaged) is rewritten as ``convert(image entry)``. Returns how many."""
    from code.common import progress

    missing = [im["file_name"] for im in images if not (image_dir / im["file_name"]).is_file()]
    if missing:
        raise MissingDataError(f"{len(missing)} of {len(images)} {dataset} images missing in {image_dir} "
                               f"(e.g. {missing[0]})", fix)
    out_dir.mkdir(parents=True, exist_ok=True)
    done = 0
    with progress.bar(len(images), "preprocess", "image") as bar:
        for im in images:
            dest = preprocessed_file(out_dir, im["file_name"])
            try:
                check(dest)
            except MissingDataError:         # absent or damaged: (re)write it
                arr = convert(im)
                with staged_path(dest, suffix=".npy") as tmp:
                    with open(tmp, "wb") as f:
                        np.save(f, arr)
                done += 1
            bar.update()
    return done


# --- QSL ---------------------------------------------------------------------------------------------

class OpenImagesQSL(QSL):
    """Loaded samples as float32 (3, S, S) arrays, read from the per-image ``.npy`` files."""

    def __init__(self, pre_dir: Path, images: Sequence[dict], performance_count: int, size: int, fix: str):
        self.files = [preprocessed_file(pre_dir, im["file_name"]) for im in images]
        self.size, self.fix = size, fix
        missing = [f for f in self.files if not f.is_file()]
        if missing:
            raise MissingDataError(f"{len(missing)} of {len(self.files)} preprocessed images missing "
                                   f"(e.g. {missing[0]})", fix)
        for f in self.files:            # headers only: a damaged file stops the run before LoadGen starts
            self._check(f)
        self.total_count = len(self.files)
        self.performance_count = min(performance_count, self.total_count)
        self.loaded: dict[int, np.ndarray] = {}

    def load(self, indices: Sequence[int]) -> None:
        for i in indices:
            if i not in self.loaded:
                self.loaded[i] = np.ascontiguousarray(self._check(self.files[i], mmap=False))

    def unload(self, indices: Sequence[int]) -> None:
        for i in indices:
            self.loaded.pop(i, None)

    def _check(self, path: Path, mmap: bool = True) -> np.ndarray:
        """One preprocessed file, checked (dtype, shape): what a subclass storing another layout overrides."""
        return check_preprocessed(path, self.size, self.fix, mmap)

    def sample(self, i: int) -> np.ndarray:
        """(1, 3, S, S) view of a loaded sample."""
        return self.loaded[i][None]


# --- synthetic images (tiny variant) -----------------------------------------------------------------

def synthetic_image(rng) -> tuple[np.ndarray, list]:
    """One seeded RGB image (HWC uint8, 192-400 px a side): a smooth colour field with 1-6 planted
    rectangles and ellipses. Returns (image, [(x0, y0, x1, y1), ...])."""
    from PIL import Image, ImageDraw

    h, w = (int(v) for v in rng.integers(192, 401, size=2))
    base = rng.integers(0, 256, size=(3, 3, 3)).astype(np.uint8)
    im = Image.fromarray(base).resize((w, h), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(im)
    shapes = []
    for _ in range(int(rng.integers(1, 7))):
        bw, bh = int(rng.integers(w // 10, w // 2)), int(rng.integers(h // 10, h // 2))
        x0, y0 = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        (draw.rectangle if rng.random() < 0.5 else draw.ellipse)((x0, y0, x0 + bw, y0 + bh), fill=colour)
        shapes.append((x0, y0, x0 + bw, y0 + bh))
    img = np.asarray(im).astype(np.int16) + rng.integers(-12, 13, size=(h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8), shapes


# --- the real dataset: the reference's tools/openimages.py, without pandas/boto3/cv2 -------------------

def check_class_map(path: Path) -> None:
    names = {row[1] for row in _csv_rows(path) if len(row) >= 2}
    missing = [c for c in MLPERF_CLASSES if c not in names]
    if missing:
        raise MissingDataError(f"{path.name} lacks {len(missing)} of the 264 MLPerf classes (e.g. {missing[0]!r})",
                               "retry make download_data BENCHMARKS=retinanet")


def check_bbox_csv(path: Path) -> None:
    with open(path, newline="") as f:
        header = next(csv.reader(f), [])
    if header[:len(BBOX_HEADER)] != BBOX_HEADER:
        raise MissingDataError(f"{path.name}: unexpected header {header[:4]} (not the OpenImages box annotations)",
                               "retry make download_data BENCHMARKS=retinanet")


def check_jpeg(path: Path) -> None:
    from PIL import Image

    try:
        with Image.open(path) as im:
            im.verify()
    except Exception as e:  # noqa: BLE001 - PIL raises many types for a damaged file
        raise MissingDataError(f"{path.name}: not a readable image ({type(e).__name__})",
                               "retry make download_data BENCHMARKS=retinanet") from None


def _csv_rows(path: Path):
    with open(path, newline="", encoding="utf-8") as f:
        yield from csv.reader(f)


def mlperf_image_list(bbox_csv: Path, class_csv: Path) -> tuple[list[str], dict[str, int], list[dict]]:
    """(image ids with a box of an MLPerf class, in first-appearance order; LabelName -> category id;
    the box rows of those classes) as get_image_list / export_to_coco select them."""
    cat = {name: i for i, name in enumerate(MLPERF_CLASSES)}
    label_to_cat = {row[0]: cat[row[1]] for row in _csv_rows(class_csv) if len(row) >= 2 and row[1] in cat}
    ids: dict[str, None] = {}
    boxes = []
    rows = _csv_rows(bbox_csv)
    header = next(rows)
    col = {k: header.index(k) for k in BBOX_HEADER}
    for row in rows:
        if row[col["LabelName"]] in label_to_cat:
            ids.setdefault(row[col["ImageID"]], None)
            boxes.append({k: row[col[k]] for k in BBOX_HEADER})
    return list(ids), label_to_cat, boxes


def export_coco(image_ids: Sequence[str], label_to_cat: dict[str, int], boxes: list[dict], image_dir: Path,
                dest: Path) -> None:
    """export_to_coco: images sorted by ImageID with ids 1..N, box coordinates scaled to pixels, the
    OpenImages flags kept, iscrowd = IsGroupOf."""
    from PIL import Image, ImageOps

    dims = {}
    for i in image_ids:
        with Image.open(image_dir / f"{i}.jpg") as im:
            w, h = ImageOps.exif_transpose(im).size
        dims[i] = (h, w)
    order = sorted(dims)
    image_id = {name: n + 1 for n, name in enumerate(order)}
    images = [{"id": image_id[n], "file_name": f"{n}.jpg", "height": dims[n][0], "width": dims[n][1],
               "license": None, "coco_url": None} for n in order]
    anns = []
    for b in sorted((b for b in boxes if b["ImageID"] in dims), key=lambda b: b["ImageID"]):
        h, w = dims[b["ImageID"]]
        x0, x1, y0, y1 = (float(b[k]) for k in ("XMin", "XMax", "YMin", "YMax"))
        bbox = [x0 * w, y0 * h, (x1 - x0) * w, (y1 - y0) * h]
        flags = {k: int(b[k]) for k in ("IsOccluded", "IsInside", "IsDepiction", "IsTruncated", "IsGroupOf")}
        anns.append({"id": len(anns) + 1, "image_id": image_id[b["ImageID"]],
                     "category_id": label_to_cat[b["LabelName"]], "bbox": bbox, "area": bbox[2] * bbox[3],
                     "iscrowd": flags["IsGroupOf"], **flags})
    write_json(dest, {"info": {"dataset": "openimages_mlperf", "version": "v6"}, "licenses": [],
                      "categories": [{"id": i, "name": c, "supercategory": None} for i, c in enumerate(MLPERF_CLASSES)],
                      "images": images, "annotations": anns})


def download_openimages(root: Path, expected_images: int, log=print) -> Path:
    """The reference's download: both CSVs (checked), the MLPerf image list (checked against the
    round's dataset size), every image (each checked to decode; resumable: present good files are
    kept), then the COCO annotation file. Images that cannot be fetched: an error naming the list
    and the folder to put them in."""
    fix = "make download_data BENCHMARKS=retinanet"
    ann_dir, img_dir = root / "annotations", root / IMAGES
    bbox = download(BBOX_ANNOTATIONS_URL, ann_dir / "validation-annotations-bbox.csv", check=check_bbox_csv, fix=fix)
    classes = download(MAP_CLASSES_URL, ann_dir / "class-descriptions-boxable.csv", check=check_class_map, fix=fix)
    ids, label_to_cat, boxes = mlperf_image_list(bbox, classes)
    if len(ids) != expected_images:
        raise MissingDataError(f"the OpenImages box annotations select {len(ids)} images, not the MLPerf "
                               f"{expected_images}", f"delete {bbox} and retry {fix}")
    listing = root / "annotations" / "openimages-mlperf-images.txt"
    from code.common.fileio import write_text

    write_text(listing, "".join(f"validation/{i}\n" for i in ids))
    log(f"[download_data] {len(ids)} images listed in {listing}")
    from code.common import progress
    from code.common.errors import HarnessError

    failed, got = [], 0
    with progress.bar(len(ids), "images", "image") as bar:
        for i in ids:
            try:
                download(IMAGE_URL.format(i), img_dir / f"{i}.jpg", check=check_jpeg, fix=fix)
                got += 1
            except HarnessError as e:
                failed.append((i, e.cause))
                if len(failed) >= 3 and not got:
                    break                     # nothing comes through (no network): stop trying
            bar.update()
    if failed:
        raise MissingDataError(f"{len(failed)} OpenImages images could not be fetched (first: {failed[0][1]})",
                               f"put the {len(ids)} JPEGs listed in {listing} into {img_dir} (as <ImageID>.jpg), "
                               f"then rerun {fix}")
    dest = root / ANNOTATIONS
    export_coco(ids, label_to_cat, boxes, img_dir, dest)
    log(f"[download_data] {dest}")
    return dest
