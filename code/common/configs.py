"""configs/<benchmark>/<Scenario>/config.json: validation and precedence.

File shape::

    {"default": {"gpu_batch_size": 8, "config_ver": {"high_accuracy": {"precision": "fp16"}}},
     "H200-SXM-141GBx1": {"extends": "default", "offline_expected_qps": 2.1}}

A block is found by exact system id ("H200-SXM-141GBx1", "AMD-EPYC-2c") or class id ("AMD-EPYC").
A block may hold "config_ver": {"high_accuracy": {...}} and "model_variant": {"tiny": {...}}
sub-blocks that override it for that --config_ver / --model_variant.
Precedence: CLI > model_variant sub-blocks > config_ver sub-blocks > system block > blocks it
extends > "default" > schema default (sub-blocks of a more specific block win among themselves).
Which block a system reads, and the fallbacks to a one-GPU or architecture block: ``pick_block``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from code.common import paths
from code.common.benchmark import BenchmarkSpec
from code.common.errors import HarnessError
from code.common.errors import did_you_mean
from code.common.fields import CONFIG_VERS, VARIANTS, Registry

META_KEYS = ("extends", "config_ver", "model_variant", "description")
# sub-blocks that override a block for one --config_ver or one --model_variant
VARIANT_KEYS = ("config_ver", "model_variant")


def config_path(bench: str, scenario: str) -> Path:
    return paths.configs_dir() / bench / scenario / "config.json"


def _rel(path: Path) -> Path:
    """``path`` relative to the repository when it lies inside it (for notes and value sources)."""
    return path.relative_to(paths.REPO_ROOT) if path.is_relative_to(paths.REPO_ROOT) else path


def _line_of(text: str, key: str, after: "int | _Where" = 0) -> int | None:
    after = after.pos if isinstance(after, _Where) else after
    m = re.compile(r'"' + re.escape(key) + r'"\s*:').search(text, after)
    return text.count("\n", 0, m.start()) + 1 if m else None


def _no_duplicates(path: Path, text: str):
    """object_pairs_hook for json.loads: a key given twice in one object is an error (json would keep
    the last one silently)."""
    def hook(pairs):
        out = {}
        for k, v in pairs:
            if k in out:
                lines = [n for n, ln in enumerate(text.splitlines(), 1) if re.search(r'"' + re.escape(k) + r'"\s*:', ln)]
                where = f"{path}:{lines[1]}" if len(lines) > 1 else str(path)
                raise HarnessError(f"{where}: key '{k}' given twice in one block (JSON keeps only the last)",
                                   f"keep one '{k}' in {path}")
            out[k] = v
        return out
    return hook


def load_file(path: Path) -> tuple[dict, str]:
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise HarnessError(f"{path}: config file missing",
                           "create it with at least {\"default\": {}} (see configs/resnet50/Offline/config.json)") from None
    except UnicodeDecodeError as e:
        raise HarnessError(f"{path}: not UTF-8 text (byte {e.start})", f"save {path} as UTF-8 JSON") from None
    except OSError as e:     # a folder, no permission, ...
        raise HarnessError(f"{path}: cannot read the config file: {e.strerror}",
                           f"make {path} a readable JSON file (see configs/resnet50/Offline/config.json)") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates(path, text))
    except json.JSONDecodeError as e:
        raise HarnessError(f"{path}:{e.lineno}: bad JSON: {e.msg} (column {e.colno})", f"correct line {e.lineno} of {path}; check it with: python -m json.tool {path}") from None
    if not isinstance(data, dict) or "default" not in data or not all(isinstance(v, dict) for v in data.values()):
        raise HarnessError(f"{path}: expected an object of blocks with a \"default\" block",
                           "see configs/resnet50/Offline/config.json for the shape")
    if "extends" in data["default"]:
        line = _line_of(text, "extends", text.find('"default"'))
        raise HarnessError(f"{path}:{line}: the \"default\" block cannot extend another block (every chain "
                           "ends at \"default\")",
                           f"remove 'extends' from the default block in {path}")
    return data, text


def validate_file(path: Path, reg: Registry, scenario: str, bench: str) -> dict:
    """Check every key of every block; returns the parsed (typed) blocks."""
    data, text = load_file(path)
    typed: dict[str, dict] = {}
    for block, body in data.items():
        pos = _Where(text, block)      # where the block starts: looked up only for an error message
        typed[block] = {}
        for vk in VARIANT_KEYS:
            if not isinstance(body.get(vk, {}), dict):
                raise HarnessError(f"{path}:{_line_of(text, vk, pos)}: [{block}] {vk} must be an object "
                                   "of variant -> overrides", f"fix {path}")
        for k, v in body.items():
            if k in ("extends", "description"):
                if not isinstance(v, str):
                    raise HarnessError(f"{path}:{_line_of(text, k, pos)}: [{block}] {k} must be a string", f"fix {path}")
                typed[block][k] = v
                continue
            if k in VARIANT_KEYS:
                continue
            typed[block][k] = _typed(path, text, pos, block, k, v, reg, scenario, bench)
        for vk, allowed in (("config_ver", CONFIG_VERS), ("model_variant", VARIANTS)):
            typed[block][vk] = {}
            for ver, over in body.get(vk, {}).items():
                if ver not in allowed:
                    raise HarnessError(f"{path}:{_line_of(text, ver, pos)}: [{block}] unknown {vk} '{ver}'"
                                       f"{did_you_mean(ver, allowed)}", f"use one of {', '.join(allowed)}")
                if not isinstance(over, dict):
                    raise HarnessError(f"{path}: [{block}] {vk}.{ver} must be an object", f"fix {path}")
                typed[block][vk][ver] = {k: _typed(path, text, pos, f"{block}.{vk}.{ver}", k, v, reg, scenario, bench)
                                         for k, v in over.items()}
    check_chains(typed, path)      # every block, not only this system's: a broken one fails on every machine
    return typed


class _Where:
    """A block's offset in the file text, found on first use: error messages need it (``_line_of``), a valid
    file never does (finding every block of an 8 MB file up front took quadratic time)."""

    def __init__(self, text: str, block: str):
        self.text, self.block, self._pos = text, block, None

    @property
    def pos(self) -> int:
        if self._pos is None:
            self._pos = max(0, self.text.find(f'"{self.block}"'))
        return self._pos


def _typed(path, text, pos, block, k, v, reg: Registry, scenario, bench):
    f = reg.get(k)
    if f is not None and f.config:
        scope, benches = f.scenario_scope(), f.benchmarks
        if (scope is None or scenario in scope) and (benches is None or bench in benches):
            try:
                return f.coerce(v)
            except ValueError:
                pass                   # said below, with its line
    line = _line_of(text, k, pos)
    where = f"{path}:{line}" if line else str(path)
    if f is None or not f.config:
        raise HarnessError(f"{where}: [{block}] unknown key '{k}'{did_you_mean(k, reg.names(config=True))}",
                           f"fix the key in {path}; `python -m code.main --action=docs` lists valid keys")
    scope = f.scenario_scope()
    if scope is not None and scenario not in scope:
        raise HarnessError(f"{where}: [{block}] key '{k}' applies only to {', '.join(scope)}, not {scenario}",
                           f"remove '{k}' from {path}")
    if f.benchmarks is not None and bench not in f.benchmarks:
        raise HarnessError(f"{where}: [{block}] key '{k}' applies only to {', '.join(f.benchmarks)}", f"remove '{k}' from {path}")
    try:
        return f.coerce(v)
    except ValueError as e:
        raise HarnessError(f"{where}: [{block}] bad value for '{k}': {e}", f"fix '{k}' in {path}") from None


def block_chain(blocks: dict, start: str, path: Path) -> list[str]:
    """[start, parent, ..., "default"] following "extends"."""
    out, seen, cur = [], set(), start
    while True:
        if cur in seen:
            raise HarnessError(f"{path}: 'extends' cycle: {' -> '.join(out + [cur])}", f"fix 'extends' in {path}")
        if cur not in blocks:
            raise HarnessError(f"{path}: block '{out[-1] if out else start}' extends unknown block '{cur}'"
                               f"{did_you_mean(cur, blocks)}", f"fix 'extends' in {path}")
        out.append(cur)
        seen.add(cur)
        if cur == "default":
            return out
        cur = blocks[cur].get("extends", "default")


def check_chains(blocks: dict, path: Path) -> None:
    """Every block's "extends" chain ends at "default" (block_chain's errors), in time linear in the blocks:
    a chain is walked only up to a block already known to reach "default"."""
    good = {"default"}
    for start in blocks:
        chain, cur = set(), start
        while cur not in good:
            if cur in chain or cur not in blocks:
                block_chain(blocks, start, path)     # raises, with the message
            chain.add(cur)
            cur = blocks[cur].get("extends", "default")
        good |= chain


ARCH_NOTE = "confirm the values with a trial run (make run_harness RUN_ARGS=\"... --fast\"), or add a block for it"


def pick_block(blocks: dict, system, scenario: str, path: Path) -> tuple[str, int, str | None]:
    """The block a system reads, how many GPUs that block was written for, and a note when it is a fallback.

    Rule (documented in configs/README.md): the exact system id ("H100-NVL-94GBx2"), else its class id
    ("AMD-EPYC"); for a GPU system then the same class at one GPU ("H100-NVL-94GBx1"), else its
    architecture's block ("Hopper"). A fallback to a one-GPU block scales the throughput setting by
    the GPU count in the scenarios that spread work over every GPU (Offline, Server). CPU systems
    fall back to "default"."""
    if system.system_id in blocks:
        return system.system_id, system.gpu_count or 1, None
    if system.class_id in blocks:
        return system.class_id, system.gpu_count or 1, None
    if system.accelerator != "gpu":
        return "default", 1, None
    for name, kind in ((f"{system.class_id}x1", "one-GPU"), (system.arch, f"{system.arch} architecture")):
        if name in blocks:
            note = f"{_rel(path)}: no block for {system.system_id}; using the {kind} block '{name}'"
            return name, 1, note
    raise HarnessError(f"{path}: no block for system '{system.system_id}', '{system.class_id}x1' or its "
                       f"architecture '{system.arch}'",
                       f"add a \"{system.system_id}\": {{\"extends\": \"default\", ...}} block to {path}")


def config_vers(spec: BenchmarkSpec, scenario: str, system, reg: Registry) -> list[str]:
    """Every config_ver the system's block chain defines ("default" first): ``--config_ver=all``."""
    path = config_path(spec.name, scenario)
    blocks = validate_file(path, reg, scenario, spec.name)
    out = ["default"]
    for name in block_chain(blocks, pick_block(blocks, system, scenario, path)[0], path):
        out += [v for v in blocks[name]["config_ver"] if v not in out]
    return out


