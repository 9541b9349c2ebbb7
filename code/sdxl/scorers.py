"""The two SDXL accuracy scorers, loaded from local files only.

- CLIP score: open_clip ViT-B-32 with OpenAI's weights, built the way the MLCommons reference
  (open-clip-torch 2.26.1, ``pretrained="openai"``) builds it: ``load_openai_model`` (QuickGELU,
  fp16-rounded weights run in fp32) and the OpenAI eval transform (bicubic resize of the shortest
  side to 224, centre crop, OpenAI mean/std). Captions go through ``open_clip.tokenize`` (77 tokens).
- FID: pytorch-fid's ``InceptionV3`` pool3 block (2048 features) with the TF-ported FID weights;
  its forward resizes to 299x299 (bilinear) and maps [0, 1] to [-1, 1], as the reference does. The
  tiny variant's FID uses the same network's 192-d block (``TINY_FID_DIMS``, see there).

Nothing here downloads implicitly: ``download_scorer_weights`` fetches the real files (checksummed),
``build_tiny_scorers`` writes seeded random ones for the offline tiny variant. Both return the
``ScorerFiles`` that ``load_scorers`` reads.

Threading: a ClipScorer or FidInception is used by one thread at a time (torch modules, no locks).
Images everywhere are uint8 arrays [N, H, W, 3] (RGB, HWC), the layout LoadGen receives.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from code.common.errors import HarnessError, MissingDataError
from code.common.fileio import download, staged_path, write_json

# The URL open_clip uses for ("ViT-B-32", "openai"); the path segment is the file's SHA-256.
CLIP_URL = ("https://openaipublic.azureedge.net/clip/models/"
            "40d365715913c9da98579312b702a82c18be219cc2a73407c4526f58eba950af/ViT-B-32.pt")
CLIP_SHA256 = "40d365715913c9da98579312b702a82c18be219cc2a73407c4526f58eba950af"
# pytorch_fid.inception.FID_WEIGHTS_URL; torch.hub names it by its SHA-256 prefix (6726825d).
INCEPTION_URL = ("https://github.com/mseitzer/pytorch-fid/releases/download/fid_weights/"
                 "pt_inception-2015-12-05-6726825d.pth")
INCEPTION_SHA256 = "6726825d0af5f729cebd5821db510b11b1cfad8faad88a03f1befd49fb9129b2"

FID_DIMS = 2048                 # pool3 features
# The tiny scorer's FID uses pytorch-fid's 192-d block (its --dims 192: the second max pool of the same
# InceptionV3). Over a few dozen images a 2048-d covariance is singular and its sqrtm (pytorch-fid
# retries with an offset: two 2048x2048 sqrtm) costs ~15 s on 2 cores per FID; 192-d gives the same
# comparison in milliseconds. The real scorer is pool3, 2048-d, as the reference.
TINY_FID_DIMS = 192
TINY_CLIP_ARCH = "ViT-B-32-quickgelu"   # same architecture as the real scorer, random weights
TINY_STATS_IMAGES = 48          # synthetic reference images behind the tiny FID statistics
TINY_STATS_SIZE = 128           # their side, pixels (the tiny SDXL output size)
_MANIFEST = "scorers.json"

_FIX_REAL = "python -m code.main --action=download_model --benchmarks=sdxl"
_FIX_TINY = "python -m code.main --action=download_model --benchmarks=sdxl --model_variant=tiny"


@dataclasses.dataclass(frozen=True)
class ScorerFiles:
    """Where one variant's scorer files live under ``models_dir``."""
    clip: Path                   # OpenAI-format CLIP checkpoint (TorchScript archive or state dict)
    inception: Path              # pytorch-fid FID Inception state dict
    fid_stats: Path | None       # tiny only: reference statistics (npz with mu, sigma)


