"""KiTS19 data: the reference's preprocessing (preprocess.py), its on-disk layout, synthetic tiny cases, the QSL.

Preprocessing, per case (as the reference's Preprocessor.preprocess_case):
  1. load imaging.nii.gz / segmentation.nii.gz (nibabel), voxel spacing from the header's pixdim;
  2. resample to the target spacing (1.6, 1.2, 1.2) mm with scipy.ndimage.zoom (order 1 for the
     image, order 0 for the label, constant mode with the volume's minimum, grid_mode False);
  3. clip to [-79, 304] and normalise ((x - 101) / 76.9);
  4. edge-pad every edge to at least the ROI (128);
  5. make each edge a multiple of the sliding-window stride (64 = 128 x 0.5 overlap; the reference
     pads to multiples of the stride, not of 128): an edge whose remainder is under half a stride is
     cropped symmetrically, otherwise it is constant-padded (-2.2 for the image, 0 for the label).
The result is written in the reference's layout, so its accuracy_kits.py reads our folder as is:
  <preprocessed>/case_XXXXX.pkl              pickle of [image (1,D,H,W) float32, label (1,D,H,W) uint8]
  <preprocessed>/preprocessed_files.pkl      {"file_list": [cases], "cases": {case: aux}}
  <preprocessed>/nifti/case_XXXXX/{imaging,segmentation}.nii.gz   (reshaped affine)
The whole folder is written into a staging folder and swapped into place only when every case is
done (code.common.fileio.staged_dir), and reused while its inputs are unchanged (manifest.json).
The tiny variant uses a 32^3 ROI (stride 16) on the same code path.
"""
from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Sequence

import numpy as np

from code.common.benchmark import QSL
from code.common.errors import MissingDataError
from code.unet3d import constants as K

MANIFEST = "manifest.json"
FILES_PKL = "preprocessed_files.pkl"


# --- preprocessing (the reference's steps) -----------------------------------------------------------
def normalize(image: np.ndarray) -> np.ndarray:
    image = np.clip(image, K.MIN_CLIP_VAL, K.MAX_CLIP_VAL)
    return (image - K.MEAN_VAL) / K.STDDEV_VAL


