"""The generic batching SUT that puts any benchmark's Processors behind LoadGen.

The dispatch mode comes from the scenario definition (``code.common.scenarios``):
- ``queue`` (Offline): issue_queries hands batches to worker queues and returns at once;
- ``batcher`` (Server): a batcher thread fills batches, workers run them;
- ``inline`` (SingleStream, MultiStream): work runs on LoadGen's issue thread (LoadGen issues the
  next query only after this one completes, so inline work saves a thread hand-off per query).

Threading contract:
- ``issue_queries`` is called on LoadGen's issue thread.
- One worker thread per Processor; a Processor is only ever used by its own worker.
- Server: one batcher thread collects samples into a batch until ``batch_size`` are there or the
  oldest has waited ``batch_timeout_s``, whichever comes first.
- Response memory: the numpy arrays returned by ``Processor.process`` stay referenced until
  ``QuerySamplesComplete`` returns (LoadGen copies the bytes it logs before returning).
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Sequence

import numpy as np

from code.common.benchmark import Processor

_STOP = object()


class NullProcessor(Processor):
    """Returns one byte per sample without computing: measures the harness's own overhead ceiling."""

    def __init__(self, batch_size: int):
        self.batch_size = batch_size
        self._out = np.zeros(1, dtype=np.uint8)

    def process(self, indices: Sequence[int]) -> list[np.ndarray]:
        return [self._out] * len(indices)


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

    def __init__(self, lg, dispatch: str, processors: list[Processor], batch_timeout_s: float = 0.002):
        if dispatch not in self.MODES:
            raise ValueError(f"dispatch mode {dispatch!r} is not one of {self.MODES}")
        self.lg = lg
        self.dispatch = dispatch
        self.processors = processors
        self.batch_size = max(1, processors[0].batch_size)
        self.batch_timeout_s = batch_timeout_s
        self.inline = dispatch == "inline"
        self.work: queue.Queue = queue.Queue()
        self.incoming: queue.Queue = queue.Queue()
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.completed = 0

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        for p in self.processors:
            p.warmup()
        if self.inline:
            return
        for i, p in enumerate(self.processors):
            t = threading.Thread(target=self._worker, args=(p,), name=f"sut-worker-{i}", daemon=True)
            t.start()
            self.threads.append(t)
        if self.dispatch == "batcher":
            t = threading.Thread(target=self._batcher, name="sut-batcher", daemon=True)
            t.start()
            self.threads.append(t)

    def stop(self) -> None:
        if self.dispatch == "batcher":
            self.incoming.put(_STOP)
        else:
            for _ in self.processors:
                self.work.put(_STOP)
        for t in self.threads:
            t.join(timeout=60)
        for p in self.processors:
            p.close()

    # --- LoadGen callbacks ----------------------------------------------------------------------
    def issue_queries(self, samples) -> None:
        if self.inline:
            self._run_batches(self.processors[0], [(s.id, s.index) for s in samples])
            return
        if self.dispatch == "batcher":
            for s in samples:
                self.incoming.put((s.id, s.index))
            return
        items = [(s.id, s.index) for s in samples]
        # Offline: hand out batches in issue order; workers pull as they free up.
        for start in range(0, len(items), self.batch_size):
            self.work.put(items[start:start + self.batch_size])

    def flush_queries(self) -> None:
        return None

    # --- internals ------------------------------------------------------------------------------
    def _run_batches(self, proc: Processor, items: list[tuple[int, int]]) -> None:
        for start in range(0, len(items), self.batch_size):
            self._complete(proc, items[start:start + self.batch_size])

    def _complete(self, proc: Processor, batch: list[tuple[int, int]]) -> None:
        lg = self.lg
        try:
            outs = proc.process([idx for _, idx in batch])
        except BaseException as e:  # keep LoadGen alive; the runner reports the error
            self.errors.append(e)
            outs = [np.zeros(0, dtype=np.uint8)] * len(batch)
        responses = []
        for (qid, _), out in zip(batch, outs):
            ptr, size = out.__array_interface__["data"][0], out.nbytes
            responses.append(lg.QuerySampleResponse(qid, ptr, size))
        lg.QuerySamplesComplete(responses)
        self.completed += len(batch)
        del outs  # released only after LoadGen has copied what it logs

    def _worker(self, proc: Processor) -> None:
        while True:
            batch = self.work.get()
            if batch is _STOP:
                return
            self._complete(proc, batch)

    def _batcher(self) -> None:
        """Server: wait for batch_size samples or batch_timeout_s after the first, then dispatch."""
        n_workers = len(self.processors)
        while True:
            first = self.incoming.get()
            if first is _STOP:
                break
            batch = [first]
            deadline = time.monotonic() + self.batch_timeout_s
            stop = False
            while len(batch) < self.batch_size:
                left = deadline - time.monotonic()
                try:
                    item = self.incoming.get(timeout=left) if left > 0 else self.incoming.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                batch.append(item)
            self.work.put(batch)
            if stop:
                break
        for _ in range(n_workers):
            self.work.put(_STOP)
