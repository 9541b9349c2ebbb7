"""``make add_system``: register the detected GPUs as data, without editing code.

  make add_system RUN_ARGS="--system_id=RTX-PRO-6000 --based_on=H100-SXM-80GB"

1. Detects the GPUs (``code.common.systems.detect``; MLPERF_FAKE_SYSTEM in tests): one model, a count.
2. Writes ``systems/known/<id>.json`` (checked by the same rules detection applies to user entries) and a
   submission description stub ``systems/<id>x<count>_TRT.json`` (never over a filled-in one), and the
   nameplate-power stub ``systems/<id>x<count>_TRT_power.yaml`` that v6.1 power results need
   (``code.common.power.nameplate``; never over a filled-in one).
3. Adds a ``"<id>x<count>"`` block to every ``configs/<benchmark>/<scenario>/config.json``: it extends the
   block of the nearest known system in that file (``--based_on``, else the same GPU model if known, else
   the closest architecture and memory) and scales its throughput settings by the GPU count; its
   ``description`` names the guesses to confirm with ``make find_performance``.

Idempotent: a second run with the same inputs changes nothing. A block or file that differs from what
this would write (edited by hand) is kept unless ``--force``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from code.common import paths
from code.common.errors import HarnessError, did_you_mean
from code.common.fileio import write_json, write_text
from code.common.power import nameplate
from code.common.systems.system_list import SYSTEM_ID, KnownSystems, SystemClass, check_user_entry

# Architecture from the marketing name when the GPU is unknown (newest families first).
_ARCH_BY_NAME = (("Blackwell", r"\bB\d{2,3}\b|GB\d{3}|Blackwell|RTX PRO"), ("Hopper", r"\bG?H\d{2,3}\b"),
                 ("Ada", r"\bL4\b|\bL40|Ada|RTX 40\d\d"), ("Ampere", r"\bA\d{1,3}\b|RTX A\d|RTX 30\d\d"))
SPREAD_KEYS = ("offline_expected_qps", "server_target_qps")    # per-system rates: scale with the GPU count


def propose_id(name: str, memory_mb: int) -> str:
    """"NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887 MB -> "RTX-PRO-6000-Blackwell-Server-Edition-96GB"."""
    base = re.sub(r"[^A-Za-z0-9]+", "-", re.sub(r"^NVIDIA\s+", "", name.strip(), flags=re.I)).strip("-")
    base = base[:56].rstrip("-") or "GPU"          # SYSTEM_ID's 64 characters, with room for "-<n>GB"
    gb = round(memory_mb / 1024) if memory_mb else 0
    return f"{base}-{gb}GB" if gb and f"{gb}GB" not in base else base


def arch_of(name: str) -> str | None:
    return next((a for a, pat in _ARCH_BY_NAME if re.search(pat, name)), None)


def _class_memory_gb(c: SystemClass) -> int:
    m = re.search(r"(\d+)GB", c.system_id)
    return int(m.group(1)) if m else 0


def nearest(gpu, based_on: str | None, new_id: str = "") -> tuple[SystemClass, str]:
    """(the known class the new system's blocks extend, why that one). Never the system being added: once
    registered it matches its own GPU, and its blocks would extend themselves."""
    classes = [c for c in KnownSystems.gpu_classes() if c.system_id.lower() != new_id.lower()]
    if based_on:
        by_id = {c.system_id.lower(): c for c in classes}
        c = by_id.get(based_on.lower()) or by_id.get(re.sub(r"x\d+$", "", based_on.lower()))
        if c is None:
            raise HarnessError(f"--based_on={based_on} is not a known system{did_you_mean(based_on, [x.system_id for x in classes])}",
                               "use a class id from `make info` or code/common/systems/system_list.py, e.g. "
                               "--based_on=H100-SXM-80GB")
        return c, "--based_on"
    same = next((c for c in classes if c.matches_gpu(gpu)), None)
    if same is not None:
        return same, "the same GPU model"
    arch = arch_of(gpu.name)
    if arch is None:
        raise HarnessError(f"cannot tell the architecture of '{gpu.name}' to pick the nearest known system",
                           'name one: make add_system RUN_ARGS="--based_on=H100-SXM-80GB" (any id from make info)')
    mem = round(gpu.memory_mb / 1024) if gpu.memory_mb else 0
    pool = [c for c in classes if c.arch == arch] or classes
    return min(pool, key=lambda c: (abs(_class_memory_gb(c) - mem), c.system_id)), f"closest {arch} GPU by memory"


def _base_block(blocks: dict, cls: SystemClass, count: int) -> str:
    for name in (f"{cls.system_id}x{count}", f"{cls.system_id}x1", cls.system_id, cls.arch, "default"):
        if name in blocks:
            return name
    return "default"


def _gpus_of(block: str) -> int:
    m = re.search(r"x(\d+)$", block)
    return int(m.group(1)) if m else 1


