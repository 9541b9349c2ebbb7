"""The generic batching SUT that puts any benchmark's Processors behind LoadGen.

The dispatch mode comes from the scenario definition (``code.common.scenarios``):
- ``queue`` (Offline): issue_queries hands batches to worker queues and returns at once;
- ``batcher`` (Server): workers fill batches from the samples LoadGen issued, and run them;
- ``inline`` (SingleStream, MultiStream): work runs on LoadGen's issue thread (LoadGen issues the
  next query only after this one completes, so inline work saves a thread hand-off per query).

Threading contract:
- ``issue_queries`` is called on LoadGen's issue thread.
- One worker thread per Processor; a Processor is only ever used by its own worker.
- Server: issue_queries appends LoadGen's samples to a pending deque under one lock (no per-sample
  Python work, no thread hand-off); a worker takes a full batch at once, or waits until the batch
  fills or the oldest pending sample has waited ``batch_timeout_s``. Workers are woken only for
  a first sample or a full batch. (ResNet50 null backend, batch 64, this 2-core machine: max VALID
  Server QPS 36k with a batcher thread and queue.Queue hand-offs, 70k now; a bare SUT completing
  inline reaches ~100k.)
- Response memory: the numpy arrays returned by ``Processor.process`` stay referenced until
  ``QuerySamplesComplete`` returns (LoadGen copies the bytes it logs before returning).

Overload (Server): the pending deque is bounded by ``max_pending`` (``pending_bound``). A SUT that
falls that far behind has already lost the run (more of its samples will be late than the latency
percentile allows), so rather than queue without limit (memory grows with the target QPS) it
records ``overload`` (when, how far behind, the rate it was serving)
and from then on answers every pending and new sample at once with an empty response, so the run
ends on time. Such a run is INVALID whatever LoadGen's summary says: the runner marks it so in
metadata.json with the explanation, and staging refuses it.
"""
from __future__ import annotations

import collections
import math
import queue
import threading
import time
from typing import Sequence

import numpy as np

from code.common.benchmark import Processor
from code.common.harness.timeline import Timeline

_STOP = object()


class NullProcessor(Processor):
    """Returns one byte per sample without computing: measures the harness's own overhead ceiling.
    ``service_s`` > 0 makes it a test backend with a known service rate: each batch sleeps that long
    (batch_size / service_s samples/s per worker, whatever the CPU load)."""

    def __init__(self, batch_size: int, service_s: float = 0.0):
        self.batch_size = batch_size
        self.service_s = service_s
        self._out = np.zeros(1, dtype=np.uint8)

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        if self.service_s:
            time.sleep(self.service_s)
        return [self._out] * len(indices)


def pending_bound(target_qps: float, latency_bound_s: float, percentile: float, expected_queries: float,
                  batch_size: int, workers: int) -> int:
    """Server: how many samples may wait for a worker before the SUT counts as overloaded.

    Past this bound the run is INVALID whatever happens next, so shedding changes no verdict: of P
    pending samples at most target_qps x latency_bound can still finish within the bound, and once
    more than (1 - percentile) of the run's expected queries are late, its latency percentile is
    over the bound. Never fewer than 256 samples or eight batches per worker."""
    sure = (1 - percentile) * expected_queries + target_qps * latency_bound_s
    return max(256, 8 * batch_size * workers, math.ceil(round(sure, 6)))   # round: 0.01 * 6e6 is 60000.00000000004


class CachingProcessor(Processor):
    """TEST ONLY (--use_cached_responses): answers a repeated sample from a cache. This is the
    cheating TEST04 exists to catch; it lets tests prove that TEST04 fails on such a SUT."""

    def __init__(self, inner: Processor):
        self.inner = inner
        self.batch_size = inner.batch_size
        self.cache: dict[int, np.ndarray] = {}

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        todo = [i for i in dict.fromkeys(indices) if i not in self.cache]
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start:start + self.batch_size]
            for i, out in zip(chunk, self.inner.process(chunk)):
                self.cache[i] = out
        return [self.cache[i] for i in indices]

    def warmup(self):
        self.inner.warmup()

    def close(self):
        self.inner.close()


