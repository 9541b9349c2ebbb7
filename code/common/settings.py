"""What one run is: frozen workload settings (``RunSettings``) and the control values that steer one
invocation (``RunControl``). The two travel separately: nothing rewrites a setting to steer a run.

The config hash (``RunSettings.config_hash``) is the one documented hash of a run's workload: the
benchmark, scenario, system, config_ver and every resolved setting. Two runs with the same hash ran
the same workload; reports and staging use it to tell runs apart. Engines have their own build key
(``code.common.engines.build_key``), which covers only what changes an engine file.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import types
from typing import Any, Mapping

from code.common.benchmark import BenchmarkSpec

FAST_MIN_DURATION_MS = 60_000      # what --fast (--test_run) sets
ROUND_MIN_DURATION_MS = 600_000    # what LoadGen's mlperf.conf sets when nothing else does (every round's)


def min_duration_ms(values: Mapping[str, Any]) -> int:
    """The minimum duration a run's values make LoadGen use: --min_duration (a flag or config.json), else
    --fast's, else the round's. The one place the planning checks and the run's user.conf read it from."""
    return int(values.get("min_duration") or (FAST_MIN_DURATION_MS if values.get("fast") else ROUND_MIN_DURATION_MS))


def _NOT_SUBMITTABLE(default: Any) -> Any:
    """A RunControl value that makes a run unsubmittable when it differs from ``default``."""
    return dataclasses.field(default=default, metadata={"not_submittable": True})


@dataclasses.dataclass(frozen=True)
class RunControl:
    """Steers one invocation; never part of a run's settings or its config hash."""

    action: str = "run_harness"
    test_mode: str = "PerformanceOnly"
    audit_test: str | None = None          # set for compliance runs: the Server target QPS is derated
    verbose: bool = False
    log_dir: str | None = None
    overwrite: bool = False                # replace an existing run folder (audits replace theirs)
    # Values marked _NOT_SUBMITTABLE change what the SUT answers or how fast: a run made with any of them set
    # is never staged nor exported (``not_submittable``).
    use_cached_responses: bool = _NOT_SUBMITTABLE(False)   # TEST ONLY: the cheating SUT TEST04 exists to catch
    plant_first_token: bool = _NOT_SUBMITTABLE(False)      # TEST ONLY: first-token events carry a wrong token (TEST06)
    plant_output_limit: int = _NOT_SUBMITTABLE(0)          # TEST ONLY: answers cut at this many tokens (TEST07/TEST09)
    plant_prediction_shift: float = _NOT_SUBMITTABLE(0.0)  # TEST ONLY: performance-mode probabilities moved (TEST08)
    null_processor: bool = _NOT_SUBMITTABLE(False)         # benchmarks of the harness itself: no model work
    null_service_ms: float = _NOT_SUBMITTABLE(0.0)         # with null_processor: each batch sleeps this long
    slow_batch_ms: float = _NOT_SUBMITTABLE(0.0)           # TEST ONLY (executor=ray): each actor batch takes >= this
    smoke: bool = _NOT_SUBMITTABLE(False)                  # make submission --smoke: a short run of the whole flow
    force_rebuild: bool = False            # engines are built again (code.common.engines.rebuilding)
    find_probe_seconds: float = 10.0       # find_performance (code.common.tuning)
    find_confirm_seconds: float = 60.0
    write_config: bool = False

    @classmethod
    def from_cli(cls, cli: Mapping[str, Any], **over) -> "RunControl":
        names = {f.name for f in dataclasses.fields(cls)}
        return dataclasses.replace(cls(**{k: v for k, v in cli.items() if k in names}), **over)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def not_submittable(cls, recorded: Mapping[str, Any] | None, allow: tuple[str, ...] = ()) -> list[str]:
        """The test-only / harness-benchmark values a run's recorded ``control`` (metadata.json) has set, as
        ``--name=value``; empty for a run that may be submitted. ``allow``: names not counted (a smoke tree's
        own ``smoke``)."""
        if not isinstance(recorded, Mapping):
            return []
        return [f"--{f.name}={recorded[f.name]}" for f in dataclasses.fields(cls)
                if f.metadata.get("not_submittable") and f.name in recorded and recorded[f.name] != f.default
                and f.name not in allow]


def _jsonable(v: Any) -> Any:
    return dict(v) if isinstance(v, Mapping) else list(v) if isinstance(v, tuple) else v


