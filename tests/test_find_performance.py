"""find_performance against a test backend with a known service rate (the null processor sleeping a
fixed time per batch: its rate does not depend on this machine's speed or load), the config writer,
and the CLI spellings (issue 9)."""
from __future__ import annotations

import heapq
import json
import random
import re
import shutil
from pathlib import Path

import pytest

from code.common.tuning import Finder, passes, search


def test_search_brackets_the_highest_passing_value():
    for limit in (3.7, 137.0, 5000.0):
        seen = []
        found = search(lambda q: seen.append(q) or q <= limit, 100.0)
        assert 0.97 * limit <= found <= limit, (limit, found, seen)
        assert len(seen) == len(set(seen)), seen                 # no value is probed twice
    assert search(lambda q: False, 100.0) == 0.0


def _plan(scenario: str, *extra: str):
    from code.main import plan

    return plan(["--action=run_harness", "--benchmarks=resnet50", f"--scenarios={scenario}", "--model_variant=tiny",
                 *extra])[1][0]


def _control(service_ms: float, **kw):
    from code.common.settings import RunControl

    return RunControl(null_processor=True, null_service_ms=service_ms, overwrite=True, **kw)


def _p99_latency(lam: float, batch: int, service: float, timeout: float, n: int = 40000, seed: int = 1) -> float:
    """Simulated p99 latency (s) of one worker that serves up to ``batch`` samples in ``service`` s,
    waiting up to ``timeout`` for a batch to fill after its first sample, under Poisson arrivals."""
    rnd = random.Random(seed)
    t, arrivals = 0.0, []
    for _ in range(n):
        t += rnd.expovariate(lam)
        arrivals.append(t)
    free, i, lat = 0.0, 0, []
    while i < n:
        start = max(free, arrivals[i])
        if start == arrivals[i] and i + 1 < n:     # idle worker: waits for the batch to fill, up to timeout
            start = min(arrivals[min(i + batch - 1, n - 1)], arrivals[i] + timeout)
        j = i
        while j < n and j - i < batch and arrivals[j] <= start:
            j += 1
        free = start + service
        lat += [free - a for a in arrivals[i:j]]
        i = j
    heapq.heapify(lat)
    return sorted(lat)[int(0.99 * len(lat))]


def _optimum(batch: int, service: float, timeout: float, bound: float) -> float:
    """The analytic optimum: the highest arrival rate whose simulated p99 latency is within bound."""
    lo, hi = 0.0, batch / service
    for _ in range(25):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _p99_latency(mid, batch, service, timeout) <= bound else (lo, mid)
    return lo


@pytest.mark.timeout(600)
def test_find_performance_server_is_near_the_analytic_optimum(tiny_resnet, tmp_path):
    batch, service_ms, bound_ms, timeout_ms = 4, 20.0, 300.0, 1.0
    s = _plan("Server", f"--gpu_batch_size={batch}", f"--server_target_latency_ns={int(bound_ms * 1e6)}",
              f"--server_batch_timeout_ms={timeout_ms}")
    f = Finder(s, _control(service_ms, find_probe_seconds=3.0, find_confirm_seconds=4.0), tmp_path, {},
               log=lambda _: None)
    found = f.find()["server_target_qps"]
    opt = _optimum(batch, service_ms / 1000, timeout_ms / 1000, bound_ms / 1000)
    assert abs(found - opt) / opt <= 0.15, (found, opt, [(p.value, p.verdict, p.note) for p in f.probes])
    assert f.probes[-1].note == "confirmation" and f.probes[-1].validity == "VALID"
    assert any(p.verdict == "fail" for p in f.probes) and any(p.verdict == "pass" for p in f.probes)


@pytest.mark.timeout(300)
def test_find_performance_offline_is_within_ten_percent_of_the_service_rate(tiny_resnet, tmp_path):
    batch, service_ms = 8, 40.0                 # 200 samples/s
    s = _plan("Offline", f"--gpu_batch_size={batch}")
    f = Finder(s, _control(service_ms, find_probe_seconds=2.0), tmp_path, {}, log=lambda _: None)
    qps = f.find()["offline_expected_qps"]
    rate = batch / (service_ms / 1000)
    assert abs(qps - rate) / rate <= 0.10, (qps, rate)
    assert len(f.probes) == 2 and all(p.validity == "VALID" for p in f.probes)


@pytest.mark.timeout(300)
def test_find_performance_singlestream_latency_from_the_measured_mean(tiny_resnet, tmp_path):
    s = _plan("SingleStream")
    f = Finder(s, _control(5.0, find_probe_seconds=1.0), tmp_path, {}, log=lambda _: None)
    ns = f.find()["single_stream_expected_latency_ns"]
    # The mean LoadGen itself printed for the probe (not a band around 5 ms: with three workers on one core the
    # 5 ms sleep's wake-ups waited for the CPU and the mean was 11.0 ms, min 5.1, p90 16.1).
    [probe] = f.probes
    summary = (Path(probe.log_dir) / "mlperf_log_summary.txt").read_text()
    mean, minimum = (int(re.search(rf"^{k} latency \(ns\)\s*:\s*(\d+)", summary, re.M).group(1))
                     for k in ("Mean", "Min"))
    assert mean <= ns <= mean + 1 and 5e6 <= minimum <= ns, (ns, summary)   # the mean (rounded up), not the p90


