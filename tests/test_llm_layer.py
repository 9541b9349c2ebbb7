"""The LLM layer in process (no LoadGen): the scheduler's batching modes against plain
``model.generate``, the token budget, beam search, failures, the streaming SUT's LoadGen calls, ROUGE
and the input checks. Small seeded models built here (a few hundred thousand parameters)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from code.common.errors import HarnessError  # noqa: E402
from code.common.llm import rouge, tiny  # noqa: E402
from code.common.llm.generation import GenRequest, NullStepModel, Scheduler, StepModel  # noqa: E402
from code.common.llm.hf import TransformersStepModel, greedy_generate  # noqa: E402

MAX_NEW, MIN_NEW = 24, 3


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Tiny GPT-J and Llama checkpoints with calibrated EOS (varied output lengths), and prompts."""
    root = tmp_path_factory.mktemp("llm_layer")
    tok_dir = tiny.build_tokenizer(root / "tok")
    tok = tiny.load_tokenizer(tok_dir)
    g = tiny.TextGen(5)
    prompts = [np.asarray(tok(g.paragraph(1 + i % 7))["input_ids"]) for i in range(40)]
    out = {"tok": tok, "prompts": prompts}
    for kind in ("gptj", "llama"):
        tiny.build_model(kind, root / kind, tok_dir, context=512, max_new_tokens=MAX_NEW, min_new_tokens=MIN_NEW,
                         calibration_prompts=prompts[:16])
        out[kind] = tiny.load_model(root / kind)
    return out


def run_scheduler(sched: Scheduler, prompts, stagger_s: float = 0.0, max_new=MAX_NEW, min_new=MIN_NEW):
    done, firsts = {}, {}
    ev = threading.Event()

    def on_done(r, toks):
        done[r.index] = toks.tolist()
        if len(done) == len(prompts):
            ev.set()
    sched.start(lambda r, t: firsts.__setitem__(r.index, t), on_done)
    for i, p in enumerate(prompts):
        sched.submit([GenRequest(i, i, p, max_new, min_new)])
        if stagger_s:
            ev.wait(stagger_s)
    assert ev.wait(120), sched.state()
    sched.stop()
    return done, firsts


@pytest.mark.parametrize("kind", ["gptj", "llama"])
@pytest.mark.parametrize("mode,bs", [("inflight", 1), ("inflight", 8), ("static", 8)])
def test_scheduler_matches_plain_generate(models, kind, mode, bs):
    m, prompts = models[kind], models["prompts"]
    ref = [greedy_generate(m, p, max_new_tokens=MAX_NEW, min_new_tokens=MIN_NEW, eos_token_id=tiny.EOS) for p in prompts]
    lens = {len(r) for r in ref}
    assert len(lens) > 3 and min(lens) < MAX_NEW, f"outputs should end early at varied lengths: {sorted(lens)}"
    sched = Scheduler(TransformersStepModel(m, eos_token_id=tiny.EOS), bs, mode=mode, batch_timeout_s=0.05)
    done, firsts = run_scheduler(sched, prompts, stagger_s=0.003)
    same = sum(done[i] == ref[i] for i in range(len(prompts)))
    if bs == 1:
        assert same == len(prompts)                      # batch 1: token-identical to model.generate
    else:
        assert same >= 0.99 * len(prompts) - 0.5         # padding numerics may differ
    assert all(firsts[i] == done[i][0] for i in done)     # the first-token event is the output's first token
    st = sched.stats()
    assert st["completed"] == len(prompts)
    if bs > 1:
        assert st["max_rows"] > 1
    if mode == "static":
        assert st["idle_row_steps"] > 0                  # finished rows stay in a static batch until it ends


def test_inflight_joins_between_steps_and_respects_token_budget(models):
    prompts = models["prompts"][:12]
    budget = max(len(p) for p in prompts) + 4
    sched = Scheduler(TransformersStepModel(models["llama"], eos_token_id=tiny.EOS), 8, mode="inflight",
                      max_num_tokens=budget)
    joins = []
    real_join = sched.model.join

    def join(ps, sup):
        joins.append(sum(len(p) for p in ps))
        return real_join(ps, sup)
    sched.model.join = join
    done, _ = run_scheduler(sched, prompts)
    assert len(done) == len(prompts)
    assert max(joins) <= budget and len(joins) > 1