class BatchingSUT:
    MODES = ("queue", "batcher", "inline")

    def __init__(self, lg, dispatch: str, processors: list[Processor], batch_timeout_s: float = 0.002,
                 max_pending: int = 0, order_key=None):
        if dispatch not in self.MODES:
            raise ValueError(f"dispatch mode {dispatch!r} is not one of {self.MODES}")
        self.lg = lg
        self.dispatch = dispatch
        self.processors = processors
        self.batch_size = max(1, processors[0].batch_size)
        self.batch_timeout_s = batch_timeout_s
        self.order_key = order_key          # queue mode: QSL index -> sort key (Benchmark.offline_order_key)
        self.inline = dispatch == "inline"
        self.work: queue.SimpleQueue = queue.SimpleQueue()      # batches for the workers
        # batcher mode: samples LoadGen issued that no batch holds yet, guarded by _cv
        self._pending: collections.deque = collections.deque()
        self._arrivals: collections.deque = collections.deque()   # issue time of each pending sample
        self._cv = threading.Condition(threading.Lock())
        self._idle = 0             # workers waiting for a first sample
        self._filling = 0          # workers waiting for their batch to fill
        self._stopping = False
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.completed = 0
        self.issued = 0                  # samples LoadGen handed over (written on its issue thread only)
        self.busy: dict[str, tuple[float, int]] = {}   # thread name -> (monotonic start, samples) of its batch
        self.max_pending = max_pending   # batcher mode: 0 = unbounded
        self.overload: dict | None = None  # set once, when max_pending is exceeded
        self.shed = 0                    # samples answered empty after the overload
        self._t0: float | None = None   # batcher mode: when LoadGen issued the first sample
        self.timeline = Timeline()       # per-sample issue / completion times (make report)

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        for p in self.processors:
            p.warmup()
        if self.inline:
            return

        loop = self._batching_worker if self.dispatch == "batcher" else self._worker
        for i, p in enumerate(self.processors):
            t = threading.Thread(target=loop, args=(p,), name=f"sut-worker-{i}", daemon=True)
            t.start()
            self.threads.append(t)

    def stop(self) -> None:
        if self.dispatch == "batcher":
            with self._cv:
                self._stopping = True
                self._cv.notify_all()
        else:
            for _ in self.processors:
                self.work.put(_STOP)
        for t in self.threads:
            t.join(timeout=60)
        for p in self.processors:
            p.close()

    # --- LoadGen callbacks ----------------------------------------------------------------------
    def issue_queries(self, samples) -> None:
        self.issued += len(samples)
        if self.dispatch == "batcher":     # the hot path: no per-sample Python work here
            now = time.monotonic()
            with self._cv:
                if self._t0 is None:
                    self._t0 = now
                pending = self._pending
                if self.max_pending and (self.overload is not None or len(pending) + len(samples) > self.max_pending):
                    shed = self._shed_locked(samples, now)
                else:
                    shed = None
                    pending.extend(samples)
                    if len(samples) == 1:
                        self._arrivals.append(now)
                    else:
                        self._arrivals.extend([now] * len(samples))
                    # wake a worker only for a first sample, or all of them when a batch is full
                    if self._idle and len(pending) == len(samples):
                        self._cv.notify()
                    elif len(pending) >= self.batch_size and self._filling:
                        self._cv.notify_all()
            if shed:                           # overloaded: answered empty, outside the lock
                lg = self.lg
                lg.QuerySamplesComplete([lg.QuerySampleResponse(x.id, 0, 0) for x in shed])
            return
        items = [(s.id, s.index) for s in samples]
        now = time.monotonic()
        if self.inline:
            self._run_batches(self.processors[0], items, now)
        else:
            # Offline: hand out batches in issue order (or sorted by the benchmark's key: BERT groups
            # features of similar length); workers pull as they free up.
            if self.order_key is not None:
                key = self.order_key
                items.sort(key=lambda it: key(it[1]))
            for start in range(0, len(items), self.batch_size):
                self.work.put((now, items[start:start + self.batch_size]))

    def flush_queries(self) -> None:
        return None

    @property
    def progress(self) -> int:
        """The watchdog's sign of life: completed samples (a batch completes as a whole)."""
        return self.completed

    def state(self) -> str:
        """What the workers are doing now, for a stall report: each busy batch and for how long."""
        now = time.monotonic()
        busy = [f"{name} in {type(self.processors[0]).__name__}.process() for {now - t0:.1f}s on {n} sample(s)"
                for name, (t0, n) in sorted(self.busy.items())]
        return (f"{self.completed} of {self.issued} issued samples completed; "
                + ("; ".join(busy) if busy else "no batch in process() (waiting on LoadGen or the queue)"))

    def _shed_locked(self, samples, now: float) -> list:
        """Called under _cv once max_pending is exceeded: record the overload the first time, and return
        every pending and new sample for an empty answer (the caller completes them outside the lock)."""
        if self.overload is None:
            elapsed = max(now - (self._t0 or now), 1e-3)
            self.overload = {"at_s": round(elapsed, 3), "pending": len(self._pending) + len(samples),
                             "max_pending": self.max_pending, "completed": self.completed,
                             "served_per_s": round(self.completed / elapsed, 3)}
            print(f"[run] overloaded: {self.overload['pending']} samples waiting (limit {self.max_pending}) after "
                  f"{elapsed:.1f}s, serving {self.overload['served_per_s']:g} samples/s; the rest of this run is "
                  "answered empty and it is INVALID", flush=True)
        out = list(self._pending)
        self._pending.clear()
        self._arrivals.clear()
        out.extend(samples)
        self.shed += len(out)
        return out

    # --- internals ------------------------------------------------------------------------------
    def _run_batches(self, proc: Processor, items: list[tuple[int, int]], issued: float) -> None:
        for start in range(0, len(items), self.batch_size):
            self._complete(proc, items[start:start + self.batch_size], issued)

    def _complete(self, proc: Processor, batch: list[tuple[int, int]], issued: float | list[float]) -> None:
        """Run one batch and complete every sample in it exactly once, whatever the processor does
        (an exception, too few outputs, a non-array): LoadGen would otherwise wait forever.
        ``issued``: when the batch's samples reached the SUT (one time, or one per sample)."""
        lg = self.lg
        me = threading.current_thread().name
        self.busy[me] = (time.monotonic(), len(batch))
        try:
            outs = proc.process([idx for _, idx in batch])
            if len(outs) != len(batch) or not all(isinstance(o, np.ndarray) for o in outs):
                raise TypeError(f"{type(proc).__name__}.process returned {len(outs)} outputs for {len(batch)} samples "
                                "(one numpy array per sample expected)")
            response, ptrs = lg.QuerySampleResponse, {}
            responses = []
            # a processor whose answers are generated tokens (whisper) gives their counts: LoadGen's n_tokens
            counts = getattr(proc, "token_counts", None) or ()
            for k, ((qid, _), out) in enumerate(zip(batch, outs)):
                key = id(out)   # a processor may answer several samples with one array (the null one does)
                ptr = ptrs.get(key)
                if ptr is None:
                    ptr = ptrs[key] = (out.__array_interface__["data"][0], out.nbytes)
                responses.append(response(qid, *ptr, int(counts[k])) if counts else response(qid, *ptr))
        except BaseException as e:  # keep LoadGen alive; the runner reports the error
            self.errors.append(e)
            outs = None
            responses = [lg.QuerySampleResponse(qid, 0, 0) for qid, _ in batch]
        self.busy.pop(me, None)
        self.timeline.batch(issued, time.monotonic(), len(batch))
        lg.QuerySamplesComplete(responses)
        self.completed += len(batch)
        del outs  # released only after LoadGen has copied what it logs

    def _worker(self, proc: Processor) -> None:
        proc.thread_init()
        while True:
            job = self.work.get()
            if job is _STOP:
                return
            self._complete(proc, job[1], job[0])

    def _batching_worker(self, proc: Processor) -> None:
        """Server: take a full batch as soon as there is one; otherwise wait until batch_size samples
        are there or the oldest pending sample has waited batch_timeout_s, then take what there is.
        No thread sits between LoadGen and the workers."""
        proc.thread_init()
        bs, pending, cv = self.batch_size, self._pending, self._cv
        while True:
            with cv:
                while not pending and not self._stopping:
                    self._idle += 1
                    cv.wait()
                    self._idle -= 1
                if not pending:          # stopping, nothing left
                    return
                while len(pending) < bs and not self._stopping:
                    left = self._arrivals[0] + self.batch_timeout_s - time.monotonic()   # the oldest sample's wait
                    if left <= 0:
                        break
                    self._filling += 1
                    cv.wait(left)
                    self._filling -= 1
                    if not pending:      # another worker took them
                        break
                n = min(bs, len(pending))
                batch = [pending.popleft() for _ in range(n)]
                arrived = [self._arrivals.popleft() for _ in range(n)]
                if pending and self._idle:
                    cv.notify()          # the rest is another worker's
            if batch:
                self._complete(proc, [(s.id, s.index) for s in batch], arrived)
