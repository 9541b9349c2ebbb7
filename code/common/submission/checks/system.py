"""systems/<system>.json, and the scenarios its system_type requires of each benchmark."""
from __future__ import annotations

from pathlib import Path

from code.common import rounds
from code.common.submission import sysdesc
from code.common.submission.checks.findings import Findings, read_json


def check_system(f: Findings, path: Path, division: str, submitter: str) -> dict:
    """The system description at ``path``; returns it ({} when missing or not JSON)."""
    desc = read_json(f, path, "missing: run make update_results",
                     "edit the staged systems JSON (or delete it to start again), then rerun make update_results "
                     "and make export_submission")
    if desc is None:
        return {}
    for k in sysdesc.REQUIRED_FIELDS:
        if k not in desc:
            f.error(path, f"field {k} is missing")
        elif sysdesc.is_placeholder(desc[k]):
            f.error(path, f"field {k} still says '{desc[k]}': edit the staged systems JSON and rerun make update_results")
        elif sysdesc.field_problem(k, desc[k]):
            continue                  # named below, with every other field of the wrong type
        elif sysdesc.is_empty(desc[k]):
            (f.error if k in sysdesc.MEANINGFUL_FIELDS else f.warn)(path, f"field {k} is empty")
    for why in sysdesc.field_problems(desc):
        f.error(path, f"{why} (fix: edit the staged systems JSON, then rerun make update_results and make "
                      "export_submission)")
        f.unreadable.append(f._rel(path))
    if str(desc.get("status", "")).lower() not in sysdesc.VALID_STATUS:
        f.error(path, f"status '{desc.get('status')}' is not one of {', '.join(sysdesc.VALID_STATUS)}")
    if desc.get("system_type") not in sysdesc.VALID_SYSTEM_TYPES:
        f.error(path, f"system_type '{desc.get('system_type')}' is not one of {', '.join(sysdesc.VALID_SYSTEM_TYPES)}")
    if str(desc.get("division", "")).lower() != division.lower():
        f.error(path, f"division is '{desc.get('division')}', the directory says '{division}'")
    if str(desc.get("submitter", "")).lower() != submitter.lower():
        f.error(path, f"submitter is '{desc.get('submitter')}', the directory says '{submitter}'")
    if str(desc.get("is_network", "false")).lower() == "true" and division == "closed":
        f.error(path, "is_network is true in the closed division")
    return desc


def check_scenarios(f: Findings, bench_dir: Path, rnd: rounds.Round, rb: rounds.RoundBenchmark, stype: str,
                    division: str, scens: list[str]) -> None:
    """Is ``rb`` a benchmark of ``stype``, and (closed division) are exactly its required scenarios there?"""
    if stype not in sysdesc.VALID_SYSTEM_TYPES:
        return                        # check_system reported it
    req = rb.required_scenarios(stype)
    if req is None:
        f.error(bench_dir, f"{rb.name} is not a '{stype}' benchmark in {rnd.version} "
                           f"(edge: {', '.join(rb.edge_scenarios) or '-'}; datacenter: "
                           f"{', '.join(rb.datacenter_scenarios) or '-'}); fix system_type")
    elif division == "closed":
        missing = [s for s in req if s not in scens]
        if missing:
            f.error(bench_dir, f"missing required scenario(s) for {stype}: {', '.join(missing)}")
        optional = rb.optional(stype)
        extra = [s for s in scens if s not in req and s not in optional]
        if optional and not any(s in scens for s in optional):
            f.error(bench_dir, f"{rb.name} for {stype} needs one of {' or '.join(optional)} besides "
                               f"{', '.join(req)}")
        if extra:
            f.error(bench_dir, f"scenario(s) not part of {rb.name} for {stype}: {', '.join(extra)}")