def scorer_files(models_dir: Path, variant: str) -> ScorerFiles:
    models_dir = Path(models_dir)
    if variant == "tiny":
        return ScorerFiles(models_dir / "clip" / "ViT-B-32.random.pt",
                           models_dir / "fid" / "pt_inception.random.pth",
                           models_dir / "fid" / "val2014.random.npz")
    return ScorerFiles(models_dir / "clip" / "ViT-B-32.pt",
                       models_dir / "fid" / "pt_inception-2015-12-05-6726825d.pth", None)


def download_scorer_weights(models_dir: Path) -> ScorerFiles:
    """Fetch the real CLIP and Inception weights (SHA-256 checked; a present good file is reused)."""
    files = scorer_files(models_dir, "reference")
    download(CLIP_URL, files.clip, sha256=CLIP_SHA256, fix=_FIX_REAL, timeout=300)
    download(INCEPTION_URL, files.inception, sha256=INCEPTION_SHA256, fix=_FIX_REAL, timeout=300)
    return files


# --- loading ----------------------------------------------------------------------------------

_BUILD_LOCK = threading.Lock()


class ClipScorer:
    """100 x cosine(image, caption) with an OpenAI-format CLIP checkpoint."""

    def __init__(self, checkpoint: Path, device: str = "cpu"):
        import open_clip
        from open_clip.openai import load_openai_model

        with warnings.catch_warnings(), _no_init():   # torch.jit.load deprecation, TorchScript dispatch notes
            warnings.simplefilter("ignore")
            self.model = load_openai_model(str(checkpoint), precision="fp32", device=device).eval()
        self.preprocess = open_clip.image_transform(self.model.visual.image_size, is_train=False,
                                                    mean=open_clip.OPENAI_DATASET_MEAN,
                                                    std=open_clip.OPENAI_DATASET_STD)
        self.tokenize = open_clip.tokenize
        self.device = device

    def image_features(self, images: np.ndarray):
        """uint8 [N, H, W, 3] -> L2-normalised float32 torch tensor [N, D] (on CPU)."""
        import torch
        from PIL import Image

        x = torch.stack([self.preprocess(Image.fromarray(im)) for im in _check_images(images)])
        with torch.inference_mode():
            f = self.model.encode_image(x.to(self.device)).float()
        return (f / f.norm(dim=-1, keepdim=True)).cpu()

    def text_features(self, captions: Sequence[str]):
        import torch

        with torch.inference_mode():
            f = self.model.encode_text(self.tokenize(list(captions)).to(self.device)).float()
        return (f / f.norm(dim=-1, keepdim=True)).cpu()

    def scores(self, images: np.ndarray, captions: Sequence[str]) -> np.ndarray:
        """Per-pair CLIP score, float64 [N]: 100 x cosine of image i and caption i."""
        if len(images) != len(captions):
            raise ValueError(f"{len(images)} images but {len(captions)} captions")
        img, txt = self.image_features(images), self.text_features(captions)
        return 100.0 * (img * txt).sum(dim=-1).double().numpy()


class FidInception:
    """pytorch-fid InceptionV3 pool3 features from a local weights file."""

    def __init__(self, weights: Path, device: str = "cpu", dims: int = FID_DIMS):
        import torch
        from pytorch_fid import inception as pfi

        state = torch.load(weights, map_location="cpu", weights_only=True)
        # pytorch-fid only knows how to fetch its weights by URL; hand it the local state dict
        # instead. Its own constructor still builds the FID-specific blocks and checks every key.
        with _no_init(), _swap_attr(pfi, "load_state_dict_from_url", lambda *a, **k: state):
            self.model = pfi.InceptionV3([pfi.InceptionV3.BLOCK_INDEX_BY_DIM[dims]])
        self.model = self.model.to(device).eval()
        self.device, self.dims = device, dims

    def activations(self, images: np.ndarray, batch_size: int = 8) -> np.ndarray:
        """uint8 [N, H, W, 3] -> float64 [N, dims]. Same input as torchvision's ToTensor (x/255)."""
        import torch

        images = _check_images(images)
        out = np.empty((len(images), self.dims), dtype=np.float64)
        with torch.inference_mode():
            for s in range(0, len(images), batch_size):
                x = torch.from_numpy(np.ascontiguousarray(images[s:s + batch_size]))
                x = x.permute(0, 3, 1, 2).to(self.device, torch.float32).div(255)
                pred = self.model(x)[0]
                if pred.shape[2] != 1 or pred.shape[3] != 1:      # blocks before pool3: pooled as pytorch-fid does
                    pred = torch.nn.functional.adaptive_avg_pool2d(pred, output_size=(1, 1))
                out[s:s + len(x)] = pred.squeeze(3).squeeze(2).cpu().numpy()
        return out


