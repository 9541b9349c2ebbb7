"""The scenario table owns each scenario's behaviour (code/common/scenarios.py); these pin what the other modules
ask it, with Interactive (LoadGen's Server under the model's -interactive name) where it used to go wrong."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from code.common import scenarios
from code.common.harness import monitor

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


@pytest.fixture
def burst(monkeypatch):
    """A scenario the table did not have: Server-shaped, under its own mlperf.conf model suffix, sized by its own
    rate setting, for datacenter systems; added as one table entry (what adding a scenario is)."""
    import dataclasses

    sc = dataclasses.replace(scenarios.SCENARIOS["Interactive"], name="Burst", loadgen_model_suffix="-burst",
                             percentile=None)
    monkeypatch.setitem(scenarios.SCENARIOS, "Burst", sc)
    return sc


def test_a_new_scenario_is_one_table_entry(burst):
    """Every module that used to branch on scenario names answers for the new one from its entry alone: user.conf
    keys (LoadGen's Server section, token bounds too), progress sizing, find_performance's probe, the metric
    text, TEST06's first-token rule, the edge-twin rule and the LLM bound check's LoadGen section."""
    from code.common.results import records

    lines = scenarios.conf_lines("Burst", scenarios.loadgen_model("llama2-70b", "Burst"),
                                 {"server_target_qps": 3.0, "ttft_latency_ns": 2_000_000_000})
    assert lines == ["llama2-70b-burst.Server.target_qps = 3", "llama2-70b-burst.Server.ttft_latency = 2000"]
    assert monitor.expected_samples(TS, "Burst", "PerformanceOnly", 10) == 300
    assert burst.find_probe == "server" and burst.runs_as_server and "Burst" not in scenarios.SERVER_LIKE
    assert records.metric_text({"scenario": "Burst", "metric_value": 12.5, "test_mode": "PerformanceOnly"}) == \
        "12.50 samples/s"
    assert burst.first_token and burst.categories == ("datacenter",) and not burst.latency_sized


def test_a_new_scenario_reaches_the_test06_and_bound_checks(burst, tmp_path):
    """TEST06 checks the first token in it (it is not Offline), from its entry's first_token."""
    import json

    from code.common.compliance.verify import test06

    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps([{"qsl_idx": 0, "data": "01000000" "02000000", "token_count": 2}]))
    v = test06(log, "Burst", eos_token_id=None)
    assert not v.passed and "no first-token payload" in " ".join(v.figures["reasons"])
    assert test06(log, "Offline", eos_token_id=None).passed
