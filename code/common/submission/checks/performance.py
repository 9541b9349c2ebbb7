"""Performance logs: VALID, the round's minimum duration and sample count, the scenario's mlperf.conf bounds."""
from __future__ import annotations

from pathlib import Path

from code.common import rounds, scenarios
from code.common.compliance.mlperf_log import DetailLog
from code.common.submission import mlperf_conf
from code.common.settings import FAST_MIN_DURATION_MS
from code.common.submission.checks.findings import Findings, log_basics, read_log, require, run_record



def _samples_per_query(f: Findings, log: DetailLog, rb: rounds.RoundBenchmark, scen: str, conf: dict,
                       what: str) -> None:
    need = mlperf_conf.lookup(conf, rb.loadgen_model, scen, "min_query_count")
    spq = log.get("effective_samples_per_query")
    if need and spq is not None and int(spq) < int(need):
        f.error(log.path, f"{what} {scen} query has {spq} samples, needs >= {need}")


def _latency_bound(f: Findings, log: DetailLog, rb: rounds.RoundBenchmark, scen: str, conf: dict, what: str) -> None:
    bound = mlperf_conf.lookup(conf, rb.loadgen_model, scen, "target_latency")
    tl = log.get("effective_target_latency_ns")
    if bound and tl is not None and int(tl) > int(float(bound) * 1e6):
        f.error(log.path, f"{what} {scen} latency bound {tl} ns exceeds the official {float(bound) * 1e6:.0f} ns")


def _token_latencies(f: Findings, log: DetailLog, rb: rounds.RoundBenchmark, scen: str, conf: dict, what: str) -> None:
    """LLMs measured per token (the checker's llm_check): use_token_latencies on, and in Server /
    Interactive the p99 TTFT and TPOT strictly under the official bounds of the scenario's mlperf.conf
    model (``llama2-70b-interactive`` for Interactive)."""
    if not any("tokens" in v and "inferred" not in v for v in rb.result_field.values()):
        return
    if not log.get("requested_use_token_latencies"):
        f.error(log.path, f"{what}: use_token_latencies is off; an LLM result needs per-token latencies")
    sc = scenarios.get(scen)
    if not sc.runs_as_server:
        return
    model = scenarios.loadgen_model(rb.loadgen_model, scen)
    for name, key, conf_key in (("TTFT", "result_first_token_99.00_percentile_latency_ns", "ttft_latency"),
                                ("TPOT", "result_time_per_output_token_99.00_percentile_ns", "tpot_latency")):
        bound, v = mlperf_conf.lookup(conf, model, sc.loadgen_enum, conf_key), log.get(key)
        if bound and v is not None and float(v) >= float(bound) * 1e6:
            f.error(log.path, f"{what} {scen} p99 {name} {float(v) / 1e6:.1f} ms is not under the official "
                              f"{float(bound):g} ms")


def _latency_constraint(f: Findings, log: DetailLog, rb: rounds.RoundBenchmark, scen: str, what: str) -> None:
    """The round's end-to-end bound (the checker's latency-constraint, RoundBenchmark.latency_constraint_ns): the
    target LoadGen judged early stopping by is within it, and so is the p99 of whole answers."""
    bound = rb.latency_constraint_ns.get(scen)
    if not bound:
        return
    tl, p99 = log.get("effective_target_latency_ns"), log.get("result_99.00_percentile_latency_ns")
    if tl is not None and int(tl) > bound:
        f.error(log.path, f"{what} {scen} latency target {int(tl)} ns exceeds the round's end-to-end {bound} ns")
    if p99 is not None and float(p99) > bound:
        f.error(log.path, f"{what} {scen} p99 latency {float(p99) / 1e6:.1f} ms exceeds the round's end-to-end "
                          f"{bound / 1e6:g} ms")


# Checks per mlperf.conf key; which keys bound which scenario is code.common.scenarios' (official_bounds).
BOUND_CHECKS = {"min_query_count": _samples_per_query, "target_latency": _latency_bound}


def perf_checks(f: Findings, log: DetailLog, rnd: rounds.Round, rb: rounds.RoundBenchmark, scen: str,
                conf: dict, what: str) -> None:
    """One performance-mode log (``what``: "performance" or the audit test it belongs to)."""
    log_basics(f, log, rnd, what)
    if log.scenario != scenarios.get(scen).loadgen_enum:      # an Interactive run is LoadGen's Server
        f.error(log.path, f"{what} log is a {log.scenario or 'unknown'} run in the {scen} directory")
    if log.get("result_validity") != "VALID":
        f.error(log.path, f"{what} result is {log.get('result_validity') or 'missing'}, not VALID")
    md = log.get("effective_min_duration_ms")
    if md is None or int(md) < rnd.min_duration_ms:
        fast = " — this is a --fast (--test_run) run" if md == FAST_MIN_DURATION_MS else ""
        f.error(log.path, f"{what} min_duration is {md} ms, below the required {rnd.min_duration_ms} ms{fast}; "
                          "a shortened run can never be a submission result: rerun without --fast/--min_duration")
    psc = log.get("effective_performance_sample_count")
    if psc is not None and int(psc) < rb.performance_sample_count:
        f.error(log.path, f"{what} performance_sample_count is {psc}, needs >= {rb.performance_sample_count}")
    sc = scenarios.get(scen)
    for key in sc.official_bounds:
        BOUND_CHECKS[key](f, log, rb, scen, conf, what)
    _token_latencies(f, log, rb, scen, conf, what)
    _latency_constraint(f, log, rb, scen, what)
    field = rb.result_field.get(sc.loadgen_enum, sc.checker_field)
    if log.get("result_validity") == "VALID" and log.get(field) is None:
        f.error(log.path, f"{what} log has no {field}, the result field the checker reads for {scen}")
    if log.get("effective_max_query_count") not in (None, 0):
        f.error(log.path, f"{what} run capped max_query_count at {log.get('effective_max_query_count')}")


def check_performance(f: Findings, d: Path, rnd: rounds.Round, rb: rounds.RoundBenchmark, scen: str,
                      conf: dict) -> None:
    """<scenario>/performance/run_1: the detail and summary logs."""
    run = d / "performance" / "run_1"
    log = read_log(f, run / "mlperf_log_detail.txt")
    require(f, run / "mlperf_log_summary.txt")
    run_record(f, run)
    if log:
        perf_checks(f, log, rnd, rb, scen, conf, "performance")
