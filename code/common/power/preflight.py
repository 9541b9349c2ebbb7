"""Pre-flight checks of a power result (code.common.submission.check): the files the official checker's power
check reads, and where the power logs came from."""
from __future__ import annotations

import json
from pathlib import Path

from code.common.power.ptd import POWER_DEV_COMMIT
from code.common.power.result import missing


def has_power(perf_dir: Path) -> bool:
    return (perf_dir / "power").is_dir()


def check_power_result(f, perf_dir: Path) -> None:
    """``perf_dir``: results/<system>/<benchmark>/<scenario>/performance."""
    if not has_power(perf_dir):
        return
    for rel in missing(perf_dir):
        f.error(perf_dir / rel, "missing (a power result needs it; rerun the power measurement)")
    for side in ("client", "server"):
        p = perf_dir / "power" / f"{side}.json"
        try:
            j = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if j.get("stand_in"):
            f.error(p, "made by the stand-in power server (a replayed trace, not a measurement): never submittable")
        elif any(str(m).startswith("code.common.power") for m in j.get("modules") or {}):
            f.error(p, f"made by the harness's own power {side}; the checker accepts only mlcommons/power-dev's "
                       f"(commit {POWER_DEV_COMMIT[:12]}): measure with power-dev's client and server")