def resolve(spec: BenchmarkSpec, scenario: str, system, reg: Registry, cli: dict[str, Any], config_ver: str,
            derived: dict[str, tuple[Any, str]] | None = None) -> tuple[dict, dict, str, list[str]]:
    """(values, sources, config path, notes) for one benchmark × scenario × config_ver on ``system``
    (a SystemMatch). Values hold workload fields only (no control fields)."""
    from code.common import scenarios

    path = config_path(spec.name, scenario)
    blocks = validate_file(path, reg, scenario, spec.name)
    fields = [f for f in reg if not f.control]
    values: dict[str, Any] = {f.name: f.default for f in fields}
    sources: dict[str, str] = {f.name: "schema default" for f in fields}
    for k, (v, src) in (derived or {}).items():
        values[k], sources[k] = v, src
    block, block_gpus, note = pick_block(blocks, system, scenario, path)
    notes = [note] if note else []
    chain = block_chain(blocks, block, path)
    found_ver = config_ver == "default"
    variant = cli.get("model_variant", "reference")
    rel = _rel(path)
    for name in reversed(chain):              # plain values: default first, most specific last
        for k, v in blocks[name].items():
            if k not in META_KEYS:
                values[k], sources[k] = v, f"{rel}#{name}"
    for vk, want in (("config_ver", config_ver), ("model_variant", variant)):   # then the sub-blocks
        for name in reversed(chain):
            over = blocks[name][vk].get(want)
            if over is None:
                continue
            found_ver = found_ver or vk == "config_ver"
            for k, v in over.items():
                values[k], sources[k] = v, f"{rel}#{name}.{vk}.{want}"
    if not found_ver:
        raise HarnessError(f"{path}: config_ver '{config_ver}' is not defined for {block} (blocks: {' -> '.join(chain)})",
                           f"add \"config_ver\": {{\"{config_ver}\": {{...}}}} to the {block} block, or drop --config_ver")
    sc = scenarios.get(scenario)
    gpus = system.gpu_count if system.accelerator == "gpu" else 1
    if sc.scales_with_devices and gpus != block_gpus and values.get(sc.sizing):
        values[sc.sizing] = values[sc.sizing] * gpus / block_gpus
        sources[sc.sizing] += f" x{gpus}/{block_gpus} GPUs"
        notes.append(f"{sc.sizing} scaled from the {block_gpus}-GPU block to {gpus} GPUs ({ARCH_NOTE})")
    elif note:
        notes[-1] += f" ({ARCH_NOTE})"
    for k, v in cli.items():
        if k in values:
            values[k], sources[k] = v, "cli"
    return values, sources, str(path), notes