# torch.nn.init functions that module constructors call to fill their parameters with random values.
_INIT_FUNCTIONS = ("uniform_", "normal_", "trunc_normal_", "constant_", "zeros_", "ones_", "xavier_uniform_",
                   "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_")


@contextlib.contextmanager
def _no_init():
    """Module constructors skip their random initialisation (as diffusers' and transformers' ``no_init_weights``):
    for a model whose every parameter and persistent buffer a strict ``load_state_dict`` then overwrites, as both
    scorers' builders do, the result is the same model, without the ~2 CPU-s the ViT-B-32's and the Inception's
    random draws cost per load. The torch.nn.init functions are process-wide, so construction is serialised
    under _BUILD_LOCK; no other thread may build modules meanwhile (the accuracy step runs after LoadGen)."""
    import torch

    # torch.nn.modules.activation imported its own names (MultiheadAttention's xavier_uniform_, constant_)
    owners = (torch.nn.init, torch.nn.modules.activation)
    with _BUILD_LOCK:
        saved = [(m, n, getattr(m, n)) for m in owners for n in _INIT_FUNCTIONS if hasattr(m, n)]
        for m, n, _ in saved:
            setattr(m, n, lambda tensor, *a, **k: tensor)
        try:
            yield
        finally:
            for m, n, f in saved:
                setattr(m, n, f)


@contextlib.contextmanager
def _swap_attr(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def _check_images(images: np.ndarray) -> np.ndarray:
    images = np.asarray(images)
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"expected uint8 images [N, H, W, 3], got {images.dtype} {images.shape}")
    return images


def fid_dims(variant: str) -> int:
    return TINY_FID_DIMS if variant == "tiny" else FID_DIMS


def require_scorer_files(models_dir: Path, variant: str) -> ScorerFiles:
    """The variant's scorer files; MissingDataError (with the fixing command) if a weights file is absent."""
    files = scorer_files(models_dir, variant)
    for p in (files.clip, files.inception):
        if not p.is_file():
            raise MissingDataError(f"SDXL accuracy scorer weights not found: {p}",
                                   _FIX_TINY if variant == "tiny" else _FIX_REAL)
    return files


def load_scorers(models_dir: Path, variant: str, device: str = "cpu") -> tuple[ClipScorer, FidInception]:
    """Both scorers for ``variant``; MissingDataError (with the fixing command) if a file is absent."""
    files = require_scorer_files(models_dir, variant)
    try:
        return ClipScorer(files.clip, device), FidInception(files.inception, device, fid_dims(variant))
    except HarnessError:
        raise
    except Exception as e:  # truncated or foreign checkpoint
        raise MissingDataError(f"cannot load SDXL scorer weights from {files.clip.parent.parent}: "
                               f"{type(e).__name__}: {str(e)[:200]}",
                               (_FIX_TINY if variant == "tiny" else _FIX_REAL) + " (after deleting the bad file)")


# --- FID statistics ---------------------------------------------------------------------------

def activation_stats(acts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mu, sigma) exactly as pytorch-fid / the reference compute them."""
    if len(acts) < 2:
        raise HarnessError(f"FID needs at least 2 images, got {len(acts)}",
                           "run the accuracy test over more samples", 4)
    return np.mean(acts, axis=0), np.cov(acts, rowvar=False)


def save_fid_stats(path: Path, mu: np.ndarray, sigma: np.ndarray) -> None:
    """Write an npz in val2014.npz's format (keys mu, sigma), atomically."""
    with staged_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, mu=mu, sigma=sigma)


