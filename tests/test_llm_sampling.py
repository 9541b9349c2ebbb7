"""Sampling decoding (issue 30: GPT-OSS-120B's reference samples at temperature 1.0, top_p 1.0, top_k off): the
filter against transformers' own logits warpers, greedy settings against plain ``model.generate``, seeded sampling
independent of the batch a sample runs in, the frequencies of many draws against the softmax, the benchmarks'
reference defaults, and the parameters in the HTTP serving SUT's request bodies, answered by the harness's own
server with the in-process tokens."""
from __future__ import annotations

import asyncio
import json
import socket
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from code.common.llm.generation import GenRequest, Scheduler  # noqa: E402
from code.common.llm.hf import TransformersStepModel, greedy_generate  # noqa: E402
from code.common.llm.sampling import Sampling, warp  # noqa: E402

VOCAB, NEW = 64, 12


@pytest.fixture(scope="module")
def model():
    """A seeded one-layer Llama whose next-token distributions are far from flat (its output head scaled up)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256, bos_token_id=1,
                      eos_token_id=2, pad_token_id=2, tie_word_embeddings=False)
    m = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        m.lm_head.weight.mul_(12.0)
    return m


@pytest.fixture(scope="module")
def prompts():
    rng = np.random.default_rng(3)
    return [rng.integers(3, VOCAB, size=int(n)) for n in rng.integers(3, 12, size=6)]


def generate(model, prompts, sampling: Sampling, batch: int, seeds=None) -> dict[int, list[int]]:
    """Each prompt's tokens through the in-flight scheduler (no EOS: every answer NEW tokens long)."""
    sched = Scheduler(TransformersStepModel(model, eos_token_id=None, pad_token_id=2), batch, sampling=sampling)
    done, ev = {}, threading.Event()

    def on_done(r, toks):
        done[r.index] = toks.tolist()
        if len(done) == len(prompts):
            ev.set()
    sched.start(lambda r, t: None, on_done)
    for i, p in enumerate(prompts):
        sched.submit([GenRequest(i, i, p, NEW, 0, seed=None if seeds is None else seeds[i])])
        if i % 2:
            ev.wait(0.01)        # later ones join a running batch
    assert ev.wait(60), sched.state()
    sched.stop()
    return done


# --- (a) the filter against transformers' warpers -----------------------------------------------------------

def test_warp_equals_transformers_temperature_top_k_top_p_warpers():
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    g = torch.Generator().manual_seed(1)
    logits = torch.randn(5, 300, generator=g) * 4
    cases = [(1.0, 0, 1.0), (0.6, 40, 1.0), (1.0, 0, 0.9), (1.3, 25, 0.8), (0.01, 0, 1.0), (2.0, 1, 1.0),
             (1.0, 300, 0.5)]
    worst = 0.0
    for t, k, p in cases:
        ref = TemperatureLogitsWarper(t)(None, logits.clone())
        if k:
            ref = TopKLogitsWarper(k)(None, ref)
        if p < 1:
            ref = TopPLogitsWarper(p)(None, ref)
        ours = warp(logits, t, k, p)
        assert torch.equal(torch.isinf(ours), torch.isinf(ref)), (t, k, p)         # the same tokens kept
        worst = max(worst, float((ours.softmax(-1) - ref.softmax(-1)).abs().max()))
    # per-row parameters in one call (each row its own request's): row by row as above
    ts, ks, ps = [1.0, 0.6, 1.3, 0.7, 1.0], [0, 40, 25, 0, 5], [1.0, 1.0, 0.8, 0.95, 0.5]
    ours = warp(logits, ts, ks, ps)
    for i, (t, k, p) in enumerate(zip(ts, ks, ps)):
        ref = TemperatureLogitsWarper(t)(None, logits[i:i + 1].clone())
        ref = TopKLogitsWarper(k)(None, ref) if k else ref
        ref = TopPLogitsWarper(p)(None, ref) if p < 1 else ref
        assert torch.equal(torch.isinf(ours[i:i + 1]), torch.isinf(ref)), i
        worst = max(worst, float((ours[i:i + 1].softmax(-1) - ref.softmax(-1)).abs().max()))
    print(f"[sampling] warp vs transformers warpers: {len(cases) + len(ts)} cases, max |dp| = {worst:.2e}")
    assert worst < 1e-6