def test_probe_verdicts():
    ok = {"status": "ok", "result_validity": "INVALID", "effective": {"effective_target_latency_percentile": 0.99},
          "results": {"result_perf_constraints_met": True, "result_min_duration_met": True,
                      "result_query_count": 500, "result_overlatency_query_count": 2}}
    assert passes(ok)[0] and "early stopping" in passes(ok)[1]
    assert not passes({**ok, "results": {**ok["results"], "result_overlatency_query_count": 9}})[0]
    assert not passes({**ok, "results": {**ok["results"], "result_perf_constraints_met": False}})[0]
    assert not passes({**ok, "overload": {"pending": 300}})[0]
    assert passes({"status": "ok", "result_validity": "VALID"})[0]


def test_write_config_changes_only_the_system_block(tmp_path, monkeypatch):
    from code.common import paths
    from code.common.config_edit import write_values

    cfg = tmp_path / "configs"
    shutil.copytree(paths.configs_dir() / "resnet50", cfg / "resnet50")
    monkeypatch.setenv("MLPERF_CONFIGS_DIR", str(cfg))
    f = cfg / "resnet50" / "Offline" / "config.json"
    before = f.read_text()
    s = _plan("Offline")
    path, block = write_values(s, {"offline_expected_qps": 432.1})
    assert block == s.system_id and path == f
    after = f.read_text()
    assert _plan("Offline").offline_expected_qps == 432.1          # it takes effect for this system and variant
    new = json.loads(after)[block]
    assert new["model_variant"] == {"tiny": {"offline_expected_qps": 432.1}} and "extends" in new
    assert after.startswith(before.rstrip()[:-1].rstrip())        # every earlier line kept as it was
    write_values(s, {"offline_expected_qps": 500.0})                # a second write edits the block in place
    again = f.read_text()
    assert again.count(f'"{block}"') == 1 and _plan("Offline").offline_expected_qps == 500.0
    assert [ln for ln in again.splitlines() if block not in ln] == [ln for ln in after.splitlines() if block not in ln]


def test_find_peak_performance_test_mode_is_find_performance(harness_env):
    from code.common.errors import HarnessError
    from code.main import plan

    cli, _ = plan(["--action=run_harness", "--benchmarks=resnet50", "--scenarios=Server", "--model_variant=tiny",
                   "--test_mode=FindPeakPerformance", "--write_config"])
    assert cli["action"] == "find_performance" and "test_mode" not in cli
    with pytest.raises(HarnessError, match="does not apply"):
        plan(["--action=run_harness", "--benchmarks=resnet50", "--write_config"])


def test_make_find_performance_end_to_end(tiny_resnet, tmp_path):
    """The action through the CLI on the real tiny engine: probes, the table, --write_config."""
    from code.common import paths
    from tests.conftest import run_main

    cfg = tmp_path / "configs"
    shutil.copytree(paths.configs_dir() / "resnet50", cfg / "resnet50")
    earlier = tmp_path / "l" / "AMD-EPYC-2c_ORT" / "resnet50" / "SingleStream" / "performance"   # an earlier search's
    earlier.mkdir(parents=True)
    (earlier / "metadata.json").write_text('{"earlier": true}')
    r = run_main("--action=find_performance", "--benchmarks=resnet50", "--model_variant=tiny",
                 "--scenarios=SingleStream", "--find_probe_seconds=1", "--write_config", f"--log_dir={tmp_path / 'l'}",
                 env={**tiny_resnet, "MLPERF_CONFIGS_DIR": str(cfg)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Probes (" in r.stdout and "Chosen values" in r.stdout and "single_stream_expected_latency_ns =" in r.stdout
    # this search's probes are in a folder of its own under --log_dir; nothing earlier is replaced
    assert (earlier / "metadata.json").read_text() == '{"earlier": true}'
    probes = [p for p in (tmp_path / "l").rglob("metadata.json") if p.parent != earlier]
    assert probes and all(p.relative_to(tmp_path / "l").parts[0].startswith("find_performance-") for p in probes)
    written = json.loads((cfg / "resnet50" / "SingleStream" / "config.json").read_text())
    [ns] = [v["model_variant"]["tiny"]["single_stream_expected_latency_ns"] for k, v in written.items()
            if k != "default" and "single_stream_expected_latency_ns" in v.get("model_variant", {}).get("tiny", {})]
    assert ns > 0
