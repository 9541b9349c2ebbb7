"""LibriSpeech dev-clean + dev-other as the reference packs them, the features, and the QSL.

The reference's data (speech2text/README.md, download_dataset.sh): both dev sets' FLAC files are decoded to 16 kHz
WAV with a lower-cased, stripped transcript each (utils/convert_librispeech.py), then repacked
(utils/repackage_librispeech.py): per source (``<speaker>-<chapter>``), clips are concatenated in order with 0.5 s
of silence between them while the result stays <= 30 s, clips over 30 s are dropped, and each pack is written as
``dev-all-repack/<source>_<n>.wav`` (16-bit PCM) with one entry in ``dev-all-repack.json``: 1,633 samples. The
manifest's format (``transcript``, ``files[0].fname`` relative to the data folder, ``original_duration``) is what
the official accuracy_eval.py reads through its ``--dataset_dir`` / ``--manifest`` arguments, so the tiny set is
written in the same format and the official script scores it as it is.

Transcripts become the reference's character ``LABELS`` indices (its Manifest.parse_transcript keeps the
characters in LABELS and drops the rest); answers are logged the same way (int64 indices).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from code.common.benchmark import QSL
from code.common.errors import MissingDataError
from code.whisper import features

# speech2text/reference_SUT.py and accuracy_eval.py: the answer alphabet (index = value logged)
LABELS = (" ", *"abcdefghijklmnopqrstuvwxyz", "'", *"0123456789", "$", "%", "+", "-")
LABEL_INDEX = {c: i for i, c in enumerate(LABELS)}
MANIFEST = "dev-all-repack.json"
REPACK_DIR = "dev-all-repack"
SAMPLES = 1633                         # the checker's dataset-size and performance-sample-count
MAX_S, PAD_S = 30.0, 0.5               # repackage_librispeech.py MAX_DURATION / PAD_DURATION
FEATURES = "features.npy"              # preprocessed: (N, n_mels, 3000) float32
PRE_MANIFEST = "preprocess.json"


def to_labels(text: str) -> np.ndarray:
    """The reference SUT's answer encoding: lower-cased, stripped, characters outside LABELS dropped, int64."""
    return np.array([LABEL_INDEX[c] for c in text.lower().strip() if c in LABEL_INDEX], dtype=np.int64)


def from_labels(ids: Sequence[int]) -> str:
    return "".join(LABELS[int(i)] for i in ids)


def transcript_labels(text: str) -> str:
    """A manifest transcript as the official Manifest parses it (characters outside LABELS dropped, case kept)."""
    return "".join(c for c in text if c in LABEL_INDEX)


# --- audio files ---------------------------------------------------------------------------------------
def read_audio(path: Path, fix: str) -> np.ndarray:
    """Mono float32 at 16 kHz, as ``librosa.load(path, sr=16000)`` gives for the reference's 16 kHz files."""
    import soundfile as sf

    try:
        data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as e:  # noqa: BLE001 - libsndfile's errors are RuntimeError / LibsndfileError
        raise MissingDataError(f"cannot read audio {path}: {e}", fix) from None
    if sr != features.SAMPLE_RATE:
        raise MissingDataError(f"{path}: {sr} Hz, expected {features.SAMPLE_RATE} (the reference's files are 16 kHz)",
                               fix)
    return data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]


def write_wav(path: Path, audio: np.ndarray) -> None:
    import soundfile as sf

    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), np.asarray(audio, dtype=np.float64), features.SAMPLE_RATE, subtype="PCM_16")


def sample_json(fname: str, audio_len: int, transcript: str) -> dict:
    """One manifest entry in repackage_librispeech.py's get_sample_json format."""
    d = float(audio_len / features.SAMPLE_RATE)
    return {"transcript": transcript,
            "files": [{"channels": 1, "sample_rate": float(features.SAMPLE_RATE), "bitdepth": 16, "bitrate": 256000.0,
                       "duration": d, "num_samples": int(audio_len), "encoding": "Signed Integer PCM",
                       "silent": False, "fname": fname, "speed": 1}],
            "original_duration": d, "original_num_samples": int(audio_len)}


def repack(clips: Sequence[tuple[str, np.ndarray, str]], out_dir: Path, data_dir: Path) -> list[dict]:
    """repackage_librispeech.py over (utterance id ``spk-chap-utt``, audio, transcript) in the given order: packs of
    one source up to 30 s (0.5 s silences between clips), clips over 30 s dropped. Writes the WAVs; returns the
    manifest entries (fnames relative to ``data_dir``)."""
    sr = features.SAMPLE_RATE
    by_source: dict[str, list[tuple[np.ndarray, str]]] = {}
    for uid, audio, text in clips:
        by_source.setdefault("-".join(uid.split("-")[:2]), []).append((audio, text))
    out: list[dict] = []

    def flush(source: str, n: int, entry: list[tuple[np.ndarray, str]]) -> None:
        pad = np.zeros(int(PAD_S * sr))
        parts, text = [], ""
        for a, t in entry:
            if parts:
                parts.append(pad)
                text += " "
            parts.append(a)
            text += t
        audio = np.concatenate(parts)
        path = out_dir / f"{source}_{n}.wav"
        write_wav(path, audio)
        out.append(sample_json(str(path.relative_to(data_dir)), audio.size, text))

    for source, items in by_source.items():
        n, entry, dur = 0, [], 0.0
        for audio, text in items:
            d = audio.size / sr
            if d > MAX_S:
                continue
            if entry and dur + PAD_S + d > MAX_S:
                flush(source, n, entry)
                n, entry, dur = n + 1, [], 0.0
            entry.append((audio, text))
            dur += d + (PAD_S if len(entry) > 1 else 0.0)
        if entry:
            flush(source, n, entry)
    return out


