"""The batching SUT's contracts, with LoadGen's two calls recorded (no timing beyond tens of ms)."""
from __future__ import annotations

import threading
import time
import types

import numpy as np

from code.common.benchmark import Processor
from code.common.harness.sut import BatchingSUT


class FakeLoadGen:
    """Records QuerySamplesComplete calls: (time, [(id, size), ...])."""

    def __init__(self):
        self.completed: list[tuple[float, list[tuple[int, int]]]] = []
        self.lock = threading.Lock()

    @staticmethod
    def QuerySampleResponse(qid, ptr, size):  # noqa: N802 - LoadGen's name
        return (qid, size)

    def QuerySamplesComplete(self, responses):  # noqa: N802
        with self.lock:
            self.completed.append((time.monotonic(), list(responses)))

    def ids(self) -> list[int]:
        return sorted(q for _, rs in self.completed for q, _ in rs)


class Echo(Processor):
    def __init__(self, batch_size: int, out_count=None):
        self.batch_size = batch_size
        self.out_count = out_count
        self.batches: list[list[int]] = []

    def process(self, indices):
        self.batches.append(list(indices))
        n = len(indices) if self.out_count is None else self.out_count
        return [np.full(1, i, np.int32) for i in indices[:n]]


def samples(ids):
    return [types.SimpleNamespace(id=i, index=i) for i in ids]


def wait_for(cond, timeout=5.0):
    t0 = time.monotonic()
    while not cond() and time.monotonic() - t0 < timeout:
        time.sleep(0.002)
    return cond()


def test_sut_server_full_batch_goes_at_once_partial_after_the_oldest_waited():
    lg, proc = FakeLoadGen(), Echo(4)
    sut = BatchingSUT(lg, "batcher", [proc], batch_timeout_s=0.4)
    sut.start()
    try:
        t0 = time.monotonic()
        for i in range(4):
            sut.issue_queries(samples([i]))
        assert wait_for(lambda: len(lg.ids()) == 4)
        assert lg.completed[0][0] - t0 < 0.35 and proc.batches[0] == [0, 1, 2, 3]    # full: no timeout wait
        t1 = time.monotonic()
        sut.issue_queries(samples([10]))
        time.sleep(0.3)
        sut.issue_queries(samples([11]))            # arrives late: the deadline stays the oldest sample's
        assert wait_for(lambda: len(lg.ids()) == 6)
        waited = lg.completed[-1][0] - t1            # ~0.4 s; counted from the newest it would be ~0.7 s
        assert 0.39 <= waited < 0.65 and proc.batches[-1] == [10, 11], waited
    finally:
        sut.stop()


def test_sut_every_sample_completed_once_under_many_workers():
    lg = FakeLoadGen()
    procs = [Echo(8) for _ in range(3)]
    sut = BatchingSUT(lg, "batcher", procs, batch_timeout_s=0.001)
    sut.start()
    for i in range(2000):
        sut.issue_queries(samples([i]))
    sut.stop()                                     # drains what is pending
    assert lg.ids() == list(range(2000))
    assert max(len(b) for p in procs for b in p.batches) <= 8


def test_sut_bad_processor_output_still_completes_every_sample():
    """Too few outputs (or an exception) must not leave samples for LoadGen to wait on forever."""
    for mode in ("queue", "batcher", "inline"):
        lg, proc = FakeLoadGen(), Echo(4, out_count=1)
        sut = BatchingSUT(lg, mode, [proc], batch_timeout_s=0.001)
        sut.start()
        sut.issue_queries(samples(range(4)))
        assert wait_for(lambda: len(lg.ids()) == 4), mode
        sut.stop()
        assert lg.ids() == [0, 1, 2, 3] and all(size == 0 for _, rs in lg.completed for _, size in rs)
        assert sut.errors and "1 outputs for 4 samples" in str(sut.errors[0])


def test_sut_offline_orders_the_query_by_the_benchmarks_key():
    """Benchmark.offline_order_key (BERT: sequence length): the one Offline query is sorted before it is cut
    into batches; every sample is still answered once, under its own id."""
    lengths = {i: (i * 37) % 11 for i in range(40)}
    lg, proc = FakeLoadGen(), Echo(8)
    sut = BatchingSUT(lg, "queue", [proc], order_key=lengths.__getitem__)
    sut.start()
    sut.issue_queries(samples(range(40)))
    assert wait_for(lambda: len(lg.ids()) == 40)
    sut.stop()
    assert lg.ids() == list(range(40))
    flat = [i for b in proc.batches for i in b]
    assert [lengths[i] for i in flat] == sorted(lengths.values()) and all(len(b) <= 8 for b in proc.batches)


def test_bert_offline_order_key_is_the_sequence_length_when_bucketed():
    from code.bert.harness import BertBenchmark
    from code.main import plan

    qsl = types.SimpleNamespace(seq_len=np.array([300, 70, 128]))
    for mode, want in (("bucketed", [1, 2, 0]), ("padded", None)):
        _, [s] = plan(["--action=run_harness", "--benchmarks=bert", "--scenarios=Offline", "--model_variant=tiny",
                       f"--bert_seqlen_batching={mode}"])
        key = BertBenchmark(s).offline_order_key(qsl)
        assert (None if key is None else sorted(range(3), key=key)) == want
