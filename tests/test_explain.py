"""The INVALID explainer on real INVALID LoadGen logs, one per cause, made by under- and over-set
targets on the test backend (the null processor, sleeping a known time per batch), and the
watchdog that stops a run whose backend hangs (issue 9)."""
from __future__ import annotations

import time

import pytest


def _run(tmp_path, scenario: str, *flags: str, service_ms: float = 0.0, name: str = "run"):
    from code.common.harness.runner import run_one
    from code.common.settings import RunControl
    from code.main import plan

    _, [s] = plan(["--action=run_harness", "--benchmarks=resnet50", f"--scenarios={scenario}", "--model_variant=tiny",
                   "--gpu_batch_size=1", "--force", *flags])
    return run_one(s, RunControl(null_processor=True, null_service_ms=service_ms), tmp_path / name, {})


def _one_reason(m: dict) -> str:
    assert m["status"] == "ok" and m["result_validity"] == "INVALID", m.get("error")
    assert m["invalid_reasons"], m["results"]
    return m["invalid_reasons"][0]


def test_offline_expected_qps_set_too_low(tiny_resnet, tmp_path):
    """A query sized for 1 sample/s ends long before min_duration."""
    why = _one_reason(_run(tmp_path, "Offline", "--offline_expected_qps=1", "--min_duration=2000",
                           "--min_query_count=1", service_ms=5))
    assert why.startswith("min duration not met: the Offline query of") and "--offline_expected_qps=" in why
    assert 'make run_harness RUN_ARGS="--benchmarks=resnet50 --scenarios=Offline --model_variant=tiny' in why


def test_server_latency_over_the_bound(tiny_resnet, tmp_path):
    """Every sample takes 20 ms against the 15 ms bound: kept up with the schedule, latency over."""
    why = _one_reason(_run(tmp_path, "Server", "--server_target_qps=5", "--min_duration=1500", "--min_query_count=1",
                           service_ms=20))
    assert why.startswith("latency bound not met: p99 latency") and "over the 15 ms bound" in why
    assert "kept up" in why and "--server_target_qps=4.5" in why and "find_performance" in why


def test_server_target_above_the_service_rate(tiny_resnet, tmp_path):
    """Asked for 80 QPS of a 50/s backend (not yet far enough behind to be shed): cannot keep up, and
    the rerun rate comes from what it completed."""
    m = _run(tmp_path, "Server", "--server_target_qps=80", "--min_duration=1500", "--min_query_count=1",
             "--server_target_latency_ns=5000000000", service_ms=20)
    why = _one_reason(m)
    assert m["overload"] is None
    assert why.startswith("behind schedule") and "cannot keep up" in why, why
    rate = float(why.split("--server_target_qps=")[1].split()[0].rstrip('"'))
    assert rate < 50, why


def test_server_run_too_short_for_early_stopping(tiny_resnet, tmp_path):
    """Latency is fine, but 20 queries cannot prove a p99: run longer."""
    why = _one_reason(_run(tmp_path, "Server", "--server_target_qps=20", "--min_duration=1000", "--min_query_count=1",
                           "--server_target_latency_ns=2000000000"))      # a bound no hiccup of a busy machine breaks
    assert why.startswith("early stopping not met") and "--min_query_count=" in why


def test_singlestream_expected_latency_set_too_high(tiny_resnet, tmp_path):
    """An expected latency of 1 s makes LoadGen generate too few queries to fill min_duration."""
    why = _one_reason(_run(tmp_path, "SingleStream", "--single_stream_expected_latency_ns=1000000000",
                           "--min_duration=2000", "--min_query_count=1", service_ms=2))
    assert why.startswith("min duration not met") and "--single_stream_expected_latency_ns=" in why


def test_run_capped_by_max_query_count(tiny_resnet, tmp_path):
    """min_query_count 100 but capped at 10: min queries and min duration fail; the cap is the cause."""
    m = _run(tmp_path, "SingleStream", "--min_duration=500", "--min_query_count=100", "--max_query_count=10",
             service_ms=1)
    why = _one_reason(m)
    assert m["results"]["result_min_queries_met"] is False and len(m["invalid_reasons"]) == 1
    assert why.startswith("capped by max_query_count: the run stopped after 10 queries")
    assert "--max_query_count" not in why.split("Rerun without the cap:")[1]


def test_explainer_text_reaches_the_table(tiny_resnet, tmp_path):
    from code.common.results.records import table

    m = _run(tmp_path, "Offline", "--offline_expected_qps=1", "--min_duration=1000", "--min_query_count=1")
    assert "min duration not met" in table([m])


@pytest.mark.timeout(300)
def test_watchdog_stops_a_hung_backend(tiny_resnet, tmp_path):
    """A backend that never returns: stopped within its limit plus 10 s, with what it was doing."""
    limit = 3.0
    t0 = time.time()
    m = _run(tmp_path, "Offline", f"--watchdog_s={limit}", "--offline_expected_qps=10", "--min_duration=1000",
             "--min_query_count=1", service_ms=3_600_000)
    wall = time.time() - t0
    assert m["status"] == "error" and m["stall"] is not None
    assert m["error"].startswith("watchdog: no sample completed and no progress for") and "outstanding" in m["error"]
    assert "sut-worker-0 in NullProcessor.process()" in m["stall"]["state"]
    assert "--watchdog_s" in m["error_fix"]
    assert wall < limit + 10 + 30, wall        # the limit plus 10 s, plus the child's start-up
    assert m["stall"]["seconds"] < limit + 10
