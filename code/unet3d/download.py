"""KiTS19 raw data for the reference's 43 inference cases: a resumable, checksummed downloader.

Where the files come from (what the reference's ``make download_kits19_and_duplicate`` does through
``git clone neheller/kits19`` and ``python -m starter_code.get_imaging``):
  * segmentation.nii.gz: git blobs of neheller/kits19, fetched from raw.githubusercontent.com at the
    pinned commit and checked against their pinned git blob ids (constants.SEGMENTATION_BLOBS);
  * imaging.nii.gz: the Hugging Face dataset neheller/KiTS-Challenge-Imaging (images/case_XXXXX.nii.gz,
    what get_imaging.py downloads today), checked against the sha256 the Hub's tree API reports for
    each LFS file;
  * case_00400 is a copy of case_00185, as the reference's Makefile makes it.
Only the inference cases are fetched (not all 300). Bytes go through code.common.fileio.download:
partial files resume with an HTTP Range request, nothing unverified appears under its final name,
and a file already present is reused once it passes its checksum. $MLPERF_DOWNLOAD_MIRROR is honoured.
"""
from __future__ import annotations

import json
import shutil
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Sequence

from code.common.errors import HarnessError, MissingDataError
from code.common.fileio import download, git_blob_sha1, mirrored, sha256_file, staged_path
from code.unet3d import constants as K

SEG_URL = "https://raw.githubusercontent.com/neheller/kits19/{commit}/data/{case}/segmentation.nii.gz"
IMG_URL = "https://huggingface.co/datasets/{repo}/resolve/{rev}/images/{case}.nii.gz"
TREE_API = "https://huggingface.co/api/datasets/{repo}/tree/{rev}/images"


def where_to_put(raw_dir: Path) -> str:
    return (f"put the KiTS19 files of the 43 inference cases at {raw_dir}/case_XXXXX/imaging.nii.gz and "
            f"segmentation.nii.gz (git clone https://github.com/neheller/kits19, then python -m "
            f"starter_code.get_imaging; copy case_00185 to case_00400), or pass --data_dir=<kits19>/data; "
            f"then rerun make download_data BENCHMARKS=unet3d")


def imaging_index(fix: str) -> dict[str, tuple[str, int]]:
    """case -> (checksum, size) of images/<case>.nii.gz, from the Hub's tree API (paged by Link headers):
    the LFS sha256, or "git:<blob id>" for a file stored in git itself."""
    url = TREE_API.format(repo=K.HF_IMAGING_REPO, rev=K.HF_IMAGING_REVISION)
    out: dict[str, tuple[str, int]] = {}
    for _ in range(100):
        try:
            req = urllib.request.Request(mirrored(url), headers={"User-Agent": "mlperf-harness/1.0"})
            with urllib.request.urlopen(req, timeout=60) as r:
                entries = json.load(r)
                link = r.headers.get("Link") or ""
        except Exception as e:  # noqa: BLE001 - network, HTTP, JSON: one line with where to put the files
            raise HarnessError(f"could not read the KiTS19 imaging index {url}: {type(e).__name__}: {e}"
                               .replace("\n", " "), fix, 3) from None
        for e in entries if isinstance(entries, list) else []:
            path = e.get("path", "")
            lfs = e.get("lfs") or {}
            if not (path.startswith("images/") and path.endswith(".nii.gz")):
                continue
            if lfs.get("oid"):
                out[Path(path).name[:-len(".nii.gz")]] = (lfs["oid"], int(lfs.get("size", e.get("size", 0))))
            elif e.get("oid"):
                out[Path(path).name[:-len(".nii.gz")]] = (f"git:{e['oid']}", int(e.get("size", 0)))
        nxt = [p.split(";")[0].strip(" <>") for p in link.split(",") if 'rel="next"' in p]
        if not nxt:
            return out
        url = urllib.parse.urljoin(url, nxt[0])
    return out


def _blob_check(want: str, url: str, fix: str):
    def check(p: Path) -> None:
        if git_blob_sha1(p) != want:
            raise MissingDataError(f"checksum mismatch for {url}: git blob id is not {want} (file discarded)", fix)
    return check


def fetch_cases(raw_dir: Path, cases: Sequence[str] = K.INFERENCE_CASES, log=print) -> None:
    """Download (or verify and reuse) imaging and segmentation of ``cases`` into raw_dir/<case>/."""
    fix = where_to_put(raw_dir)
    sources = sorted({K.DUPLICATES.get(c, c) for c in cases})
    index: dict[str, tuple[str, int]] | None = None
    for n, case in enumerate(sources, 1):
        seg_sha, _ = K.SEGMENTATION_BLOBS[case]
        seg_url = SEG_URL.format(commit=K.KITS19_COMMIT, case=case)
        download(seg_url, raw_dir / case / "segmentation.nii.gz", check=_blob_check(seg_sha, seg_url, fix), fix=fix)
        if index is None:
            index = imaging_index(fix)
        if case not in index:
            raise HarnessError(f"{case} is not in the imaging index of {K.HF_IMAGING_REPO}", fix, 3)
        sha, size = index[case]
        img_url = IMG_URL.format(repo=K.HF_IMAGING_REPO, rev=K.HF_IMAGING_REVISION, case=case)
        log(f"[download_data] {n}/{len(sources)} {case}: imaging {size / 2**20:.0f} MiB ({sha[:16]}...)")
        if sha.startswith("git:"):
            download(img_url, raw_dir / case / "imaging.nii.gz", check=_blob_check(sha[4:], img_url, fix), fix=fix,
                     timeout=120)
        else:
            download(img_url, raw_dir / case / "imaging.nii.gz", sha256=sha, fix=fix, timeout=120)
    for dup, src in K.DUPLICATES.items():
        if dup in cases:
            copy_case(raw_dir, src, dup)


def copy_case(raw_dir: Path, src: str, dup: str) -> None:
    for name in ("imaging.nii.gz", "segmentation.nii.gz"):
        s, d = raw_dir / src / name, raw_dir / dup / name
        if d.exists() and d.stat().st_size == s.stat().st_size and sha256_file(d) == sha256_file(s):
            continue
        with staged_path(d, suffix=".nii.gz") as tmp:
            shutil.copyfile(s, tmp)


def verify_local(raw_dir: Path, cases: Sequence[str] = K.INFERENCE_CASES) -> list[str]:
    """A user-provided KiTS19 folder: every file present, segmentations matching their pinned blob ids.
    Returns notes; raises with where to put the files for anything missing or wrong."""
    fix = where_to_put(raw_dir)
    for case in cases:
        for name in ("imaging.nii.gz", "segmentation.nii.gz"):
            p = raw_dir / case / name
            if not p.is_file():
                raise MissingDataError(f"KiTS19 {case}: {name} missing ({p})", fix)
        src = K.DUPLICATES.get(case, case)
        if git_blob_sha1(raw_dir / case / "segmentation.nii.gz") != K.SEGMENTATION_BLOBS[src][0]:
            raise MissingDataError(f"{raw_dir / case / 'segmentation.nii.gz'} is not the kits19 file (git blob id "
                                   f"differs from {K.SEGMENTATION_BLOBS[src][0]})", fix)
    return ["imaging files of a local folder are checked for presence only (their sha256 needs the Hub's index)"]