# --- (b) greedy settings: plain generate's tokens -----------------------------------------------------------

def test_temperature_0_and_top_k_1_are_plain_generate_greedy(model, prompts):
    ref = [greedy_generate(model, p, max_new_tokens=NEW, min_new_tokens=0, eos_token_id=None, pad_token_id=2)
           for p in prompts]
    for s in (Sampling(temperature=0.0, seed=5), Sampling(temperature=1.0, top_k=1, seed=5)):
        for batch in (1, 4):
            got = generate(model, prompts, s, batch)
            assert [got[i] for i in range(len(prompts))] == ref, (s, batch)


# --- (c) sampling: seeded per sample, independent of the batch -------------------------------------------------

def test_sampling_is_seeded_per_sample_and_independent_of_its_batch(model, prompts):
    s = Sampling(temperature=1.0, top_p=1.0, top_k=0, seed=7)
    alone = generate(model, prompts, s, 1)
    batched = generate(model, prompts, s, 4)
    assert batched == alone
    greedy = generate(model, prompts, Sampling(), 4)
    other = generate(model, prompts, Sampling(temperature=1.0, seed=8), 4)
    differ_seed = sum(other[i] != alone[i] for i in alone)
    differ_greedy = sum(greedy[i] != alone[i] for i in alone)
    print(f"[sampling] {len(prompts)} samples x {NEW} tokens: batch 1 == batch 4; seed 8 differs from seed 7 in "
          f"{differ_seed}, greedy in {differ_greedy}")
    assert differ_seed == len(prompts) and differ_greedy == len(prompts)
    # a request's own seed (what a server receives) is the stream its index gives: the same tokens
    seeded = generate(model, prompts, s, 4, seeds=[s.request_seed(i) for i in range(len(prompts))])
    assert seeded == alone


def test_first_token_frequencies_match_the_softmax(model, prompts):
    """4,000 samples of one prompt joined in one batch (one prefill, each its own stream): the first token's
    frequencies against softmax(logits / T) of the batch-1 logits; every token within 4.5 binomial standard
    deviations (a sampler off by its temperature or by one token's mass fails by dozens)."""
    n, t = 4000, 1.0
    s = Sampling(temperature=t, seed=11)
    step = TransformersStepModel(model, eos_token_id=None, pad_token_id=2)
    p = prompts[0]
    with torch.inference_mode():
        logits = model(torch.as_tensor(p)[None]).logits[0, -1].float()
    want = (logits / t).softmax(-1).numpy()
    firsts = step.join([p] * n, [False] * n, [(s, s.request_seed(i)) for i in range(n)])
    freq = np.bincount(firsts, minlength=VOCAB) / n
    z = np.abs(freq - want) / np.sqrt(np.maximum(want * (1 - want), 1e-12) / n)
    tv = 0.5 * np.abs(freq - want).sum()
    off = (logits / (1.25 * t)).softmax(-1).numpy()           # what a sampler 25% off in temperature would give
    z_off = np.abs(freq - off) / np.sqrt(np.maximum(off * (1 - off), 1e-12) / n)
    print(f"[sampling] {n} draws of one step: max p = {want.max():.3f}, total variation {tv:.4f}, "
          f"max |z| {z.max():.2f} (against T x 1.25: {z_off.max():.1f})")
    assert want.max() < 0.9 and z.max() < 4.5 and tv < 0.05 and z_off.max() > 4.5


# --- the benchmarks' reference decoding -------------------------------------------------------------------

def test_reference_decoding_defaults_and_the_schema_flags():
    from code.common.benchmarks import registry
    from code.deepseek_r1.harness import REAL as DS
    from code.gpt_oss_120b.harness import ACCURACY, PERFORMANCE, TINY
    from code.llama3_1_405b.harness import REAL as L405

    # language/gpt-oss-120b/generation_config.json: temperature 1.0, top_k -1, top_p 1.0
    assert ACCURACY.sampling == PERFORMANCE.sampling == Sampling(temperature=1.0, top_k=0, top_p=1.0, seed=0)
    assert not ACCURACY.sampling.greedy and TINY.sampling.greedy        # tiny: judged against plain generate
    assert DS.sampling.greedy and DS.sampling.seed == 42                 # deepseek-r1 backend_registry: temperature 0
    assert L405.sampling.greedy and L405.sampling.top_k == 1             # llama3.1-405b SUT_VLLM.py: top_k 1
    names = {f.name: f for f in registry()}
    for k in ("llm_temperature", "llm_top_k", "llm_top_p", "llm_seed"):
        assert k in names and names[k].default is None, k
    with pytest.raises(ValueError):
        names["llm_top_p"].coerce("1.5")


