"""Weights + KV cache per GPU (code.common.llm.memory): every shipped LLM block fits its GPUs, and `make info`
and the engine start refuse one that cannot (issue 28: llama2-70b's H100-SXM-80GBx1 block asked one 80 GB GPU for
64 GiB of fp8 weights and 896 sequences of KV cache)."""
from __future__ import annotations

import json

import pytest

from code.common.errors import HarnessError
from code.common.llm import memory
from tests.conftest import run_main

LLMS = ("llama2_70b", "gptj", "mixtral_8x7b", "llama3_1_8b", "deepseek_r1", "llama3_1_405b")


def _settings(*args):
    from code.main import plan

    return plan(["--action=info", *args])[1]


def test_sizing_by_hand():
    """Llama-2-70B fp8 on one H100 (81559 MiB), worked out on paper: 68.98e9 B of weights = 64.24 GiB; KV per
    token 2 x 80 layers x 8 heads x 128 x 1 B = 163840 B; a sequence in flight 300 + 294.45 / 2 = 447.2 tokens."""
    from code.llama2_70b import SPEC

    p = memory.plan(SPEC.llm_shape, precision="fp8", batch=896, gpu_gib=81559 / 1024, fraction=0.9)
    assert p.weights_gib == pytest.approx(68.98e9 / 2**30)
    per_seq = 163840 * 447.225 / 2**30
    assert p.kv_gib == pytest.approx(896 * per_seq)
    assert p.max_batch == int((0.9 * 81559 / 1024 - 68.98e9 / 2**30) // per_seq) == 109
    assert not p.fits
    # tensor parallel 2 halves both; four beams share the prompt and multiply the answer
    p2 = memory.plan(SPEC.llm_shape, precision="fp8", batch=896, gpu_gib=81559 / 1024, fraction=0.9, tensor_parallel=2)
    assert p2.weights_gib == pytest.approx(p.weights_gib / 2) and p2.fits
    beams = memory.plan(SPEC.llm_shape, precision="fp8", batch=1, gpu_gib=141, fraction=0.9, beams=4)
    assert beams.kv_gib == pytest.approx(163840 * (300 + 4 * 294.45 / 2) / 2**30)
    with pytest.raises(HarnessError, match="weights alone"):
        memory.check(memory.plan(SPEC.llm_shape, precision="fp16", batch=1, gpu_gib=79.6, fraction=0.9), "here")


def test_every_shipped_block_fits_its_gpus():
    """Each LLM config block named for a known GPU system: weights + KV cache for its gpu_batch_size within
    kv_cache_memory_fraction of the GPU (blocks that ask for more GPUs than their system has are refused
    elsewhere, by worker_specs)."""
    from code.common import paths
    from code.common.actions import _bench
    from code.common.systems.system_list import known_ids

    known, checked, bad = set(known_ids()), 0, []
    for b in LLMS:
        for f in sorted(paths.configs_dir().glob(f"{b}/*/config.json")):
            for block in json.loads(f.read_text()):
                if block not in known:
                    continue
                s = _settings(f"--benchmarks={b}", f"--scenarios={f.parent.name}", f"--system_name={block}")[0]
                p = _bench(s).memory_plan()
                assert p is not None, (b, block)
                checked += 1
                if not p.fits:
                    bad.append(f"{b} {f.parent.name} {block}: {p.describe()}")
    assert checked >= 60 and not bad, "\n".join(bad)


def test_info_and_engine_start_refuse_what_cannot_fit():
    r = run_main("--action=info", "--benchmarks=llama2-70b", "--scenarios=Offline", "--system_name=H100-SXM-80GBx1",
                 "--gpu_batch_size=896")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "DOES NOT FIT" in r.stdout and "gpu_batch_size 896 does not fit" in r.stderr
    assert "fix: use --gpu_batch_size=109" in r.stderr
    ok = run_main("--action=info", "--benchmarks=llama2-70b", "--scenarios=Offline", "--system_name=H100-SXM-80GBx1")
    assert ok.returncode == 0 and "sequences fit: fits" in ok.stdout, ok.stderr
    # the engine start (worker_specs, shared by run_harness and run_llm_server) asks the same question, with the
    # memory NVML reports for a detected GPU
    from code.common.actions import _bench

    s = _settings("--benchmarks=llama2-70b", "--scenarios=Offline", "--system_name=L40Sx8", "--tensor_parallel_size=1")[0]
    with pytest.raises(HarnessError, match="weights alone take 64.2 GiB") as e:
        _bench(s).worker_specs("/nonexistent")
    assert "--tensor_parallel_size=2" in e.value.fix
    # the tiny variant is never sized (its real shape is not the 70B's)
    tiny = _settings("--benchmarks=llama2-70b", "--scenarios=Offline", "--system_name=L40Sx8", "--model_variant=tiny",
                     "--tensor_parallel_size=1")[0]
    assert _bench(tiny).memory_plan() is None


def test_detected_gpu_memory_wins_and_user_systems_declare_theirs(tmp_path, monkeypatch):
    from code.common.systems import CPUInfo, GPUInfo, SystemInfo, match_system
    from code.common.systems.system_list import check_user_entry

    cpu = CPUInfo("AuthenticAMD", "AMD EPYC 9654", 96)
    h100 = match_system(SystemInfo((GPUInfo("NVIDIA H100 80GB HBM3", "0x233010DE", 81559),), cpu))
    assert h100.gpu_memory_gib == pytest.approx(81559 / 1024)
    smaller = match_system(SystemInfo((GPUInfo("NVIDIA H100 80GB HBM3", "0x233010DE", 40000),), cpu))
    assert smaller.gpu_memory_gib == pytest.approx(40000 / 1024)      # what NVML says, not the class's figure
    assert match_system(SystemInfo((), cpu), "H200-SXM-141GBx8").gpu_memory_gib == pytest.approx(143771 / 1024)
    entry = {"system_id": "RTX-6000-Ada", "gpu_names": ["NVIDIA RTX 6000 Ada Generation"], "counts": [1],
             "arch": "Ada", "memory_mb": 49140}
    assert check_user_entry(entry, tmp_path / "x.json").memory_mb == 49140
    with pytest.raises(HarnessError, match="memory_mb"):
        check_user_entry({**entry, "memory_mb": "48GB"}, tmp_path / "x.json")
