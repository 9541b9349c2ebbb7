"""The generation contract every LLM backend fulfils, and the batching scheduler for step models.

Contract (``GenerationProcessor``): prompts (token ids) in, a stream of tokens out per sample.
``submit(requests)`` never blocks; the processor calls ``on_first(request, token)`` once the
sample's first output token exists and ``on_done(request, tokens)`` with every output token (int32,
the EOS included when the model emitted one) when it ends. A request may carry a stop sequence
(``GenRequest.stop``, token ids): generation ends right after it appears (it stays in the output),
as Mixtral's reference ends MBXP code at "\n```\n". The streaming SUT
(``code.common.llm.sut``) turns these into LoadGen's ``FirstTokenComplete`` and
``QuerySamplesComplete`` (with ``n_tokens``).

Engines that schedule themselves (vLLM, TensorRT-LLM) implement the contract directly. Models that
only know how to run a forward pass implement ``StepModel`` and get batching from ``Scheduler``:

- ``inflight`` (continuous batching): between two decode steps, waiting requests join the running
  batch (one prefill for all joiners), and finished sequences leave it at once. The batch is capped
  by ``max_batch_size`` sequences and ``max_num_tokens`` tokens per step (the joiners' prompt
  tokens plus one per running sequence).
- ``static``: a batch is formed (full, or once its oldest request waited ``batch_timeout_s``),
  and runs until its last sequence ends; finished sequences stay in the batch (their rows are still
  computed, as in a padded ``generate`` call) but complete to LoadGen as soon as they end.

Decoding (``code.common.llm.sampling``): greedy (the argmax) unless the request's ``Sampling`` samples (GPT-OSS-120B's
reference: temperature 1.0); a sampling request draws from its own stream, seeded from the run's seed and its QSL
index (or the ``seed`` it carries), so its tokens do not depend on its batch. The EOS is suppressed until
``min_new_tokens`` tokens exist (as transformers' ``MinNewTokensLengthLogitsProcessor`` does).
"""
from __future__ import annotations

import abc
import collections
import dataclasses
import threading
import time
from typing import Callable, Sequence

import numpy as np

from code.common.llm.sampling import GREEDY, Sampling


@dataclasses.dataclass(eq=False)
class GenRequest:
    """One sample to generate for. ``qid`` is LoadGen's response id (or any handle)."""

    qid: int
    index: int                       # QSL index
    prompt: np.ndarray               # token ids (1-D)
    max_new_tokens: int
    min_new_tokens: int = 0
    stop: tuple[int, ...] = ()       # a stop sequence: the output ends right after it (kept in the output)
    tokens: list[int] = dataclasses.field(default_factory=list)
    issued: float = 0.0              # time.monotonic() when submitted
    first_at: float = 0.0            # when its first token existed
    done: bool = False
    media: dict | None = None        # a vision-language sample's chat messages ({"messages": [...]}: code.common.llm.vision)
    sampling: Sampling | None = None  # None: the processor's (the benchmark's generation settings)
    seed: int | None = None          # this sample's stream; None: sampling.request_seed(index)


def decoding(r: GenRequest, default: Sampling) -> tuple[Sampling, int] | None:
    """How ``r`` decodes: None when greedy, else its Sampling and the seed of its own stream."""
    s = r.sampling or default
    if s.greedy:
        return None
    return s, (r.seed if r.seed is not None else s.request_seed(r.index))


FirstFn = Callable[[GenRequest, int], None]
DoneFn = Callable[[GenRequest, np.ndarray], None]


