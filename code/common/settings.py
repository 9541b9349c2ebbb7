"""Frozen run settings: the resolved value of every schema field for one benchmark × scenario."""
from __future__ import annotations

import hashlib
import json
import types
from typing import Any, Mapping

from code.common.benchmark import BenchmarkSpec


class RunSettings:
    """Read-only. ``s.gpu_batch_size`` reads a field; ``s.sources[name]`` says where it came from
    ("cli", "config.json:<path>#<block>", or "schema default")."""

    __slots__ = ("spec", "scenario", "system", "values", "sources", "config_file")

    def __init__(self, spec: BenchmarkSpec, scenario: str, system: Any, values: Mapping[str, Any],
                 sources: Mapping[str, str], config_file: str | None = None):
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "scenario", scenario)
        object.__setattr__(self, "system", system)            # code.common.systems.SystemMatch
        object.__setattr__(self, "values", types.MappingProxyType(dict(values)))
        object.__setattr__(self, "sources", types.MappingProxyType(dict(sources)))
        object.__setattr__(self, "config_file", config_file)

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
    def system_id(self) -> str:
        return self.system.system_id

    @property
    def system_name(self) -> str:
        """Submission system name, e.g. ``H200-SXM-141GBx1_TRT`` (backend short name appended)."""
        from code.common.backends import backend_class

        name = f"{self.system.system_id}_{backend_class(self.backend).short}"
        if self.config_ver not in ("default", None):
            name += f"_{self.config_ver}"
        return name

    def batch_size(self, component: str | None = None) -> int:
        """gpu_batch_size for one component (mappings) or the single int."""
        bs = self.values["gpu_batch_size"]
        if isinstance(bs, dict):
            if component is None or component not in bs:
                raise KeyError(f"gpu_batch_size has no entry for component {component!r}: {bs}")
            return bs[component]
        return bs

    def engine_values(self) -> dict[str, Any]:
        from code.common.fields import registry

        reg = registry()
        return {k: v for k, v in sorted(self.values.items()) if (f := reg.get(k)) is not None and f.engine}

    def config_hash(self) -> str:
        blob = json.dumps({"benchmark": self.benchmark, "scenario": self.scenario, "system": self.system_id,
                           "values": dict(self.values)}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "scenario": self.scenario, "system_id": self.system_id,
                "values": {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, tuple) else v)
                           for k, v in self.values.items()},
                "sources": dict(self.sources), "config_file": self.config_file}