# --- (d) the HTTP serving SUT's request bodies -------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_http_bodies_carry_the_sampling_and_the_server_answers_the_in_process_tokens(model, prompts):
    """The harness's own OpenAI-compatible server (code.common.llm.serve, greedy by default) behind a recorder of
    request bodies; OpenAIProcessor sends temperature, top_p, top_k and each sample's seed, and the server's
    tokens are the in-process scheduler's for the same seed and index."""
    from aiohttp import web

    from code.common.llm import serve
    from code.common.llm.openai_client import OpenAIProcessor
    from code.common.llm.tokentext import TokenText

    bodies: list[dict] = []

    @web.middleware
    async def record(request, handler):
        if request.method == "POST":
            bodies.append(await request.json())
        return await handler(request)

    class Text(TokenText):                   # the tiny model has no tokenizer: ids as words
        def __init__(self):
            pass

        def decode(self, ids, special=True):
            return " ".join(map(str, ids))

    served = serve.Served(Scheduler(TransformersStepModel(model, eos_token_id=None, pad_token_id=2), 4),
                          "tiny", Text(), NEW)
    served.start()
    app = serve.make_app(served)
    app.middlewares.append(record)
    port, loop = free_port(), asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    th = threading.Thread(target=loop.run_forever, daemon=True)
    th.start()
    s = Sampling(temperature=0.8, top_k=20, top_p=0.9, seed=3)
    try:
        got = {}
        for how in (s, Sampling()):
            proc = OpenAIProcessor(f"http://127.0.0.1:{port}", model="tiny", stop_text=lambda t: "", sampling=how)
            proc.warmup()
            done, ev = {}, threading.Event()

            def on_done(r, toks, done=done, ev=ev):
                done[r.index] = toks.tolist()
                if len(done) == len(prompts):
                    ev.set()
            proc.start(lambda r, t: None, on_done)
            proc.submit([GenRequest(i, i, p, NEW, 0) for i, p in enumerate(prompts)])
            assert ev.wait(60), proc.state()
            proc.stop()
            assert not proc.errors and proc.stats()["sampling"] == how.record()
            got[how] = done
    finally:
        loop.call_soon_threadsafe(loop.stop)
        th.join(10)
        served.proc.stop()
    sampled = sorted((b for b in bodies if "seed" in b), key=lambda b: b["seed"])
    assert len(sampled) == len(prompts) and len(bodies) == 2 * len(prompts)
    assert sorted(b["seed"] for b in sampled) == sorted(s.request_seed(i) for i in range(len(prompts)))
    assert all(b["temperature"] == 0.8 and b["top_k"] == 20 and b["top_p"] == 0.9 and b["stream"] for b in sampled)
    greedy = [b for b in bodies if "seed" not in b]
    assert all(b["temperature"] == 0.0 and "top_k" not in b and "top_p" not in b for b in greedy)
    shown = {k: sampled[0][k] for k in ("temperature", "top_k", "top_p", "seed")}
    print(f"[sampling] HTTP bodies: {json.dumps(shown)}")
    assert got[s] == generate(model, prompts, s, 4)              # the server's tokens: the in-process ones
    assert got[Sampling()] == generate(model, prompts, Sampling(), 4)


# --- the GPU engines' sampling parameters (vLLM stand-in; TensorRT-LLM's mapping) ---------------------------------

