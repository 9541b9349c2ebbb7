"""Qwen3-VL-235B-A22B end to end through the CLI and LoadGen on its tiny variant (a Qwen3VLMoeForConditionalGeneration:
2 text layers of 4 experts top-2 with interleaved multimodal positions, a 2-block ViT; transformers backend): the
reference's own prompt (its formulate_loaded_sample, run from the shared official tree) through Hugging Face's
processor and plain ``model.generate`` gives the text LoadGen logged at batch 1; the official scorer (evaluation.py's
run_evaluation) scores the same log as ours; an Offline performance run; a Server run under the end-to-end 12 s
bound; an Interactive run under its 1.5 s; the official checker on a staged v6.1 export of the Offline runs; the HTTP
serving path (the harness's own server over chat completions with image_url data URLs) logs the same answers; the
round table's facts (no audits for this benchmark in either round); the Hub download path; the reference's sampling
(the real variant's default, the README's numbers): a sampled tiny run answers each sample's own seeded stream at any
batch, in process and over HTTP.

Sized for a 2-core machine: one module fixture (an AccuracyOnly run at batch 1 and one Offline performance run), one
of 8 samples sampled in process at batch 1."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TINY_UNAVOIDABLE, build_tiny, official_root, offline_samples, run_main, server_rate, \
    server_run, staged_official_check, valid_or_short
from tests.test_llm_harness import generate_reference, one

Q = ("--benchmarks=qwen3-vl", "--model_variant=tiny")
N = 24                                       # Qwen3VLBenchmark.tiny_samples
SHIM = Path(__file__).with_name("qwen3_vl_shim")


@pytest.fixture(scope="module")
def tiny_qwen3_vl(harness_env) -> dict:
    return build_tiny("qwen3_vl", harness_env)


def scratch(env) -> Path:
    return Path(env["MLPERF_SCRATCH_PATH"])


@pytest.fixture(scope="module")
def qv(tiny_qwen3_vl, tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3_vl_runs")
    env = dict(tiny_qwen3_vl, MLPERF_BUILD_DIR=str(root / "build"))    # private: the staged export reads its logs
    logs = root / "build" / "logs"
    (root / "build" / "compliance_logs").mkdir(parents=True)           # no audit for qwen3-vl in either round
    run_main("--action=run_harness", *Q, "--scenarios=Offline", "--test_mode=AccuracyOnly", "--gpu_batch_size=1",
             f"--log_dir={logs / 'acc'}", env=env, check=True)
    run_main("--action=run_harness", *Q, "--scenarios=Offline", *offline_samples(48), f"--log_dir={logs / 'perf'}",
             env=env, check=True)
    return {"root": root, "env": env, "acc": one(logs / "acc"), "perf": one(logs / "perf")}


def answers_of(log_dir) -> dict[int, str]:
    """The accuracy log's answers as the reference's scorer reads them: UTF-8 text."""
    data = json.loads((Path(log_dir) / "mlperf_log_accuracy.json").read_text())
    return {int(e["qsl_idx"]): bytes.fromhex(e["data"]).decode("utf-8") for e in data}


def official_env() -> dict:
    src = official_root("multimodal", "qwen3-vl", "src")
    try:
        import datasets  # noqa: F401 - the real package where installed
        path = str(src)
    except ImportError:
        path = f"{SHIM}{os.pathsep}{src}"
    return {**os.environ, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}


def reference_messages(data_dir: Path, env: dict) -> list:
    """task.py's ShopifyGlobalCatalogue.formulate_loaded_sample on every tiny row (PIL images, as datasets decodes
    the Image feature), run in a subprocess from the shared official tree."""
    code = (
        "import io, json, sys\n"
        "from PIL import Image\n"
        "from datasets import load_dataset\n"
        "from mlperf_inf_mm_q3vl.task import ShopifyGlobalCatalogue\n"
        "out = []\n"
        "for row in load_dataset(sys.argv[1], split='train+test'):\n"
        "    row['product_image'] = Image.open(io.BytesIO(row['product_image']['bytes']))\n"
        "    out.append(ShopifyGlobalCatalogue.formulate_loaded_sample(row).messages)\n"
        "print(json.dumps(out))\n")
    r = subprocess.run([sys.executable, "-c", code, str(data_dir)], env=env, capture_output=True, text=True,
                       timeout=300)
    if r.returncode and "ModuleNotFoundError" in r.stderr:
        pytest.skip(f"the official reference's imports are missing here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_qwen3_vl_offline_accuracy_batch1_is_reference_prompt_through_plain_generate(qv):
    """The reference's messages (its own code) through transformers' processor and plain ``model.generate`` at batch
    1 give the text LoadGen logged for every sample; the prompts, answers and images are those of the run."""
    import numpy as np
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from code.qwen3_vl import dataset

    env = qv["env"]
    data_dir = scratch(env) / "data" / "qwen3_vl" / "tiny"
    msgs = reference_messages(data_dir, official_env())
    rows = dataset.read(data_dir, "x")
    assert len(msgs) == len(rows) == N
    assert [dataset.messages(r) for r in rows] == msgs           # our prompt is the reference's, byte for byte
    ck = scratch(env) / "models" / "qwen3_vl" / "tiny" / "checkpoint"
    proc = AutoProcessor.from_pretrained(str(ck))
    model = AutoModelForImageTextToText.from_pretrained(str(ck), dtype=torch.float32).eval()
    got = answers_of(qv["acc"]["log_dir"])
    assert sorted(got) == list(range(N))
    from code.common.llm.vision import images_of

    texts, ids_per = [], []
    for m in msgs:
        x = proc(text=[proc.apply_chat_template(m, tokenize=False, add_generation_prompt=True)], images=images_of(m),
                 return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(**x, do_sample=False, max_new_tokens=2, min_new_tokens=1)
        new = out[0, x["input_ids"].shape[1]:].tolist()
        ids_per.append(new)
        texts.append(proc.tokenizer.decode(new, skip_special_tokens=True))
    assert [got[i] for i in range(N)] == texts
    assert [list(t) for t in generate_reference(env, "qwen3_vl")] == ids_per
    # the image matters: the same text with another product's image is answered otherwise for some samples
    from code.common.llm.harness import load_prompts

    prompts = load_prompts(scratch(env) / "preprocessed_data" / "qwen3_vl" / "tiny" / "prompts.npz")
    assert len(prompts) == N and all(len(p) > 1000 for p in prompts)
    swapped = 0
    for i in range(0, N, 6):
        m = json.loads(json.dumps(msgs[i]))
        m[1]["content"][1] = msgs[(i + 1) % N][1]["content"][1]
        x = proc(text=[proc.apply_chat_template(m, tokenize=False, add_generation_prompt=True)], images=images_of(m),
                 return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(**x, do_sample=False, max_new_tokens=2, min_new_tokens=1)
        swapped += out[0, x["input_ids"].shape[1]:].tolist() != ids_per[i]
    assert swapped >= 1
    acc = qv["acc"]["accuracy"]
    assert acc["passed"], acc["text"]
    assert acc["metrics"]["f1"] == acc["generate_metrics"]["f1"] and 0.03 < acc["metrics"]["f1"] < 0.9
    assert np.isfinite(acc["metrics"]["f1"])
    perf = qv["perf"]
    assert perf["valid"], perf["invalid_reasons"]
    assert perf["loadgen_model"] == "qwen3-vl-235b-a22b"


def test_qwen3_vl_official_run_evaluation_scores_the_same_log(qv, tmp_path):
    """multimodal/qwen3-vl evaluation.py's run_evaluation (the official scorer, in a subprocess from the shared tree,
    the tiny Parquet set as its data set argument) on the run's own accuracy log: its accuracy.txt holds our f1."""
    official_root("multimodal", "qwen3-vl", "src", "mlperf_inf_mm_q3vl", "evaluation.py")
    log = Path(qv["acc"]["log_dir"]) / "mlperf_log_accuracy.json"
    data_dir = scratch(qv["env"]) / "data" / "qwen3_vl" / "tiny"
    code = ("import sys, types\nfrom pathlib import Path\n"
            "from mlperf_inf_mm_q3vl.evaluation import run_evaluation\n"
            "run_evaluation(random_seed=12345, filename=Path(sys.argv[1]), dataset=types.SimpleNamespace("
            "repo_id=sys.argv[2], token=None, split=['train', 'test']))\n")
    r = subprocess.run([sys.executable, "-c", code, str(log), str(data_dir)], cwd=tmp_path, env=official_env(),
                       capture_output=True, text=True, timeout=300)
    if r.returncode and "ModuleNotFoundError" in r.stderr:
        pytest.skip(f"the official scorer's imports are missing here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-2000:]
    text = (tmp_path / "accuracy.txt").read_text()
    theirs = json.loads(re.search(r"^\{.*\}$", text, re.M).group(0))["f1"]
    brand = re.search(r"From accuracy file\s*│\s*([\d.]+)\s*│\s*([\d.]+)", r.stderr + r.stdout)
    ours_text = (Path(qv["acc"]["log_dir"]) / "accuracy.txt").read_text()
    ours = json.loads(ours_text.splitlines()[0])["f1"]
    our_brand = float(re.search(r"brand score ([\d.]+)", ours_text).group(1))
    print(f"FIGURE qwen3_vl tiny log, official: f1 {theirs!r}, brand {brand.group(2) if brand else '?'} | "
          f"ours: f1 {ours!r}, brand {our_brand}")
    assert f"{ours:.4g}" == f"{theirs:.4g}" and abs(ours - theirs) < 1e-12
    if brand:
        assert f"{our_brand:.4g}" == f"{float(brand.group(2)):.4g}"
    # the checker's F1_HIERARCHICAL pattern reads both files alike
    from code.common.results.accuracy_text import values

    assert values(text, ["F1_HIERARCHICAL"]) == values(ours_text, ["F1_HIERARCHICAL"]) == {"F1_HIERARCHICAL": theirs}


def test_qwen3_vl_server_end_to_end_bound(qv):
    """Server: judged end to end (mlperf.conf's target_latency 12 s at p99, use_token_latencies off), the round
    table's bound written to user.conf; answers logged as text."""
    qps = server_rate(qv["perf"], 0.5, cap=8)
    m, qps, _ = server_run(("--action=run_harness", *Q, "--scenarios=Server", "--min_query_count=24",
                            "--min_duration=1000"), qv["root"] / "server", qv["env"], qps)
    assert valid_or_short(m), m["invalid_reasons"]
    assert m["loadgen_model"] == "qwen3-vl-235b-a22b"
    res = m["results"]
    assert res["result_99.00_percentile_latency_ns"] < 12e9
    detail = (Path(m["log_dir"]) / "mlperf_log_detail.txt").read_text()
    assert "first_token" not in json.dumps(res)                  # no TTFT/TPOT figures: whole answers only
    assert '"key": "effective_target_latency_ns", "value": 12000000000' in detail
    conf = (Path(m["log_dir"]) / "user.conf").read_text()
    assert "qwen3-vl-235b-a22b.Server.target_latency = 12000" in conf and "ttft" not in conf


def test_qwen3_vl_interactive_bound_and_round_facts():
    """The round table owns the end-to-end bounds and v6.1's per-scenario figures (the checker's latency-constraint,
    accuracy-target and accuracy-sample-count); the Interactive run's user.conf carries its 1.5 s, which no
    mlperf.conf LoadGen compiles has; no audit is required in either round."""
    from code.common import rounds
    from code.common.harness.runner import user_conf_text
    from code.common.settings import RunControl

    v60, v61 = rounds.ROUNDS["v6.0"].benchmarks["qwen3-vl-235b-a22b"], rounds.ROUNDS["v6.1"].benchmarks[
        "qwen3-vl-235b-a22b"]
    assert v60.datacenter_scenarios == ("Server", "Offline") and v61.datacenter_scenarios == ("Offline",)
    assert v61.optional_scenarios == ("Interactive", "Server") and v60.compliance_tests == v61.compliance_tests == ()
    assert dict(v60.latency_constraint_ns) == {"Server": 12_000_000_000}
    assert dict(v61.latency_constraint_ns) == {"Server": 12_000_000_000, "Interactive": 1_500_000_000}
    inter = v61.for_scenario("Interactive")
    assert inter.accuracy_samples == 8000 and round(inter.accuracy_min["F1_HIERARCHICAL"], 6) == 0.779922
    assert v61.for_scenario("Server").accuracy_samples == 48289 and v61.accuracy_min["F1_HIERARCHICAL"] == 0.7903 * 0.99
    assert not v61.result_field                                   # samples/s, not tokens/s
    from code.main import plan

    for round_, scen, ms in (("v6.1", "Interactive", "1500"), ("v6.1", "Server", "12000"), ("v6.0", "Server", "12000")):
        _, settings = plan(["--action=run_harness", *Q, f"--scenarios={scen}", f"--round={round_}"])
        conf = user_conf_text(settings[0], RunControl())
        model = "qwen3-vl-235b-a22b" + ("-interactive" if scen == "Interactive" else "")
        assert f"{model}.Server.target_latency = {ms}" in conf, conf
    _, settings = plan(["--action=run_harness", *Q, "--scenarios=Server", "--server_target_latency_ns=2000000000"])
    assert "target_latency = 2000" in user_conf_text(settings[0], RunControl())      # a flag still wins
    _, settings = plan(["--action=run_harness", "--benchmarks=gpt-oss-120b", "--model_variant=tiny",
                        "--scenarios=Interactive"])
    assert "target_latency" not in user_conf_text(settings[0], RunControl())      # per-token LLMs: none


def test_qwen3_vl_interactive_run_end_to_end_bound(qv):
    """Interactive (v6.1, optional): LoadGen's Server scenario under qwen3-vl-235b-a22b-interactive, a name the
    mlperf.conf LoadGen compiles has no line for, so the checker's 1.5 s (latency-constraint) reaches LoadGen only
    through user.conf; judged end to end (no TTFT/TPOT: the checker's LLM list leaves qwen3-vl out). 16 queries: a
    p99 needs ~460 here before early stopping can pass (minutes on this CPU), so short of early stopping only."""
    qps = server_rate(qv["perf"], 0.5, cap=8)
    m, qps, _ = server_run(("--action=run_harness", *Q, "--scenarios=Interactive", "--min_query_count=16",
                            "--min_duration=1000"), qv["root"] / "interactive", qv["env"], qps)
    assert valid_or_short(m), m["invalid_reasons"]
    assert m["loadgen_model"] == "qwen3-vl-235b-a22b-interactive" and m["scenario"] == "Interactive"
    eff = m["effective"]
    assert eff["effective_scenario"] == "Server" and eff["effective_target_latency_ns"] == 1_500_000_000
    assert eff["effective_target_qps"] == qps and m["results"]["result_99.00_percentile_latency_ns"] < 1.5e9
    detail = (Path(m["log_dir"]) / "mlperf_log_detail.txt").read_text()
    assert "use_token_latencies" not in detail and "first_token" not in detail      # LoadGen logs them only when on
    conf = (Path(m["log_dir"]) / "user.conf").read_text()
    assert "qwen3-vl-235b-a22b-interactive.Server.target_latency = 1500" in conf
    # the reference enables sample concatenation permutation in every scenario; LoadGen's mlperf.conf does so for
    # qwen3-vl-235b-a22b.* only (was false here), so the round table's loadgen_conf puts it into user.conf
    assert "qwen3-vl-235b-a22b-interactive.Server.sample_concatenate_permutation = 1" in conf
    assert str(eff["effective_sample_concatenate_permutation"]).lower() in ("true", "1"), eff


def test_qwen3_vl_staged_export_official_checker(qv, tmp_path):
    """The module's Offline runs (v6.1 datacenter's one required scenario; qwen3-vl is in none of the checker's
    models_TEST lists, so no audit) staged, truncated and exported for v6.1: the official checker reads them and
    reports only what a tiny CPU run cannot avoid: its length, 24 of 48,289 samples, and no Interactive or Server
    result (the checker wants one of its optional pair; the module's Server and Interactive runs, short of early
    stopping, are not staged: they stay outside its build/; a VALID one needs ~460 queries, minutes here)."""
    sub, errors = staged_official_check(qv["env"], tmp_path, "v6.1")
    assert list(sub.rglob("qwen3-vl-235b-a22b/Offline/accuracy/accuracy.txt"))
    assert list(sub.rglob("qwen3-vl-235b-a22b/Offline/performance/run_1/mlperf_log_detail.txt"))
    assert not list(sub.rglob("qwen3-vl-235b-a22b/Offline/TEST*"))
    unavoidable = (*TINY_UNAVOIDABLE, r"missing \['\(one of\) Interactive or Server'\]")
    assert [ln for ln in errors if not any(re.search(p, ln) for p in unavoidable)] == [], errors


def test_qwen3_vl_http_chat_completions_with_image_urls(qv, sampled, tmp_path):
    """The harness's own server (make run_llm_server, batch 1) takes the reference's messages, image_url data URL
    and all: the prompt it builds is the preprocessed one and its answer the in-process one; --backend=openai sends
    every sample so and logs the same answers; a sampled request (the reference's parameters, the sample's seed)
    answers what that sample's stream gives in process."""
    import urllib.request

    from code.common.llm.harness import load_prompts
    from code.qwen3_vl import dataset
    from tests.test_llm_http import free_port

    env = dict(qv["env"], MLPERF_BUILD_DIR=str(tmp_path / "build"))
    r = run_main("--action=run_llm_server", *Q, f"--llm_server_port={free_port()}", "--gpu_batch_size=1", env=env,
                 timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        url = json.loads((tmp_path / "build" / "llm_server" / "endpoints.json").read_text())["servers"][0]["url"]
        rows = dataset.read(scratch(env) / "data" / "qwen3_vl" / "tiny", "x")
        body = {"model": "qwen3_vl-tiny", "messages": dataset.messages(rows[3]), "max_tokens": 2, "min_tokens": 1,
                "temperature": 0.0}
        req = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            ans = json.loads(resp.read())
        prompts = load_prompts(scratch(env) / "preprocessed_data" / "qwen3_vl" / "tiny" / "prompts.npz")
        assert ans["prompt_token_ids"] == prompts[3].tolist()
        assert ans["choices"][0]["message"]["content"] == answers_of(qv["acc"]["log_dir"])[3]
        s, greedy = sampled["s"], answers_of(qv["acc"]["log_dir"])
        picks = [i for i, t in enumerate(sampled["text"]) if t != greedy[i]][:2]    # where sampling shows
        assert picks
        for i in picks:                        # sampled, with the sample's seed: its in-process stream's answer
            body = {**body, "messages": dataset.messages(rows[i]), "temperature": s.temperature, "top_p": s.top_p,
                    "top_k": s.top_k, "seed": s.request_seed(i)}
            req = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as resp:
                assert json.loads(resp.read())["choices"][0]["message"]["content"] == sampled["text"][i], i
        run_main("--action=run_harness", *Q, "--scenarios=Offline", "--test_mode=AccuracyOnly", "--backend=openai",
                 "--llm_sample_count=12", f"--log_dir={tmp_path / 'http'}", env=env, check=True)
        m = one(tmp_path / "http")
        got, want = answers_of(m["log_dir"]), answers_of(qv["acc"]["log_dir"])
        assert sorted(got) == list(range(12)) and all(got[i] == want[i] for i in got)
    finally:
        run_main("--action=stop_llm_server", env=env)


def test_qwen3_vl_real_model_and_data_from_the_hub_pinned_and_checked(tmp_path, monkeypatch):
    """The reference's repositories at its pinned commits (the Hub stood in for by tests.test_llm_downloads.FakeHub):
    files verified, the folder checked, reused; a data set of the wrong size is refused in one line."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from code.common.errors import MissingDataError
    from code.qwen3_vl import download
    from tests.test_llm_downloads import FakeHub

    hub = FakeHub(monkeypatch, tmp_path)

    def parquet(n):
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist([{"product_title": f"t{i}", "ground_truth_category": "a > b",
                                              "ground_truth_brand": "x", "ground_truth_is_secondhand": False}
                                             for i in range(n)]), buf)
        return buf.getvalue()
    hub.add(download.DATA_REPO, {"data/train-00000-of-00001.parquet": parquet(3),
                                 "data/test-00000-of-00001.parquet": parquet(2)},
            lfs=("data/train-00000-of-00001.parquet",), sha=download.DATA_REVISION)
    monkeypatch.setattr(download, "DATA_ROWS", 5)
    dest = download.download_data(tmp_path / "data", log=lambda *a: None)
    rec = json.loads((dest / "download.json").read_text())
    assert rec["revision"] == download.DATA_REVISION and rec["repo_type"] == "dataset"
    assert ("repo_info", download.DATA_REPO, download.DATA_REVISION, "dataset", None) in hub.calls
    n = len(hub.calls)
    download.download_data(tmp_path / "data", log=lambda *a: None)
    assert len(hub.calls) == n                                      # complete and checked: reused
    monkeypatch.setattr(download, "DATA_ROWS", 48289)
    with pytest.raises(MissingDataError, match="5 rows in train \\+ test, expected 48289"):
        download.download_data(tmp_path / "data2", log=lambda *a: None)


# --- decoding: the reference samples (temperature 0.7, top_p 0.8, top_k 20); tiny stays greedy --------------------

SAMPLED = ("--llm_temperature=0.7", "--llm_top_p=0.8", "--llm_top_k=20")


@pytest.fixture(scope="module")
def sampled(tiny_qwen3_vl):
    """The first 8 tiny samples through transformers' ``generate`` in process (``vision.generate``), each at batch 1
    from its own stream at the reference's sampling (seed 0, its index); ``gen`` runs any batch of them."""
    import torch

    from code.common.llm import vision
    from code.common.llm.harness import load_prompts
    from code.common.llm.sampling import Sampling
    from code.qwen3_vl import dataset
    from code.qwen3_vl.harness import TINY

    n, env = 8, tiny_qwen3_vl
    ck = scratch(env) / "models" / "qwen3_vl" / "tiny" / "checkpoint"
    model = vision.load_model(str(ck), torch.float32, "cpu")
    inputs = vision.ChatInputs(str(ck))
    prompts = load_prompts(scratch(env) / "preprocessed_data" / "qwen3_vl" / "tiny" / "prompts.npz")[:n]
    rows = dataset.read(scratch(env) / "data" / "qwen3_vl" / "tiny", "x")[:n]
    pix = [inputs.pixels(dataset.messages(r), p) for r, p in zip(rows, prompts)]
    cfg = json.loads((ck / "config.json").read_text())
    eos = cfg.get("eos_token_id", (cfg.get("text_config") or {}).get("eos_token_id"))

    def gen(idx, how):
        return vision.generate(model, [prompts[i] for i in idx], [pix[i] for i in idx],
                               max_new_tokens=TINY.max_new_tokens, min_new_tokens=TINY.min_new_tokens,
                               eos_token_id=eos, pad_token_id=0,
                               sampling=[None if h is None else (h, h.request_seed(i)) for i, h in zip(idx, how)])
    s = Sampling(temperature=0.7, top_k=20, top_p=0.8, seed=0)
    tokens = [gen([i], [s])[0] for i in range(n)]
    return {"n": n, "s": s, "gen": gen, "tokens": tokens,
            "text": [inputs.proc.tokenizer.decode(t, skip_special_tokens=True) for t in tokens]}


def test_qwen3_vl_sampled_run_is_each_samples_seeded_stream_at_any_batch(tiny_qwen3_vl, sampled, tmp_path):
    """The tiny variant at the reference's sampling (flags through the schema), 8 samples in one LoadGen batch of 8:
    metadata.json records it, every answer is the one its own stream (seed 0, its index) gives at batch 1 through
    transformers' ``generate`` and inside an in-process batch in another order; seed 1 answers otherwise somewhere;
    greedy rows in the same call stay plain generate's."""
    from tests.conftest import metadata_under

    n, s, gen, one_by_one = sampled["n"], sampled["s"], sampled["gen"], sampled["tokens"]
    env = dict(tiny_qwen3_vl, MLPERF_BUILD_DIR=str(tmp_path / "build"))
    run_main("--action=run_harness", *Q, "--scenarios=Offline", "--test_mode=AccuracyOnly", "--gpu_batch_size=8",
             f"--llm_sample_count={n}", *SAMPLED, f"--log_dir={tmp_path / 'logs'}", env=env, check=True)
    [m] = metadata_under(tmp_path / "logs")
    assert m["generation"]["sampling"] == {**s.record(), "decoding": "sampling"}, m.get("error")
    got = answers_of(m["log_dir"])
    assert [got.get(i) for i in range(n)] == sampled["text"]      # LoadGen's batch of 8 == batch 1, sample by sample
    order = [5, 2, 7, 0]                                            # a batch of another shape, two rows greedy
    greedy = [list(t) for t in generate_reference(env, "qwen3_vl")]
    assert gen(order, [s, None, s, None]) == [one_by_one[5], greedy[2], one_by_one[7], greedy[0]]
    other = [gen([i], [dataclasses.replace(s, seed=1)])[0] for i in range(n)]
    differ = sum(a != b for a, b in zip(other, one_by_one))
    off = sum(a != greedy[i] for i, a in enumerate(one_by_one))
    print(f"FIGURE qwen3_vl tiny sampled (T 0.7, top_p 0.8, top_k 20): batch 8 == batch 1 for {n} of {n}; seed 1 "
          f"differs on {differ} of {n}; {off} of {n} differ from greedy")
    assert differ >= 1 and all(len(t) >= 1 for t in one_by_one)


def reference_sampling_from_readme() -> dict:
    """The reference README's "Sampling parameters" (shared folder), or the constants where it is absent."""
    try:
        text = official_root("multimodal", "qwen3-vl", "README.md").read_text()
    except pytest.skip.Exception:                                   # no shared folder here
        return {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.0}
    out = {}
    for key, name in (("temperature", "Temperature"), ("top_p", "Top-P"), ("top_k", "Top-K"),
                      ("repetition_penalty", "Repetition penalty")):
        found = set(re.findall(rf"^\s*- {name}: None resolves to ([\d.]+) from Q3VL", text, re.M))
        assert len(found) == 1, (name, found)                       # every section of the README says the same
        out[key] = float(found.pop())
    return out


def test_qwen3_vl_real_variant_decodes_with_the_readme_sampling_and_http_bodies_carry_it():
    """The real variant's default decoding is the reference README's sampling parameters (tiny: greedy); the
    chat-completions body of a sample (--backend=openai) carries them with the sample's own seed and its messages."""
    import numpy as np

    from code.common.llm.generation import GenRequest
    from code.common.llm.openai_client import OpenAIProcessor
    from code.qwen3_vl.harness import GENERATION, REFERENCE, TINY

    ref = reference_sampling_from_readme()
    assert ref["repetition_penalty"] == 1.0                          # none: the engines apply no penalty
    s = GENERATION.sampling
    assert s is REFERENCE and (s.temperature, s.top_p, s.top_k) == (ref["temperature"], ref["top_p"], ref["top_k"])
    assert not s.greedy and TINY.sampling.greedy
    from code.common.benchmarks import implementation
    from code.main import plan
    from code.qwen3_vl import SPEC

    for args, want in (((), REFERENCE), (("--model_variant=tiny",), TINY.sampling),
                       (("--llm_temperature=0",), dataclasses.replace(REFERENCE, temperature=0.0))):
        _, settings = plan(["--action=run_harness", "--benchmarks=qwen3-vl", "--scenarios=Offline", *args])
        assert implementation(SPEC)(settings[0]).sampling() == want, args      # what a run decodes with
    msgs = [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    proc = OpenAIProcessor("http://127.0.0.1:9", model="q", api="chat", sampling=s, stop_text=lambda t: "")
    body = proc.body(GenRequest(7, 7, np.zeros(3, np.int64), 16, 1, media={"messages": msgs}))
    assert proc.route(GenRequest(7, 7, np.zeros(3, np.int64), 16, 1, media={"messages": msgs})).endswith(
        "/v1/chat/completions")
    assert {k: body[k] for k in ("temperature", "top_p", "top_k", "seed")} == {
        "temperature": 0.7, "top_p": 0.8, "top_k": 20, "seed": s.request_seed(7)}
    assert body["messages"] == msgs and body["stream"]
