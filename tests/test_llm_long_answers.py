"""Answers thousands of tokens long (issue 30: DeepSeek-R1 and GPT-OSS reason for thousands of tokens before they
answer): the in-flight scheduler with a small per-step token budget runs two such answers to their end with the
KV cache growing past the prompt many times over, and the watchdog, whose limit is far shorter than one answer,
sees the engine's steps as progress and stays quiet; a worker that stops stepping is still caught."""
from __future__ import annotations

import threading
import time

import numpy as np

from code.common.harness.monitor import Monitor
from code.common.llm.generation import GenRequest, Scheduler
from code.common.llm.hf import TransformersStepModel

NEW = 2500          # tokens per answer: ~100x the prompt
LIMIT_S = 0.5       # the watchdog's limit: each answer takes several times this long (3.6 s here)


def tiny_long_context_llama():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=4096, bos_token_id=1, eos_token_id=2,
                      pad_token_id=2, tie_word_embeddings=False)
    return LlamaForCausalLM(cfg).eval()


class SchedulerView:
    """What the watchdog reads of a SUT (issued, completed, progress, state), over one scheduler."""

    def __init__(self, sched: Scheduler):
        self.sched, self.issued, self.completed = sched, 0, 0

    @property
    def progress(self) -> int:
        return self.completed + self.sched.progress()

    def state(self) -> str:
        return self.sched.state()


def test_answers_thousands_of_tokens_long_finish_and_the_watchdog_stays_quiet():
    import torch

    torch.set_num_threads(1)
    step = TransformersStepModel(tiny_long_context_llama(), eos_token_id=2, pad_token_id=2)
    # a token budget of 32 per step: far below one answer, so only the prompts' prefill is ever cut by it
    sched = Scheduler(step, 2, mode="inflight", max_num_tokens=32, name="long-0")
    view, done, stalls = SchedulerView(sched), {}, []
    finished = threading.Event()

    def on_done(r, toks):
        done[r.qid] = np.asarray(toks)
        view.completed += 1
        if len(done) == 2:
            finished.set()
    sched.start(lambda r, t: None, on_done)
    mon = Monitor(view, LIMIT_S, 2, "long answers", stalls.append).start()
    rng = np.random.default_rng(0)
    prompts = [rng.integers(3, 64, n) for n in (24, 17)]
    t0 = time.monotonic()
    view.issued = 2
    sched.submit([GenRequest(i, i, p, NEW, NEW) for i, p in enumerate(prompts)])
    assert finished.wait(600), sched.state()
    wall = time.monotonic() - t0
    mon.stop()
    sched.stop()
    assert not sched.errors, sched.errors
    assert sorted(done) == [0, 1] and all(len(t) == NEW for t in done.values())
    assert wall > 2 * LIMIT_S, f"the answers took {wall:.1f} s: too short to show anything about the watchdog"
    assert not stalls, stalls                     # completed stayed 0 for seconds; steps kept coming
    c = sched.stats() or sched.counters
    assert sched.counters["steps"] >= NEW and sched.counters["row_steps"] >= 2 * NEW - 2, c
    print(f"FIGURE long answers: 2 x {NEW} tokens in {wall:.1f} s, {sched.counters['steps']} steps, watchdog "
          f"limit {LIMIT_S} s quiet")


def test_a_worker_that_stops_stepping_is_still_a_stall():
    class Stuck:
        issued, completed = 2, 0
        progress = 7                               # no step, no chunk, no completion: frozen

        def state(self) -> str:
            return "stuck in a step"
    stalls = []
    mon = Monitor(Stuck(), 0.3, 2, "stuck", stalls.append).start()
    t0 = time.monotonic()
    while not stalls and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    mon.stop()
    assert stalls and stalls[0]["state"] == "stuck in a step" and stalls[0]["completed"] == 0


def test_batched_sequences_past_a_sliding_window_are_refused_in_one_line():
    """GPT-OSS's sliding-window layers keep the last window-1 tokens, while the in-flight merge pads every row to
    the batch's width: past the window the rows would attend to the wrong tokens, so the step model refuses (the
    tiny GPT-OSS sets the window to its context and never gets there)."""
    import pytest
    import torch

    from code.common.llm.tiny import tiny_config

    torch.manual_seed(0)
    cfg = tiny_config("gpt_oss", 64, 256)
    cfg.sliding_window = 8
    from transformers import GptOssForCausalLM

    step = TransformersStepModel(GptOssForCausalLM(cfg).eval(), eos_token_id=2, pad_token_id=2)
    step.join([np.arange(3, 7)], [True])                       # 4 tokens: inside the window, batched fine
    step.join([np.arange(3, 8)], [True])
    assert step.cache.layers[0].cumulative_length == 5
    with pytest.raises(RuntimeError, match=r"8-token sliding window.*--backend=vllm") as e:
        for _ in range(3):                                     # two rows decoding past it
            step.step([5, 6], [True, True])
    assert "\n" not in str(e.value)
    step.leave([0, 1])
    step.join([np.arange(3, 15)], [True])                      # one row past it: batch 1 is transformers' own case
    with pytest.raises(RuntimeError, match=r"8-token sliding window"):
        step.join([np.arange(3, 13)], [True])                  # a second one joining it
