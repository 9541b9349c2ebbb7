"""What one MLPerf Inference round requires of a submission: names, scenarios, seeds, sizes.

These are facts read from the official v6.1 submission checker and compliance tests
(mlcommons/inference at b66003e, "Add constants for v6.1"); the table is ours, no checker code is
imported. ``current()`` returns the round whose seeds the installed LoadGen carries
(mlcommons-loadgen 6.0.x -> v6.1); ``tests/test_submission_rounds.py`` keeps the two in step.

Keys of ``Round.benchmarks`` are the harness's ``BenchmarkSpec.mlperf_name`` values.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

from code.common.errors import HarnessError


@dataclasses.dataclass(frozen=True)
class RoundBenchmark:
    """One benchmark as a round sees it."""

    name: str                                  # directory name in the submission tree, e.g. "resnet"
    loadgen_model: str                         # model key in LoadGen's mlperf.conf, e.g. "resnet50"
    edge_scenarios: tuple[str, ...] = ()       # required scenarios for system_type "edge" (empty: not edge)
    datacenter_scenarios: tuple[str, ...] = () # required scenarios for "datacenter" (empty: not datacenter)
    both_scenarios: tuple[str, ...] = ()       # required for "datacenter,edge"
    dataset_size: int = 0                      # samples an accuracy run must cover
    performance_sample_count: int = 0          # minimum effective_performance_sample_count
    compliance_tests: tuple[str, ...] = ()     # audits a closed submission must include
    test01_sampling_target: int = 0            # accuracy_log_sampling_target of TEST01
    test04_extra: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)  # scenario -> key -> value
    accuracy_delta_perc: Mapping[str, float] = dataclasses.field(default_factory=dict)      # TEST01 fallback deltas
    accuracy_metrics: tuple[str, ...] = ()     # metric names as the checker parses them from accuracy.txt
    accuracy_min: Mapping[str, float] = dataclasses.field(default_factory=dict)
    accuracy_max: Mapping[str, float] = dataclasses.field(default_factory=dict)
    extra_accuracy_files: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # dir -> stems

    def required_scenarios(self, system_type: str) -> tuple[str, ...] | None:
        """Scenarios a closed submission must hold for ``system_type``; None: benchmark not in that category."""
        st = ",".join(sorted(p.strip() for p in system_type.split(",")))
        req = {"edge": self.edge_scenarios, "datacenter": self.datacenter_scenarios,
               "datacenter,edge": self.both_scenarios}.get(st)
        return req if req else None

    def delta_perc(self, metric: str) -> float:
        """Allowed TEST01 fallback accuracy delta in percent (checker default: 1, or 0.1 for -99.9)."""
        if metric in self.accuracy_delta_perc:
            return self.accuracy_delta_perc[metric]
        return 0.1 if "99.9" in self.name else 1.0


@dataclasses.dataclass(frozen=True)
class Round:
    version: str                               # "v6.1": what the official checker's --version takes
    loadgen_versions: tuple[str, ...]          # LoadGen version prefixes whose compiled-in seeds are this round's
    seeds: Mapping[str, int]                   # effective_* seed values every run must log
    audit_accuracy_log_rng_seed: int           # TEST01's accuracy_log_rng_seed
    min_duration_ms: int                       # every performance run
    benchmarks: Mapping[str, RoundBenchmark]   # key: BenchmarkSpec.mlperf_name
    result_field: Mapping[str, str]            # scenario -> detail-log key of the headline metric
    src_dir: str = "src"                       # "code" before v6.0
    results_hold_compliance: bool = True       # v6.x: compliance + measurements under results/<sys>/<bench>/<scen>/

    def benchmark(self, mlperf_name: str) -> RoundBenchmark:
        try:
            return self.benchmarks[mlperf_name]
        except KeyError:
            raise HarnessError(f"benchmark '{mlperf_name}' is not part of MLPerf Inference {self.version}",
                               f"submit only: {', '.join(sorted(self.benchmarks))}") from None

    def by_submission_name(self, name: str) -> RoundBenchmark | None:
        return next((b for b in self.benchmarks.values() if b.name == name), None)


_SEEDS_V61 = {"qsl_rng_seed": 2085463073848966840,
              "sample_index_rng_seed": 2747215439041700203,
              "schedule_rng_seed": 16159082839903944936}

V6_1 = Round(
    version="v6.1",
    loadgen_versions=("6.0.",),
    seeds=_SEEDS_V61,
    audit_accuracy_log_rng_seed=720381539243781796,
    min_duration_ms=600_000,
    result_field={"Offline": "result_samples_per_second", "SingleStream": "early_stopping_latency_ss",
                  "MultiStream": "early_stopping_latency_ms", "Server": "result_completed_samples_per_sec"},
    benchmarks={
        # From v5.1 on, ResNet50 is filed as "resnet"; it is an edge-only benchmark in v6.1.
        "resnet50": RoundBenchmark(
            name="resnet", loadgen_model="resnet50",
            edge_scenarios=("SingleStream", "MultiStream", "Offline"),
            both_scenarios=("SingleStream", "MultiStream", "Offline", "Server"),
            dataset_size=50_000, performance_sample_count=1024,
            compliance_tests=("TEST01", "TEST04"), test01_sampling_target=4096,
            accuracy_metrics=("acc",), accuracy_min={"acc": 76.46 * 0.99}),
        # SDXL has no -99/-99.9 split; in v6.1 it is edge (SingleStream, Offline).
        "stable-diffusion-xl": RoundBenchmark(
            name="stable-diffusion-xl", loadgen_model="stable-diffusion-xl",
            edge_scenarios=("SingleStream", "Offline"),
            both_scenarios=("SingleStream", "Offline", "Server"),
            dataset_size=5000, performance_sample_count=5000,
            compliance_tests=("TEST01", "TEST04"), test01_sampling_target=128,
            test04_extra={"Offline": {"min_query_count": 500}},
            accuracy_delta_perc={"CLIP_SCORE": 1.0, "FID_SCORE": 2.0},
            accuracy_metrics=("CLIP_SCORE", "FID_SCORE"),
            accuracy_min={"CLIP_SCORE": 31.68631873, "FID_SCORE": 23.01085758},
            accuracy_max={"CLIP_SCORE": 31.81331801, "FID_SCORE": 23.95007626},
            # text_to_image/tools/sample_ids.txt of v6.1: the accuracy run saves these images.
            extra_accuracy_files={"images": ("4475", "3627", "1046", "4937", "3867",
                                             "1671", "3789", "1206", "4111", "3093")}),
    },
)

ROUNDS = {r.version: r for r in (V6_1,)}


def loadgen_version() -> str:
    try:
        from importlib.metadata import version

        return version("mlcommons-loadgen")
    except Exception:  # noqa: BLE001 - not installed: report plainly below
        return ""


def current(version: str | None = None) -> Round:
    """The round to file for: ``version`` if given, else the one matching the installed LoadGen."""
    if version:
        if version not in ROUNDS:
            raise HarnessError(f"submission round '{version}' is not known here",
                               f"use one of: {', '.join(ROUNDS)}")
        return ROUNDS[version]
    lg = loadgen_version()
    for r in ROUNDS.values():
        if any(lg.startswith(p) for p in r.loadgen_versions):
            return r
    raise HarnessError(f"installed LoadGen {lg or '(none)'} carries no round this harness knows",
                       "pip install mlcommons-loadgen==6.0.17, or pass --version=" + "|".join(ROUNDS))
