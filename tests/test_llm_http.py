"""LLM serving over HTTP (issue 28): `make run_llm_server` starts the harness's own OpenAI-compatible server (a
separate process, aiohttp) over the tiny Llama2, and `--backend=openai` drives it through LoadGen. Token identity
with plain model.generate at batch 1, TEST06 through HTTP, a server never started, a server killed mid-run,
`make stop_llm_server`, and the command lines of the GPU serving engines."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import PY, REPO, metadata_under, offline_samples, run_main
from tests.test_llm_harness import generate_reference, tokens_of

LLAMA = ("--benchmarks=llama2_70b", "--model_variant=tiny")
HTTP = (*LLAMA, "--backend=openai")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_error(r: subprocess.CompletedProcess, *needles: str) -> str:
    assert r.returncode != 0 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert errs, r.stdout + r.stderr
    for n in needles:
        assert n in errs[0] + r.stderr, (n, r.stderr)
    return errs[0]


def start_server(tiny_llama: dict, build: Path, *extra: str) -> tuple[dict, dict]:
    env = dict(tiny_llama, MLPERF_BUILD_DIR=str(build))
    r = run_main("--action=run_llm_server", *LLAMA, f"--llm_server_port={free_port()}", *extra, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return env, json.loads((build / "llm_server" / "endpoints.json").read_text())


@pytest.fixture(scope="module")
def server(tiny_llama, tmp_path_factory):
    """One harness server at batch 1 (so its tokens are plain generate's), stopped after the module."""
    env, rec = start_server(tiny_llama, tmp_path_factory.mktemp("llm_http") / "build", "--gpu_batch_size=1")
    yield {"env": env, "rec": rec, "url": rec["servers"][0]["url"]}
    run_main("--action=stop_llm_server", env=env)


def test_http_batch1_is_token_identical_to_generate(server, tmp_path):
    rec = server["rec"]
    assert rec["engine"] == "harness" and rec["served_model"] == "llama2_70b-tiny" and len(rec["servers"]) == 1
    with urllib.request.urlopen(f"{server['url']}/v1/models", timeout=10) as r:
        assert [m["id"] for m in json.loads(r.read())["data"]] == ["llama2_70b-tiny"]
    run_main("--action=run_harness", *HTTP, "--scenarios=Offline", "--test_mode=AccuracyOnly", "--llm_sample_count=32",
             f"--log_dir={tmp_path}", env=server["env"], check=True)
    [m] = metadata_under(tmp_path)
    got, ref = tokens_of(m["log_dir"]), generate_reference(server["env"])
    assert len(got) == 32 and all(got[i] == ref[i] for i in range(32))
    assert m["backend"] == "openai" and m["system_name"].endswith("_OAI") and m["accuracy"]["passed"]
    w = m["generation"]["workers"][0]
    assert w["endpoint"] == server["url"] and w["completed"] == 32 and w["failed"] == 0
    # a server that streams text only: the client encodes the whole streamed text with the benchmark's tokenizer
    # (as the MLCommons endpoints client counts tokens), so the ids are generate's, decoded and encoded again
    retok = tmp_path / "retokenize"
    run_main("--action=run_harness", *HTTP, "--scenarios=Offline", "--test_mode=AccuracyOnly", "--llm_sample_count=32",
             "--llm_token_ids=retokenize", f"--log_dir={retok}", env=server["env"], check=True)
    from tokenizers import Tokenizer

    [mr] = metadata_under(retok)
    tok = Tokenizer.from_file(str(Path(server["env"]["MLPERF_SCRATCH_PATH"]) / "models" / "llama2_70b" / "tiny"
                                  / "checkpoint" / "tokenizer.json"))
    got = tokens_of(mr["log_dir"])
    assert [got[i] for i in range(32)] == [tok.encode(tok.decode(ref[i]), add_special_tokens=False).ids
                                           for i in range(32)]
    assert mr["generation"]["workers"][0]["completed"] == 32


def post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_http_protocol_completions_chat_and_refusals(server):
    """The routes as an OpenAI client sees them (the MLCommons endpoints client speaks chat): a chat request is the
    completion of its contents (the tiny checkpoint has no chat template), token ids in both; a negative temperature,
    beams and a wrong model are refused with 4xx and a message."""
    url = server["url"]
    code, chat = post(f"{url}/v1/chat/completions", {"model": "llama2_70b-tiny", "max_tokens": 6,
                                                     "messages": [{"role": "user", "content": "hello there"}]})
    assert code == 200 and chat["object"] == "chat.completion", chat
    code, comp = post(f"{url}/v1/completions", {"prompt": "hello there", "max_tokens": 6})
    assert code == 200 and comp["choices"][0]["token_ids"] == chat["choices"][0]["token_ids"], (comp, chat)
    assert len(comp["choices"][0]["token_ids"]) == comp["usage"]["completion_tokens"] <= 6
    for body, status, needle in (({"prompt": "x", "temperature": -0.7}, 400, "temperature"),
                                 ({"prompt": "x", "use_beam_search": True}, 400, "beam"),
                                 ({"prompt": "x", "model": "gpt-4"}, 404, "not served here"),
                                 ({"prompt": [], "max_tokens": 2}, 400, "prompt")):
        code, err = post(f"{url}/v1/completions", body)
        assert code == status and needle in err["error"]["message"], (body, code, err)


def test_http_test06_and_server_token_latencies(server, tmp_path):
    env = dict(server["env"], MLPERF_BUILD_DIR=str(tmp_path / "build"))
    env_file = Path(server["env"]["MLPERF_BUILD_DIR"]) / "llm_server" / "endpoints.json"
    (tmp_path / "build" / "llm_server").mkdir(parents=True)
    (tmp_path / "build" / "llm_server" / "endpoints.json").write_text(env_file.read_text())
    r = run_main("--action=run_audit_harness", "--audit_test=TEST06", *HTTP, "--scenarios=Server",
                 "--server_target_qps=10", "--llm_sample_count=32", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    verify = next((tmp_path / "build" / "compliance_logs" / "TEST06").rglob("verify_accuracy.txt"))
    assert "First token check pass: True" in verify.read_text() and "EOS check pass: True" in verify.read_text()
    # Interactive (Server's arrivals, tighter bounds) through the same SUT; TEST06 above ran Server
    run_main("--action=run_harness", *HTTP, "--scenarios=Interactive", "--server_target_qps=5", "--min_duration=1000",
             "--min_query_count=16", "--performance_sample_count=16", f"--log_dir={tmp_path / 'srv'}", env=env,
             check=True)
    [m] = metadata_under(tmp_path / "srv")
    assert m["scenario"] == "Interactive" and m["backend"] == "openai"
    assert m["tokens"]["ttft_p99_ns"] > 0 and m["tokens"]["tpot_p99_ns"] > 0 and m["completed_samples"] >= 16


def test_http_server_never_started_is_one_line(tiny_llama, tmp_path):
    env = dict(tiny_llama, MLPERF_BUILD_DIR=str(tmp_path / "build"))
    r = run_main("--action=run_harness", *HTTP, "--scenarios=Offline", "--test_mode=AccuracyOnly",
                 "--llm_sample_count=4", f"--llm_endpoints=http://127.0.0.1:{free_port()}", env=env)
    one_error(r, "no LLM server answers at http://127.0.0.1:", "fix: start it: make run_llm_server")
    r = run_main("--action=run_harness", *HTTP, "--scenarios=Offline", "--test_mode=AccuracyOnly", env=env)
    one_error(r, "no LLM servers are running for llama2_70b", "make run_llm_server")
    r = run_main("--action=run_harness", *HTTP, "--scenarios=Offline", "--llm_endpoints=localhost:8000", env=env)
    one_error(r, "is not an http(s) URL")


def test_http_server_killed_mid_run_ends_the_run_naming_it(tiny_llama, tmp_path):
    env, rec = start_server(tiny_llama, tmp_path / "build", "--gpu_batch_size=1")
    url, pid = rec["servers"][0]["url"], rec["servers"][0]["pid"]
    e = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
    run = subprocess.Popen([PY, "-m", "code.main", "--action=run_harness", *HTTP, "--scenarios=Offline",
                            *offline_samples(2000), f"--log_dir={tmp_path / 'logs'}"], cwd=REPO, env=e,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end:              # kill it once it has answered some samples
            with urllib.request.urlopen(f"{url}/health", timeout=10) as h:
                if json.loads(h.read())["served"] >= 5:
                    break
            time.sleep(0.2)
        os.kill(pid, signal.SIGKILL)
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    r = subprocess.CompletedProcess(run.args, run.returncode, out, err)
    line = one_error(r, url, "failed mid-run")
    assert "make run_llm_server" in r.stderr, r.stderr
    r = run_main("--action=stop_llm_server", env=env)
    assert r.returncode == 0 and "was not running" in r.stdout and not (tmp_path / "build/llm_server/endpoints.json").exists()
    print(f"FIGURE llm http: server killed mid-run -> {line}")


def test_run_llm_server_refusals(tiny_llama, tmp_path):
    env = dict(tiny_llama, MLPERF_BUILD_DIR=str(tmp_path / "build"))
    r = run_main("--action=run_llm_server", *LLAMA, "--llm_server_engine=trtllm", env=env)
    one_error(r, "trtllm-serve is not on PATH", "--llm_server_engine=harness")
    r = run_main("--action=run_llm_server", "--benchmarks=resnet50", "--model_variant=tiny", env=env)
    one_error(r, "generates no tokens")
    r = run_main("--action=stop_llm_server", env=env)
    assert r.returncode == 0 and "no servers to stop" in r.stdout


def test_openai_backend_refuses_beam_search():
    """GPT-J's reference decodes with 4 beams (its tiny twin is greedy): the completions API has none, so the
    openai backend refuses it, naming the backend that can."""
    from code.common.backends import get_backend
    from code.common.errors import HarnessError
    from code.common.llm.backends import WorkerSpec
    from code.gptj.harness import REAL

    be = get_backend("openai")
    with pytest.raises(HarnessError, match="decodes greedily.*4 beams") as e:
        be.prepare_model("/m", WorkerSpec(model_dir="/m", num_beams=REAL.num_beams, endpoint="http://127.0.0.1:9"))
    assert "--backend=transformers" in e.value.fix
    assert be.prepare_model("/m", WorkerSpec(model_dir="/m", endpoint="http://127.0.0.1:9")) == "/m"


def test_gpu_engine_command_lines_one_server_per_gpu_group():
    """vllm serve / sglang / trtllm-serve for an 8-GPU node at tensor parallel 2: four servers, GPUs 0,1 / 2,3 / ...,
    each on its own port, with the spec's batch, precision and memory share."""
    from code.common.llm import servers
    from code.common.llm.backends import WorkerSpec

    specs = [WorkerSpec(model_dir="/m/llama", precision="fp8", device=f"cuda:{g}", gpus=(g, g + 1), max_batch_size=512,
                        max_num_tokens=8192, tensor_parallel_size=2, kv_cache_memory_fraction=0.85, max_context=4096)
             for g in (0, 2, 4, 6)]
    vl = [servers.command("vllm", s, port=8000 + i, host="0.0.0.0", served="llama2-70b") for i, s in enumerate(specs)]
    assert [ln.env["CUDA_VISIBLE_DEVICES"] for ln in vl] == ["0,1", "2,3", "4,5", "6,7"]
    assert [ln.port for ln in vl] == [8000, 8001, 8002, 8003]
    a = list(vl[1].argv)
    assert a[:3] == ["vllm", "serve", "/m/llama"] and a[a.index("--port") + 1] == "8001"
    for flag, v in (("--tensor-parallel-size", "2"), ("--max-num-seqs", "512"), ("--max-num-batched-tokens", "8192"),
                    ("--gpu-memory-utilization", "0.85"), ("--quantization", "fp8"), ("--served-model-name", "llama2-70b"),
                    ("--max-model-len", "4096")):
        assert a[a.index(flag) + 1] == v, flag
    sg = list(servers.command("sglang", specs[0], port=9000, host="h", served="x").argv)
    assert sg[1:3] == ["-m", "sglang.launch_server"] and sg[sg.index("--tp-size") + 1] == "2"
    tr = list(servers.command("trtllm", specs[0], port=9000, host="h", served="x").argv)
    assert tr[:2] == ["trtllm-serve", "/m/llama"] and tr[tr.index("--tp_size") + 1] == "2"
    assert tr[tr.index("--max_batch_size") + 1] == "512" and tr[tr.index("--backend") + 1] == "pytorch"


# --- Interop with the MLCommons endpoints client (../shared/mlcommons-endpoints, Python 3.12, its own venv) ---

@pytest.fixture(scope="module")
def endpoints_venv():
    """build/endpoints_venv from scripts/endpoints_venv.sh (`make test` starts it in the background; this waits on
    its lock). Skips with the reason where the source or a Python 3.12 is missing."""
    r = subprocess.run(["bash", str(REPO / "scripts" / "endpoints_venv.sh")], cwd=REPO, capture_output=True,
                       text=True, timeout=900)
    if r.returncode != 0:
        pytest.skip(f"MLCommons endpoints client unavailable: {(r.stdout + r.stderr).strip().splitlines()[-1:]}")
    return REPO / "build" / "endpoints_venv" / "bin"


def tiny_checkpoint(env: dict) -> Path:
    return Path(env["MLPERF_SCRATCH_PATH"]) / "models" / "llama2_70b" / "tiny" / "checkpoint"


def tiny_prompts(env: dict) -> list[list[int]]:
    from code.common.llm.harness import load_prompts

    return [t.tolist() for t in load_prompts(Path(env["MLPERF_SCRATCH_PATH"]) / "preprocessed_data" / "llama2_70b"
                                             / "tiny" / "prompts.npz")]


def test_harness_sut_drives_the_endpoints_echo_server(tiny_llama, endpoints_venv, tmp_path):
    """Our LoadGen SUT against the official echo server (chat route only, text only, answers the prompt back word
    by word): --llm_api=chat --llm_token_ids=retokenize sends each prompt's text and reports, per sample, the
    tokenizer's encoding of the echoed text, the prompt with its whitespace runs made single spaces."""
    from tokenizers import Tokenizer

    port = free_port()
    echo = subprocess.Popen([str(endpoints_venv / "python"), "-m", "inference_endpoint.testing.echo_server",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/v1/models", timeout=2).read()
                break
            except urllib.error.HTTPError:
                break
            except (urllib.error.URLError, OSError):
                assert time.monotonic() < deadline and echo.poll() is None, "echo server did not start"
                time.sleep(0.3)
        r = run_main("--action=run_harness", *HTTP, f"--llm_endpoints={url}", "--llm_served_model=echo",
                     "--llm_api=chat", "--llm_token_ids=retokenize", "--scenarios=Offline", "--test_mode=AccuracyOnly",
                     "--llm_sample_count=32", f"--log_dir={tmp_path}", env=tiny_llama)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    finally:
        echo.terminate()
        echo.wait(timeout=30)
    [m] = metadata_under(tmp_path)
    assert m["generation"]["workers"][0]["completed"] == 32 and m["generation"]["workers"][0]["failed"] == 0
    tok = Tokenizer.from_file(str(tiny_checkpoint(tiny_llama) / "tokenizer.json"))
    prompts = tiny_prompts(tiny_llama)
    got = tokens_of(m["log_dir"])
    assert sorted(got) == list(range(32))
    for i in range(32):
        echoed = " ".join(tok.decode(prompts[i]).split())
        assert got[i] == tok.encode(echoed, add_special_tokens=False).ids, i