def read_manifest(path: Path, fix: str) -> list[dict]:
    """The entries of a dev-all-repack.json (each with ``transcript`` and ``files[0].fname``), as the official
    Manifest keeps them (none is longer than 30 s: the reference's MAX_DURATION filter drops nothing)."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise MissingDataError(f"manifest not found: {path}", fix) from None
    except (OSError, ValueError) as e:
        raise MissingDataError(f"{path}: not a JSON manifest ({e})", fix) from None
    if not isinstance(data, list) or not data:
        raise MissingDataError(f"{path}: expected a non-empty JSON list of samples", fix)
    for i, d in enumerate(data):
        if not isinstance(d, dict) or not isinstance(d.get("transcript"), str) or not d.get("files"):
            raise MissingDataError(f"{path}: entry {i} has no transcript or files", fix)
        if float(d.get("original_duration", 0)) > MAX_S:
            raise MissingDataError(f"{path}: entry {i} is {d['original_duration']} s, over the 30 s limit", fix)
    return data


# --- tiny synthetic set -----------------------------------------------------------------------------------
def synthetic_clip(rng: np.random.Generator, text: str) -> np.ndarray:
    """A speech-like waveform for ``text``: per word a voiced segment (harmonics of a pitch that glides, formant-like
    amplitude bumps, noise), short pauses between words. Its length follows the text (about 0.35 s a word)."""
    sr = features.SAMPLE_RATE
    parts = [np.zeros(int(0.2 * sr))]
    for w in text.split():
        n = int(sr * (0.12 + 0.045 * len(w)))
        t = np.arange(n) / sr
        f0 = rng.uniform(90, 220) * (1 + 0.1 * np.sin(2 * np.pi * rng.uniform(1, 4) * t))
        phase = 2 * np.pi * np.cumsum(f0) / sr
        voice = sum(np.sin(k * phase) / k for k in range(1, 6))
        env = np.sin(np.pi * t / t[-1]) ** 2
        seg = 0.25 * env * voice + 0.02 * rng.standard_normal(n)
        parts += [seg, np.zeros(int(sr * rng.uniform(0.05, 0.2)))]
    return np.clip(np.concatenate(parts), -1, 1).astype(np.float32)


def write_tiny_set(data_dir: Path, n_sources: int, seed: int) -> list[dict]:
    """LibriSpeech-shaped synthetic clips (``<spk>-<chap>-<utt>``, lower-case sentences), repacked exactly as the
    real set into ``data_dir/dev-all-repack`` with its manifest ``data_dir/dev-all-repack.json``."""
    from code.common.fileio import write_json
    from code.common.llm.tiny import TextGen

    rng = np.random.default_rng(seed)
    gen = TextGen(seed)
    clips = []
    for s in range(n_sources):
        spk, chap = 100 + 7 * s, 2000 + 13 * s
        for u in range(int(rng.integers(3, 10))):
            text = gen.sentence(4, 14).lower().replace(",", "").replace(".", "").replace("?", "")
            clips.append((f"{spk}-{chap}-{u:04d}", synthetic_clip(rng, text), text))
    entries = repack(clips, data_dir / REPACK_DIR, data_dir)
    write_json(data_dir / MANIFEST, entries)
    return entries


# --- QSL ------------------------------------------------------------------------------------------------------
class WhisperQSL(QSL):
    """Features of the preprocessed set (N, n_mels, 3000), memory-mapped; ``load`` copies the samples LoadGen asks
    for into memory (the whole set fits: 2.5 GB for the real 1,633), ``unload`` drops them."""

    def __init__(self, preprocessed: Path, performance_count: int, fix: str):
        from code.common.fileio import load_array

        self.features = load_array(Path(preprocessed) / FEATURES, fix, dtype=np.float32, mmap=True)
        if self.features.ndim != 3 or self.features.shape[2] != features.N_FRAMES:
            raise MissingDataError(f"{Path(preprocessed) / FEATURES}: shape {self.features.shape}, expected "
                                   f"(samples, mel bins, {features.N_FRAMES})", fix)
        self.total_count = int(self.features.shape[0])
        self.performance_count = min(performance_count or self.total_count, self.total_count)
        self.loaded: dict[int, np.ndarray] = {}

    def load(self, indices: Sequence[int]) -> None:
        for i in indices:
            if i not in self.loaded:
                self.loaded[i] = np.array(self.features[i])

    def unload(self, indices: Sequence[int]) -> None:
        for i in indices:
            self.loaded.pop(i, None)

    def batch(self, indices: Sequence[int]) -> np.ndarray:
        """(len(indices), n_mels, 3000) float32; a sample not loaded is read from the map."""
        return np.stack([self.loaded[i] if i in self.loaded else np.asarray(self.features[i]) for i in indices])
