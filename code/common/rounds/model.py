"""What one MLPerf Inference round requires: benchmark names, scenarios, accuracy targets, audits, seeds.

The dataclasses only; the tables are in ``code.common.rounds.v5`` / ``.v6`` and the lookups in
``code.common.rounds`` (the one place accuracy scripts, audits, staging, export and pre-flight ask).

A round lists *entries*, one per submission name (``bert-99``, ``bert-99.9``, ``resnet``). Each entry
names the harness benchmark package it is run by (``bert``, ``resnet50``) and the accuracy variant
(``"99"``, ``"99.9"`` or ``""`` where the round has no split). ``--accuracy_target`` picks the
variant; the submission name follows from the entry.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Mapping

from code.common.errors import HarnessError

DEFAULT_ACCURACY_TARGET = "99"
AUDIT_TESTS = ("TEST01", "TEST04", "TEST06", "TEST07", "TEST08", "TEST09")   # every compliance test a round can require
# TEST07 / TEST08 / TEST09 audit.config: a fixed accuracy_log_rng_seed of their own (not the round's TEST01 seed)
TEST07_09_ACCURACY_LOG_RNG_SEED = 720381539243781796
# compliance/TEST08/dlrm-v3/audit.config: the answers LoadGen logs from the performance run (about this many)
TEST08_ACCURACY_LOG_SAMPLING_TARGET = 4096
# compliance/TEST08/run_verification.py: the relative NE difference allowed per matched answer (its --tolerance)
TEST08_NE_TOLERANCE = 0.001


def seeds(qsl: int, sample_index: int, schedule: int) -> dict[str, int]:
    """A round's LoadGen seeds (mlperf.conf), as every run logs them (effective_*)."""
    return {"qsl_rng_seed": qsl, "sample_index_rng_seed": sample_index, "schedule_rng_seed": schedule}


def _vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


@dataclasses.dataclass(frozen=True)
class RoundBenchmark:
    """One submission name as a round sees it."""

    name: str                                  # submission directory name, e.g. "resnet", "bert-99.9"
    benchmark: str                             # harness package that runs it, e.g. "resnet50", "bert"
    loadgen_model: str                         # model key in LoadGen's mlperf.conf, e.g. "resnet50"
    accuracy_variant: str = ""                 # "99" | "99.9" | "95" (yolo-95) | "" (the round has no split)
    edge_scenarios: tuple[str, ...] = ()       # required scenarios for system_type "edge" (empty: not edge)
    datacenter_scenarios: tuple[str, ...] = () # required scenarios for "datacenter" (empty: not datacenter)
    both_scenarios: tuple[str, ...] = ()       # required for "datacenter,edge"
    dataset_size: int = 0                      # samples an accuracy run must cover (checker dataset-size)
    # where the accuracy set is its own, smaller file (the checker's accuracy-sample-count: gpt-oss-120b's 4,395
    # against a 6,396-sample performance set); 0: dataset_size
    accuracy_sample_count: int = 0
    performance_sample_count: int = 0          # minimum effective_performance_sample_count
    compliance_tests: tuple[str, ...] = ()     # audits a closed submission must include
    test01_sampling_target: int = 0            # accuracy_log_sampling_target of TEST01
    test04_extra: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)  # scenario -> key -> value
    accuracy_delta_perc: Mapping[str, float] = dataclasses.field(default_factory=dict)      # TEST01 fallback deltas
    accuracy_metrics: tuple[str, ...] = ()     # metric names as the checker parses them from accuracy.txt
    accuracy_min: Mapping[str, float] = dataclasses.field(default_factory=dict)
    accuracy_max: Mapping[str, float] = dataclasses.field(default_factory=dict)
    extra_accuracy_files: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # dir -> stems
    result_field: Mapping[str, str] = dataclasses.field(default_factory=dict)  # scenario -> checker field override
    # datacenter (and datacenter,edge) scenarios of which a closed submission holds at least one beside
    # the required ones (the checker's optional-scenarios-*: "Interactive or Server" for the LLMs since v5.1)
    optional_scenarios: tuple[str, ...] = ()
    # TEST07 (accuracy in a performance-mode run over a set of its own, every sample logged): that set's size and
    # the score the official run_verification.py requires (its audit.config's test07_accuracy_threshold)
    test07_samples: int = 0
    test07_accuracy_threshold: float = 0.0
    # TEST09 (mean output length of a performance-mode run over the whole performance set): [min, max] tokens
    test09_output_tokens: tuple[float, ...] = ()

    # the checker's per-scenario figures where a scenario runs another data set (qwen3-vl-235b-a22b's Interactive:
    # the 8k subset, its own accuracy target and sample count): scenario -> RoundBenchmark fields (for_scenario)
    scenario_overrides: Mapping[str, Mapping[str, object]] = dataclasses.field(default_factory=dict)
    # the checker's latency-constraint: scenario -> the p99 bound of a whole answer (ns) where it is end to end, not
    # per token (qwen3-vl-235b-a22b: Server 12 s, Interactive 1.5 s); user.conf's target_latency and the
    # submission checks read it here
    latency_constraint_ns: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # LoadGen settings the reference requires where the mlperf.conf LoadGen compiles has none for a scenario's model
    # name (qwen3-vl-235b-a22b-interactive: sample concatenation permutation, which the reference README enables in
    # every scenario and LoadGen's mlperf.conf sets for qwen3-vl-235b-a22b.* only): scenario -> {key: value}, written
    # into user.conf by the runner
    loadgen_conf: Mapping[str, Mapping[str, object]] = dataclasses.field(default_factory=dict)

    def for_scenario(self, scenario: str | None) -> "RoundBenchmark":
        """This entry as ``scenario`` sees it (its scenario_overrides applied)."""
        over = self.scenario_overrides.get(scenario or "")
        return dataclasses.replace(self, **over) if over else self

    def required_scenarios(self, system_type: str) -> tuple[str, ...] | None:
        """Scenarios a closed submission must hold for ``system_type``; None: benchmark not in that category."""
        st = ",".join(sorted(p.strip() for p in system_type.split(",")))
        req = {"edge": self.edge_scenarios, "datacenter": self.datacenter_scenarios,
               "datacenter,edge": self.both_scenarios}.get(st)
        return req if req else None

    def optional(self, system_type: str) -> tuple[str, ...]:
        """The optional scenarios for ``system_type`` (datacenter categories only)."""
        return self.optional_scenarios if "datacenter" in system_type else ()

    @property
    def scenarios(self) -> tuple[str, ...]:
        """Every scenario the round defines for this entry, in any category (optional ones included)."""
        return tuple(dict.fromkeys(self.edge_scenarios + self.datacenter_scenarios + self.both_scenarios
                                   + self.optional_scenarios))

    @property
    def accuracy_samples(self) -> int:
        """Samples an accuracy run must cover."""
        return self.accuracy_sample_count or self.dataset_size

    def accuracy_reference(self, metric: str) -> float | None:
        """The reference model's score behind a target, as the checker's table implies it: the middle of
        a [min, max] range (SDXL's CLIP and FID, the LLMs' output lengths), a length floor over 0.9, else
        the target over the variant's fraction (0.99 or 0.999). None for a metric without a target."""
        lo, hi = self.accuracy_min.get(metric), self.accuracy_max.get(metric)
        if lo is None:
            return hi
        if hi is not None:
            return (lo + hi) / 2
        if metric in ("GEN_LEN", "TOKENS_PER_SAMPLE"):
            return lo / 0.9
        return lo / {"99.9": 0.999, "95": 0.95}.get(self.accuracy_variant, 0.99)

    def delta_perc(self, metric: str) -> float:
        """Allowed TEST01 fallback accuracy delta in percent (checker default: 1, or 0.1 for -99.9)."""
        if metric in self.accuracy_delta_perc:
            return self.accuracy_delta_perc[metric]
        return 0.1 if self.accuracy_variant == "99.9" else 1.0