class RunSettings:
    """Read-only workload settings. ``s.gpu_batch_size`` reads a field; ``s.sources[name]`` says where it
    came from ("cli", "configs/<bench>/<scenario>/config.json#<block>", or "schema default");
    ``s.notes`` holds what resolution wants the user to see (e.g. an architecture fallback block)."""

    __slots__ = ("spec", "scenario", "system", "values", "sources", "config_file", "config_ver", "notes")

    def __init__(self, spec: BenchmarkSpec, scenario: str, system: Any, values: Mapping[str, Any],
                 sources: Mapping[str, str], config_file: str | None = None, config_ver: str = "default",
                 notes: tuple[str, ...] = ()):
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "scenario", scenario)
        object.__setattr__(self, "system", system)            # code.common.systems.SystemMatch
        object.__setattr__(self, "values", types.MappingProxyType(dict(values)))
        object.__setattr__(self, "sources", types.MappingProxyType(dict(sources)))
        object.__setattr__(self, "config_file", config_file)
        object.__setattr__(self, "config_ver", config_ver)
        object.__setattr__(self, "notes", tuple(notes))

    def __setattr__(self, k, v):
        raise AttributeError("RunSettings is frozen")

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(f"no setting {name!r}") from None

    @property
    def benchmark(self) -> str:
        return self.spec.name

    @property
    def loadgen_model(self) -> str:
        """The mlperf.conf model name this run loads (``llama2-70b-interactive`` for Interactive)."""
        from code.common import scenarios

        model = self.spec.loadgen_model + ("-edge" if self.edge_twin else "")
        return scenarios.loadgen_model(model, self.scenario)

    @property
    def edge_twin(self) -> bool:
        """Is this run for the edge twin of a benchmark that has one (llama3.1-8b-edge: another dataset and
        LoadGen model)? Its ``category`` setting says so; "auto" means edge for a scenario only the edge
        category runs (SingleStream)."""
        from code.common import scenarios

        if not any(f.name == "category" for f in self.spec.fields):
            return False
        c = self.values.get("category")
        return c == "edge" or (c == "auto" and scenarios.get(self.scenario).categories == ("edge",))

    @property
    def system_id(self) -> str:
        return self.system.system_id

    @property
    def system_name(self) -> str:
        """Submission system name, e.g. ``H200-SXM-141GBx1_TRT`` (backend short name appended)."""
        from code.common.backends import backend_class

        name = f"{self.system.system_id}_{backend_class(self.backend).short}"
        if self.config_ver not in ("default", "high_accuracy", None):
            name += f"_{self.config_ver}"
        return name

    @property
    def log_name(self) -> str:
        """The benchmark's folder name in logs: the package name, with "-99.9" (yolo: "-95") for the accuracy
        variant other than 99 of a benchmark that has one (so two variants' runs never share a folder)."""
        from code.common import rounds

        if self.edge_twin:
            return f"{self.benchmark}-edge"
        return f"{self.benchmark}-{self.accuracy_target}" if self.accuracy_target != "99" \
            and rounds.has_variants(self.benchmark) else self.benchmark

    @property
    def accuracy_target(self) -> str:
        """"99", "99.9" or "95": --accuracy_target, else 99.9 under config_ver high_accuracy (NVIDIA's convention)."""
        given = self.values.get("accuracy_target") or ("99.9" if self.config_ver == "high_accuracy" else None)
        if given:
            return given
        from code.common import rounds       # a round that files only one variant (v6.1: llama2-70b-99.9) means it

        try:
            have = {e.accuracy_variant for e in rounds.current(self.values.get("round")).entries(self.benchmark)}
        except Exception:  # noqa: BLE001 - no LoadGen / unknown round: the plain default
            have = set()
        return "99.9" if have == {"99.9"} else "99"

    def round_entry(self):
        """This run's entry in the round table (submission name, accuracy targets, audits)."""
        from code.common import rounds

        return rounds.entry(self.benchmark, self.accuracy_target, self.values.get("round"),
                            edge=self.edge_twin).for_scenario(self.scenario)

    def batch_size(self, component: str | None = None) -> int:
        """gpu_batch_size for one component (mappings) or the single int."""
        bs = self.values["gpu_batch_size"]
        if isinstance(bs, dict):
            if component is None or component not in bs:
                raise KeyError(f"gpu_batch_size has no entry for component {component!r}: {bs}")
            return bs[component]
        return bs

    def config_hash(self) -> str:
        """The run's workload identity (see the module docstring)."""
        blob = json.dumps({"benchmark": self.benchmark, "scenario": self.scenario, "system": self.system_id,
                           "config_ver": self.config_ver, "values": dict(self.values)}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def replace(self, **values: Any) -> "RunSettings":
        """A copy with some values changed (source "override")."""
        v, src = dict(self.values), dict(self.sources)
        for k, x in values.items():
            v[k], src[k] = x, "override"
        return RunSettings(self.spec, self.scenario, self.system, v, src, self.config_file, self.config_ver, self.notes)

    def to_json(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "scenario": self.scenario, "system_id": self.system_id,
                "config_ver": self.config_ver, "values": {k: _jsonable(v) for k, v in self.values.items()},
                "sources": dict(self.sources), "config_file": self.config_file, "notes": list(self.notes)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any], spec: BenchmarkSpec, system: Any) -> "RunSettings":
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in d["values"].items()}
        return cls(spec, d["scenario"], system, values, d["sources"], d.get("config_file"),
                   d.get("config_ver", "default"), tuple(d.get("notes", ())))
