"""Why a run is INVALID, in plain words: the constraint LoadGen says failed, the value that would fix
it, and the exact command to rerun. Read from LoadGen's own detail log (``loadgen_logs.summarize``),
never from stdout. The same lines go into metadata.json (``invalid_reasons``) and the result table.
"""
from __future__ import annotations

import re
from typing import Any

from code.common import scenarios


SKIP = ("benchmarks", "scenarios", "model_variant", "config_ver", "fast")


# the reasons ``explain`` gives for a run INVALID for the load alone (a bound or early stopping missed, a backlog, an
# overloaded SUT): what a caller may answer by lowering the rate (make submission SMOKE=1's one retry at half)
LOAD_REASONS = ("latency bound not met", "early stopping not met", "cannot keep up", "overloaded", "Lower the load",
                "behind schedule")


def load_only(reasons: list[str]) -> bool:
    """A run's ``invalid_reasons`` are all the load's (``LOAD_REASONS``; none empty): a lower rate may make it VALID,
    as LoadGen's own advice says (scripts/tiny_valid_runs.py's one retry at half the rate)."""
    return bool(reasons) and all(any(k in w for k in LOAD_REASONS) for w in reasons)


def _flag(k: str, v: Any) -> str:
    if isinstance(v, bool):
        return f"--{k}" if v else f"--{k}=false"
    if isinstance(v, dict):
        return f"--{k}=" + ",".join(f"{c}:{n}" for c, n in v.items())
    if isinstance(v, (list, tuple)):
        return f"--{k}=" + ",".join(map(str, v))
    return f"--{k}={_g(v) if isinstance(v, float) else v}"


def rerun(s, *flags: str, drop: tuple[str, ...] = ()) -> str:
    """The make command that reruns ``s`` (a RunSettings) as it was given on the command line, with
    ``flags`` replacing the settings they name and the settings in ``drop`` left out."""
    names = {f.split("=", 1)[0].lstrip("-") for f in flags if f} | set(drop)
    args = [f"--benchmarks={s.benchmark}", f"--scenarios={s.scenario}"]
    if s.model_variant != "reference":
        args.append(f"--model_variant={s.model_variant}")
    if s.config_ver != "default":
        args.append(f"--config_ver={s.config_ver}")
    if s.fast and "min_duration" not in names:
        args.append("--fast")
    args += [_flag(k, s.values[k]) for k in s.values
             if s.sources.get(k) == "cli" and k not in names and k not in SKIP]
    args += [f for f in flags if f]
    return f'make run_harness RUN_ARGS="{" ".join(args)}"'


def _ms(ns: float | None) -> str:
    return "?" if ns is None else f"{ns / 1e6:.3g} ms"


def _g(x: float) -> str:
    return f"{x:.4g}"


