"""Strict RUN_ARGS parsing from the schema. Unknown or inapplicable flags are errors, never ignored."""
from __future__ import annotations

from typing import Any, Sequence

from code.common.errors import HarnessError, did_you_mean, nearest
from code.common.fields import ALL, Field, Registry, parse_list
from code.common.scenarios import NAMES as SCENARIOS


# flags of the former submission-tool parsers that now have one name for every action
RENAMED = {"version": "round"}


def parse_argv(argv: Sequence[str], reg: Registry) -> dict[str, Any]:
    """``--key=value``, ``--key value`` or bare ``--flag`` → {field name: typed value}."""
    out: dict[str, Any] = {}
    raw: dict[str, str] = {}
    argv = list(argv)
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if not tok.startswith("--") or tok == "--":
            raise HarnessError(f"unexpected argument '{tok}': flags look like --name=value",
                               "make run_harness RUN_ARGS=\"--benchmarks=resnet50 --scenarios=Offline\"")
        key, eq, val = tok[2:].partition("=")
        key = key.replace("-", "_")
        f = reg.get(key)
        if f is None or not f.cli:
            hint = f" (it is --{RENAMED[key]}{'=' + val if val else ''} for every action)" if key in RENAMED else \
                did_you_mean(key, [n for n in reg.names(cli=True)] + [a for x in reg if x.cli for a in x.aliases])
            raise HarnessError(f"unknown flag --{key}{hint}",
                               "run `python -m code.main --help` (or see README) for the flags")
        if not eq:
            if f.flag_value is not None and (i >= len(argv) or argv[i].startswith("--")):
                val = f.flag_value
            elif i < len(argv) and not argv[i].startswith("--"):
                val = argv[i]
                i += 1
            else:
                raise HarnessError(f"flag --{key} needs a value", f"pass --{f.name}=<{f.type_name}>")
        if f.name in out:
            raise HarnessError(f"flag --{f.name} given twice ({raw[f.name]!r} and {val!r})", f"keep one --{f.name}")
        try:
            out[f.name] = f.coerce(val)
        except ValueError as e:
            raise HarnessError(f"bad value for --{f.name}: {e}", _fix_for(f)) from None
        if out[f.name] == () and f.parse is parse_list:   # `--scenarios=` is a typo, not "all"
            raise HarnessError(f"--{f.name} is empty", f"give it one or more values (--{f.name}=<a,b>), "
                               f"or drop --{f.name}" + (" to use its default" if f.default != () else ""))
        raw[f.name] = str(val)
    return out


def _fix_for(f: Field) -> str:
    if f.maximum is not None and f.maximum == f.minimum:
        return f"use --{f.name}={f.maximum:g} or drop it: {f.help}"
    if f.choices:
        return f"use --{f.name}={'|'.join(f.choices)}"
    return f"use --{f.name}=<{f.type_name}>"


def parse_scenarios(names: Sequence[str], supported: Sequence[str], benchmark: str = "this benchmark") -> list[str]:
    out = []
    if ALL in (n.lower() for n in names):
        return list(supported)
    for n in names:
        canon = nearest(n, SCENARIOS)
        if canon is None or canon.lower() != n.lower():
            raise HarnessError(f"unknown scenario '{n}'{did_you_mean(n, SCENARIOS)}",
                               f"use --scenarios= one or more of {','.join(SCENARIOS)}")
        if canon not in out:
            out.append(canon)
    for s in out:
        if s not in supported:
            raise HarnessError(f"scenario {s} is not supported by {benchmark} (supported: {', '.join(supported)})",
                               f"use --scenarios={','.join(supported)} for {benchmark}, or leave it out of --benchmarks")
    return out or list(supported)


def check_applicable(cli: dict[str, Any], reg: Registry, action: str, benchmarks: Sequence[str],
                     scenarios_per_bench: dict[str, list[str]]) -> None:
    """A flag given for an action, benchmark or scenario it cannot affect is an error."""
    all_scen = {s for ss in scenarios_per_bench.values() for s in ss}
    for name in cli:
        f = reg.get(name)
        if f.actions is not None and action not in f.actions:
            raise HarnessError(f"flag --{name} does not apply to --action={action} (it applies to: {', '.join(f.actions)})",
                               f"drop --{name}, or use --action={f.actions[0]}")
        if f.benchmarks is not None and not set(f.benchmarks) & set(benchmarks):
            raise HarnessError(f"flag --{name} applies only to benchmarks {', '.join(f.benchmarks)}, not {', '.join(benchmarks)}",
                               f"drop --{name}, or add --benchmarks={f.benchmarks[0]}")
        scope = f.scenario_scope()
        if scope is not None and action in ("generate_engines", "run_harness", "run", "run_audit_harness", "info",
                                            "find_performance") \
                and not set(scope) & all_scen:
            raise HarnessError(f"flag --{name} applies only to scenario {', '.join(scope)}, not "
                               f"{', '.join(sorted(all_scen))}",
                               f"drop --{name}, or add --scenarios={scope[0]}")


def render_help(reg: Registry) -> str:
    lines = ["usage: python -m code.main --action=<action> [--flag=value ...]", "",
             "Every flag below is also documented in docs/flags.md (generated from code/common/fields.py).", ""]
    for f in reg:
        if not f.cli:
            continue
        names = ", ".join(f"--{n}" for n in (f.name, *f.aliases))
        meta = f.type_name + (f" ({f.unit})" if f.unit else "")
        lines.append(f"  {names} <{meta}>  default={f.default!r}")
        lines.append(f"      {f.help}" + (f" Choices: {', '.join(f.choices)}." if f.choices else ""))
    return "\n".join(lines)


def render_markdown(reg: Registry) -> str:
    rows = ["# Flags and config.json keys", "",
            "Generated by `python -m code.main --action=docs` from `code/common/fields.py`. Do not edit by hand.", "",
            "| name | type | default | flag | config.json | applies to | help |", "|---|---|---|---|---|---|---|"]
    for f in reg:
        scope = []
        if f.actions:
            scope.append("actions: " + ", ".join(f.actions))
        if f.scenario_scope():
            scope.append("scenarios: " + ", ".join(f.scenario_scope()))
        if f.benchmarks:
            scope.append("benchmarks: " + ", ".join(f.benchmarks))
        names = f"`{f.name}`" + "".join(f" (alias `{a}`)" for a in f.aliases)
        helptext = f.help + (f" Choices: {', '.join(f.choices)}." if f.choices else "") + (f" Unit: {f.unit}." if f.unit else "")
        rows.append(f"| {names} | {f.type_name} | `{f.default!r}` | {'yes' if f.cli else 'no'} | "
                    f"{'yes' if f.config else 'no'} | {'; '.join(scope) or 'all'} | {helptext.replace('|', '/')} |")
    return "\n".join(rows) + "\n"