class GenerationProcessor(abc.ABC):
    """One generation worker (one model instance). ``start`` is called once before any ``submit``."""

    max_batch_size: int = 1
    eos_token_id: int | None = None
    sampling: Sampling = GREEDY      # how requests without their own Sampling decode

    def start(self, on_first: FirstFn, on_done: DoneFn) -> None:
        self.on_first, self.on_done = on_first, on_done

    @abc.abstractmethod
    def submit(self, requests: Sequence[GenRequest]) -> None:
        """Queue requests; return at once. Callbacks come from the processor's own thread(s)."""

    def outstanding(self) -> int:
        """Requests submitted and not yet done (the SUT routes new work to the least loaded worker)."""
        return 0

    def state(self) -> str:
        """What the worker is doing, for a stall report."""
        return ""

    def progress(self) -> int:
        """A count that grows while the worker generates (steps or streamed chunks): the watchdog's sign of life
        while answers thousands of tokens long complete no sample for minutes."""
        return 0

    def warmup(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def stats(self) -> dict:
        """Counters for metadata.json (steps, joins, batch occupancy, ...)."""
        return {}


class StepModel(abc.ABC):
    """A model that runs one batched forward pass at a time over a batch of rows it keeps (with their
    KV cache). Rows are addressed by position in the batch, in join order."""

    eos_token_id: int | None = None
    extra_eos: tuple[int, ...] = ()  # other ids that end a sequence too (Llama 3.1: <|eot_id|>, <|eom_id|>)
    vocab_size: int = 0
    max_context: int = 0             # prompt + output tokens one row may hold

    @abc.abstractmethod
    def join(self, prompts: Sequence[np.ndarray], suppress_eos: Sequence[bool],
             sampling: Sequence[tuple[Sampling, int] | None] | None = None) -> list[int]:
        """Prefill ``prompts`` (one forward over all of them), append them as rows at the end of the
        batch and return the first output token of each. ``sampling``: per joiner, None (greedy) or its
        Sampling and stream seed, which the row keeps until it leaves; omitted: every joiner greedy."""

    @abc.abstractmethod
    def step(self, last_tokens: Sequence[int], suppress_eos: Sequence[bool]) -> list[int]:
        """One decode step for every row: feed each row's last token, return each row's next token."""

    @abc.abstractmethod
    def leave(self, rows: Sequence[int]) -> None:
        """Drop these rows (positions in the batch) and their cache."""

    def warmup(self) -> None:
        return None

    def close(self) -> None:
        return None


class NullStepModel(StepModel):
    """Emits tokens without computing (token ``1`` forever, EOS after ``out_len`` tokens when given):
    measures the harness's own ceiling in tokens/s and first-token events/s."""

    def __init__(self, eos_token_id: int | None = None, vocab_size: int = 2, max_context: int = 1 << 30):
        self.eos_token_id, self.vocab_size, self.max_context = eos_token_id, vocab_size, max_context
        self.rows = 0

    def join(self, prompts, suppress_eos, sampling=None):
        self.rows += len(prompts)
        return [1] * len(prompts)

    def step(self, last_tokens, suppress_eos):
        return [1] * len(last_tokens)

    def leave(self, rows):
        self.rows -= len(rows)


def ends_with_stop(tokens: Sequence[int], stop: Sequence[int]) -> bool:
    n = len(stop)
    return bool(n) and len(tokens) >= n and tuple(tokens[-n:]) == tuple(stop)


def ends(r: GenRequest, eos_token_id: int | None, extra_eos: tuple[int, ...] = ()) -> bool:
    """Has ``r`` ended: max_new_tokens reached, or (past min_new_tokens) an EOS or its stop sequence."""
    if len(r.tokens) >= r.max_new_tokens:
        return True
    if len(r.tokens) < r.min_new_tokens:
        return False
    t = r.tokens[-1]
    return (eos_token_id is not None and t == eos_token_id) or t in extra_eos or ends_with_stop(r.tokens, r.stop)


def cut_at_stop(tokens: Sequence[int], stop: Sequence[int], min_new_tokens: int = 0) -> list[int]:
    """``tokens`` up to and including the first ``stop`` sequence that ends at or after ``min_new_tokens``
    tokens (what a generation that stopped there would have returned); all of them when none does."""
    out = list(tokens)
    n = len(stop)
    if n:
        for end in range(max(n, min_new_tokens), len(out) + 1):
            if tuple(out[end - n:end]) == tuple(stop):
                return out[:end]
    return out


def strip_trailing(tokens: Sequence[int], token: int | None, min_len: int = 2) -> list[int]:
    """``tokens`` without trailing ``token`` (Mixtral's reference reports outputs without their EOS); unchanged
    when fewer than ``min_len`` would be left (LoadGen's TPOT needs two tokens; shed answers are two EOS)."""
    out = list(tokens)
    while token is not None and out and out[-1] == token:
        out.pop()
    return out if len(out) >= min_len else list(tokens)


class Scheduler(GenerationProcessor):
    """In-flight or static batching of GenRequests over one StepModel, on one worker thread."""

    def __init__(self, model: StepModel, max_batch_size: int, *, mode: str = "inflight", max_num_tokens: int = 0,
                 batch_timeout_s: float = 0.0, name: str = "gen-worker-0",
                 thread_init: Callable[[], None] | None = None, sampling: Sampling = GREEDY):
        if mode not in ("inflight", "static"):
            raise ValueError(f"batching mode {mode!r} is not inflight or static")
        self.model, self.mode, self.name = model, mode, name
        self.max_batch_size = max(1, max_batch_size)
        self.max_num_tokens = max_num_tokens
        self.batch_timeout_s = batch_timeout_s
        self.sampling = sampling
        self.eos_token_id = model.eos_token_id
        self.extra_eos = tuple(getattr(model, "extra_eos", ()))
        self._thread_init = thread_init
        self._queue: collections.deque[GenRequest] = collections.deque()
        self._cv = threading.Condition(threading.Lock())
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.active: list[GenRequest] = []       # row i of the model's batch is active[i]
        self._joining: list[GenRequest] = []     # taken from the queue, not yet in the batch
        self.errors: list[BaseException] = []
        self.busy_since: float | None = None
        self.counters = {"steps": 0, "joins": 0, "prefill_tokens": 0, "row_steps": 0, "idle_row_steps": 0,
                         "max_rows": 0, "completed": 0}

    # --- contract ---------------------------------------------------------------------------------
    def start(self, on_first: FirstFn, on_done: DoneFn) -> None:
        super().start(on_first, on_done)
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def submit(self, requests: Sequence[GenRequest]) -> None:
        if self.errors:                  # the worker died: answer at once (the run reports the error)
            for r in requests:
                r.done = True
                self.on_done(r, np.zeros(0, dtype=np.int32))
            return
        now = time.monotonic()
        with self._cv:
            for r in requests:
                r.issued = r.issued or now
            self._queue.extend(requests)
            self._cv.notify()

    def outstanding(self) -> int:
        return len(self._queue) + sum(not r.done for r in self.active)

    def progress(self) -> int:
        return self.counters["steps"]

    def state(self) -> str:
        busy = f"in a step for {time.monotonic() - self.busy_since:.1f}s" if self.busy_since else "between steps"
        return (f"{self.name}: {len(self.active)} row(s) running, {len(self._queue)} waiting, {busy} "
                f"({self.counters['steps']} steps so far)")

    def warmup(self) -> None:
        self.model.warmup()

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=60)
        self.model.close()

    def stats(self) -> dict:
        c = dict(self.counters)
        c["mean_rows_per_step"] = round(c["row_steps"] / c["steps"], 3) if c["steps"] else 0.0
        c["mode"] = self.mode
        c["sampling"] = self.sampling.record()
        return c

    # --- the loop ---------------------------------------------------------------------------------
    def _take(self) -> list[GenRequest]:
        """Under the lock: the requests that join now (may wait for a static batch to fill)."""
        q = self._queue
        if self.mode == "static":
            if self.active:
                return []
            while q and len(q) < self.max_batch_size and not self._stopping:
                left = q[0].issued + self.batch_timeout_s - time.monotonic()
                if left <= 0:
                    break
                self._cv.wait(left)
            n = min(len(q), self.max_batch_size)
            return [q.popleft() for _ in range(n)]
        room = self.max_batch_size - len(self.active)
        out: list[GenRequest] = []
        budget = self.max_num_tokens - len(self.active) if self.max_num_tokens else None
        while q and room > 0:
            need = len(q[0].prompt)
            if budget is not None and out and need > budget:      # the first joiner always fits
                break
            if budget is not None and not out and self.active and need > budget:
                break
            r = q.popleft()
            out.append(r)
            room -= 1
            if budget is not None:
                budget -= need
        return out

    def _loop(self) -> None:
        if self._thread_init:
            self._thread_init()
        try:
            while True:
                with self._cv:
                    while not self._queue and not self.active and not self._stopping:
                        self._cv.wait()
                    if self._stopping and not self.active:
                        return
                    joiners = self._joining = self._take()
                self.busy_since = time.monotonic()
                self._iterate(joiners)
                self._joining = []
                self.busy_since = None
        except BaseException as e:   # answer everything empty: LoadGen must never wait forever
            self.errors.append(e)
            self._fail_all()

    def _iterate(self, joiners: list[GenRequest]) -> None:
        model, c = self.model, self.counters
        finished: list[int] = []
        if joiners:
            ps, sup = [r.prompt for r in joiners], [r.min_new_tokens > 0 for r in joiners]
            how = [decoding(r, self.sampling) for r in joiners]
            firsts = model.join(ps, sup, how) if any(how) else model.join(ps, sup)
            c["joins"] += 1
            c["prefill_tokens"] += sum(len(r.prompt) for r in joiners)
            now = time.monotonic()
            base = len(self.active)
            self.active.extend(joiners)
            for i, (r, t) in enumerate(zip(joiners, firsts)):
                r.tokens.append(int(t))
                r.first_at = now
                self.on_first(r, int(t))
                if self._ends(r):
                    finished.append(base + i)
        running = [i for i, r in enumerate(self.active) if not r.done and i not in set(finished)]
        if running:
            rows = self.active
            last = [r.tokens[-1] for r in rows]
            suppress = [len(r.tokens) < r.min_new_tokens for r in rows]
            nxt = model.step(last, suppress)
            c["steps"] += 1
            c["row_steps"] += len(rows)
            c["max_rows"] = max(c["max_rows"], len(rows))
            for i in running:
                r = rows[i]
                r.tokens.append(int(nxt[i]))
                if self._ends(r):
                    finished.append(i)
            c["idle_row_steps"] += len(rows) - len(running)
        for i in finished:
            self._finish(self.active[i])
        # rows leave: in-flight at once; static only when the whole batch has ended
        if self.mode == "inflight":
            gone = sorted(set(finished))
        else:
            gone = list(range(len(self.active))) if all(r.done for r in self.active) else []
        if gone:
            model.leave(gone)
            keep = set(gone)
            self.active = [r for i, r in enumerate(self.active) if i not in keep]

    def _ends(self, r: GenRequest) -> bool:
        return ends(r, self.eos_token_id, self.extra_eos)

    def _finish(self, r: GenRequest) -> None:
        if r.done:
            return
        r.done = True
        self.counters["completed"] += 1
        self.on_done(r, np.asarray(r.tokens, dtype=np.int32))

    def _fail_all(self) -> None:
        with self._cv:
            left = [r for r in self.active + self._joining if not r.done] + list(self._queue)
            self._queue.clear()
            self.active, self._joining = [], []
        for r in left:
            r.done = True
            self.on_done(r, np.zeros(0, dtype=np.int32))