def block_for(path: Path, new_id: str, cls: SystemClass, count: int) -> dict:
    """The config block of ``<new_id>x<count>`` in one config file."""
    from code.common.configs import block_chain, load_file

    blocks, _ = load_file(path)
    base = _base_block(blocks, cls, count)
    out: dict = {"extends": base}
    chain = block_chain(blocks, base, path)
    guesses = []
    for key in SPREAD_KEYS:
        v = next((blocks[b][key] for b in chain if key in blocks[b]), None)
        if isinstance(v, (int, float)) and v:
            out[key] = round(v * count / _gpus_of(base), 3)
            guesses.append(key)
    out["description"] = (f"added by make add_system from {base} ({cls.system_id}); per-GPU batch sizes as there"
                          + (f"; {', '.join(guesses)} scaled by GPU count {count}/{_gpus_of(base)}" if guesses else "")
                          + ": guesses, confirm with make find_performance")
    return out


def _config_files() -> list[Path]:
    from code.common.benchmarks import all_specs

    out = []
    for spec in all_specs():
        for sc in spec.scenarios:
            p = paths.configs_dir() / spec.name / sc / "config.json"
            if p.is_file():
                out.append(p)
    return out


def add_system(cli: dict, log=print) -> int:
    from code.common.config_edit import set_block
    from code.common.configs import load_file
    from code.common.systems import detect

    info = detect()
    if not info.gpus:
        raise HarnessError("no NVIDIA GPU detected: CPU-only machines already match a CPU class (make info)",
                           "run make add_system on the GPU machine (nvidia-smi must list its GPUs)")
    names = sorted({g.name for g in info.gpus})
    if len(names) > 1:
        raise HarnessError(f"mixed GPU models detected ({', '.join(names)}): one system id covers one model",
                           "select one model with CUDA_VISIBLE_DEVICES=<its indices>, then make add_system")
    gpu, count = info.gpus[0], len(info.gpus)
    new_id = cli.get("system_id") or propose_id(gpu.name, gpu.memory_mb)
    if not re.fullmatch(SYSTEM_ID, new_id):       # before any file is named after it
        raise HarnessError(f"system id '{new_id[:70]}{'...' if len(new_id) > 70 else ''}' is not usable: 1 to 64 "
                           "letters, digits, '-', '_' or '.', starting with a letter or digit",
                           'make add_system RUN_ARGS="--system_id=My-GPU-96GB"')
    cls, why = nearest(gpu, cli.get("based_on"), new_id)
    force = bool(cli.get("force"))
    entry = {"system_id": new_id, "gpu_names": [gpu.name], "pci_ids": [f"0x{gpu.device_id.upper()}"],
             "arch": arch_of(gpu.name) or cls.arch, "counts": sorted({1, count}),
             **({"memory_mb": gpu.memory_mb} if gpu.memory_mb else {}),
             "description": f"added by make add_system; config blocks extend {cls.system_id} ({why})"}
    known = paths.systems_dir() / "known" / f"{new_id}.json"
    check_user_entry(entry, known)
    # every config file is read and its new text made before any file is written: a broken one stops the
    # whole command with nothing changed
    edits = []
    for path in _config_files():
        blocks, _ = load_file(path)
        name = f"{new_id}x{count}"
        block = block_for(path, new_id, cls, count)
        rel = path.relative_to(paths.configs_dir())
        if blocks.get(name) == block:
            continue
        if name in blocks and not force:
            log(f"[add_system] kept {rel}#{name}: edited by hand (--force replaces it)")
            continue
        edits.append((path, set_block(path, name, block), f"[add_system] {rel}#{name} extends {block['extends']}"))
    changed = _put_json(known, entry, force, log)
    for path, text, line in edits:
        write_text(path, text)
        changed += 1
        log(line)
    changed += _description_stub(new_id, count, force, log)
    changed += nameplate.write_stub(paths.systems_dir(), f"{new_id}x{count}_TRT", force, log)
    log(f"[add_system] {new_id}x{count} ({count} x {gpu.name}, {entry['arch']}) based on {cls.system_id} ({why}): "
        f"{changed} file(s) changed" + ("" if changed else " (already registered)"))
    log("[add_system] the rates are guesses: make find_performance RUN_ARGS=\"--benchmarks=... --write_config\"")
    return 0


def _put_json(path: Path, obj: dict, force: bool, log) -> int:
    if path.is_file():
        try:
            old = json.loads(path.read_text())
        except ValueError:
            old = None
        if old == obj:
            return 0
        if not force:
            log(f"[add_system] kept {path}: it differs from the detected system (--force replaces it)")
            return 0
    write_json(path, obj)
    log(f"[add_system] wrote {path}")
    return 1


def _description_stub(new_id: str, count: int, force: bool, log) -> int:
    """systems/<id>x<count>_TRT.json: the submission system description from the detected facts, with the
    fields to fill in left as placeholders (make update_results merges it; see systems/README.md)."""
    from code.common.submission import sysdesc
    from code.common.systems import detect
    from code.common.systems.facts import gpu_facts, host_facts

    path = paths.systems_dir() / f"{new_id}x{count}_TRT.json"
    if path.exists() and not force:
        return 0
    desc = sysdesc.describe(division="closed", submitter="OpenHarness", system_type="datacenter", system_info=detect(),
                            host=host_facts(), gpus_extra=gpu_facts(), software={},
                            backends={"tensorrt"}, harness_version="")
    write_json(path, desc)
    log(f"[add_system] wrote {path} (fill in: {', '.join(sysdesc.to_fill(desc)) or 'nothing'})")
    return 1
