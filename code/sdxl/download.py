"""Fetching SDXL data and weights. Every file is checked against a pinned checksum.

Data: the official files from the public mlcommons/inference repository, pinned to one commit, or a
local folder holding the same files (``--data_dir`` or $MLPERF_SDXL_DATA_DIR) for offline use.
Model: stabilityai/stable-diffusion-xl-base-1.0 via huggingface_hub (fp16 or fp32 weights), plus the
accuracy scorers' weights (code.sdxl.scorers). The tiny variant is built locally, offline.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from code.common import paths
from code.common.errors import HarnessError, MissingDataError
from code.common.fileio import download, git_blob_sha1, sha256_file, staged_path, write_json, write_text
from code.sdxl.constants import HF_MODEL_ID, TINY_CAL_CAPTIONS, TINY_SAMPLES, TINY_SEED, latent_side

INFERENCE_COMMIT = "b66003e10e2db4b8c36a448b0545ec90fcc6e9e9"
RAW_BASE = f"https://raw.githubusercontent.com/mlcommons/inference/{INFERENCE_COMMIT}/"

# name in the data folder -> (path in mlcommons/inference, checksum kind, checksum)
# sha256 computed from the repository blobs (`git show <commit>:<path> | sha256sum`). val2014.npz is
# checked by its git blob id (sha1 of "blob <size>\0" + content), the checksum git itself records.
DATA_FILES = {
    "captions_source.tsv": ("text_to_image/coco2014/captions/captions_source.tsv", "sha256",
                            "2eeb95637b30fe5af26dd644bafa7affe4e5472ad0bda32d0feb1bd261280d5e"),
    "latents.npy": ("text_to_image/tools/latents.npy", "sha256",
                    "78cac10a20ea287f88b5851382e21504a755338d3f8ba8ffd2bcf9e9bf2404f9"),
    "sample_ids.txt": ("text_to_image/tools/sample_ids.txt", "sha256",
                       "a8574ce73da3a80f8fe83ec97ee1278390404ad6315a9b0478fd480d57814733"),
    "coco_cal_captions_list.txt": ("calibration/COCO-2014/coco_cal_captions_list.txt", "sha256",
                                   "d712f9bb13e11a16b438dd6283a8dbf860733ca6262792a1f4f05a0300983cb8"),
    "val2014.npz": ("text_to_image/tools/val2014.npz", "git-blob-sha1", "806479d0693a33110526b6689aa26baddd995c7b"),
}
REQUIRED = ("captions_source.tsv", "latents.npy", "sample_ids.txt")   # the rest only matter for accuracy/calibration
DATA_ENV = "MLPERF_SDXL_DATA_DIR"
FIX_DATA = "make download_data BENCHMARKS=sdxl (or pass --data_dir=<folder with the official files>)"


def checksum_ok(name: str, path: str | os.PathLike) -> bool:
    _, kind, want = DATA_FILES[name]
    return (sha256_file(path) if kind == "sha256" else git_blob_sha1(path)) == want


def local_data_dir(data_dir: str | None) -> Path | None:
    """The folder named by --data_dir, else ${DATA_ENV}, else None."""
    return paths.given_data_dir(data_dir, DATA_ENV, "SDXL data", "captions_source.tsv, latents.npy and sample_ids.txt")


def fetch_one(name: str, dest_dir: Path, local: Path | None, log=print) -> Path:
    """Copy ``name`` from the local folder (checksum-checked) or download it from mlcommons/inference."""
    dest = dest_dir / name
    if dest.exists() and checksum_ok(name, dest):
        return dest
    if local is not None and (local / name).exists():
        src = local / name
        if not checksum_ok(name, src):
            raise MissingDataError(f"{src} is not the official {name} (checksum mismatch)",
                                   f"replace it with a fresh copy, or remove it to download ({FIX_DATA})")
        with staged_path(dest) as tmp:
            shutil.copyfile(src, tmp)
        log(f"[sdxl] {name}: copied from {local}")
        return dest
    repo_path, kind, want = DATA_FILES[name]
    url = RAW_BASE + repo_path
    if kind == "sha256":
        download(url, dest, sha256=want, fix=FIX_DATA)
    else:
        def blob_ok(p: Path) -> None:
            if git_blob_sha1(p) != want:
                raise MissingDataError(f"checksum mismatch for {url}: git blob id is not {want} (file discarded)",
                                       FIX_DATA)
        download(url, dest, check=blob_ok, fix=FIX_DATA)
    log(f"[sdxl] {name}: downloaded {url}")
    return dest


def fetch_reference_data(dest_dir: Path, data_dir: str | None, log=print) -> None:
    """The official files into dest_dir. Missing optional files (FID stats, calibration list) only warn."""
    local = local_data_dir(data_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    for name in DATA_FILES:
        try:
            fetch_one(name, dest_dir, local, log)
        except HarnessError as e:
            if name in REQUIRED:
                raise
            log(f"[sdxl] warning: {name} not fetched ({e.cause}); accuracy/calibration need it: {FIX_DATA}")


def make_tiny_data(dest_dir: Path, data_dir: str | None, real_dir: Path, n: int = TINY_SAMPLES, log=print) -> None:
    """Tiny variant data: the first n real captions when a real captions file is at hand (local folder or
    the reference data folder), else n synthetic captions; the tiny fixed latent; 10 sample ids."""
    from code.sdxl.dataset import make_latent, read_captions, synthetic_captions, write_captions

    local = local_data_dir(data_dir)
    src = next((d / "captions_source.tsv" for d in (local, real_dir)
                if d is not None and (d / "captions_source.tsv").exists()), None)
    if src is not None:
        rows = read_captions(src)[:n]
        origin = f"first {len(rows)} captions of {src}"
    else:
        rows = synthetic_captions(n, TINY_SEED)
        origin = f"{n} synthetic captions (seed {TINY_SEED})"
    dest_dir.mkdir(parents=True, exist_ok=True)
    write_captions(dest_dir / "captions_source.tsv", rows)
    import numpy as np

    with staged_path(dest_dir / "latents.npy", suffix=".npy") as tmp:
        with open(tmp, "wb") as f:
            np.save(f, make_latent(latent_side("tiny")))
    # Compliance image ids: the first 10, so that runs on a prefix (--sdxl_sample_count >= 10) keep all.
    write_text(dest_dir / "sample_ids.txt", "".join(f"{i}\n" for i in range(min(10, len(rows)))))
    # The tiny calibration list: the ids of its first TINY_CAL_CAPTIONS captions (a fixed slice of its own set).
    write_text(dest_dir / CAL_LIST, "".join(f"{r['id']}\n" for r in rows[:TINY_CAL_CAPTIONS]))
    write_json(dest_dir / "SOURCE.json", {"captions": origin, "latent": "randn_tensor seed 0", "count": len(rows)})
    log(f"[sdxl] tiny data: {origin} -> {dest_dir}")


# --- calibration ---------------------------------------------------------------------------------------

CAL_LIST = "coco_cal_captions_list.txt"          # the official list: 500 COCO-2014 train caption ids
CAL_CAPTIONS = "calibration_captions.tsv"        # id + caption of each listed id, built here once
# The annotations the reference's text_to_image/tools/coco_calibration.py reads the captions from, with the
# sha256 it pins for the archive.
COCO_ANNOTATIONS_URL = "https://s3.amazonaws.com/images.cocodataset.org/annotations/annotations_trainval2014.zip"
COCO_ANNOTATIONS_SHA256 = "031296bbc80c45a1d1f76bf9a90ead27e94e99ec629208449507a4917a3bf009"
CAL_FIX = 'make calibrate RUN_ARGS="--benchmarks=sdxl" (or --calibration_dir=<folder with the reference\'s captions.tsv>)'


def calibration_captions(raw_dir: Path, ids: list[str], calibration_dir: str | None, log=print) -> dict[str, str]:
    """Caption id -> caption for the official calibration ids, as the reference's coco_calibration.py
    selects them (captions_train2014.json rows whose id is listed, newlines removed, stripped). Read from
    the reference's own output (``captions.tsv`` in --calibration_dir, or raw_dir/calibration/), else
    from our earlier extraction (raw_dir/calibration_captions.tsv), else extracted from the COCO
    annotations archive, downloaded sha256-checked."""
    import csv
    import io
    import zipfile

    for tsv in ([Path(calibration_dir) / "captions.tsv"] if calibration_dir else []) + \
            [raw_dir / "calibration" / "captions.tsv", raw_dir / CAL_CAPTIONS]:
        if tsv.is_file():
            from code.sdxl.dataset import read_captions

            got = {r["id"]: r["caption"] for r in read_captions(tsv)}
            missing = [i for i in ids if i not in got]
            if missing:
                raise MissingDataError(f"{len(missing)} of the {len(ids)} calibration caption ids are not in {tsv} "
                                       f"(e.g. id {missing[0]})", f"remove {tsv} and rerun {CAL_FIX}")
            return {i: got[i] for i in ids}
    if calibration_dir:
        raise MissingDataError(f"no captions.tsv in --calibration_dir={calibration_dir}",
                               "point it at the folder coco_calibration.py wrote (<dataset-dir>/calibration), or drop "
                               "the flag to extract the captions from the COCO annotations")
    archive = raw_dir / "annotations_trainval2014.zip"
    log(f"[sdxl] calibration captions: extracting {len(ids)} ids from {COCO_ANNOTATIONS_URL}")
    download(COCO_ANNOTATIONS_URL, archive, sha256=COCO_ANNOTATIONS_SHA256, fix=CAL_FIX)
    try:
        with zipfile.ZipFile(archive) as z, z.open("annotations/captions_train2014.json") as f:
            anns = json.load(f)["annotations"]
    except (zipfile.BadZipFile, KeyError, ValueError) as e:
        archive.unlink(missing_ok=True)
        raise MissingDataError(f"{archive} is not the COCO 2014 annotations archive ({type(e).__name__})", CAL_FIX) from None
    want = set(ids)
    got = {str(a["id"]): a["caption"].replace("\n", "").strip() for a in anns if str(a["id"]) in want}
    missing = [i for i in ids if i not in got]
    if missing:
        raise MissingDataError(f"{len(missing)} calibration caption ids are not in captions_train2014.json "
                               f"(e.g. id {missing[0]})", f"check {raw_dir / CAL_LIST} against the official list")
    buf = io.StringIO()
    w = csv.writer(buf, delimiter="\t", lineterminator="\n")
    w.writerow(["id", "caption"])
    w.writerows([i, got[i]] for i in ids)
    write_text(raw_dir / CAL_CAPTIONS, buf.getvalue())
    archive.unlink(missing_ok=True)          # 241 MB, of which the 500 captions were all that was needed
    return {i: got[i] for i in ids}


# --- model -----------------------------------------------------------------------------------------

COMPLETE = "download.json"    # written last into the pipeline folder: the real model is complete
COMPONENT_WEIGHTS = {"text_encoder": "model", "text_encoder_2": "model", "unet": "diffusion_pytorch_model",
                     "vae": "diffusion_pytorch_model"}


def hf_patterns(dtype: str) -> list[str]:
    """Files of the diffusers layout to fetch: configs, tokenizers, scheduler, one weight file per component."""
    suffix = ".fp16.safetensors" if dtype == "fp16" else ".safetensors"
    pats = ["model_index.json", "scheduler/*", "tokenizer/*", "tokenizer_2/*"]
    for comp, stem in COMPONENT_WEIGHTS.items():
        pats += [f"{comp}/config.json", f"{comp}/{stem}{suffix}"]
    return pats


def download_reference_model(pipeline_dir: Path, dtype: str = "fp16", revision: str | None = None, log=print) -> Path:
    """stabilityai/stable-diffusion-xl-base-1.0 into pipeline_dir (huggingface_hub verifies each file
    against the hub's recorded sha256/etag). Records the resolved commit in download.json, written last."""
    try:
        from huggingface_hub import HfApi, snapshot_download
    except ImportError:
        raise HarnessError("huggingface_hub is not installed", "pip install huggingface_hub") from None
    (pipeline_dir / COMPLETE).unlink(missing_ok=True)   # incomplete until this download finishes
    try:
        info = HfApi().model_info(HF_MODEL_ID, revision=revision)
        snapshot_download(HF_MODEL_ID, revision=info.sha, local_dir=str(pipeline_dir),
                          allow_patterns=hf_patterns(dtype))
    except Exception as e:  # network, auth, disk
        raise MissingDataError(f"could not download {HF_MODEL_ID}: {type(e).__name__}: {str(e).splitlines()[0]}",
                               "check network access to huggingface.co (HF_TOKEN if needed), then "
                               "re-run `make download_model BENCHMARKS=sdxl`") from None
    write_json(pipeline_dir / COMPLETE, {"repo": HF_MODEL_ID, "revision": info.sha, "dtype": dtype,
                                         "variant": "fp16" if dtype == "fp16" else None})
    log(f"[sdxl] {HF_MODEL_ID}@{info.sha} ({dtype}) -> {pipeline_dir}")
    return pipeline_dir


def weights_variant(pipeline_dir: Path) -> str | None:
    """diffusers ``variant=`` of the weight files ("fp16" for the hub's fp16 files), from download.json."""
    meta = Path(pipeline_dir) / COMPLETE
    return json.loads(meta.read_text()).get("variant") if meta.exists() else None
