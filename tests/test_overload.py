"""Server overload is bounded: a SUT far slower than the target QPS turns into an INVALID result with
the reason and the rate to rerun at, in about the run's duration and with bounded memory, never an
unbounded queue (issue 8, item 2). The test backend sleeps per batch, so its service rate is known
whatever the machine's speed or load."""
from __future__ import annotations

import re
import time

import pytest

from code.common.harness.sut import pending_bound


def test_pending_bound_is_where_the_run_is_lost_anyway():
    assert pending_bound(10, 0.015, 0.99, 600, 1, 1) == 256                 # floor: short stalls are not overload
    # 100k QPS for 60 s at p99 / 15 ms: 1% of 6M queries late, plus what can still make the bound
    assert pending_bound(100000, 0.015, 0.99, 6e6, 64, 2) == 60000 + 1500
    assert pending_bound(292.5, 0.1, 0.99, 175500, 1, 1) == 1785           # the soak's 10 minutes
    assert pending_bound(1, 20.0, 0.99, 600, 8, 8) == 512                   # eight batches per worker


@pytest.mark.timeout(300)
def test_server_overload_is_invalid_with_the_rate_to_use(tiny_resnet, tmp_path):
    from code.common.harness.runner import run_one
    from code.common.results.selection import _why_not_performance, Run
    from code.common.settings import RunControl
    from code.main import plan

    service_ms, target = 20.0, 500.0                  # serves 50 samples/s; asked for 10x that
    _, [s] = plan(["--action=run_harness", "--benchmarks=resnet50", "--scenarios=Server", "--model_variant=tiny",
                   "--min_duration=2000", "--min_query_count=1", f"--server_target_qps={target}",
                   "--gpu_batch_size=1", "--force"])
    t0 = time.time()
    m = run_one(s, RunControl(null_processor=True, null_service_ms=service_ms), tmp_path / "run", {})
    wall = time.time() - t0
    assert m["status"] == "ok" and m["result_validity"] == "INVALID" and m["valid"] is False
    o = m["overload"]
    assert o["pending"] == o["max_pending"] + 1 == pending_bound(target, 0.015, 0.99, target * 2, 1, 1) + 1
    assert o["shed"] > 0 and m["completed_samples"] < o["max_pending"]     # never queued past the bound
    assert 0 < o["served_per_s"] <= 1000 / service_ms * 1.1               # what the SUT really served
    why = m["invalid_reasons"][0]                       # first; LoadGen's own reasons may follow
    assert "SUT overloaded" in why and f"--server_target_qps={o['served_per_s'] * 0.9:.4g}" in why
    assert "make run_harness" in why
    # every reason advises a rate the SUT served, never LoadGen's completed rate with the empty answers in it
    rates = [float(x) for w in m["invalid_reasons"] for x in re.findall(r"--server_target_qps=([\d.e+]+)", w)]
    assert rates and all(r <= o["served_per_s"] for r in rates), m["invalid_reasons"]
    # ends near its min_duration (shed samples are answered at once), not after draining a backlog
    assert wall < 2 + 120, wall
    # staging refuses it, naming the reason
    assert "SUT overloaded" in _why_not_performance(Run(tmp_path / "run", m))


@pytest.mark.timeout(300)
def test_server_within_capacity_is_not_shed(tiny_resnet, tmp_path):
    """The same test backend at a fifth of its service rate: nothing shed, no overload recorded."""
    from code.common.harness.runner import run_one
    from code.common.settings import RunControl
    from code.main import plan

    _, [s] = plan(["--action=run_harness", "--benchmarks=resnet50", "--scenarios=Server", "--model_variant=tiny",
                   "--min_duration=1000", "--min_query_count=1", "--server_target_qps=10", "--gpu_batch_size=1"])
    m = run_one(s, RunControl(null_processor=True, null_service_ms=20.0), tmp_path / "run", {})
    assert m["status"] == "ok" and m["overload"] is None and m["completed_samples"] > 0
    assert not any("overloaded" in why for why in m["invalid_reasons"])
