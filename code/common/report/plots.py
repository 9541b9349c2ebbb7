"""The report's pictures, drawn with matplotlib (Agg, no display) from a run's sample timeline
(``code.common.harness.timeline``) and LoadGen's logged percentiles.

Each function writes one PNG and returns its file name, or None when the run has nothing to draw.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

DPI = 100
SIZE = (6.4, 3.6)


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out: Path) -> str:
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    _plt().close(fig)
    return out.name


def latency_histogram(lat_ms: np.ndarray, out: Path, title: str) -> str | None:
    if lat_ms.size == 0:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=SIZE)
    ax.hist(lat_ms, bins=min(60, max(10, int(np.sqrt(lat_ms.size)))), color="#3b6ea8")
    for p, style in ((50, "--"), (99, ":")):
        v = float(np.percentile(lat_ms, p))
        ax.axvline(v, color="#b33", linestyle=style, label=f"p{p} {v:.3g} ms")
    ax.set_xlabel("latency (ms, SUT side)")
    ax.set_ylabel("samples")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return _save(fig, out)


def percentile_curve(lat_ms: np.ndarray, loadgen: list[tuple[float, float]], out: Path, title: str,
                     bound_ms: float | None = None) -> str | None:
    """Latency against percentile, on a 'nines' axis (50, 90, 99, 99.9 evenly spaced); LoadGen's own
    percentiles as markers."""
    if lat_ms.size == 0 and not loadgen:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=SIZE)

    def nines(p):
        return -np.log10(np.maximum(1 - np.asarray(p, dtype=float) / 100, 1e-6))
    if lat_ms.size:
        p = np.linspace(0, 99.99 if lat_ms.size >= 1000 else 99.9, 400)
        ax.plot(nines(p), np.percentile(lat_ms, p), color="#3b6ea8", label="SUT side (every sample)")
    if loadgen:
        ps, vs = zip(*loadgen)
        ax.plot(nines(ps), vs, "o", color="#d98c1a", label="LoadGen (detail log)")
    if bound_ms:
        ax.axhline(bound_ms, color="#b33", linestyle="--", label=f"latency bound {bound_ms:g} ms")
    ticks = [0, 50, 90, 99, 99.9, 99.99]
    ax.set_xticks(nines(ticks))
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (ms)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return _save(fig, out)


def throughput(done_s: np.ndarray, out: Path, title: str, unit: str = "samples/s",
               weights: np.ndarray | None = None) -> str | None:
    """Completions per second over the run (tokens/s with ``weights``), in up to 60 bins."""
    if done_s.size < 2:
        return None
    span = float(done_s.max()) or 1e-3
    bins = int(min(60, max(5, done_s.size // 20)))
    counts, edges = np.histogram(done_s, bins=bins, range=(0, span), weights=weights)
    rate = counts / (edges[1] - edges[0])
    plt = _plt()
    fig, ax = plt.subplots(figsize=SIZE)
    ax.step(edges[:-1], rate, where="post", color="#2e8b57")
    ax.fill_between(edges[:-1], rate, step="post", alpha=0.3, color="#2e8b57")
    ax.set_xlabel("time since the first issue (s)")
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=10)
    return _save(fig, out)


def token_latencies(ttft_ms: np.ndarray, tpot_ms: np.ndarray, out: Path, title: str,
                    ttft_bound_ms: float | None = None, tpot_bound_ms: float | None = None) -> str | None:
    """TTFT and TPOT distributions side by side."""
    if ttft_ms.size == 0:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(SIZE[0] * 1.4, SIZE[1]))
    for ax, data, name, bound, color in ((axes[0], ttft_ms, "TTFT", ttft_bound_ms, "#7a4ea8"),
                                         (axes[1], tpot_ms, "TPOT", tpot_bound_ms, "#a84e7a")):
        if data.size:
            ax.hist(data, bins=min(50, max(8, int(np.sqrt(data.size)))), color=color)
            v = float(np.percentile(data, 99))
            ax.axvline(v, color="#333", linestyle=":", label=f"p99 {v:.3g} ms")
        if bound:
            ax.axvline(bound, color="#b33", linestyle="--", label=f"bound {bound:g} ms")
        ax.set_xlabel(f"{name} (ms, SUT side)")
        ax.set_ylabel("samples")
        if data.size or bound:
            ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return _save(fig, out)


def power_over_time(trace: dict, out: Path, title: str) -> str | None:
    """Informative power (metadata.json ``power.trace``): watts of each source against seconds into
    LoadGen's power window, stacked."""
    t = np.asarray(trace.get("t_s") or [], dtype=float)
    series = [(k[:-2], np.asarray(v, dtype=float)) for k, v in trace.items() if k.endswith("_w") and len(v) == t.size]
    if t.size == 0 or not series:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=SIZE)
    ax.stackplot(t, *[v for _, v in series], labels=[f"{n} (mean {v.mean():.1f} W)" for n, v in series],
                 colors=["#3b6ea8", "#c8803a", "#5a9a5a"][:len(series)], alpha=0.85)
    ax.set_xlabel("seconds into LoadGen's power window")
    ax.set_ylabel("watts (informative)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, out)
