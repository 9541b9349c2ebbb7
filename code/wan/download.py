"""Fetching the Wan 2.2 prompts, VBench's prompt-to-dimension table, and the model. Every file is pinned.

- ``vbench_prompts.txt``: the reference's 248 prompts (text_to_video/wan-2.2-t2v-a14b/data/ of mlcommons/inference
  at the checker's commit), from --data_dir / $MLPERF_WAN_DATA_DIR, the shared checkout, or GitHub; sha256-checked.
- ``VBench_full_info.json``: which VBench dimensions (and auxiliary text: a style, a scene) each prompt is scored
  on. VBench's evaluate.py reads it from its own package; here it comes out of the ``vbench==0.1.5`` wheel
  (``pip download``, wheel and file sha256-checked).
- ``fixed_latent.pt``: optional. The reference's default --fixed-latent (data/fixed_latent.pt, shipped with the
  MLCommons dataset download, not the repository); without it the reference draws the latent from its seed, as we do.
- the model: Wan-AI/Wan2.2-T2V-A14B-Diffusers at the commit the reference README pins (huggingface_hub verifies
  each file against the hub's recorded hash); the reference's download_model.py does the same snapshot_download.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from code.common import paths
from code.common.errors import HarnessError, MissingDataError
from code.common.fileio import download, sha256_file, staged_path, write_json
from code.wan.constants import HF_MODEL_ID, HF_REVISION

INFERENCE_COMMIT = "b66003e10e2db4b8c36a448b0545ec90fcc6e9e9"
REF_DIR = "text_to_video/wan-2.2-t2v-a14b"
RAW_BASE = f"https://raw.githubusercontent.com/mlcommons/inference/{INFERENCE_COMMIT}/"
PROMPTS = "vbench_prompts.txt"
PROMPTS_SHA256 = "f45433f7d3f6ac055613bb36ea21f38120e3cb5873d91f7e621477761b7284e8"
FULL_INFO = "VBench_full_info.json"
FULL_INFO_SHA256 = "5dd2de80ee43cda750b2b72ea7023657c0b90d3702041c7e4608c65dbe50dccd"
VBENCH_WHEEL = ("vbench", "0.1.5", "13266ed4715d91a7669ab58484b9e010bc91bb96e129d414fb512d4937890023")
FIXED_LATENT = "fixed_latent.pt"
DATA_ENV = "MLPERF_WAN_DATA_DIR"
FIX_DATA = "make download_data BENCHMARKS=wan (or pass --data_dir=<folder with vbench_prompts.txt>)"
FIX_MODEL = "make download_model BENCHMARKS=wan"
COMPLETE = "download.json"


def local_data_dir(data_dir: str | None) -> Path | None:
    """The folder named by --data_dir, else ${DATA_ENV}, else None."""
    return paths.given_data_dir(data_dir, DATA_ENV, "Wan data", PROMPTS)


def _copy_checked(src: Path, dest: Path, want: str) -> Path:
    if sha256_file(src) != want:
        raise MissingDataError(f"{src} is not the official {dest.name} (sha256 mismatch)",
                               f"replace it with a fresh copy, or remove it to download ({FIX_DATA})")
    with staged_path(dest) as tmp:
        shutil.copyfile(src, tmp)
    return dest


def fetch_prompts(dest_dir: Path, data_dir: str | None, official_root: Path | None, log=print) -> Path:
    dest = dest_dir / PROMPTS
    if dest.exists() and sha256_file(dest) == PROMPTS_SHA256:
        return dest
    local = local_data_dir(data_dir)
    for folder in (local, official_root / REF_DIR / "data" if official_root else None):
        if folder is not None and (folder / PROMPTS).is_file():
            log(f"[wan] {PROMPTS}: copied from {folder}")
            return _copy_checked(folder / PROMPTS, dest, PROMPTS_SHA256)
    url = RAW_BASE + f"{REF_DIR}/data/{PROMPTS}"
    download(url, dest, sha256=PROMPTS_SHA256, fix=FIX_DATA)
    log(f"[wan] {PROMPTS}: downloaded {url}")
    return dest


def fetch_full_info(dest_dir: Path, data_dir: str | None, log=print) -> Path:
    """VBench_full_info.json from --data_dir, else out of the pinned vbench wheel (pip download, no install)."""
    dest = dest_dir / FULL_INFO
    if dest.exists() and sha256_file(dest) == FULL_INFO_SHA256:
        return dest
    local = local_data_dir(data_dir)
    if local is not None and (local / FULL_INFO).is_file():
        return _copy_checked(local / FULL_INFO, dest, FULL_INFO_SHA256)
    name, version, want = VBENCH_WHEEL
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([sys.executable, "-m", "pip", "download", f"{name}=={version}", "--no-deps", "-d", tmp,
                            "-q"], capture_output=True, text=True)
        wheels = list(Path(tmp).glob(f"{name}-{version}-*.whl"))
        if r.returncode or not wheels:
            raise MissingDataError(f"could not fetch the {name}=={version} wheel for {FULL_INFO}: "
                                   f"{(r.stderr.strip().splitlines() or ['no wheel'])[-1]}",
                                   f"check access to PyPI, or put {FULL_INFO} (VBench's) in --data_dir")
        if sha256_file(wheels[0]) != want:
            raise MissingDataError(f"{wheels[0].name}: sha256 mismatch (not the pinned wheel)",
                                   f"put VBench's {FULL_INFO} in --data_dir")
        with zipfile.ZipFile(wheels[0]) as z, staged_path(dest) as part:
            part.write_bytes(z.read(f"vbench/{FULL_INFO}"))
    if sha256_file(dest) != FULL_INFO_SHA256:
        dest.unlink()
        raise MissingDataError(f"{FULL_INFO} in {name}=={version}: sha256 mismatch", FIX_DATA)
    log(f"[wan] {FULL_INFO}: from {name}=={version}")
    return dest


def fetch_fixed_latent(dest_dir: Path, data_dir: str | None, log=print) -> Path | None:
    """The MLCommons dataset's fixed_latent.pt when --data_dir holds one (no checksum is published: its sha256 is
    recorded in the preprocessed manifest); None otherwise (the latent is drawn from the seed, as the reference
    does without one)."""
    local = local_data_dir(data_dir)
    if local is None or not (local / FIXED_LATENT).is_file():
        return None
    dest = dest_dir / FIXED_LATENT
    with staged_path(dest) as tmp:
        shutil.copyfile(local / FIXED_LATENT, tmp)
    log(f"[wan] {FIXED_LATENT}: copied from {local}")
    return dest


def download_reference_model(model_dir: Path, log=print) -> Path:
    """Wan-AI/Wan2.2-T2V-A14B-Diffusers at the README's commit into model_dir (about 126 GB)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise HarnessError("huggingface_hub is not installed", "pip install huggingface_hub") from None
    (model_dir / COMPLETE).unlink(missing_ok=True)
    try:
        snapshot_download(HF_MODEL_ID, revision=HF_REVISION, local_dir=str(model_dir))
    except Exception as e:  # network, auth, disk
        raise MissingDataError(f"could not download {HF_MODEL_ID}: {type(e).__name__}: {str(e).splitlines()[0]}",
                               f"check network access to huggingface.co (HF_TOKEN if needed), then re-run "
                               f"`{FIX_MODEL}`") from None
    write_json(model_dir / COMPLETE, {"repo": HF_MODEL_ID, "revision": HF_REVISION})
    log(f"[wan] {HF_MODEL_ID}@{HF_REVISION} -> {model_dir}")
    return model_dir
