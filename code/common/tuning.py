"""``make find_performance``: measure the values a scenario is sized by, instead of guessing them.

Every probe is a real LoadGen run (``runner.run_one``: one child process, FromConfig once) judged by
LoadGen's own verdicts in its detail log:

- Offline: a short run sized by sample count measures samples/s; a second one sized to
  ``find_probe_seconds`` confirms it; ``offline_expected_qps`` = measured x OFFLINE_HEADROOM (the one
  query then lasts just over min_duration).
- Server: target QPS doubled from the configured value until a probe fails, then bisected to
  SERVER_PRECISION; a probe passes when its latency percentile is within the bound and early
  stopping failed, if at all, only for lack of queries (short probes); then a confirmation run of
  ``find_confirm_seconds`` at the found value, stepping down 5% until it is VALID.
- SingleStream / MultiStream: one probe; the expected latency is the measured mean (LoadGen then
  generates enough queries for min_duration).

The table of probes and the chosen values is printed; ``--write_config`` writes the values into this
system's block of configs/<benchmark>/<scenario>/config.json (code.common.config_edit).
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Callable

from code.common import scenarios
from code.common.errors import HarnessError

OFFLINE_HEADROOM = 1.05
SERVER_PRECISION = 0.03        # bisect until the pass/fail bracket is within 3%
MAX_PROBES = 14
EARLY_STOP_QUERIES = 1000      # Server probes: enough queries for early stopping with a few over the bound


@dataclasses.dataclass
class Probe:
    value: float                # the setting probed (QPS, or ns for latency scenarios)
    verdict: str                # "pass" | "fail" | LoadGen's validity
    metric: float | None
    validity: str | None
    note: str = ""
    log_dir: str = ""


def passes(meta: dict) -> tuple[bool, str]:
    """Judge a Server probe by LoadGen's verdicts: VALID passes; INVALID passes only when the latency
    percentile met the bound, the schedule was kept, and early stopping lacked only queries."""
    if meta.get("status") != "ok":
        return False, meta.get("error") or "failed"
    if meta.get("overload"):
        return False, "overloaded"
    if meta.get("result_validity") == "VALID":
        return True, "VALID"
    r = meta.get("results") or {}
    if r.get("result_perf_constraints_met") is False:
        return False, "latency over the bound"
    if r.get("result_min_duration_met") is False:
        return False, "min duration not met"
    queries = r.get("result_query_count") or 0
    over = r.get("result_overlatency_query_count") or 0
    pct = ((meta.get("effective") or {}).get("effective_target_latency_percentile") or 0.99)
    if queries and over <= (1 - pct) * queries:
        return True, f"latency met; early stopping needs a longer run ({over}/{queries} over the bound)"
    return False, "early stopping: too many queries over the bound"


def search(probe: Callable[[float], bool], start: float, precision: float = SERVER_PRECISION,
           max_probes: int = MAX_PROBES) -> float:
    """Highest value for which ``probe`` passes: double from ``start`` until it fails (halve while it
    fails from the start), then bisect until the bracket is within ``precision``. 0 if nothing passes."""
    lo, hi, n, failed = 0.0, start, 0, None
    while n < max_probes:
        n += 1
        if probe(hi):
            lo = hi
            if failed is not None:              # passed below a failure: that failure is the bracket's top
                hi = failed
                break
            hi *= 2
            continue
        failed = hi
        if lo:
            break
        hi /= 2                                 # even the start fails: look below it
        if hi < start / 1024:
            return 0.0
    else:
        return lo
    while n < max_probes and hi - lo > precision * hi:
        n += 1
        mid = (lo + hi) / 2
        if probe(mid):
            lo = mid
        else:
            hi = mid
    return lo


class Finder:
    """Probes for one RunSettings (a benchmark x scenario x config_ver), with its engines built once."""

    def __init__(self, s, control, log_root: Path, engines: dict, log: Callable[[str], None] = print):
        self.s, self.control, self.root, self.engines, self.log = s, control, log_root, engines, log
        self.probes: list[Probe] = []
        self.probe_s = control.find_probe_seconds
        self.sc = scenarios.get(s.scenario)

    def run(self, tag: str, **over):
        from code.common.harness.runner import run_one

        s = self.s.replace(**over)
        d = self.root / s.system_name / s.log_name / s.scenario / f"probe-{len(self.probes):02d}-{tag}"
        return run_one(s, self.control, d, self.engines), str(d)

    def record(self, value: float, meta: dict, d: str, verdict: str, note: str = "") -> None:
        self.probes.append(Probe(value, verdict, meta.get("metric_value"), meta.get("result_validity"), note, d))
        self.log(f"[find_performance] {self.s.benchmark} {self.s.scenario} probe {len(self.probes)}: "
                 f"{self._fmt(value)} -> {verdict}" + (f" ({note})" if note else ""))

    def _fmt(self, v: float) -> str:
        return f"{v:.4g} QPS" if not self.sc.latency_sized else f"{v / 1e6:.4g} ms"

    # --- scenarios -------------------------------------------------------------------------------
    def offline(self) -> dict:
        first = max(64, 8 * self._batch() * self._workers())
        m, d = self.run("count", min_duration=1, min_query_count=first, offline_expected_qps=1.0)
        rate = self._rate(m)
        self.record(first, m, d, m.get("result_validity") or "error", f"{first} samples: {rate:.4g} samples/s")
        n = max(first, int(rate * self.probe_s))
        m, d = self.run("sized", min_duration=1, min_query_count=n, offline_expected_qps=1.0)
        rate = self._rate(m)
        self.record(n, m, d, m.get("result_validity") or "error", f"{n} samples: {rate:.4g} samples/s")
        return {"offline_expected_qps": round(rate * OFFLINE_HEADROOM, 4)}

    def server(self) -> dict:
        def probe(qps: float) -> bool:
            m, d = self.run(f"{qps:.4g}", server_target_qps=qps, min_duration=int(self.probe_s * 1000),
                            min_query_count=min(EARLY_STOP_QUERIES, max(1, int(qps * self.probe_s))))
            ok, why = passes(m)
            self.record(qps, m, d, "pass" if ok else "fail", why)
            return ok

        start = self.s.server_target_qps or 1.0
        best = search(probe, start)
        if not best:
            raise HarnessError(f"{self.s.benchmark} Server: no target QPS down to {start / 1024:.3g} met the latency "
                               "bound", "check the model and latency bound with a --fast run, or set "
                               "--server_target_latency_ns")
        for _ in range(4):                       # confirm at full LoadGen rules, stepping down 5%
            m, d = self.run(f"confirm-{best:.4g}", server_target_qps=best,
                            min_duration=int(self.control.find_confirm_seconds * 1000), min_query_count=1)
            self.record(best, m, d, m.get("result_validity") or "error", "confirmation")
            if m.get("result_validity") == "VALID":
                break
            best *= 0.95
        else:
            raise HarnessError(f"{self.s.benchmark} Server: the confirmation runs stayed INVALID down to {best:.4g} QPS",
                               "raise --find_confirm_seconds, or rerun when the machine is idle")
        factor = self.s.audit_server_qps_factor
        return {"server_target_qps": round(best, 4), "_audit_target_qps": round(best * factor, 4)}

    def latency(self) -> dict:
        key = self.sc.sizing
        m, d = self.run("latency", min_duration=int(self.probe_s * 1000), min_query_count=1)
        mean = (m.get("results") or {}).get("result_mean_latency_ns")
        if m.get("status") != "ok" or not mean:
            raise HarnessError(f"{self.s.benchmark} {self.s.scenario} probe failed: {m.get('error') or 'no latency'}",
                               f"see {d}")
        self.record(m.get("metric_value") or 0, m, d, m.get("result_validity") or "error",
                    f"p{self.sc.percentile} {m['metric_value'] / 1e6:.4g} ms, mean {mean / 1e6:.4g} ms")
        return {key: int(math.ceil(mean))}

    def find(self) -> dict:
        return {"offline": self.offline, "server": self.server, "latency": self.latency}[self.sc.find_probe]()

    def _rate(self, m: dict) -> float:
        if m.get("status") != "ok" or not m.get("metric_value"):
            raise HarnessError(f"{self.s.benchmark} {self.s.scenario} probe failed: {m.get('error') or 'no result'}",
                               f"see {m.get('log_dir')} (mlperf_log_detail.txt)")
        return float(m["metric_value"])

    def _batch(self) -> int:
        bs = self.s.gpu_batch_size
        return max(bs.values()) if isinstance(bs, dict) else int(bs)

    def _workers(self) -> int:
        from code.common.benchmarks import implementation

        return len(implementation(self.s.spec)(self.s).workers())


def table(rows: list[tuple[str, str, Probe]]) -> str:
    """Every probe of every setting: benchmark, scenario, value, verdict, metric, note."""
    out = [("benchmark", "scenario", "#", "value", "verdict", "metric", "note")]
    count: dict[tuple[str, str], int] = {}
    for bench, scen, p in rows:
        count[(bench, scen)] = n = count.get((bench, scen), 0) + 1
        sc = scenarios.get(scen)
        value = f"{p.value / 1e6:.4g} ms" if sc.latency_sized else f"{p.value:.4g}"
        metric = "-" if p.metric is None else sc.format_metric(p.metric)
        out.append((bench, scen, str(n), value, p.verdict, metric, p.note[:80]))
    widths = [max(len(r[i]) for r in out) for i in range(len(out[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in out]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def action_find_performance(cli: dict, settings: list) -> int:
    """Find each settings' sizing value, print the probes and the choice, optionally write configs."""
    from code.common import paths
    from code.common.harness import runner
    from code.common.benchmarks import implementation
    from code.common.config_edit import write_values
    from code.common.settings import RunControl

    control = RunControl.from_cli(cli, test_mode="PerformanceOnly", overwrite=True)
    stamp = runner.timestamp()
    # a folder of this invocation's own (under --log_dir too): probes overwrite each other, never an earlier search
    root = (Path(control.log_dir) if control.log_dir else paths.logs_dir()) / f"find_performance-{stamp}"
    rows, chosen = [], []
    for s in settings:
        engines = implementation(s.spec)(s).generate_engines()
        f = Finder(s, control, root, engines)
        values = f.find()
        rows += [(s.benchmark, s.scenario, p) for p in f.probes]
        chosen.append((s, values))
    print(f"\nProbes ({root})")
    print(table(rows))
    print("\nChosen values")
    for s, values in chosen:
        audit = values.pop("_audit_target_qps", None)
        for k, v in values.items():
            print(f"  {s.benchmark} {s.scenario} {s.system_id}: {k} = {v:g}" +
                  (f" (audit runs use {audit:g}: x{s.audit_server_qps_factor:g})" if audit else ""))
        if control.write_config:
            path, block = write_values(s, values)
            print(f"  wrote {', '.join(values)} into [{block}] of {path}")
    if not control.write_config:
        print("\n(add --write_config to write them into this system's block of configs/<benchmark>/<scenario>/config.json)")
    return 0
