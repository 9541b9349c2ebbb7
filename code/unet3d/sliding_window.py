"""The reference's sliding-window inference (inference_utils.py / base_SUT.py), vectorised.

A preprocessed volume (1, D, H, W) is cut into ROI^3 patches at a stride of ROI*(1-overlap) (every
edge is a multiple of the stride and >= ROI after preprocessing, so the patches tile it exactly);
each patch's 3-class logits are weighted by a Gaussian importance map (scipy's gaussian window with
std 0.125*ROI, outer product over the three axes, cube root, max 1) and summed; the sum is divided
by the summed weights and the argmax over classes is the uint8 segmentation (D, H, W).

The division by the weight map is kept although argmax is invariant to it in exact arithmetic: the
reference does it in float32, and so do we, so ties round the same way.
"""
from __future__ import annotations

import functools
from typing import Callable, Iterator

import numpy as np


def _weights_1d(roi: int) -> np.ndarray:
    """The reference's kernel is cbrt(g(x) g(y) g(z)) / max, which factors into one 1-D profile per axis."""
    from scipy.signal import windows

    w = np.cbrt(windows.gaussian(roi, 0.125 * roi))
    return w / w.max()


@functools.lru_cache(maxsize=4)
def gaussian_patch(roi: int) -> np.ndarray:
    """(roi, roi, roi) float32 importance weights, as inference_utils.gaussian_kernel(roi, 0.125*roi)."""
    w = _weights_1d(roi)
    out = (w[:, None, None] * w[None, :, None] * w[None, None, :]).astype(np.float32)
    out.setflags(write=False)
    return out


def positions(shape: tuple[int, int, int], roi: int, overlap: float = 0.5) -> list[tuple[int, int, int]]:
    """Patch origins in the reference's order (depth, then height, then width)."""
    stride = int(roi * (1 - overlap))
    n = [(s - roi) // stride + 1 for s in shape]
    return [(i * stride, j * stride, k * stride) for i in range(n[0]) for j in range(n[1]) for k in range(n[2])]


@functools.lru_cache(maxsize=8)
def norm_map(shape: tuple[int, int, int], roi: int, overlap: float = 0.5) -> np.ndarray:
    """Summed importance weights over all patches of a volume of ``shape``. The patches form a full
    grid and the kernel factors per axis, so the sum is the outer product of three 1-D sums
    (a real volume's map is ~100 MB: only a few are cached)."""
    stride = int(roi * (1 - overlap))
    w = _weights_1d(roi)
    sums = []
    for s in shape:
        a = np.zeros(s)
        for p in range(0, s - roi + 1, stride):
            a[p:p + roi] += w
        sums.append(a)
    out = (sums[0][:, None, None] * sums[1][None, :, None] * sums[2][None, None, :]).astype(np.float32)
    out.setflags(write=False)
    return out


def check_volume(image: np.ndarray, roi: int, overlap: float = 0.5) -> None:
    stride = int(roi * (1 - overlap))
    if image.ndim != 4 or image.shape[0] != 1 or any(s < roi or s % stride for s in image.shape[1:]):
        raise ValueError(f"volume of shape {image.shape}: expected (1, D, H, W), each edge >= {roi} and a "
                         f"multiple of {stride}")


def batches(image: np.ndarray, roi: int, batch: int, overlap: float = 0.5) -> Iterator[tuple[list, np.ndarray]]:
    """(origins, (n, 1, roi, roi, roi) float32 patches) with n <= batch, in reference order."""
    pos = positions(image.shape[1:], roi, overlap)
    for s in range(0, len(pos), batch):
        chunk = pos[s:s + batch]
        x = np.empty((len(chunk), 1, roi, roi, roi), np.float32)
        for n, (i, j, k) in enumerate(chunk):
            x[n] = image[:, i:i + roi, j:j + roi, k:k + roi]
        yield chunk, x


def segment(image: np.ndarray, infer: Callable[[np.ndarray], np.ndarray], roi: int, batch: int,
            overlap: float = 0.5, pad_to_batch: bool = False) -> np.ndarray:
    """Sliding-window segmentation of one (1, D, H, W) float32 volume -> (D, H, W) uint8 labels.

    ``infer``: (n, 1, roi, roi, roi) float32 -> (n, 3, roi, roi, roi) logits. ``pad_to_batch``: the last
    partial batch is padded with zero patches (engines with a fixed batch dimension)."""
    check_volume(image, roi, overlap)
    shape = tuple(image.shape[1:])
    w = gaussian_patch(roi)
    acc = np.zeros((3, *shape), np.float32)
    for chunk, x in batches(image, roi, batch, overlap):
        n = len(chunk)
        if pad_to_batch and n < batch:
            x = np.concatenate([x, np.zeros((batch - n, *x.shape[1:]), np.float32)])
        y = np.asarray(infer(x))
        if y.shape[0] < n or y.shape[1:] != (3, roi, roi, roi):
            raise ValueError(f"the engine returned {y.shape} for {n} patches; expected ({n}, 3, {roi}, {roi}, {roi})")
        for m, (i, j, k) in enumerate(chunk):
            np.add(acc[:, i:i + roi, j:j + roi, k:k + roi], y[m] * w, out=acc[:, i:i + roi, j:j + roi, k:k + roi])
    acc /= norm_map(shape, roi, overlap)
    return np.argmax(acc, axis=0).astype(np.uint8)
