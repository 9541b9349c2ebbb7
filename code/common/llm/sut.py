"""The token-streaming SUT: LoadGen queries -> GenerationProcessors -> per-token completions.

Every scenario of a generation benchmark dispatches this way (``scenarios.dispatch_for``):
``issue_queries`` turns each sample into a ``GenRequest`` (its prompt's token ids from the QSL) and
hands it to the worker with the fewest outstanding requests; it never waits. Workers batch as their
settings say (``code.common.llm.generation``).

- First token: with ``use_token_latencies`` (Llama2-70B, Mixtral, Llama3.1), ``FirstTokenComplete``
  is called with the first token (an int32) as soon as it exists: LoadGen's TTFT.
- Completion: ``QuerySamplesComplete`` with every output token as int32 and ``n_tokens``: LoadGen's
  TPOT and tokens/s (GPT-J infers tokens from samples instead: ``infer_token_latencies``).
- Response memory: the int32 arrays stay referenced until the call that hands them over returns.

The counters ``issued`` / ``completed`` and ``state()`` are what the watchdog (``code.common.monitor``) reads.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Sequence

import numpy as np

from code.common.llm.generation import GenRequest, GenerationProcessor


class StreamingSUT:
    def __init__(self, lg, processors: Sequence[GenerationProcessor], prompt: Callable[[int], np.ndarray], *,
                 max_new_tokens: int, min_new_tokens: int = 0, token_latencies: bool = True,
                 plant_first_token: bool = False):
        self.lg = lg
        self.processors = list(processors)
        self.prompt = prompt                      # QSL index -> token ids
        self.max_new_tokens, self.min_new_tokens = max_new_tokens, min_new_tokens
        self.token_latencies = token_latencies
        self.plant_first_token = plant_first_token     # TEST ONLY: TEST06 must catch a wrong first token
        self.issued = 0
        self.completed = 0
        self.tokens = 0
        self.first_tokens = 0
        self.errors: list[BaseException] = []
        self.overload = None                      # the batching SUT's field; generation never sheds
        self.outputs: dict[int, np.ndarray] | None = None   # set to {} to keep every sample's tokens (tests)
        self._lock = threading.Lock()

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
        reqs = [GenRequest(s.id, s.index, self.prompt(s.index), self.max_new_tokens, self.min_new_tokens, issued=now)
                for s in samples]
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

    def flush_queries(self) -> None:
        return None

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
        a = np.ascontiguousarray(tokens, dtype=np.int32)
        lg.QuerySamplesComplete([lg.QuerySampleResponse(r.qid, a.__array_interface__["data"][0] if a.size else 0,
                                                        a.nbytes, int(a.size))])
        with self._lock:
            self.completed += 1
            self.tokens += int(a.size)
            if self.outputs is not None:
                self.outputs[r.index] = a
        del a

    def stats(self) -> dict:
        return {"tokens": self.tokens, "first_tokens": self.first_tokens, "completed": self.completed,
                "workers": [p.stats() for p in self.processors]}