def test_vllm_and_tensorrt_llm_get_the_decoding_and_each_samples_seed(monkeypatch):
    """vLLM's SamplingParams carry temperature, top_p, top_k (-1: off) and the sample's own seed (vLLM seeds the
    request's generator with it); greedy stays temperature 0. TensorRT-LLM: top_k 1 when greedy; when sampling, top_p
    is given (with neither top_k nor top_p it decodes greedily) and top_k 0 means every logit."""
    from code.common.llm.backends import VLLMBackend, trtllm_sampling
    from tests.test_llm_gpu_engines import fake_vllm, spec

    s = Sampling(temperature=1.0, seed=9)
    fake_vllm(monkeypatch, [5, 6, 7])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    params = {}
    for how in (s, Sampling()):
        p = VLLMBackend().processor(spec(sampling=how))
        add = p.engine.add_request
        p.engine.add_request = lambda rid, prompt, sp, add=add, how=how: (params.__setitem__((how, rid), sp),
                                                                          add(rid, prompt, sp))
        ev = threading.Event()
        p.start(lambda r, t: None, lambda r, toks: ev.set())
        p.submit([GenRequest(4, 17, np.array([1, 2]), max_new_tokens=3)])
        assert ev.wait(10)
        p.stop()
    sp, greedy = params[(s, "4")], params[(Sampling(), "4")]
    assert (sp.temperature, sp.top_p, sp.top_k, sp.seed) == (1.0, 1.0, -1, s.request_seed(17))
    assert greedy.temperature == 0.0 and not hasattr(greedy, "seed")
    assert trtllm_sampling(None) == {"top_k": 1}
    assert trtllm_sampling((s, 123)) == {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": 123}


# --- a run through LoadGen: metadata.json records the decoding; its tokens are the seeded streams' ---------------

def test_a_sampled_run_records_its_decoding_and_answers_each_samples_seeded_stream(tiny_llama, tmp_path):
    """The tiny Llama2 at temperature 1.0, top_p 0.9, seed 3 (flags through the schema), in-flight batch 4 through
    LoadGen: metadata.json's generation.sampling says so, and every sample's tokens are those the same stream gives
    it at batch 1 in process; plain generate's greedy answers differ."""
    from pathlib import Path

    from code.common.llm import tiny
    from code.common.llm.harness import load_prompts
    from code.llama2_70b.harness import TINY as GEN
    from tests.conftest import metadata_under, run_main
    from tests.test_llm_harness import generate_reference, tokens_of

    n = 8
    run_main("--action=run_harness", "--benchmarks=llama2_70b", "--model_variant=tiny", "--scenarios=Offline",
             "--test_mode=AccuracyOnly", "--gpu_batch_size=4", f"--llm_sample_count={n}", "--llm_temperature=1.0",
             "--llm_top_p=0.9", "--llm_seed=3", f"--log_dir={tmp_path}", env=tiny_llama)
    [m] = metadata_under(tmp_path)
    s = Sampling(temperature=1.0, top_k=0, top_p=0.9, seed=3)
    assert m["generation"]["sampling"] == {**s.record(), "decoding": "sampling"}, m.get("error")
    assert m["settings"]["llm_temperature"] == 1.0 and m["settings"]["llm_seed"] == 3
    got = tokens_of(m["log_dir"])
    scratch = Path(tiny_llama["MLPERF_SCRATCH_PATH"])
    model = tiny.load_model(scratch / "models" / "llama2_70b" / "tiny" / "checkpoint")
    prompts = load_prompts(scratch / "preprocessed_data" / "llama2_70b" / "tiny" / "prompts.npz")[:n]
    sched = Scheduler(TransformersStepModel(model, eos_token_id=model.config.eos_token_id,
                                            pad_token_id=model.config.pad_token_id or 0), 1, sampling=s)
    done, ev = {}, threading.Event()

    def on_done(r, toks):
        done[r.index] = toks.tolist()
        if len(done) == n:
            ev.set()
    sched.start(lambda r, t: None, on_done)
    sched.submit([GenRequest(i, i, p, GEN.max_new_tokens, GEN.min_new_tokens) for i, p in enumerate(prompts)])
    assert ev.wait(60), sched.state()
    sched.stop()
    assert got == done
    greedy = generate_reference(tiny_llama)
    print(f"[sampling] tiny Llama2 run at temperature 1.0 / top_p 0.9 / seed 3: {n} samples == in process at batch 1;"
          f" {sum(got[i] != greedy[i] for i in range(n))} of {n} differ from plain generate's greedy answers")
    assert sum(got[i] != greedy[i] for i in range(n)) >= n // 2