def load_fid_stats(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with np.load(path) as f:
            return f["mu"][:], f["sigma"][:]
    except FileNotFoundError:
        raise MissingDataError(f"FID reference statistics not found: {path}",
                               "python -m code.main --action=download_data --benchmarks=sdxl") from None
    except Exception as e:
        raise MissingDataError(f"FID reference statistics unreadable: {path}: {type(e).__name__}: {e}",
                               "delete it and rerun: python -m code.main --action=download_data "
                               "--benchmarks=sdxl") from None


# --- tiny (offline) scorers ---------------------------------------------------------------------

def build_tiny_scorers(models_dir: Path, seed: int = 0) -> ScorerFiles:
    """Seeded random-weight scorers and reference statistics that exist offline.

    Same architectures and the same loading code as the real scorers; only the numbers they give
    are meaningless except as a comparison between two image sets. Idempotent: reuses files
    built with the same seed.
    """
    import torch

    files = scorer_files(models_dir, "tiny")
    manifest = Path(models_dir) / "fid" / _MANIFEST
    want = {"seed": seed, "clip_arch": TINY_CLIP_ARCH, "stats_images": TINY_STATS_IMAGES,
            "stats_size": TINY_STATS_SIZE, "fid_dims": TINY_FID_DIMS}
    if all(p.is_file() for p in (files.clip, files.inception, files.fid_stats, manifest)):
        try:
            if json.loads(manifest.read_text()) == want:
                return files
        except ValueError:
            pass
    gen = torch.Generator().manual_seed(seed)
    _write_tiny_clip(files.clip, seed)
    _write_tiny_inception(files.inception, gen)
    rng = np.random.default_rng(seed)
    images = synthetic_images(rng, TINY_STATS_IMAGES, TINY_STATS_SIZE)
    mu, sigma = activation_stats(FidInception(files.inception, dims=TINY_FID_DIMS).activations(images))
    save_fid_stats(files.fid_stats, mu, sigma)
    write_json(manifest, want)
    return files


def _write_tiny_clip(path: Path, seed: int) -> None:
    import open_clip
    import torch

    with torch.random.fork_rng(devices=[]):          # seed locally; leave the caller's RNG alone
        torch.manual_seed(seed)
        model = open_clip.create_model(TINY_CLIP_ARCH, pretrained=None)
    # OpenAI checkpoints are fp16; load_openai_model rounds to fp16 anyway, so store half the bytes.
    state = {k: v.half() if v.is_floating_point() else v for k, v in model.state_dict().items()}
    with staged_path(path, suffix=".pt") as tmp:
        torch.save(state, tmp)


def _write_tiny_inception(path: Path, gen) -> None:
    """Random FID-Inception weights. Default init collapses the pool3 features (FID ~1e-13), so
    every conv is re-initialised Kaiming-normal (fan_in, ReLU); BatchNorm stays identity."""
    import torch
    import torchvision

    net = torchvision.models.inception_v3(weights=None, aux_logits=False, num_classes=1008,
                                          init_weights=False)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.Conv2d):
                fan_in = m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1]
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * (2.0 / fan_in) ** 0.5)
            elif isinstance(m, torch.nn.Linear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * (1.0 / m.in_features) ** 0.5)
                m.bias.zero_()
    with staged_path(path, suffix=".pth") as tmp:
        torch.save(net.state_dict(), tmp)


def synthetic_images(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """n smooth random RGB images, uint8 [n, size, size, 3]: bicubic-upsampled 8x8 colour noise."""
    from PIL import Image

    low = rng.integers(0, 256, size=(n, 8, 8, 3), dtype=np.uint8)
    return np.stack([np.asarray(Image.fromarray(im).resize((size, size), Image.BICUBIC)) for im in low])
