"""The executor and LLM multi-node settings checked before anything runs (no cluster needed)."""
from __future__ import annotations

import pytest

from code.common.errors import HarnessError


def llama(*extra: str):
    from code.common.benchmarks import implementation
    from code.main import plan

    _, [s] = plan(["--action=run_harness", "--benchmarks=llama2_70b", "--model_variant=tiny", "--scenarios=Offline",
                   *extra])
    return implementation(s.spec)(s)


def test_llm_ray_backend_needs_executor_ray(harness_env):
    with pytest.raises(HarnessError) as e:
        llama("--llm_distributed_backend=ray").check_distributed(1)
    assert "executor is local" in e.value.cause and "--executor=ray" in e.value.fix


def test_llm_ray_backend_needs_an_engine_that_spans_nodes(harness_env):
    with pytest.raises(HarnessError) as e:
        llama("--llm_distributed_backend=ray", "--executor=ray").check_distributed(1)
    assert "needs vllm or tensorrt_llm" in e.value.cause and "--backend=vllm" in e.value.fix


def test_llm_default_distributed_backend_passes_through(harness_env):
    assert llama().check_distributed(8) == "auto"
    assert llama("--llm_distributed_backend=mp").check_distributed(8) == "mp"


def test_executor_typo_suggests_the_name(harness_env):
    from tests.conftest import run_main

    r = run_main("--action=info", "--benchmarks=resnet50", "--executor=rays")
    assert r.returncode == 2 and "'rays' is not one of local, ray" in r.stderr and "Traceback" not in r.stderr
    r = run_main("--action=info", "--benchmarks=resnet50", "--ray_adress=x:1")
    assert r.returncode == 2 and "ray_address" in r.stderr


def test_system_description_counts_the_cluster_nodes():
    from code.common.submission import sysdesc
    from code.common.systems import CPUInfo, SystemInfo

    info = SystemInfo((), CPUInfo("GenuineIntel", "Test CPU", 2), 24.0, "test")
    kw = dict(division="closed", submitter="x", system_type="edge", system_info=info, host={}, gpus_extra=[],
              software={}, backends={"onnxruntime"})
    assert sysdesc.describe(**kw)["number_of_nodes"] == 1
    three = sysdesc.describe(**kw, nodes=3)
    assert three["number_of_nodes"] == 3 and three["host_networking_topology"].startswith(sysdesc.TO_FILL)
