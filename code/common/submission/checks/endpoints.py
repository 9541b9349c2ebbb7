"""An endpoints-client result (config.yaml, performance/result_summary.json, accuracy/accuracy_results.json, in
place of LoadGen's logs; ``code.common.submission.endpoints``): what the official checker judges of it, and what
it leaves out.

The checker reads the seeds and min_duration from config.yaml, TTFT/TPOT from the early-stopping p99 estimates,
and the accuracy sample count; it never compares the run's own length with min_duration (the client stops at
``--num-samples`` whatever min_duration says), nor the accuracy score with the targets (only Qwen3-VL's), nor
whether the score is the benchmark's metric at all. These checks do.
"""
from __future__ import annotations

from pathlib import Path

from code.common import rounds, scenarios
from code.common.results import accuracy_text as acc_text
from code.common.submission import endpoints, mlperf_conf
from code.common.submission.checks.findings import Findings, read_json, require, run_record


def _yaml(f: Findings, path: Path) -> dict | None:
    import yaml

    if not require(f, path):
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        f.error(path, f"not readable YAML: {str(e).splitlines()[0]}")
        f.unreadable.append(f._rel(path))
        return None
    if not isinstance(data, dict):
        f.error(path, f"expected a YAML mapping, found {type(data).__name__}")
        f.unreadable.append(f._rel(path))
        return None
    return data


def _get(d, dotted: str):
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def _settings(f: Findings, path: Path, cfg: dict, rnd: rounds.Round, scen: str) -> None:
    run_type = cfg.get("benchmark_mode") if cfg.get("type") == "submission" else cfg.get("type")
    if scen not in endpoints.TYPE_SCENARIOS.get(str(run_type), ()):
        f.error(path, f"an {run_type} run in the {scen} directory")
    runtime = _get(cfg, "settings.runtime") or {}
    for ours, theirs in (("dataloader_random_seed", "sample_index_rng_seed"),
                         ("scheduler_random_seed", "schedule_rng_seed")):
        if runtime.get(ours) != rnd.seeds[theirs]:
            f.error(path, f"settings.runtime.{ours} is {runtime.get(ours)}, the {rnd.version} {theirs} is "
                          f"{rnd.seeds[theirs]} (--runtime.{ours.replace('_', '-')} {rnd.seeds[theirs]})")
    md = runtime.get("min_duration_ms")
    if not isinstance(md, int) or md < rnd.min_duration_ms:
        f.error(path, f"min_duration_ms is {md}, below the required {rnd.min_duration_ms} ms (--duration 600s)")


def _performance(f: Findings, path: Path, perf: dict, cfg: dict, rb: rounds.RoundBenchmark, scen: str,
                 conf: dict) -> None:
    if perf.get("n_samples_failed") or not perf.get("complete", True):
        f.error(path, f"the run did not complete: {perf.get('n_samples_failed')} samples failed")
    md = _get(cfg, "settings.runtime.min_duration_ms")
    ran = perf.get("duration_ns")
    if isinstance(md, int) and md and isinstance(ran, (int, float)) and ran / 1e6 < md:
        f.error(path, f"the run lasted {ran / 1e9:.1f} s, under its min_duration of {md / 1000:g} s (the client stops "
                      "at --num-samples whatever min_duration says; the official checker reads only the setting)")
    sc = scenarios.get(scen)
    if not sc.runs_as_server:
        return
    model = scenarios.loadgen_model(rb.loadgen_model, scen)
    for name, key, conf_key in (("TTFT", "ttft", "ttft_latency"), ("TPOT", "tpot", "tpot_latency")):
        v = _get(perf, f"{key}.early_stopping_percentiles") or {}
        v = v.get("99.0", v.get("99")) if isinstance(v, dict) else None
        bound = mlperf_conf.lookup(conf, model, sc.loadgen_enum, conf_key)
        if v is None:
            f.error(path, f"no early-stopping p99 {name} estimate (a Server run needs at least 662 samples for one)")
        elif bound and float(v) >= float(bound) * 1e6:
            f.error(path, f"{scen} p99 {name} {float(v) / 1e6:.1f} ms is not under the official {float(bound):g} ms")


def _accuracy(f: Findings, path: Path, acc: dict, rb: rounds.RoundBenchmark) -> None:
    scores = [s for s in acc.get("accuracy_scores") or [] if isinstance(s, dict)
              and s.get("dataset_type", "accuracy") == "accuracy"]
    n = sum(int(s.get("total_samples") or (s.get("response_counts") or {}).get("issued") or 0) for s in scores)
    if n != rb.accuracy_samples:
        f.error(path, f"accuracy run covered {n} samples; the {rb.name} accuracy set has {rb.accuracy_samples} "
                      "(every sample must be scored)")
    found: dict[str, float] = {}
    for s in scores:
        score = s.get("score")
        if isinstance(score, dict):
            lower = {str(k).lower(): v for k, v in score.items()}
            for m in rb.accuracy_metrics:
                try:
                    found.setdefault(m, float(lower[m.lower()]))
                except (KeyError, TypeError, ValueError):
                    pass
    if not found:
        got = ", ".join(repr(s.get("score"))[:40] for s in scores) or "none"
        f.error(path, f"the accuracy score ({got}) is not {rb.name}'s metrics ({', '.join(rb.accuracy_metrics)}): "
                      "score the accuracy dataset with accuracy_config.eval_method=rouge")
        return
    for p in acc_text.judge(found, dict(rb.accuracy_min), dict(rb.accuracy_max)):
        f.error(path, p.replace("accuracy.txt", "accuracy_results.json"))


def _audits(f: Findings, d: Path, rb: rounds.RoundBenchmark) -> None:
    for test in rb.compliance_tests:
        name = endpoints.AUDIT_NAMES.get(test)
        p = d / endpoints.AUDIT_DIR / f"audit_{name}.json"
        if name is None or not p.is_file():
            f.warn(d, f"no {test} audit ({name or 'the endpoints client has none'}): the checker does not require "
                      f"it of an endpoints result for {rb.name}")
            continue
        rec = read_json(f, p)
        if rec is not None and (rec.get("test") != name or not rec.get("passed")):
            f.error(p, f"{test} ({name}) did not pass")


def check_endpoints(f: Findings, d: Path, rnd: rounds.Round, rb: rounds.RoundBenchmark, scen: str,
                    conf: dict) -> None:
    """One results/<system>/<benchmark>/<scenario> directory holding an endpoints-client result."""
    if not rnd.accepts_endpoints(rb):
        f.error(d, f"an endpoints-client result, which MLPerf Inference {rnd.version} does not accept for {rb.name}")
    run_record(f, d)
    cfg = _yaml(f, d / "config.yaml")
    perf = read_json(f, d / endpoints.PERF_SUMMARY)
    acc = read_json(f, d / endpoints.ACC_RESULTS)
    if cfg is not None:
        _settings(f, d / "config.yaml", cfg, rnd, scen)
    if perf is not None:
        _performance(f, d / endpoints.PERF_SUMMARY, perf, cfg or {}, rb, scen, conf)
    if acc is not None:
        _accuracy(f, d / endpoints.ACC_RESULTS, acc, rb)
    _audits(f, d, rb)