def test_beam_search_processor_matches_generate(models):
    from code.common.llm.backends import BeamSearchProcessor, WorkerSpec

    m, prompts = models["gptj"], models["prompts"][:6]
    spec = WorkerSpec(model_dir="", max_batch_size=1, num_beams=4, eos_token_id=tiny.EOS, pad_token_id=tiny.EOS)
    proc = BeamSearchProcessor(m, spec, lambda: None)
    done, _ = run_scheduler(proc, prompts)
    with torch.inference_mode():
        for i, p in enumerate(prompts):
            ids = torch.as_tensor(p)[None]
            ref = m.generate(ids, attention_mask=torch.ones_like(ids), num_beams=4, early_stopping=True,
                             do_sample=False, max_new_tokens=MAX_NEW, min_new_tokens=MIN_NEW,
                             eos_token_id=tiny.EOS, pad_token_id=tiny.EOS)[0, ids.shape[1]:].tolist()
            if tiny.EOS in ref:
                ref = ref[:ref.index(tiny.EOS) + 1]
            assert done[i] == ref


class Exploding(StepModel):
    eos_token_id = 2

    def join(self, prompts, suppress_eos):
        raise RuntimeError("device lost")

    def step(self, last_tokens, suppress_eos):
        raise AssertionError

    def leave(self, rows):
        pass


def test_a_failing_model_answers_every_request_and_reports_the_error():
    sched = Scheduler(Exploding(), 4)
    done, _ = run_scheduler(sched, [np.arange(3, 9)] * 5)
    assert len(done) == 5 and all(v == [] for v in done.values())
    assert sched.errors and "device lost" in str(sched.errors[0])
    sched2 = Scheduler(Exploding(), 4)         # a dead worker answers new work at once
    sched2.errors.append(RuntimeError("dead"))
    got = []
    sched2.start(lambda r, t: None, lambda r, t: got.append(r.index))
    sched2.submit([GenRequest(0, 7, np.arange(3), 4)])
    assert got == [7]


class FakeLG:
    """Records the LoadGen calls the streaming SUT makes (and copies the payloads, as LoadGen does)."""

    def __init__(self):
        self.first, self.done, self.lock = [], [], threading.Lock()

    class QuerySampleResponse:
        def __init__(self, id, data, size, n_tokens=0):
            import ctypes

            self.id, self.size, self.n_tokens = id, size, n_tokens
            self.payload = np.frombuffer(ctypes.string_at(data, size), dtype=np.int32).copy() if size else np.zeros(0)

    def FirstTokenComplete(self, rs):
        with self.lock:
            self.first += rs

    def QuerySamplesComplete(self, rs):
        with self.lock:
            self.done += rs


def test_streaming_sut_sends_first_token_then_all_tokens_with_n_tokens():
    from code.common.llm.sut import StreamingSUT

    class S:
        def __init__(self, i):
            self.id, self.index = 1000 + i, i
    lg = FakeLG()
    procs = [Scheduler(NullStepModel(None), 4, name=f"w{i}") for i in range(2)]
    sut = StreamingSUT(lg, procs, lambda i: np.arange(5 + i, dtype=np.int32), max_new_tokens=6, min_new_tokens=2)
    sut.start()
    sut.issue_queries([S(i) for i in range(10)])
    for _ in range(200):
        if sut.completed == 10:
            break
        threading.Event().wait(0.01)
    sut.stop()
    assert sorted(r.id for r in lg.first) == [1000 + i for i in range(10)]
    assert all(r.size == 4 and r.payload.tolist() == [1] for r in lg.first)
    assert all(r.n_tokens == 6 and r.payload.tolist() == [1] * 6 for r in lg.done)
    assert sut.stats()["tokens"] == 60 and all(p.stats()["completed"] > 0 for p in procs)   # both workers used
    lg2 = FakeLG()                                    # GPT-J (infer_token_latencies): no first-token events
    sut2 = StreamingSUT(lg2, [Scheduler(NullStepModel(None), 4)], lambda i: np.arange(3), max_new_tokens=3,
                        token_latencies=False, plant_first_token=True)
    sut2.start()
    sut2.issue_queries([S(0)])
    for _ in range(200):
        if sut2.completed:
            break
        threading.Event().wait(0.01)
    sut2.stop()
    assert lg2.first == [] and len(lg2.done) == 1


def test_rouge_matches_rouge_score_directly():
    from rouge_score import rouge_scorer

    preds = ["the cat sat on the mat.", "dogs run fast in parks. they bark."]
    refs = ["a cat sat on a mat.", "the dogs ran fast. they barked loudly."]
    pp, rr = rouge.postprocess_text(preds, refs)
    got = rouge.rouge(pp, rr)
    sc = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)
    want = np.mean([sc.score(r, p)["rouge1"].fmeasure for p, r in zip(pp, rr)]) * 100
    assert got["rouge1"] == round(want, 4)
    assert pp[1].count("\n") == 1      # one sentence per line (rougeLsum)


