"""Benchmark discovery and the alias table for MLPerf names.

A package under code/ whose __init__ defines ``SPEC`` is a benchmark. Nothing is registered by hand,
so adding a benchmark touches no framework file.
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path

from code.common.benchmark import Benchmark, BenchmarkSpec
from code.common.errors import HarnessError
from code.common.errors import did_you_mean
from code.common.fields import CORE_FIELDS, Registry

_CODE_DIR = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=None)
def all_specs() -> tuple[BenchmarkSpec, ...]:
    specs = []
    for mod in pkgutil.iter_modules([str(_CODE_DIR)]):
        if not mod.ispkg or mod.name == "common":
            continue
        pkg = importlib.import_module(f"code.{mod.name}")
        spec = getattr(pkg, "SPEC", None)
        if isinstance(spec, BenchmarkSpec):
            specs.append(spec)
    names: dict[str, str] = {}
    for s in specs:
        for n in {s.name, s.mlperf_name, *s.aliases}:
            key = n.lower()
            if key in names and names[key] != s.name:
                raise RuntimeError(f"benchmark name {n!r} claimed by both {names[key]} and {s.name}")
            names[key] = s.name
    return tuple(sorted(specs, key=lambda s: s.name))


def alias_table() -> dict[str, str]:
    """Every accepted spelling (lower-case) -> package name."""
    out = {}
    for s in all_specs():
        for n in (s.name, s.mlperf_name, *s.aliases):
            out[n.lower()] = s.name
    return out


def resolve(name: str) -> BenchmarkSpec:
    table = alias_table()
    pkg = table.get(name.strip().lower())
    if pkg is None:
        raise HarnessError(f"unknown benchmark '{name}'{did_you_mean(name, table)}",
                           f"use one of: {', '.join(s.name for s in all_specs())} "
                           f"(e.g. RUN_ARGS=\"--benchmarks={all_specs()[0].name if all_specs() else '<name>'}\")")
    return next(s for s in all_specs() if s.name == pkg)


def implementation(spec: BenchmarkSpec) -> type[Benchmark]:
    mod, attr = spec.impl.split(":")
    return getattr(importlib.import_module(mod), attr)


def registry() -> Registry:
    """The whole schema: core fields + every discovered benchmark's fields."""
    import dataclasses

    from code.common.llm.fields import LLM_FIELDS, MOE_FIELDS

    fields = list(CORE_FIELDS)
    llms = tuple(s.name for s in all_specs() if s.generates_tokens)
    moes = tuple(s.name for s in all_specs() if s.llm_shape is not None and s.llm_shape.experts)
    for group, names in ((LLM_FIELDS, llms), (MOE_FIELDS, moes)):
        if names:
            fields.extend(dataclasses.replace(f, benchmarks=names) for f in group)
    for spec in all_specs():
        fields.extend(spec.fields)
    return Registry(fields)
