"""Whisper's log-mel input features, written here in numpy (no audio library).

The reference (speech2text/reference_SUT.py) hands vLLM the waveform of ``librosa.load(path, sr=16000)``; vLLM
computes the features with the checkpoint's Hugging Face ``WhisperFeatureExtractor`` (preprocessor_config.json of
whisper-large-v3: 128 mel bins, n_fft 400, hop 160, 30 s chunks). That extractor, step by step, is what this
module does:

1. the waveform is zero-padded (or cut) to 30 s = 480,000 samples: every sample costs a whole 30 s window, as the
   reference's FAQ requires;
2. a 400-point STFT with a periodic Hann window, hop 160, frames centred (the signal reflect-padded by 200 on both
   sides): 3,001 frames of 201 power bins |X|^2;
3. a Slaney-style mel filter bank (Slaney mel scale, 0-8,000 Hz, area-normalised triangles) of ``n_mels`` filters;
4. log10 of max(mel power, 1e-10); the last frame dropped (3,000 frames); values clamped from below at
   (the sample's maximum - 8); then (x + 4) / 4.

tests/test_whisper.py compares this with transformers' ``WhisperFeatureExtractor`` (the reference's path) and
with openai-whisper's ``log_mel_spectrogram`` (librosa's filters, torch's STFT) on the same waveform.
"""
from __future__ import annotations

import numpy as np

SAMPLE_RATE = 16_000
N_FFT = 400
HOP = 160
CHUNK_S = 30
N_SAMPLES = SAMPLE_RATE * CHUNK_S          # 480,000
N_FRAMES = N_SAMPLES // HOP                # 3,000
N_MELS = 128                               # whisper-large-v3 (80 for the earlier Whisper models)

_FILTERS: dict[int, np.ndarray] = {}


def _hz_to_mel(f: np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear (200/3 Hz a mel) below 1 kHz, logarithmic above."""
    f = np.asarray(f, dtype=np.float64)
    lin = 3.0 * f / 200.0
    logstep = np.log(6.4) / 27.0
    return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-12) / 1000.0) / logstep, lin)


def _mel_to_hz(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    logstep = np.log(6.4) / 27.0
    return np.where(m >= 15.0, 1000.0 * np.exp(logstep * (m - 15.0)), 200.0 * m / 3.0)


def mel_filters(n_mels: int = N_MELS) -> np.ndarray:
    """(n_mels, 201) triangular filters over the rfft bins, each scaled by 2 / its bandwidth (Slaney norm)."""
    if n_mels not in _FILTERS:
        fft_hz = np.linspace(0.0, SAMPLE_RATE / 2, 1 + N_FFT // 2)
        edges = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(SAMPLE_RATE / 2), n_mels + 2))
        width = np.diff(edges)
        rise = (fft_hz[None, :] - edges[:-2, None]) / width[:-1, None]
        fall = (edges[2:, None] - fft_hz[None, :]) / width[1:, None]
        tri = np.maximum(0.0, np.minimum(rise, fall))
        _FILTERS[n_mels] = tri * (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return _FILTERS[n_mels]


def pad_or_trim(audio: np.ndarray) -> np.ndarray:
    a = np.asarray(audio, dtype=np.float32).reshape(-1)[:N_SAMPLES]
    return np.pad(a, (0, N_SAMPLES - a.size)) if a.size < N_SAMPLES else a


def log_mel(audio: np.ndarray, n_mels: int = N_MELS) -> np.ndarray:
    """(n_mels, 3000) float32 features of one mono 16 kHz waveform (float, -1..1)."""
    x = pad_or_trim(audio).astype(np.float64)
    x = np.pad(x, (N_FFT // 2, N_FFT // 2), mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(x, N_FFT)[::HOP]          # (3001, 400)
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(N_FFT) / N_FFT)        # periodic Hann
    power = np.abs(np.fft.rfft(frames * window, axis=-1)) ** 2                   # (3001, 201)
    mel = mel_filters(n_mels) @ power.T                                          # (n_mels, 3001)
    spec = np.log10(np.maximum(mel, 1e-10))[:, :-1]
    spec = np.maximum(spec, spec.max() - 8.0)
    return ((spec + 4.0) / 4.0).astype(np.float32)
