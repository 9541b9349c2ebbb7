"""Fetching whisper-large-v3 and LibriSpeech dev-clean + dev-other (MLPerf Inference speech2text).

Model (speech2text/README.md "Get Model"): the MLCommons copy through the R2 downloader,
``bash <(curl -s https://raw.githubusercontent.com/mlcommons/r2-downloader/refs/heads/main/mlc-r2-downloader.sh)
-d whisper/model https://inference.mlcommons-storage.org/metadata/whisper-model.uri``, done here in Python
(``code.common.llm.download.r2_download``: the .uri base URL, the .md5 list beside it, every file md5-checked), then
checked to be a loadable Whisper folder with 128 mel bins. The README's external source is openai/whisper-large-v3
at revision 06f233fe (not for official submissions): such a folder placed where download_model puts the model
(with a download.json beside it) is used as it is.

Data (README "Unprocessed", download_dataset.sh): utils/download_librispeech.py fetches the two tarballs listed in
utils/inference_librispeech.csv and checks their md5; here the same URLs and md5s (``LIBRISPEECH``) through
``fileio.download`` (staged, resumable, md5-checked before it takes its name), extracted, then converted and
repacked as dataset.py describes (convert_librispeech.py + repackage_librispeech.py) into
``<data>/dev-all-repack/*.wav`` and ``<data>/dev-all-repack.json``. The reference lists the chapters in glob order
(the file system's); here they are sorted, so the sample order is the same on every machine. A folder that already
holds a ``dev-all-repack.json`` (the MLCommons preprocessed set, or the reference script's output) is used as it is
with ``--data_dir``.
"""
from __future__ import annotations

import tarfile
from pathlib import Path

from code.common import fileio
from code.common.errors import MissingDataError
from code.whisper import dataset

BENCHMARK = "whisper"
FIX_MODEL = f"make download_model BENCHMARKS={BENCHMARK}"
FIX_DATA = f"make download_data BENCHMARKS={BENCHMARK}"
MODEL_URI = "https://inference.mlcommons-storage.org/metadata/whisper-model.uri"
DATASET_URI = "https://inference.mlcommons-storage.org/metadata/whisper-dataset.uri"
HF_REPO, HF_REVISION = "openai/whisper-large-v3", "06f233fe06e710322aca913c1bc4249a0d71fce1"
# speech2text/utils/inference_librispeech.csv
LIBRISPEECH = {
    "dev-clean": ("http://www.openslr.org/resources/12/dev-clean.tar.gz", "42e2234ba48799c1f50f24a7926300a1"),
    "dev-other": ("http://www.openslr.org/resources/12/dev-other.tar.gz", "c8d0bcc9cca99d4f8b62fcc847357931"),
}
COMPLETE = "download.json"


# --- model ---------------------------------------------------------------------------------------------------
def find_checkpoint(root: Path) -> Path | None:
    """The folder under ``root`` (itself included) holding a Whisper config.json."""
    import json

    for cfg in sorted(Path(root).rglob("config.json"), key=lambda p: len(p.parts)):
        try:
            if json.loads(cfg.read_text()).get("model_type") == "whisper":
                return cfg.parent
        except (OSError, ValueError):
            continue
    return None


def check_checkpoint(folder: Path, fix: str = FIX_MODEL) -> dict:
    """A loadable whisper-large-v3 folder: model_type whisper, 128 mel bins, weights and a tokenizer."""
    from code.common.llm.download import check_hf_checkpoint

    cfg = check_hf_checkpoint(Path(folder), "whisper", "Whisper checkpoint", fix,
                              tokenizer=(("tokenizer.json",), ("vocab.json", "merges.txt")))
    if int(cfg.get("num_mel_bins", 0)) != 128:
        raise MissingDataError(f"{folder}: num_mel_bins {cfg.get('num_mel_bins')}, expected 128 (whisper-large-v3)",
                               fix)
    return cfg


def download_model(dest: Path, log=print) -> Path:
    """The MLCommons whisper-large-v3 copy into ``dest`` (md5-checked); returns its Hugging Face folder."""
    from code.common.llm import download as dl

    dest = Path(dest)
    found = find_checkpoint(dest) if dest.is_dir() else None
    if found is not None and (dest / COMPLETE).is_file():
        check_checkpoint(found)
        log(f"[download_model] {found} is complete (verified earlier)")
        return found
    dl.r2_download(MODEL_URI, dest, log=log)
    found = find_checkpoint(dest)
    if found is None:
        raise MissingDataError(f"{MODEL_URI} gave no Whisper config.json under {dest}", FIX_MODEL)
    cfg = check_checkpoint(found)
    fileio.write_json(dest / COMPLETE, {"uri": MODEL_URI, "folder": str(found.relative_to(dest)),
                                        "num_mel_bins": cfg.get("num_mel_bins"), "d_model": cfg.get("d_model")})
    return found


