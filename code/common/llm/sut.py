"""The token-streaming SUT: LoadGen queries -> GenerationProcessors -> per-token completions.

Every scenario of a generation benchmark dispatches this way (``scenarios.dispatch_for``):
``issue_queries`` turns each sample into a ``GenRequest`` (its prompt's token ids from the QSL) and
hands it to the worker with the fewest outstanding requests; it never waits. Workers batch as their
settings say (``code.common.llm.generation``).

- First token: with ``use_token_latencies`` (Llama2-70B, Mixtral, Llama3.1), ``FirstTokenComplete``
  is called with the first token (an int32) as soon as it exists: LoadGen's TTFT.
- Completion: ``QuerySamplesComplete`` with every output token as int32 and ``n_tokens``: LoadGen's
  TPOT and tokens/s (GPT-J infers tokens from samples instead: ``infer_token_latencies``; its TEST06 audit
  turns ``use_token_latencies`` on, so that LoadGen logs first tokens and token counts). A benchmark
  may end samples at a stop sequence (``stop``: QSL index -> token ids) and report outputs without
  their trailing EOS (``strip_eos``, Mixtral's reference).
- Response memory: the int32 arrays stay referenced until the call that hands them over returns.

The counters ``issued`` / ``completed`` and ``state()`` are what the watchdog (``code.common.harness.monitor``) reads.

Overload (Server, Interactive): as in the batching SUT (``code.common.harness.sut.pending_bound``), once more
than ``max_pending`` samples are outstanding the run is lost anyway; the SUT records ``overload``
and answers every later sample at once (a first token, then two EOS tokens: LoadGen's token
accounting rejects fewer than two), so memory and the run's length stay bounded. Such a run is
INVALID whatever LoadGen says and is never staged.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Sequence

import numpy as np

from code.common.llm.generation import GenRequest, GenerationProcessor, strip_trailing
from code.common.harness.timeline import Timeline


class StreamingSUT:
    def __init__(self, lg, processors: Sequence[GenerationProcessor], prompt: Callable[[int], np.ndarray], *,
                 max_new_tokens: int, min_new_tokens: int = 0, token_latencies: bool = True,
                 plant_first_token: bool = False, stop: Callable[[int], tuple[int, ...]] | None = None,
                 strip_eos: bool = False, media: Callable[[int], dict] | None = None,
                 respond: Callable[[np.ndarray], bytes] | None = None):
        self.lg = lg
        self.processors = list(processors)
        self.prompt = prompt                      # QSL index -> token ids
        self.max_new_tokens, self.min_new_tokens = max_new_tokens, min_new_tokens
        self.token_latencies = token_latencies
        self.stop_for = stop                      # QSL index -> stop sequence (token ids), or None
        self.strip_eos = strip_eos                # report outputs without their trailing EOS (Mixtral)
        self.media_for = media                    # QSL index -> the sample's chat messages (vision-language)
        # tokens -> the bytes LoadGen logs (Qwen3-VL: the answer's UTF-8 text, which its scorer reads); None: int32 ids
        self.respond = respond
        self.plant_first_token = plant_first_token     # TEST ONLY: TEST06 must catch a wrong first token
        self.issued = 0
        self.completed = 0
        self.tokens = 0
        self.first_tokens = 0
        self.errors: list[BaseException] = []
        self.max_pending = 0                      # Server / Interactive: 0 = unbounded (set by the harness child)
        self.overload: dict | None = None         # set once, when max_pending is exceeded
        self.shed = 0
        self._t0: float | None = None
        self.outputs: dict[int, np.ndarray] | None = None   # set to {} to keep every sample's tokens (tests)
        self._lock = threading.Lock()
        self.timeline = Timeline()                # per-sample issue / first token / completion (make report)

    # --- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        for p in self.processors:
            p.warmup()
        for p in self.processors:
            p.start(self._first, self._done)

    def stop(self) -> None:
        for p in self.processors:
            p.stop()
        for p in self.processors:
            self.errors.extend(getattr(p, "errors", ()))

    # --- LoadGen callbacks ----------------------------------------------------------------------------
    def issue_queries(self, samples) -> None:
        self.issued += len(samples)
        now = time.monotonic()
        if self._t0 is None:
            self._t0 = now
        if self.max_pending and (self.overload is not None or self.issued - self.completed > self.max_pending):
            self._shed(samples, now)
            return
        reqs = [self.request(s.id, s.index, issued=now) for s in samples]
        procs = self.processors
        if len(procs) == 1:
            procs[0].submit(reqs)
            return
        load = [p.outstanding() for p in procs]
        parts: list[list[GenRequest]] = [[] for _ in procs]
        for r in reqs:                            # least loaded first, counting what this call adds
            i = min(range(len(procs)), key=load.__getitem__)
            parts[i].append(r)
            load[i] += 1
        for p, part in zip(procs, parts):
            if part:
                p.submit(part)

    def request(self, qid: int, index: int, issued: float = 0.0) -> GenRequest:
        return GenRequest(qid, index, self.prompt(index), self.max_new_tokens, self.min_new_tokens,
                          stop=self.stop_for(index) if self.stop_for else (), issued=issued,
                          media=self.media_for(index) if self.media_for else None)

    def flush_queries(self) -> None:
        return None

    def measure(self, count: int, seconds: float, depth: int | None = None, max_seconds: float = 60.0) -> dict:
        """``--fast`` warm-up, before LoadGen starts: keep ``depth`` random samples outstanding per worker
        (default: two batches) for ``seconds``, answered to local callbacks (LoadGen sees nothing), then
        drain. Returns completed samples/s over the window after the first completion (cold start left
        out) and the mean latency of one sample."""
        import random

        rnd = random.Random(0)
        lock, done = threading.Lock(), threading.Event()
        state = {"open": 0, "n": 0, "lat": 0.0, "first": None, "last": None}
        t_end = time.monotonic() + seconds
        saved = [(p.on_first, p.on_done) for p in self.processors]

        def submit(p) -> None:
            with lock:
                state["open"] += 1
            p.submit([self.request(-1, rnd.randrange(count))])

        def finished(p):
            def on_done(r: GenRequest, tokens) -> None:
                now = time.monotonic()
                with lock:
                    state["open"] -= 1
                    if state["first"] is None:
                        state["first"] = now
                    else:
                        state["n"] += 1
                        state["lat"] += now - r.issued
                    state["last"] = now
                    more = now < t_end and now < state["first"] + max_seconds
                    if not more and state["open"] == 0:
                        done.set()
                if more:
                    submit(p)
            return on_done
        for p in self.processors:
            p.on_first, p.on_done = (lambda r, t: None), finished(p)
        try:
            for p in self.processors:
                for _ in range(depth or 2 * max(1, p.max_batch_size)):
                    submit(p)
            done.wait(seconds + max_seconds + 60)
        finally:
            for p, (f, d) in zip(self.processors, saved):
                p.on_first, p.on_done = f, d
        span = (state["last"] or 0) - (state["first"] or 0)
        return {"samples_per_s": round(state["n"] / span, 3) if span > 0 else 0.0,
                "mean_latency_ns": int(state["lat"] / state["n"] * 1e9) if state["n"] else 0}

    def _shed(self, samples, now: float) -> None:
        if self.overload is None:
            elapsed = max(now - (self._t0 or now), 1e-3)
            self.overload = {"at_s": round(elapsed, 3), "pending": self.issued - self.completed,
                             "max_pending": self.max_pending, "completed": self.completed,
                             "served_per_s": round(self.completed / elapsed, 3)}
            print(f"[run] overloaded: {self.overload['pending']} samples outstanding (limit {self.max_pending}) after "
                  f"{elapsed:.1f}s, serving {self.overload['served_per_s']:g} samples/s; the rest of this run is "
                  "answered at once and it is INVALID", flush=True)
        eos = self.processors[0].eos_token_id or 0
        for s in samples:
            r = GenRequest(s.id, s.index, self.prompt(s.index), 2)
            self._first(r, eos)
            self._done(r, np.array([eos, eos], dtype=np.int32))
        self.shed += len(samples)

    @property
    def progress(self) -> int:
        """The watchdog's sign of life: samples completed, first tokens, and the workers' own progress (engine
        steps, streamed chunks), so that answers thousands of tokens long do not read as a stall."""
        return self.completed + self.first_tokens + sum(p.progress() for p in self.processors)

    def state(self) -> str:
        return (f"{self.completed} of {self.issued} issued samples completed ({self.tokens} tokens); "
                + "; ".join(p.state() for p in self.processors))

    # --- processor callbacks (worker threads) -----------------------------------------------------------
    def _first(self, r: GenRequest, token: int) -> None:
        self.first_tokens += 1
        if not self.token_latencies:
            return
        lg = self.lg
        a = np.array([token + 1 if self.plant_first_token else token], dtype=np.int32)
        lg.FirstTokenComplete([lg.QuerySampleResponse(r.qid, a.__array_interface__["data"][0], a.nbytes)])

    def _done(self, r: GenRequest, tokens: np.ndarray) -> None:
        lg = self.lg
        if self.strip_eos:
            tokens = strip_trailing(tokens, self.processors[0].eos_token_id)
        a = np.ascontiguousarray(tokens, dtype=np.int32)
        n = int(a.size)
        if self.respond is not None:
            a = np.frombuffer(self.respond(a), dtype=np.uint8).copy()
        if r.issued:                              # shed samples (overload) are not timed
            self.timeline.sample(r.issued, r.first_at or r.issued, time.monotonic(), n)
        lg.QuerySamplesComplete([lg.QuerySampleResponse(r.qid, a.__array_interface__["data"][0] if a.size else 0,
                                                        a.nbytes, n)])
        with self._lock:
            self.completed += 1
            self.tokens += n
            if self.outputs is not None:
                self.outputs[r.index] = a
        del a

    def stats(self) -> dict:
        return {"tokens": self.tokens, "first_tokens": self.first_tokens, "completed": self.completed,
                "shed": self.shed, "sampling": self.processors[0].sampling.record() if self.processors else None,
                "workers": [p.stats() for p in self.processors]}
