"""``systems/<system>_power.yaml``: the nameplate power of a system with power results (MLPerf Inference v6.1 on;
the checker's NAMEPLATE_POWER_PATH). The checker sums, for every component that lists ``PSUs`` and
``Min PSUs Needed``, the ``PowerCapacityWatts`` of that many of its largest PSUs (its design power); a
``system_power_capacity`` field in systems/<system>.json stands in for the file.

``make add_system`` writes a stub with TO FILL placeholders; the pre-flight (``check``) refuses it until every
one is replaced, and checks the numbers the checker sums.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

ROUNDS = ("v6.1",)          # the rounds whose checker reads it (submission_checker constants NAMEPLATE_POWER_PATH)
TO_FILL = "TO FILL: "


def path_for(systems_dir: Path, system: str) -> Path:
    return Path(systems_dir) / f"{system}_power.yaml"


def stub(system: str) -> str:
    return f"""# Nameplate power of {system} (MLPerf Inference v6.1 power submissions; see the template in
# mlcommons/inference tools/submission/submission_structure.md). List every component the measured system
# draws power through (servers, switches); for each, its PSUs as labelled and how many it needs to run.
# The checker's design power: per component, the PowerCapacityWatts of its 'Min PSUs Needed' largest PSUs.
# Replace every TO FILL; `make check_submission` refuses the file until then.
{system}:
- Rack 1:
  - Server 1:
    - Description: '{TO_FILL}the server model'
      Min PSUs Needed: '{TO_FILL}how many PSUs the server needs to run (an integer)'
      PSUs:
      - Name: PSU 1
        PowerCapacityWatts: '{TO_FILL}the watts on the PSU label (a number)'
      - Name: PSU 2
        PowerCapacityWatts: '{TO_FILL}the watts on the PSU label (a number)'
"""


def write_stub(systems_dir: Path, system: str, force: bool, log=print) -> int:
    from code.common.fileio import write_text

    p = path_for(systems_dir, system)
    if p.exists() and not force:
        return 0
    write_text(p, stub(system))
    log(f"[add_system] wrote {p} (nameplate power for v6.1 power submissions: fill in its TO FILL values)")
    return 1


def problems(data: Any) -> tuple[list[str], float]:
    """(what is wrong with a loaded nameplate YAML, its design power in watts)."""
    out: list[str] = []
    total = 0.0
    leaves = 0

    def placeholders(node: Any, where: str) -> None:
        if isinstance(node, str) and node.startswith(TO_FILL.strip()):
            out.append(f"{where} still says '{node}'")
        elif isinstance(node, dict):
            for k, v in node.items():
                placeholders(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                placeholders(v, f"{where}[{i}]")

    def walk(node: Any, where: str) -> None:
        nonlocal total, leaves
        if isinstance(node, dict):
            keys = {str(k).lower(): k for k in node}
            if "psus" in keys and "min psus needed" in keys:
                leaves += 1
                need, psus = node[keys["min psus needed"]], node[keys["psus"]]
                if not isinstance(psus, list) or not psus:
                    out.append(f"{where}: PSUs is not a list of PSUs")
                    return
                watts = [p.get("PowerCapacityWatts") if isinstance(p, dict) else None for p in psus]
                bad = [w for w in watts if isinstance(w, bool) or not isinstance(w, (int, float)) or w <= 0]
                if bad and not any(isinstance(w, str) and w.startswith(TO_FILL.strip()) for w in bad):
                    out.append(f"{where}: every PSU needs PowerCapacityWatts, a number of watts > 0")
                if isinstance(need, bool) or not isinstance(need, int) or not 1 <= need <= len(psus):
                    if not (isinstance(need, str) and need.startswith(TO_FILL.strip())):
                        out.append(f"{where}: Min PSUs Needed must be an integer from 1 to {len(psus)}")
                    return
                if not bad:
                    total += sum(sorted(watts, reverse=True)[:need])
                return
            for k, v in node.items():
                walk(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")

    placeholders(data, "")
    walk(data, "")
    if not leaves:
        out.append("no component lists both 'PSUs' and 'Min PSUs Needed' (the checker would count 0 W)")
    return out, total


def check(f, path: Path, needed: bool, desc: dict) -> None:
    """Pre-flight (code.common.submission.check): the nameplate file of one system. ``needed``: the round reads
    it and the system has power results (without them the checker never reads it, and neither does this)."""
    import yaml

    if not needed or "system_power_capacity" in desc:
        return
    if not path.is_file():
        f.error(path, "missing: a power result needs the system's nameplate power (make add_system writes a "
                      "stub to fill in; or set system_power_capacity in the systems JSON)")
        return
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        f.error(path, f"not YAML the checker can load ({type(e).__name__}): fix the file")
        return
    found, _ = problems(data)
    for why in found:
        f.error(path, why)