# --- data ----------------------------------------------------------------------------------------------------
def fetch_librispeech(archive_dir: Path, log=print) -> list[Path]:
    """Both tarballs into ``archive_dir``, each md5-checked (a present one that checks is reused)."""
    out = []
    for name, (url, md5) in LIBRISPEECH.items():
        dest = Path(archive_dir) / url.rsplit("/", 1)[1]
        log(f"[download_data] {name}: {url}")
        out.append(fileio.download(url, dest, md5=md5, fix=f"retry {FIX_DATA}"))
    return out


def extract(archive: Path, dest: Path) -> None:
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(dest, filter="data")


def convert_and_repack(librispeech_dirs: list[Path], data_dir: Path, log=print) -> list[dict]:
    """Every chapter (``<spk>-<chap>.trans.txt`` with its FLAC files) in sorted order: transcripts lower-cased and
    stripped (convert_librispeech.py), clips repacked per source (dataset.repack); writes the manifest."""
    trans = sorted(p for d in librispeech_dirs for p in Path(d).rglob("*.trans.txt"))
    if not trans:
        raise MissingDataError(f"no LibriSpeech *.trans.txt under {', '.join(map(str, librispeech_dirs))}", FIX_DATA)
    entries: list[dict] = []
    out_dir = Path(data_dir) / dataset.REPACK_DIR
    for t in trans:
        clips = []
        for line in t.read_text().splitlines():
            uid, _, text = line.partition(" ")
            if uid:
                clips.append((uid, dataset.read_audio(t.parent / f"{uid}.flac", FIX_DATA), text.lower().strip()))
        entries += dataset.repack(clips, out_dir, Path(data_dir))
    fileio.write_json(Path(data_dir) / dataset.MANIFEST, entries)
    log(f"[download_data] {len(entries)} repacked samples from {len(trans)} chapters -> {data_dir / dataset.MANIFEST}")
    return entries


def download_preprocessed(data_dir: Path, log=print) -> Path:
    """The reference's preprocessed set (README "Preprocessed": ``mlc-r2-downloader.sh -d whisper/dataset
    .../whisper-dataset.uri``) into ``data_dir``, every file md5-checked against the R2 list; returns the folder
    holding its dev-all-repack.json (the official accuracy_eval.py's --dataset_dir)."""
    from code.common.llm import download as dl

    data_dir = Path(data_dir)
    dl.r2_download(DATASET_URI, data_dir, log=log)
    found = sorted(data_dir.rglob(dataset.MANIFEST), key=lambda p: len(p.parts))
    if not found:
        raise MissingDataError(f"{DATASET_URI} gave no {dataset.MANIFEST} under {data_dir}", FIX_DATA)
    ents = dataset.read_manifest(found[0], FIX_DATA)
    missing = [e["files"][0]["fname"] for e in ents if not (found[0].parent / e["files"][0]["fname"]).is_file()]
    if missing:
        raise MissingDataError(f"{found[0]}: {len(missing)} of {len(ents)} audio files are missing (e.g. "
                               f"{missing[0]})", FIX_DATA)
    fileio.write_json(data_dir / COMPLETE, {"uri": DATASET_URI, "manifest": str(found[0].relative_to(data_dir)),
                                            "samples": len(ents)})
    log(f"[download_data] {len(ents)} preprocessed samples -> {found[0]}")
    return found[0]


def download_data(data_dir: Path, log=print) -> Path:
    """LibriSpeech dev-clean + dev-other fetched, checked, extracted, converted and repacked into ``data_dir``;
    returns the manifest. A complete earlier result (``download.json`` beside it) is reused."""
    data_dir = Path(data_dir)
    manifest = data_dir / dataset.MANIFEST
    if manifest.is_file() and (data_dir / COMPLETE).is_file():
        log(f"[download_data] {manifest} is complete")
        return manifest
    archives = fetch_librispeech(data_dir / "archives", log)
    raw = data_dir / "LibriSpeech"
    for a in archives:
        extract(a, data_dir)
    entries = convert_and_repack([raw / n for n in LIBRISPEECH], data_dir, log)
    if len(entries) != dataset.SAMPLES:
        log(f"[download_data] note: {len(entries)} samples, the official set has {dataset.SAMPLES}")
    fileio.write_json(data_dir / COMPLETE, {"sources": {n: {"url": u, "md5": m} for n, (u, m) in LIBRISPEECH.items()},
                                            "samples": len(entries)})
    return manifest
