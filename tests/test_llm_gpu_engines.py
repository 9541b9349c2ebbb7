"""The in-process GPU LLM engines' defects (issue 28), against recording stand-ins of vLLM and TensorRT-LLM (neither
installs here): beams refused where the engine would decode greedily, one model instance per process with its GPU
group in CUDA_VISIBLE_DEVICES, vLLM's aborts by list, TensorRT-LLM 1.x without an engine save. Each test fails on
the code before the fix (named in each)."""
from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest

from code.common.errors import HarnessError
from code.common.llm.backends import TensorRTLLMBackend, TransformersBackend, VLLMBackend, WorkerSpec
from code.common.llm.generation import GenRequest


def spec(**kw) -> WorkerSpec:
    return WorkerSpec(model_dir="/m/llama", device="cuda:0", **kw)


@pytest.mark.parametrize("cls", [VLLMBackend, TensorRTLLMBackend])
def test_beam_benchmark_refused_by_greedy_engines(cls):
    """Before: GPT-J (4 beams) ran greedily on vLLM / TensorRT-LLM, silently non-compliant."""
    with pytest.raises(HarnessError, match="decodes greedily.*4 beams") as e:
        cls().prepare_model("/m/llama", spec(num_beams=4))
    assert "--backend=transformers" in e.value.fix
    with pytest.raises(HarnessError, match="4 beams"):
        cls().processor(spec(num_beams=4))
    assert cls().prepare_model("/m/llama", spec()) == "/m/llama"
    TransformersBackend().check(spec(num_beams=4))          # beams in-process: allowed


@pytest.mark.parametrize("cls", [VLLMBackend, TensorRTLLMBackend])
def test_one_instance_per_process_on_the_gpu_engines(cls):
    """Before: an H200x8 Llama2 block (TP=1, 8 workers) stacked eight engines on GPU 0 (setdefault kept the first
    worker's CUDA_VISIBLE_DEVICES for all, or none when the user had exported one)."""
    eight = [spec(gpus=(g,)) for g in range(8)]
    with pytest.raises(HarnessError, match="1 model instance per process.*asks for 8") as e:
        cls().place(eight)
    assert "make run_llm_server" in e.value.fix and "--backend=openai" in e.value.fix
    cls().place(eight[:1])
    TransformersBackend().place(eight)                       # torch places each on its device


def test_gpu_group_pinned_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    VLLMBackend.pin_gpus(spec(gpus=(4, 5)))
    import os

    assert os.environ["CUDA_VISIBLE_DEVICES"] == "4,5"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    VLLMBackend.pin_gpus(spec(gpus=(4, 5)))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2"


class _Out:
    def __init__(self, rid, tokens, finished):
        self.request_id, self.finished = rid, finished
        self.outputs = [types.SimpleNamespace(token_ids=list(tokens))]


def fake_vllm(monkeypatch, script: list[int]):
    """A vLLM stand-in: LLMEngine.step() grows each request by the next token of ``script`` and records aborts;
    abort_request takes a list of ids, as vLLM V1's does (a bare string is refused as V1 refuses it)."""
    rec = {"aborts": []}

    class Engine:
        def __init__(self):
            self.live = {}

        @classmethod
        def from_engine_args(cls, args):
            rec["args"] = args
            return cls()

        def add_request(self, rid, prompt, params):
            self.live[rid] = []

        def abort_request(self, ids):
            if isinstance(ids, str):
                raise TypeError("abort_request takes an iterable of request ids")
            rec["aborts"].append(list(ids))
            for i in ids:
                self.live.pop(i, None)

        def step(self):
            out = []
            for rid, toks in list(self.live.items()):
                toks.append(script[len(toks)])
                done = len(toks) == len(script)
                out.append(_Out(rid, toks, done))
                if done:
                    del self.live[rid]
            return out

    mod = types.SimpleNamespace(EngineArgs=lambda **kw: kw, LLMEngine=Engine,
                                SamplingParams=lambda **kw: types.SimpleNamespace(**kw))
    monkeypatch.setitem(sys.modules, "vllm", mod)
    return rec


def test_vllm_multi_token_stop_aborts_by_list(monkeypatch):
    """Before: abort_request(<one id>) missed in V1 (it takes a list): MBXP samples decoded to max_new_tokens."""
    from code.common.llm.backends import VLLMProcessor

    script = [5, 6, 7, 8, 9, 10, 11, 12]
    rec = fake_vllm(monkeypatch, script)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    p = VLLMBackend().processor(spec(gpus=(3,), max_batch_size=4))
    assert isinstance(p, VLLMProcessor)
    import os

    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    done, ev = {}, threading.Event()
    p.start(lambda r, t: None, lambda r, toks: (done.__setitem__(r.qid, toks.tolist()), ev.set()))
    p.submit([GenRequest(1, 0, np.array([1, 2]), max_new_tokens=8, stop=(7, 8))])
    assert ev.wait(10)
    p.stop()
    assert not p.errors, p.errors
    assert done[1] == [5, 6, 7, 8] and rec["aborts"] == [["1"]]


def test_tensorrt_llm_prepares_no_engine_save(monkeypatch):
    """Before: prepare_model built tensorrt_llm.LLM and called llm.save(), which the 1.x (PyTorch flow) class lacks:
    generate_engines failed first thing. Now the workers load the checkpoint itself."""
    built = []

    class LLM:                                  # 1.x: no save()
        def __init__(self, **kw):
            built.append(kw)

    monkeypatch.setitem(sys.modules, "tensorrt_llm", types.SimpleNamespace(LLM=LLM))
    assert TensorRTLLMBackend().prepare_model("/m/llama", spec()) == "/m/llama"
    assert built == []