def explain(lg: dict[str, Any], s, overload: dict | None = None) -> list[str]:
    """Reasons a performance run is INVALID (empty when LoadGen says VALID, or gave no verdict).

    ``lg``: ``loadgen_logs.summarize`` of the run; ``s``: its RunSettings; ``overload``: the SUT's record when it
    shed samples. Then LoadGen's completed rate counts the empty answers too, so every rate advised here is
    the rate the SUT really served (``overload`` leads the reasons, see ``overload()``)."""
    if lg.get("result_validity") != "INVALID":
        return []
    r, eff = dict(lg.get("results") or {}), lg.get("effective") or {}
    if overload and overload.get("served_per_s"):
        r["result_completed_samples_per_sec"] = overload["served_per_s"]
    sc = scenarios.get(s.scenario)
    out: list[str] = []
    min_ms = eff.get("effective_min_duration_ms") or 0
    cap = eff.get("effective_max_query_count") or 0
    capped = bool(cap) and (r.get("result_query_count") or 0) >= cap
    if capped and (r.get("result_min_duration_met") is False or r.get("result_min_queries_met") is False):
        out.append(f"capped by max_query_count: the run stopped after {cap} queries, before min_duration "
                   f"({min_ms / 1000:g} s) and min_query_count ({eff.get('effective_min_query_count')}) were met. "
                   f"Rerun without the cap: {rerun(s, drop=('max_query_count',))}")
        return out
    if r.get("result_min_duration_met") is False:
        out.append(_short_run(r, eff, s, sc, min_ms))
    server = sc.runs_as_server
    tokens = bool((lg.get("requested") or {}).get("requested_use_token_latencies")) and server
    if tokens:          # LLM Server / Interactive: judged on TTFT and TPOT, not on target_latency
        out.extend(_token_reasons(lg, s, sc))
    if r.get("result_min_queries_met") is False:
        out.append(f"min queries not met: {r.get('result_query_count')} queries ran, min_query_count is "
                   f"{eff.get('effective_min_query_count')}. Rerun longer: {rerun(s, f'--min_duration={int(min_ms * 2)}')}")
    if server and not tokens and r.get("result_perf_constraints_met") is False:
        out.append(_server_latency(r, eff, s))
    early = lg.get("early_stopping") or {}
    if early.get("met") is False and not tokens:
        text = " ".join(str(x) for x in early.get("lines", ()))
        m = re.search(r"at least (\d+) more queries", text)
        more = int(m.group(1)) if m else 0
        queries = int(r.get("result_query_count") or 0)
        over = r.get("result_overlatency_query_count")
        if (server and r.get("result_perf_constraints_met") is False) or (not more and out):
            pass        # a reason above says it; early stopping follows from it
        elif over:
            qps = eff.get("effective_target_qps") or s.values.get(sc.sizing) or 0
            out.append(f"early stopping not met: {over} of {queries} queries were over the latency bound; with so "
                       f"few queries the tail estimate cannot pass (it needs {more} more all under the bound). "
                       f"Run longer or lower the load: {rerun(s, f'--min_query_count={queries + more}')}"
                       + (f", or {rerun(s, f'--server_target_qps={_g(0.9 * qps)}')}" if server and qps
                          else ""))
        else:
            out.append(f"early stopping not met: {queries} queries are too few to estimate the "
                       f"p{sc.percentile or 99} latency; it needs at least {more} more. "
                       f"Run longer: {rerun(s, f'--min_query_count={queries + more}')}")
    if server and r.get("result_perf_constraints_met") is not False:
        done = r.get("result_completed_samples_per_sec") or 0
        scheduled = r.get("result_scheduled_samples_per_sec") or 0
        # LoadGen's completed rate counts until the last answer, a query's latency after the last scheduled one:
        # a short run that kept up reads a few percent behind (16 queries at 2.7 QPS: 97%). Allowed for with the mean
        # latency; a growing backlog raises that too, but less than it lowers the completed rate.
        n = r.get("result_query_count") or 0
        span = n / scheduled if scheduled and n else 0
        tail = span / (span + (r.get("result_mean_latency_ns") or 0) / 1e9) if span else 1.0
        if scheduled and done < 0.98 * tail * scheduled:      # within the bound so far, but the backlog grows
            out.insert(0, f"behind schedule: it completed {_g(done)} of the {_g(scheduled)} samples/s scheduled "
                          "(it cannot keep up; on a full-length run the backlog would break any latency bound). "
                          f"Rerun with {rerun(s, f'--server_target_qps={_g(0.9 * done)}')}")
    if not out:
        out.append("LoadGen says INVALID without naming a constraint we know; see the Recommendations in "
                   "mlperf_log_summary.txt")
    return out


def _token_reasons(lg: dict[str, Any], s, sc) -> list[str]:
    """LLM Server / Interactive runs: TTFT and TPOT p99 against their bounds, and their early-stopping
    estimates (each needs enough queries of its own)."""
    r, req = lg.get("results") or {}, lg.get("requested") or {}
    out = []
    qps = (lg.get("effective") or {}).get("effective_target_qps") or s.values.get("server_target_qps") or 0
    for name, key, limit in (("TTFT", "result_first_token_99.00_percentile_latency_ns", "requested_server_ttft_latency"),
                             ("TPOT", "result_time_per_output_token_99.00_percentile_ns", "requested_server_tpot_latency")):
        v, bound = r.get(key), req.get(limit)
        if v is not None and bound and v > bound:
            out.append(f"{name} p99 {_ms(v)} is over the {_ms(bound)} bound: the system cannot hold it at "
                       f"{_g(qps)} queries/s. Lower the load: {rerun(s, f'--server_target_qps={_g(0.8 * qps)}')}")
    if out:
        return out
    queries = int(r.get("result_query_count") or 0)
    for name, key in (("TTFT", "early_stopping_ttft_result"), ("TPOT", "early_stopping_tpot_result")):
        text = str(((lg.get("early_stopping") or {}).get("raw") or {}).get(key) or "")
        m = re.search(r"at least (\d+) more queries", text)
        if m:
            more = int(m.group(1))
            out.append(f"{name} early stopping not met: {queries} queries are too few to estimate the p99 {name} "
                       f"(it needs {more} more, all within the bound). Run longer: "
                       f"{rerun(s, f'--min_query_count={queries + more}')}")
    return out