def test_tokenizer_loads_fast_and_slow_with_the_same_ids(tmp_path):
    d = tiny.build_tokenizer(tmp_path / "tok")
    text = "Staibou tra, plai chou stoun."
    assert tiny.load_tokenizer(d)(text)["input_ids"] == tiny.load_tokenizer(d, use_fast=False)(text)["input_ids"]
    assert tiny.load_tokenizer(d).eos_token_id == tiny.EOS



class SlowStep(NullStepModel):
    """Null tokens, 20 ms per forward: a known, low service rate."""

    def join(self, prompts, suppress_eos):
        threading.Event().wait(0.02)
        return super().join(prompts, suppress_eos)

    def step(self, last_tokens, suppress_eos):
        threading.Event().wait(0.02)
        return super().step(last_tokens, suppress_eos)


def test_streaming_sut_sheds_past_its_pending_bound():
    from code.common.llm.sut import StreamingSUT

    class S:
        def __init__(self, i):
            self.id, self.index = i, i % 4
    lg = FakeLG()
    sut = StreamingSUT(lg, [Scheduler(SlowStep(2), 2)], lambda i: np.arange(4, dtype=np.int32), max_new_tokens=5,
                       min_new_tokens=2)
    sut.max_pending = 6
    sut.start()
    for i in range(40):
        sut.issue_queries([S(i)])
    for _ in range(500):
        if sut.completed == 40:
            break
        threading.Event().wait(0.01)
    sut.stop()
    assert sut.completed == 40 and sut.overload is not None and sut.overload["max_pending"] == 6
    assert 0 < sut.shed <= 40 - 6 and sut.stats()["shed"] == sut.shed     # at most max_pending were queued
    shed = [r for r in lg.done if r.n_tokens == 2 and r.payload.tolist() == [2, 2]]
    assert len(shed) == sut.shed          # answered at once with a first token and two EOS (n_tokens >= 2)


def test_gpu_workers_follow_tensor_parallel_size(monkeypatch):
    """8 H200s, fp8, tensor parallel 1: eight workers, one GPU each. 8 H100s at tensor parallel 2 (fp8 70B leaves
    too little KV cache on one 80 GB GPU): four workers of two GPUs. A100s at tensor parallel 2 (fp16 70B): a worker
    per two GPUs, and on one A100 an error naming the GPUs needed."""
    from code.common.errors import HarnessError
    from code.common.systems import KnownSystems
    from code.llama2_70b.harness import Llama2Benchmark
    from code.main import plan
    from tests.test_systems_coverage import fake

    cls = {c.system_id: c for c in KnownSystems.gpu_classes()}
    for gpu, want in (("H200-SXM-141GB", [(i,) for i in range(8)]), ("H100-SXM-80GB", [(0, 1), (2, 3), (4, 5), (6, 7)])):
        fake(monkeypatch, cls[gpu], 8)
        _, [s] = plan(["--action=info", "--benchmarks=llama2_70b", "--scenarios=Offline"])
        b = Llama2Benchmark(s)
        monkeypatch.setattr(b, "model_config", lambda: {"eos_token_id": 2, "max_position_embeddings": 4096})
        specs = b.worker_specs("/ckpt")
        assert [w.gpus for w in specs] == want and specs[0].precision == "fp8", gpu
    fake(monkeypatch, cls["A100-SXM-80GB"], 4)
    _, [s] = plan(["--action=info", "--benchmarks=llama2_70b", "--scenarios=Offline"])
    b = Llama2Benchmark(s)
    monkeypatch.setattr(b, "model_config", lambda: {"eos_token_id": 2, "max_position_embeddings": 4096})
    assert [w.gpus for w in b.worker_specs("/ckpt")] == [(0, 1), (2, 3)]
    fake(monkeypatch, cls["A100-SXM-80GB"], 1)
    _, [s] = plan(["--action=info", "--benchmarks=llama2_70b", "--scenarios=Offline"])
    b = Llama2Benchmark(s)
    monkeypatch.setattr(b, "model_config", lambda: {"eos_token_id": 2, "max_position_embeddings": 4096})
    with pytest.raises(HarnessError) as e:
        b.worker_specs("/ckpt")
    assert "needs 2 GPUs" in e.value.cause and "--tensor_parallel_size=1" in e.value.fix
