"""The one definition of each LoadGen scenario. Every other module asks here.

A scenario owns: its LoadGen enum name, the ``user.conf`` keys its settings become, the headline
metric (detail-log key, name, unit, direction), the field the official checker reads for the result
(``early_stopping_*`` where early stopping applies), how the SUT dispatches queries, and which schema
settings apply to it. Adding a scenario (the LLM ``Interactive`` one, say) is one entry in
``SCENARIOS`` plus its configs.

Dispatch modes (``code.common.harness.sut``):
- ``queue``: issue_queries hands batches to worker queues and returns (Offline);
- ``batcher``: one batcher thread fills batches up to a time limit (Server);
- ``inline``: work runs on LoadGen's issue thread (SingleStream, MultiStream: the next query comes
  only after this one completes).
- ``stream``: generation benchmarks (LLMs) in every scenario (``dispatch_for``): each sample joins an
  in-flight batch between decode steps and completes token by token (``code.common.llm.sut``):
  ``FirstTokenComplete`` at its first token, ``QuerySamplesComplete`` with ``n_tokens`` at its last.

``Interactive`` is LoadGen's Server scenario under the model's ``-interactive`` mlperf.conf name
(tighter TTFT/TPOT bounds): ``loadgen_model`` says which name a run loads.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from code.common.errors import HarnessError, did_you_mean


def _g(v: Any) -> str:
    return f"{v:g}"


def _ns_to_ms(v: Any) -> str:
    return f"{v / 1e6:g}"


@dataclasses.dataclass(frozen=True)
class ConfKey:
    """One run setting written to user.conf as ``<model>.<scenario>.<key> = convert(value)``;
    skipped when the value equals ``skip`` (the "use mlperf.conf" sentinel)."""

    setting: str
    key: str
    convert: Callable[[Any], str] = str
    skip: Any = 0


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str                       # "Offline": the LoadGen enum name and our directory name
    dispatch: str                   # "queue" | "batcher" | "inline"
    metric: str                     # metadata.json "metric"
    metric_key: str                 # key of the headline value in mlperf_log_detail.txt
    unit: str                       # unit of metric_value: "samples/s" | "ns"
    lower_is_better: bool
    checker_field: str              # the field the official checker reads as the result
    settings: tuple[str, ...]       # schema fields that apply only to this scenario (and those sharing them)
    conf_keys: tuple[ConfKey, ...]  # run settings -> user.conf
    sizing: str                     # the setting that sizes the run (expected rate or latency; a TestSettings field too)
    find_probe: str                 # how find_performance measures `sizing`: "offline" | "server" | "latency"
    scales_with_devices: bool = False  # work spreads over every GPU: the sizing rate scales with their count
    audit_scaled: str | None = None # setting multiplied by audit_server_qps_factor in audit runs
    percentile: int | None = None   # latency percentile of the metric (SingleStream 90, MultiStream 99)
    # mlperf.conf keys whose official value bounds this scenario's logs (pre-flight checks them):
    # "min_query_count" (Offline: its one query carries that many samples), "target_latency" (Server)
    official_bounds: tuple[str, ...] = ()
    loadgen_scenario: str = ""      # LoadGen's TestScenario name when it differs (Interactive runs as Server)
    audit_short_latency_ns: int = 0 # TEST01/TEST04 allow 20% instead of 10% at or below this latency
    summary_score: str = ""         # regex of the mlperf_log_summary.txt line the official TEST04 check scores
    loadgen_model_suffix: str = ""  # appended to the mlperf.conf model name ("-interactive")
    samples_per_query: str = ""     # the setting holding the samples in one query (MultiStream); "": one
    categories: tuple[str, ...] = ("datacenter", "edge")   # the submission categories that run it
    first_token: bool = True        # LoadGen reports each sample's first token (all but Offline's one big query)

    def expected_samples(self, ts) -> int:
        """About how many samples a performance run with LoadGen TestSettings ``ts`` issues (progress only):
        the queries min_duration needs at the sizing rate or latency, at least min_query_count."""
        seconds, sized = ts.min_duration_ms / 1000, getattr(ts, self.sizing)
        queries = seconds * 1e9 / max(sized, 1) if self.latency_sized else seconds * sized
        per = getattr(ts, self.samples_per_query) if self.samples_per_query else 1
        return int(max(ts.min_query_count, queries) * per)

    def planned_samples(self, values, default_duration_ms: int) -> int:
        """``expected_samples`` from a run's effective settings (``values``: flags, config.json and defaults
        alike); a setting left to mlperf.conf (0) counts as its smallest effect."""
        import types

        ts = types.SimpleNamespace(min_duration_ms=values.get("min_duration") or default_duration_ms,
                                   min_query_count=values.get("min_query_count") or 0,
                                   **{self.sizing: values.get(self.sizing) or (1 if self.latency_sized else 0)})
        if self.samples_per_query:
            setattr(ts, self.samples_per_query, values.get(self.samples_per_query) or 1)
        if self.latency_sized and not values.get(self.sizing):
            return ts.min_query_count * (getattr(ts, self.samples_per_query) if self.samples_per_query else 1)
        return self.expected_samples(ts)

    @property
    def loadgen_enum(self) -> str:
        return self.loadgen_scenario or self.name

    @property
    def latency_sized(self) -> bool:
        """Its headline metric is a latency percentile (SingleStream, MultiStream), not a rate."""
        return self.unit == "ns"

    @property
    def runs_as_server(self) -> bool:
        """LoadGen runs it as its Server scenario (Server, Interactive): Poisson arrivals, a latency bound."""
        return self.loadgen_enum == "Server"

    def format_metric(self, value: float | None) -> str:
        if value is None:
            return "-"
        if self.latency_sized:
            return f"{value / 1e6:.2f} ms (p{self.percentile})"
        return f"{value:.2f} {self.unit}"


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("Offline", "queue", "samples_per_second", "result_samples_per_second", "samples/s", False,
             "result_samples_per_second", ("offline_expected_qps",),
             (ConfKey("offline_expected_qps", "target_qps", _g),), sizing="offline_expected_qps", find_probe="offline",
             scales_with_devices=True,
             summary_score="Samples per second",
             official_bounds=("min_query_count",), first_token=False),
    Scenario("Server", "batcher", "completed_samples_per_second", "result_completed_samples_per_sec", "samples/s",
             False, "result_completed_samples_per_sec",
             ("server_target_qps", "server_target_latency_ns", "server_batch_timeout_ms"),
             (ConfKey("server_target_qps", "target_qps", _g),
              ConfKey("server_target_latency_ns", "target_latency", _ns_to_ms)),
             sizing="server_target_qps", find_probe="server", scales_with_devices=True,
             audit_scaled="server_target_qps", summary_score="Completed samples per second",
             official_bounds=("target_latency",), categories=("datacenter",)),
    # LLMs only (their BenchmarkSpec lists it): Server with the "-interactive" TTFT/TPOT bounds
    Scenario("Interactive", "batcher", "completed_samples_per_second", "result_completed_samples_per_sec",
             "samples/s", False, "result_completed_samples_per_sec",
             ("server_target_qps", "server_target_latency_ns", "server_batch_timeout_ms"),
             (ConfKey("server_target_qps", "target_qps", _g),
              ConfKey("server_target_latency_ns", "target_latency", _ns_to_ms)),
             sizing="server_target_qps", find_probe="server", scales_with_devices=True,
             audit_scaled="server_target_qps", summary_score="Completed samples per second", loadgen_scenario="Server",
             loadgen_model_suffix="-interactive", categories=("datacenter",)),
    Scenario("SingleStream", "inline", "90th_percentile_latency_ns", "result_90.00_percentile_latency_ns", "ns", True,
             "early_stopping_latency_ss", ("single_stream_expected_latency_ns",),
             (ConfKey("single_stream_expected_latency_ns", "target_latency", _ns_to_ms),),
             sizing="single_stream_expected_latency_ns", find_probe="latency", percentile=90, audit_short_latency_ns=200_000,
             summary_score=r".*Early stopping (90th|90\.0th|99\.9th) percentile estimate", categories=("edge",)),
    Scenario("MultiStream", "inline", "99th_percentile_latency_ns", "result_99.00_percentile_latency_ns", "ns", True,
             "early_stopping_latency_ms", ("multi_stream_expected_latency_ns", "multi_stream_samples_per_query"),
             (ConfKey("multi_stream_expected_latency_ns", "target_latency", _ns_to_ms),
              ConfKey("multi_stream_samples_per_query", "samples_per_query", str, skip=8)),
             sizing="multi_stream_expected_latency_ns", find_probe="latency", percentile=99,
             audit_short_latency_ns=1_600_000, samples_per_query="multi_stream_samples_per_query",
             summary_score=r".*Early stopping (99th|99\.0th) percentile estimate", categories=("edge",)),
)}

NAMES: tuple[str, ...] = tuple(SCENARIOS)
SERVER_LIKE: tuple[str, ...] = tuple(n for n, s in SCENARIOS.items() if s.runs_as_server)
LOADGEN_SCENARIOS: tuple[str, ...] = tuple(dict.fromkeys(s.loadgen_enum for s in SCENARIOS.values()))
MODE_DIRS = {"PerformanceOnly": "performance", "AccuracyOnly": "accuracy", "SubmissionRun": "submission"}


def get(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise HarnessError(f"unknown scenario '{name}'{did_you_mean(name, NAMES)}",
                           f"use --scenarios= one or more of {','.join(NAMES)}") from None


def dispatch_for(scenario: str, spec=None) -> str:
    """How the SUT dispatches this scenario's queries for ``spec`` (a BenchmarkSpec): ``stream`` for
    generation benchmarks in every scenario, else the scenario's own mode."""
    return "stream" if spec is not None and getattr(spec, "generates_tokens", False) else get(scenario).dispatch