@dataclasses.dataclass(frozen=True)
class Round:
    version: str                               # "v6.1": what the official checker's --version takes
    loadgen_versions: tuple[str, str]          # (first, last) LoadGen release carrying this round's seeds; "" = open
    seeds: Mapping[str, int]                   # effective_* seed values every run must log
    audit_accuracy_log_rng_seed: int           # TEST01's accuracy_log_rng_seed
    min_duration_ms: int                       # every performance run
    benchmarks: Mapping[str, RoundBenchmark]   # key: submission name ("resnet", "bert-99")
    src_dir: str = "src"                       # "code" before v6.0
    results_hold_compliance: bool = True       # v6.x: compliance + measurements under results/<sys>/<bench>/<scen>/
    # submission names whose results may come from the MLCommons endpoints client (inference-endpoint) instead of
    # LoadGen's logs: the checker's ENDPOINTS_ALLOWED_MODELS, for the rounds its RESULT_FIELD_ENDPOINTS has
    endpoints_models: frozenset[str] = frozenset()

    def carried_by(self, loadgen_version: str) -> bool:
        """Does this LoadGen release carry the round's compiled-in seeds?"""
        lo, hi = self.loadgen_versions
        v = _vtuple(loadgen_version)
        return bool(v) and (not lo or v >= _vtuple(lo)) and (not hi or v <= _vtuple(hi))

    def entries(self, benchmark: str) -> list[RoundBenchmark]:
        """Entries run by harness package ``benchmark`` (one, or the 99 and 99.9 pair)."""
        return [b for b in self.benchmarks.values() if b.benchmark == benchmark]

    def entry(self, benchmark: str, accuracy_target: str | None = None, *, edge: bool = False) -> RoundBenchmark:
        """The entry for harness package ``benchmark`` at ``accuracy_target`` ("99" | "99.9").

        A round without a split for that benchmark ignores the target (SDXL, ResNet50). A benchmark with an
        edge twin (a ``-edge`` name of its own: llama3.1-8b-edge) gives the twin with ``edge``, else the main one."""
        found = self.entries(benchmark)
        if not found:   # code.common.rounds.entry() words this error with the rounds that have it
            raise HarnessError(f"benchmark '{benchmark}' is not part of MLPerf Inference {self.version}",
                               "pick another round with --round")
        twins = [b for b in found if b.name.endswith("-edge")]
        if twins:
            if edge:
                return twins[0]
            found = [b for b in found if b not in twins]
        elif edge:
            raise HarnessError(f"{benchmark} has no edge twin in {self.version}", "drop --category=edge")
        if not any(b.accuracy_variant for b in found):
            return found[0]          # no split (several names, e.g. an "-edge" twin: the first is the main one)
        want = accuracy_target or DEFAULT_ACCURACY_TARGET
        for b in found:
            if b.accuracy_variant == want:
                return b
        have = ", ".join(dict.fromkeys(b.accuracy_variant for b in found))
        raise HarnessError(f"{benchmark} has no {want} accuracy target in {self.version} (it has: {have})",
                           f"use --accuracy_target={found[0].accuracy_variant}")

    def by_submission_name(self, name: str) -> RoundBenchmark | None:
        return self.benchmarks.get(name)

    def accepts_endpoints(self, rb: RoundBenchmark) -> bool:
        """May ``rb``'s result be an endpoints-client report (config.yaml, result_summary.json, ...)?"""
        return rb.name in self.endpoints_models