def _short_run(r: dict, eff: dict, s, sc, min_ms: float) -> str:
    """min_duration not met: the query LoadGen generated ran out before min_duration, because the
    scenario's sizing value promised a slower system than this one."""
    if sc.find_probe == "offline":
        rate = r.get("result_samples_per_second") or 0
        n = eff.get("effective_samples_per_query") or 0
        took = n / rate if rate else 0
        expected = eff.get("effective_target_qps") or s.values.get("offline_expected_qps")
        return (f"min duration not met: the Offline query of {n} samples took {took:.3g} s at {_g(rate)} samples/s, "
                f"under the {min_ms / 1000:g} s min_duration; --offline_expected_qps={_g(expected or 0)} is below what "
                f"this system does. Rerun with {rerun(s, f'--offline_expected_qps={_g(rate * 1.1)}')}")
    if sc.find_probe == "latency":
        key = sc.sizing
        measured = r.get("result_mean_latency_ns") or r.get(sc.metric_key)
        expected = eff.get("effective_target_latency_ns") or s.values.get(key)
        why = (f"the expected latency {_ms(expected)} is above the measured mean {_ms(measured)}"
               if expected and measured and expected > measured else f"the measured mean latency is {_ms(measured)}")
        return (f"min duration not met: the queries LoadGen generated ran out before the {min_ms / 1000:g} s "
                f"min_duration; {why}. Rerun with {rerun(s, f'--{key}={int(measured or 0)}')}")
    return (f"min duration not met: the run ended before the {min_ms / 1000:g} s min_duration "
            f"(--max_query_count caps it?). Rerun without it: {rerun(s)}")


def _server_latency(r: dict, eff: dict, s) -> str:
    """Server latency over the bound: the target QPS to rerun at (what the SUT completed, with
    headroom, when it could not keep up; else 90% of the target)."""
    pct = eff.get("effective_target_latency_percentile") or 0.99
    key = f"result_{pct * 100:.2f}_percentile_latency_ns"
    bound = eff.get("effective_target_latency_ns")
    target = eff.get("effective_target_qps") or s.values.get("server_target_qps") or 0
    done = r.get("result_completed_samples_per_sec") or 0
    scheduled = r.get("result_scheduled_samples_per_sec") or target
    behind = done < 0.98 * scheduled
    new = 0.9 * (done if behind else target)
    why = (f"it completed {_g(done)} of the {_g(scheduled)} samples/s scheduled (it cannot keep up)" if behind
           else f"it kept up with the {_g(target)} QPS schedule, but queued too long")
    return (f"latency bound not met: p{pct * 100:g} latency {_ms(r.get(key))} is over the {_ms(bound)} bound at "
            f"target {_g(target)} QPS; {why}. Rerun with {rerun(s, f'--server_target_qps={_g(new)}')} "
            f"(or find the peak: make find_performance RUN_ARGS=\"--benchmarks={s.benchmark} --scenarios=Server\")")


def overload(o: dict, s) -> str:
    """The SUT shed samples (code.common.harness.sut): how far behind it fell, what it served, the rerun."""
    served = o.get("served_per_s") or 0
    flag = f"--server_target_qps={_g(served * 0.9)}" if served else ""
    return (f"SUT overloaded: {o['pending']} samples were waiting (limit {o['max_pending']}) {o['at_s']:g}s into "
            f"the run at target {o.get('target_qps', 0):g} QPS while it served {served:g} samples/s; the other "
            f"{o.get('shed', 0)} samples were answered empty to keep memory bounded. Rerun with "
            f"{rerun(s, flag) if flag else 'a lower --server_target_qps'}")
