"""The scenario table owns each scenario's behaviour (code/common/scenarios.py); these pin what the other modules
ask it, with Interactive (LoadGen's Server under the model's -interactive name) where it used to go wrong."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from code.common import monitor, scenarios

# LoadGen TestSettings as a performance run of 10 s has them (the other scenarios' defaults left in, as in LoadGen)
TS = SimpleNamespace(min_duration_ms=10_000, min_query_count=100, offline_expected_qps=50.0, server_target_qps=30.0,
                     single_stream_expected_latency_ns=20_000_000, multi_stream_expected_latency_ns=1_000,
                     multi_stream_samples_per_query=8)


@pytest.mark.parametrize("scenario, expected", [("Offline", 500), ("Server", 300), ("Interactive", 300),
                                                ("SingleStream", 500), ("MultiStream", 80_000_000)])
def test_expected_samples_follow_the_scenarios_sizing(scenario, expected):
    """Interactive is sized as Server is (target QPS x duration): the progress bar used to expect MultiStream's
    count for it (duration / multi_stream_expected_latency_ns x samples per query: 8e7 here)."""
    assert monitor.expected_samples(TS, scenario, "PerformanceOnly", 24_576) == expected
    assert monitor.expected_samples(TS, scenario, "AccuracyOnly", 24_576) == 24_576


@pytest.mark.parametrize("scenario, probe", [("Offline", "offline"), ("Server", "server"), ("Interactive", "server"),
                                             ("SingleStream", "latency"), ("MultiStream", "latency")])
def test_find_performance_probes_each_scenario_by_its_sizing(scenario, probe, tmp_path, monkeypatch):
    bench = "llama2_70b" if scenario == "Interactive" else "resnet50"        # Interactive is the LLMs' only
    """Interactive is probed for a target QPS like Server: it used to get the latency probe, whose mean latency in ns
    would have been written into server_target_qps."""
    from code.common.settings import RunControl
    from code.common.tuning import Finder
    from code.main import plan

    _, [s] = plan(["--action=find_performance", f"--benchmarks={bench}", "--model_variant=tiny",
                   f"--scenarios={scenario}"])
    f = Finder(s, RunControl(), tmp_path, {}, log=lambda _: None)
    for kind in ("offline", "server", "latency"):
        monkeypatch.setattr(f, kind, lambda kind=kind: {"probed": kind})
    assert f.find() == {"probed": probe}
    assert scenarios.get(scenario).sizing in {"offline": ("offline_expected_qps",), "server": ("server_target_qps",),
                                              "latency": ("single_stream_expected_latency_ns",
                                                          "multi_stream_expected_latency_ns")}[probe]
