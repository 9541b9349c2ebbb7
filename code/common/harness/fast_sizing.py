"""``--fast`` sizes itself: a few seconds of warm-up in the harness child measure this machine's real
rate (the run's own processors, outside LoadGen), and the scenario's sizing setting is set so the
run takes about min_duration (60 s) here, whatever the config says. Fast runs are never
submittable, so this is allowed; metadata.json records the measured and the configured values.

A sizing value given on the command line is the user's and is kept. Per scenario:
- Offline: offline_expected_qps = measured samples/s x MARGIN (the one query then lasts a little over
  min_duration);
- Server: server_target_qps capped at 80% of the measured samples/s when the config asks for more;
- SingleStream / MultiStream: expected latency = the measured mean latency of one query / MARGIN.
"""
from __future__ import annotations

import random
import threading
import time

WARMUP_S = 3.0          # measure at least this long
MAX_WARMUP_S = 30.0     # and at most this long (a slow first batch)
SERVER_CAP = 0.8
MARGIN = 1.1            # size for 10% more work than measured: a warm-up that underestimates the rate by up
                        # to 9% still fills min_duration (an unfilled one is INVALID); one that overestimates
                        # it by 36% still ends within 90 s of a 60 s min_duration


def _throughput(procs, indices: list[int], seconds: float) -> float:
    """Samples/s of all processors together, each on its own thread, full batches of random samples.
    Each worker's first batch is not timed (cold caches and allocations: tiny SDXL's first batch took
    a quarter of a 3 s warm-up and made the estimate 20% low)."""
    rates = [0.0] * len(procs)

    def loop(i: int, p) -> None:
        p.thread_init()           # as its SUT worker will be (pinned cores)
        bs = max(1, p.batch_size)
        # every sample equally often, in a shuffled order (a gather, not a slice), as LoadGen's equal-issue mode
        # issues them: with samples of different cost (3D-UNet volumes of 1-4 patches) a few seconds of random
        # picks with replacement weigh some samples more than the run will
        order = list(indices)
        random.Random(i).shuffle(order)
        k = 0

        def batch() -> list[int]:
            nonlocal k
            k += bs
            return [order[(k - bs + j) % len(order)] for j in range(bs)]

        p.process(batch())
        t0 = time.monotonic()
        n = 0
        while n < 2 or (time.monotonic() < t0 + seconds and n < 10_000):
            p.process(batch())
            n += 1
            if time.monotonic() > t0 + MAX_WARMUP_S:
                break
        rates[i] = n * bs / (time.monotonic() - t0)

    threads = [threading.Thread(target=loop, args=(i, p)) for i, p in enumerate(procs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(rates)


def _latency_ns(proc, indices: list[int], per_query: int, seconds: float) -> float:
    """Mean time of one query of ``per_query`` samples on one processor (batches of its size)."""
    times, stop, k = [], time.monotonic() + seconds, 0
    proc.process(indices[:max(1, proc.batch_size)])        # untimed: the first query is cold
    while len(times) < 3 or (time.monotonic() < stop and len(times) < 10_000):
        q = [indices[(k + j) % len(indices)] for j in range(per_query)]
        k += per_query
        t = time.perf_counter()
        for s in range(0, per_query, max(1, proc.batch_size)):
            proc.process(q[s:s + proc.batch_size])
        times.append(time.perf_counter() - t)
    return sum(times) / len(times) * 1e9


def size(ts, settings, procs, qsl) -> dict | None:
    """Measure and set the sizing value on ``ts`` (LoadGen TestSettings); returns what was done, for
    metadata.json, or None when the command line fixed the value."""
    from code.common import scenarios

    sc = scenarios.get(settings.scenario)
    if settings.sources.get(sc.sizing) == "cli":
        return None
    indices = list(range(min(qsl.performance_count, 1024)))
    qsl.load(indices)
    t0 = time.monotonic()
    try:
        key, old = sc.sizing, getattr(ts, sc.sizing)
        if sc.find_probe == "latency":
            per = getattr(ts, sc.samples_per_query) if sc.samples_per_query else 1
            ns = _latency_ns(procs[0], indices, per, WARMUP_S)
            measured = {"query_latency_ns": int(ns)}
            new = int(ns / MARGIN)
        else:
            rate = _throughput(procs, indices, WARMUP_S)
            measured = {"samples_per_s": round(rate, 3)}
            new = rate * MARGIN if sc.find_probe == "offline" else min(old, SERVER_CAP * rate)
    finally:
        qsl.unload(indices)
    setattr(ts, key, new)
    return {"setting": key, "configured": old, "set": new, "measured": measured,
            "warmup_s": round(time.monotonic() - t0, 2)}


STREAM_SERVER_CAP = 0.5   # LLM Server: half the measured rate (TTFT needs headroom that a batch rate does not show)


def size_stream(ts, settings, sut, count: int) -> dict | None:
    """``size`` for the token-streaming SUT (LLMs): the warm-up keeps each worker two batches deep
    (SingleStream: one sample at a time) through ``StreamingSUT.measure``."""
    from code.common import scenarios

    sc = scenarios.get(settings.scenario)
    if settings.sources.get(sc.sizing) == "cli":
        return None
    t0 = time.monotonic()
    single = sc.find_probe == "latency"          # the LLMs' latency scenario is SingleStream: one sample a query
    m = sut.measure(count, WARMUP_S, depth=1 if single else None, max_seconds=MAX_WARMUP_S)
    if not m["samples_per_s"]:
        return None
    key, old = sc.sizing, getattr(ts, sc.sizing)
    if single:
        new = int(m["mean_latency_ns"] / MARGIN)
    elif sc.find_probe == "offline":
        new = m["samples_per_s"] * MARGIN
    else:
        new = min(old, STREAM_SERVER_CAP * m["samples_per_s"])
    setattr(ts, key, new)
    return {"setting": key, "configured": old, "set": new, "measured": m, "warmup_s": round(time.monotonic() - t0, 2)}