def loadgen_model(model: str, scenario: str) -> str:
    """The mlperf.conf model name a run of ``scenario`` loads (``llama2-70b-interactive`` for Interactive)."""
    return model + get(scenario).loadgen_model_suffix


def scoped_settings() -> set[str]:
    """Every setting some scenario claims; the others apply to all scenarios."""
    return {n for s in SCENARIOS.values() for n in s.settings}


def applies(setting: str, scenario: str) -> bool:
    return setting not in scoped_settings() or setting in SCENARIOS[scenario].settings


def scenarios_of(setting: str) -> tuple[str, ...] | None:
    """The scenarios a setting applies to; None: all of them."""
    if setting not in scoped_settings():
        return None
    return tuple(s.name for s in SCENARIOS.values() if setting in s.settings)


# LLM token-latency bounds (fields of the LLM layer, code.common.llm.fields): user.conf in ms
TOKEN_CONF_KEYS = (ConfKey("ttft_latency_ns", "ttft_latency", _ns_to_ms), ConfKey("tpot_latency_ns", "tpot_latency", _ns_to_ms))


def conf_lines(scenario: str, model: str, values: dict[str, Any], *, audit_factor: float | None = None) -> list[str]:
    """user.conf lines for one scenario's settings (the scenario part of the one settings->LoadGen
    function, ``code.common.harness.runner.user_conf_text``). ``model`` is the mlperf.conf name (``loadgen_model``)."""
    sc = SCENARIOS[scenario]
    out = []
    keys = sc.conf_keys + (TOKEN_CONF_KEYS if sc.runs_as_server else ())
    for ck in keys:
        v = values.get(ck.setting)
        if v is None or v == ck.skip:
            continue
        if audit_factor is not None and ck.setting == sc.audit_scaled:
            v = v * audit_factor
        out.append(f"{model}.{sc.loadgen_enum}.{ck.key} = {ck.convert(v)}")
    return out