def resample(image: np.ndarray, label: np.ndarray, spacing: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    from scipy.ndimage import zoom

    if list(spacing) == list(K.TARGET_SPACING):
        return image, label
    factor = np.array(spacing, dtype=np.float64) / np.array(K.TARGET_SPACING)
    image = zoom(image, factor, order=1, mode="constant", cval=image.min(), grid_mode=False)
    label = zoom(label, factor, order=0, mode="constant", cval=label.min(), grid_mode=False)
    return image, label


def reshaped_affine(affine: np.ndarray) -> np.ndarray:
    """The original affine with each axis's non-zero entry replaced by the target spacing (sign kept)."""
    out = affine.copy()
    targ = np.array(K.TARGET_SPACING)
    for i in range(3):
        idx = np.where(affine[i][:-1] != 0)
        sign = -1 if affine[i][idx] < 0 else 1
        out[i][idx] = targ[idx] * sign
    return out


def pad_to_min(image: np.ndarray, label: np.ndarray, roi: int) -> tuple[np.ndarray, np.ndarray]:
    need = [max(0, roi - s) for s in image.shape[1:]]
    pads = [(0, 0)] + [(n // 2, n - n // 2) for n in need]
    return np.pad(image, pads, mode="edge"), np.pad(label, pads, mode="edge")


def fit_to_stride(image: np.ndarray, label: np.ndarray, roi: int,
                  overlap: float = K.SLIDE_OVERLAP_FACTOR) -> tuple[np.ndarray, np.ndarray]:
    stride = int(roi * (1 - overlap))
    shape = image.shape[1:]
    cut = [s % stride if s % stride < stride // 2 else 0 for s in shape]
    sl = (slice(None),) + tuple(slice(c // 2, s - (c - c // 2)) for c, s in zip(cut, shape))
    image, label = image[sl], label[sl]
    add = [(stride - s % stride) % stride for s in image.shape[1:]]
    add = [a if s + a >= roi else a + stride for a, s in zip(add, image.shape[1:])]
    pads = [(0, 0)] + [(a // 2, a - a // 2) for a in add]
    image = np.pad(image, pads, mode="constant", constant_values=K.PADDING_VAL)
    label = np.pad(label, pads, mode="constant", constant_values=0)
    return image, label


def case_files(raw_dir: Path, case: str) -> tuple[Path, Path]:
    return raw_dir / case / "imaging.nii.gz", raw_dir / case / "segmentation.nii.gz"


def preprocess_case(raw_dir: Path, case: str, roi: int) -> tuple[np.ndarray, np.ndarray, dict]:
    import nibabel

    img_path, seg_path = case_files(raw_dir, case)
    img = nibabel.load(img_path)
    seg = nibabel.load(seg_path)
    spacing = img.header["pixdim"][1:4].tolist()
    image = img.get_fdata().astype(np.float32)
    label = seg.get_fdata().astype(np.uint8)
    if image.shape != label.shape:
        raise MissingDataError(f"{case}: imaging {image.shape} and segmentation {label.shape} differ in shape",
                               f"replace {raw_dir / case} with the KiTS19 files")
    image, label = resample(image, label, spacing)
    aux = {"original_affine": img.affine, "reshaped_affine": reshaped_affine(img.affine),
           "zoom_factor": np.array(spacing) / np.array(K.TARGET_SPACING), "case": case}
    image = normalize(image[None].copy())
    label = label[None]
    image, label = pad_to_min(image, label, roi)
    image, label = fit_to_stride(image, label, roi)
    image, label = image.astype(np.float32), label.astype(np.uint8)
    aux["image_shape"] = image.shape
    return image, label, aux


def check_raw(raw_dir: Path, cases: Sequence[str], fix: str) -> None:
    """Every case folder holds both files, before any work starts (nothing is written otherwise)."""
    for case in cases:
        for p in case_files(raw_dir, case):
            if not p.is_file():
                what = "case folder" if not p.parent.is_dir() else p.name
                raise MissingDataError(f"KiTS19 {case}: {what} missing ({p})", fix)


def raw_fingerprint(raw_dir: Path, cases: Sequence[str]) -> dict:
    out = {}
    for case in cases:
        for p in case_files(raw_dir, case):
            st = p.stat()
            out[f"{case}/{p.name}"] = [st.st_size, st.st_mtime_ns]
    return out


def is_current(out_dir: Path, manifest: dict) -> bool:
    try:
        return json.loads((out_dir / MANIFEST).read_text()) == manifest and (out_dir / FILES_PKL).is_file()
    except (OSError, ValueError):
        return False


def write_case_outputs(stage: Path, image: np.ndarray, label: np.ndarray, aux: dict) -> None:
    """<case>.pkl and nifti/<case>/{imaging,segmentation}.nii.gz in ``stage`` (the reference's layout)."""
    import nibabel

    case = aux["case"]
    with open(stage / f"{case}.pkl", "wb") as f:
        pickle.dump([image, label], f)
    nd = stage / "nifti" / case
    nd.mkdir(parents=True, exist_ok=True)
    nibabel.save(nibabel.Nifti1Image(image[0], affine=aux["reshaped_affine"]), nd / "imaging.nii.gz")
    nibabel.save(nibabel.Nifti1Image(label[0], affine=aux["reshaped_affine"]), nd / "segmentation.nii.gz")


def _preprocess_one(raw_dir: Path, case: str, roi: int, stage: Path) -> dict:
    image, label, aux = preprocess_case(raw_dir, case, roi)
    write_case_outputs(stage, image, label, aux)
    return aux


def preprocess_all(raw_dir: Path, cases: Sequence[str], roi: int, stage: Path, done=lambda: None) -> dict:
    """Every case into ``stage``, in up to 4 processes (as the reference's Pool(4)); returns case -> aux."""
    import os
    from concurrent.futures import ProcessPoolExecutor

    workers = max(1, min(4, len(os.sched_getaffinity(0)), len(cases)))
    if workers == 1:
        out = {}
        for c in cases:
            out[c] = _preprocess_one(raw_dir, c, roi, stage)
            done()
        return out
    with ProcessPoolExecutor(workers) as pool:
        futs = {c: pool.submit(_preprocess_one, raw_dir, c, roi, stage) for c in cases}
        out = {}
        for c, f in futs.items():
            out[c] = f.result()
            done()
    return out


def write_files_pkl(stage: Path, cases: Sequence[str], auxes: dict) -> None:
    with open(stage / FILES_PKL, "wb") as f:
        pickle.dump({"file_list": list(cases), "cases": {c: auxes[c] for c in cases}}, f)


def verify_md5(out_dir: Path, cases: Sequence[str]) -> list[str]:
    """Cases whose .pkl differs from the reference's meta/checksum_inference.json (real set only). The
    reference's md5s are of numpy 1.x pickles: under numpy >= 2 (module path numpy._core) they cannot
    match byte for byte, so a difference is reported, not an error."""
    from code.common.fileio import md5_file

    return [c for c in cases if c in K.PREPROCESSED_MD5 and md5_file(out_dir / f"{c}.pkl") != K.PREPROCESSED_MD5[c]]


# --- synthetic tiny cases --------------------------------------------------------------------------
# (raw shape, voxel spacing mm): resampled up and down, edge-padded, cropped and padded to the 16-voxel
# stride; after preprocessing they are 32^3 to 32x64x32 volumes of 1 to 4 patches of 32^3.
TINY_SPECS = (
    ((32, 32, 32), (1.6, 1.2, 1.2)),     # already at the target spacing: no resampling
    ((20, 50, 60), (2.5, 0.9, 0.9)),
    ((50, 40, 36), (1.0, 1.5, 1.5)),
    ((12, 26, 40), (3.0, 1.2, 1.0)),     # too small: edge padding to the ROI
    ((30, 90, 40), (2.0, 0.8, 0.8)),
    ((50, 40, 50), (1.25, 1.0, 1.4)),
)
TINY_CASES = K.INFERENCE_CASES[:len(TINY_SPECS)]


def synthetic_case(rng: np.random.Generator, shape=None, spacing=None) -> tuple[np.ndarray, np.ndarray, tuple]:
    """A CT-like volume (int16 HU): air, a soft-tissue body, 1-2 bright 'kidney' ellipsoids holding a
    darker 'tumour' sphere, noise; and its label (0 background, 1 kidney, 2 tumour)."""
    if shape is None:
        shape = tuple(int(x) for x in rng.integers(24, 48, size=3))
        spacing = (1.6, 1.2, 1.2)
    sp = np.array(spacing, dtype=np.float64)
    grids = np.meshgrid(*[np.arange(n) * s for n, s in zip(shape, sp)], indexing="ij")
    ext = np.array(shape) * sp
    img = np.full(shape, -1000.0)
    body = sum(((g - e / 2) / (0.48 * e)) ** 2 for g, e in zip(grids[1:], ext[1:])) < 1
    img[body] = 30.0
    label = np.zeros(shape, np.uint8)
    for _ in range(int(rng.integers(1, 3))):
        c = rng.uniform(0.3, 0.7, 3) * ext
        r = rng.uniform(0.12, 0.22, 3) * ext
        kid = sum(((g - ci) / ri) ** 2 for g, ci, ri in zip(grids, c, r)) < 1
        img[kid] = rng.uniform(150, 220)
        label[kid] = 1
        tc = c + rng.uniform(-0.5, 0.5, 3) * r
        tr = float(rng.uniform(0.3, 0.6) * r.min())
        tum = (sum((g - ci) ** 2 for g, ci in zip(grids, tc)) < tr ** 2) & kid
        img[tum] = rng.uniform(60, 110)
        label[tum] = 2
    img = img + rng.normal(0, 25, shape)
    return np.round(img).astype(np.int16), label, tuple(float(s) for s in spacing)


def write_case(raw_dir: Path, case: str, image: np.ndarray, label: np.ndarray, spacing: tuple) -> None:
    """imaging.nii.gz / segmentation.nii.gz as KiTS19 stores them (spacing in the header)."""
    import gzip

    import nibabel

    from code.common.fileio import staged_path

    affine = np.diag([-spacing[0], -spacing[1], -spacing[2], 1.0])
    for name, arr in (("imaging.nii.gz", image), ("segmentation.nii.gz", label)):
        nii = nibabel.Nifti1Image(arr, affine)
        nii.header.set_zooms(spacing)
        with staged_path(raw_dir / case / name, suffix=".nii.gz") as tmp:
            tmp.write_bytes(gzip.compress(nii.to_bytes(), compresslevel=6, mtime=0))


# --- QSL --------------------------------------------------------------------------------------------
def read_files_pkl(pre_dir: Path, fix: str) -> dict:
    p = pre_dir / FILES_PKL
    if not p.is_file():
        raise MissingDataError(f"preprocessed data not found: {p}", fix)
    try:
        with open(p, "rb") as f:
            d = pickle.load(f)
        d["file_list"], d["cases"]  # noqa: B018 - the keys accuracy_kits.py reads
    except Exception as e:  # noqa: BLE001 - truncated, not a pickle, wrong content
        raise MissingDataError(f"{p}: not the reference's preprocessed_files.pkl ({type(e).__name__})", fix) from None
    return d


def load_volume(path: Path, image_shape: tuple, roi: int, fix: str) -> tuple[np.ndarray, np.ndarray]:
    """[image, label] of one case .pkl, checked: float32 / uint8, (1, D, H, W) as recorded in
    preprocessed_files.pkl, every edge a multiple of the stride and >= the ROI."""
    if not path.is_file():
        raise MissingDataError(f"preprocessed volume not found: {path}", fix)
    try:
        with open(path, "rb") as f:
            obj = pickle.load(f)
        image, label = obj
    except Exception as e:  # noqa: BLE001
        raise MissingDataError(f"{path}: not a preprocessed [image, label] pickle ({type(e).__name__})", fix) from None
    for name, a, dt in (("image", image, np.float32), ("label", label, np.uint8)):
        if not isinstance(a, np.ndarray):
            raise MissingDataError(f"{path}: {name} is a {type(a).__name__}, expected a numpy array", fix)
        if a.dtype != dt:
            raise MissingDataError(f"{path}: {name} dtype {a.dtype}, expected {np.dtype(dt)}", fix)
        if tuple(a.shape) != tuple(image_shape):
            raise MissingDataError(f"{path}: {name} shape {tuple(a.shape)}, expected {tuple(image_shape)} "
                                   f"(preprocessed_files.pkl)", fix)
    stride = roi // 2
    if image.ndim != 4 or image.shape[0] != 1 or any(s < roi or s % stride for s in image.shape[1:]):
        raise MissingDataError(f"{path}: image shape {image.shape}, expected (1, D, H, W) with every edge >= {roi} "
                               f"and a multiple of {stride}", fix)
    return np.ascontiguousarray(image), label


class KiTSQSL(QSL):
    """All volumes are read and checked when the QSL is made (in the child, before LoadGen starts):
    the performance sample count is the whole set, as mlperf.conf asks for 3d-unet, so load/unload
    only record which samples LoadGen holds."""

    def __init__(self, pre_dir: Path, roi: int, performance_count: int, fix: str):
        d = read_files_pkl(pre_dir, fix)
        self.cases = list(d["file_list"])
        self.aux = d["cases"]
        missing = [c for c in self.cases if c not in self.aux]
        if missing:
            raise MissingDataError(f"{pre_dir / FILES_PKL}: no entry for {missing[0]}", fix)
        self.images = []
        for c in self.cases:
            img, _ = load_volume(pre_dir / f"{c}.pkl", tuple(self.aux[c]["image_shape"]), roi, fix)
            self.images.append(img)
        self.total_count = len(self.cases)
        self.performance_count = min(performance_count or self.total_count, self.total_count)
        self.loaded: set[int] = set()

    def load(self, indices: Sequence[int]) -> None:
        self.loaded = set(int(i) for i in indices)

    def unload(self, indices: Sequence[int]) -> None:
        self.loaded = set()

    def volume(self, index: int) -> np.ndarray:
        return self.images[index]
