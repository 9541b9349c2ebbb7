"""Multi-instance CPU: each worker its own slice of the cores, its thread and its ONNX Runtime pool
pinned there (--cpu_pin_cores), and progress bars only on a terminal (issue 9)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

import pytest

from tests.conftest import REPO, offline_samples


def _bench(*extra: str, benchmark: str = "resnet50"):
    from code.common.benchmarks import implementation
    from code.main import plan

    _, [s] = plan(["--action=run_harness", f"--benchmarks={benchmark}", "--scenarios=Offline", "--model_variant=tiny",
                   *extra])
    return implementation(s.spec)(s)


def test_llm_cpu_worker_threads(monkeypatch, tmp_path):
    """An LLM's CPU generation worker runs torch on one thread where MLPERF_SHARED_CPU=1 says other work shares the
    cores (a decode step's small ops in a team of two wait for a descheduled peer), unless cpu_threads says otherwise;
    elsewhere the cores shared out over the workers, as ONNX Runtime's pools, which the variable does not change."""
    def threads(*extra: str) -> list[int]:
        b = _bench(*extra, benchmark="llama3_1_8b")
        b.model_config = lambda: {"eos_token_id": 2}        # the checkpoint's config.json: not read for this
        return [w.threads for w in b.worker_specs(str(tmp_path))]

    per_worker = max(1, len(os.sched_getaffinity(0)) // 2)
    monkeypatch.setenv("MLPERF_SHARED_CPU", "1")
    assert threads() == [1] and threads("--cpu_threads=3") == [3]
    assert _bench("--gpu_inference_streams=2").intra_op_threads() == per_worker
    monkeypatch.setenv("MLPERF_SHARED_CPU", "0")
    assert threads("--gpu_inference_streams=2") == [per_worker] * 2


def test_pinned_workers_get_disjoint_core_slices():
    cores = sorted(os.sched_getaffinity(0))
    b = _bench(f"--gpu_inference_streams={len(cores)}", "--cpu_pin_cores")
    slices = b.cpu_slices()
    assert len(slices) == len(cores) and sorted(c for sl in slices for c in sl) == cores
    assert _bench("--gpu_inference_streams=2").cpu_slices() is None          # off by default


def test_ort_session_pins_its_pool_and_the_worker_thread(tiny_resnet):
    from code.common.backends.base import EngineSpec
    from code.common.backends.onnxruntime import session_options
    from code.resnet50.harness import ResNet50Processor

    so = session_options(EngineSpec("x", 1, extra={"cpu_cores": (0, 1)}))
    assert so.intra_op_num_threads == 2
    assert so.get_session_config_entry("session.intra_op_thread_affinities") == "2"   # pool thread -> CPU 1 (1-based)
    core = sorted(os.sched_getaffinity(0))[-1]
    p = ResNet50Processor(engine=None, qsl=None, batch_size=1, cores=(core,))
    seen = []
    t = threading.Thread(target=lambda: (p.thread_init(), seen.append(os.sched_getaffinity(0))))
    t.start()
    t.join()
    assert seen == [{core}] and len(os.sched_getaffinity(0)) >= 1               # only that thread was pinned


def test_pinned_instances_run_through_loadgen(tiny_resnet, tmp_path):
    from tests.conftest import metadata_under, run_main

    r = run_main("--action=run_harness", "--benchmarks=resnet50", "--model_variant=tiny", "--scenarios=Offline",
                 "--gpu_inference_streams=2", "--cpu_pin_cores", *offline_samples(512), f"--log_dir={tmp_path}",
                 env=tiny_resnet)
    assert r.returncode == 0, r.stderr
    [m] = metadata_under(tmp_path)
    assert m["result_validity"] == "VALID" and m["settings"]["cpu_pin_cores"] is True


def test_progress_is_off_without_a_terminal(tiny_resnet, tmp_path):
    from tests.conftest import run_main

    r = run_main("--action=run_harness", "--benchmarks=resnet50", "--model_variant=tiny", "--scenarios=Offline",
                 *offline_samples(256), f"--log_dir={tmp_path}", env={**tiny_resnet, "CI": ""})
    assert r.returncode == 0 and "\r" not in r.stderr and "sample/s" not in r.stderr, r.stderr


@pytest.mark.skipif(shutil.which("script") is None, reason="needs script(1) (util-linux) for a terminal")
def test_progress_bar_on_a_terminal(tiny_resnet, tmp_path):
    """Under script(1) stderr is a terminal: the run shows samples done of expected, rate and ETA."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(tiny_resnet)
    log = tmp_path / "typescript"
    cmd = (f"{sys.executable} -m code.main --action=run_harness --benchmarks=resnet50 "
           f"--model_variant=tiny --scenarios=SingleStream --min_duration=3000 --log_dir={tmp_path / 'logs'}")
    subprocess.run(["script", "-qec", cmd, str(log)], cwd=REPO, env=env, capture_output=True, timeout=300, check=True)
    text = log.read_bytes().decode(errors="replace")
    assert "resnet50 SingleStream:" in text and "sample/s" in text and "<" in text, text[-500:]
