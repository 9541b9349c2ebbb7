"""make submission: the plan against the round table (--dry_run), and a tiny smoke plan stopped with SIGTERM midway
and run again (it finishes without redoing what was finished), staged only into its own smoke tree."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import PY, REPO, run_main


def _dry_run_keys(version: str, system_type: str) -> tuple[list[str], str]:
    r = run_main("--action=submission", f"--round={version}", f"--system_type={system_type}", "--dry_run")
    assert r.returncode == 0, r.stdout + r.stderr
    keys = re.findall(r"^  (\S+/\S+/\S+)\s+~\d", r.stdout, re.M)
    assert re.search(r"plan for .*: \d+ items .* estimated \d", r.stdout), r.stdout
    return keys, r.stdout


@pytest.mark.parametrize("version,system_type", [("v6.1", "edge"), ("v5.0", "datacenter")])
def test_dry_run_plan_is_the_round_table(version, system_type, tmp_path):
    """Every required scenario of every entry the category has, an accuracy and a performance run each and every
    audit the round names for it, nothing else; nothing is run."""
    from code.common import benchmarks as B, rounds

    keys, out = _dry_run_keys(version, system_type)
    rnd = rounds.current(version)
    packages = {s.name for s in B.all_specs()}
    want = []
    for rb in rnd.benchmarks.values():
        req = rb.required_scenarios(system_type)
        if not req or rb.benchmark not in packages:
            continue
        if "interactive" in rb.name:          # v5.0: staging files llama2_70b's runs under llama2-70b-*
            assert f"{rb.name}: this harness files" in out
            continue
        assert not rb.optional(system_type)   # these two categories have no "one of" scenarios
        for sc in req:
            want += [f"{rb.name}/{sc}/{k}" for k in ("accuracy", "performance", *rb.compliance_tests)]
    assert sorted(keys) == sorted(want)
    assert len(keys) == len(set(keys))
    if version == "v5.0":                     # all nine of the original benchmarks
        assert {k.split("/")[0].rsplit("-99", 1)[0] for k in keys} >= {
            "resnet", "retinanet", "dlrm-v2", "3d-unet", "gptj", "llama2-70b", "stable-diffusion-xl", "mixtral-8x7b",
            "llama3.1-405b"}
    for k in keys:                            # an audit comes after the two runs it is verified against
        e, sc, kind = k.split("/")
        if kind.startswith("TEST"):
            assert keys.index(f"{e}/{sc}/performance") < keys.index(k) > keys.index(f"{e}/{sc}/accuracy")


def test_datacenter_llms_get_one_optional_scenario():
    """v6.1 datacenter: an LLM entry whose round says "Interactive or Server" gets exactly one of them."""
    from code.common import rounds
    from code.common.submission.plan import derive

    items, notes = derive("v6.1", "datacenter")
    rnd = rounds.current("v6.1")
    for rb in rnd.benchmarks.values():
        if not rb.optional("datacenter") or not any(i.entry == rb.name for i in items):
            continue
        got = {i.scenario for i in items if i.entry == rb.name}
        assert len(got & set(rb.optional_scenarios)) == 1, (rb.name, got)
        assert got - set(rb.optional_scenarios) == set(rb.datacenter_scenarios)


def _plan_state(build: Path) -> dict:
    p = build / "smoke" / "submission_plan" / "v6.1_edge_smoke" / "plan.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


ARGS = ("--action=submission", "--round=v6.1", "--system_type=edge", "--benchmarks=resnet50", "--model_variant=tiny",
        "--smoke", "--scenarios=SingleStream,Offline")


@pytest.fixture(scope="module")
def smoke(tiny_resnet, tmp_path_factory):
    """The smoke plan, stopped with SIGTERM after its third finished item, then run again to the end."""
    build = tmp_path_factory.mktemp("submission") / "build"
    env = {**os.environ, **tiny_resnet, "MLPERF_BUILD_DIR": str(build), "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen([PY, "-m", "code.main", *ARGS], cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 600    # a busy machine (load ~7) took over 120 s for three items
    while time.monotonic() < deadline and p.poll() is None:
        if sum(v.get("state") == "done" for v in (_plan_state(build).get("items") or {}).values()) >= 3:
            break
        time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    first_out, _ = p.communicate(timeout=120)
    first = _plan_state(build)
    done = {k: v["dir"] for k, v in first["items"].items() if v["state"] == "done"}
    stamps = {k: (Path(d) / "metadata.json").stat().st_mtime_ns for k, d in done.items()}
    second = run_main(*ARGS, env={**tiny_resnet, "MLPERF_BUILD_DIR": str(build)}, timeout=600)
    return {"build": build, "first_rc": p.returncode, "first_out": first_out, "first": first, "done": done,
            "stamps": stamps, "second": second, "final": _plan_state(build)}


def test_smoke_plan_resumes_after_sigterm(smoke):
    assert smoke["first_rc"] == 130, smoke["first_out"]
    assert "stopped:" in smoke["first_out"] and "every finished run kept" in smoke["first_out"]
    assert 3 <= len(smoke["done"]) < len(smoke["first"]["items"])
    r = smoke["second"]
    assert r.returncode == 0, r.stdout + r.stderr
    final = smoke["final"]["items"]
    assert len(final) == 8 and all(v["state"] in ("kept", "done") for v in final.values()), final
    for k, d in smoke["done"].items():       # kept, not redone: the same folder, its record untouched
        assert final[k]["state"] == "kept" and final[k]["dir"] == d
        assert (Path(d) / "metadata.json").stat().st_mtime_ns == smoke["stamps"][k], k
    redone = re.findall(r"^\[submission\] \d+/8 done, ETA \S+: now (\S+)", r.stdout, re.M)
    assert sorted(redone) == sorted(set(final) - set(smoke["done"])), r.stdout
    assert f"{len(smoke['done'])}/8 done" in r.stdout
    # nothing half-written by the stopped run is left
    assert not list(smoke["build"].rglob("*.partial"))


def test_smoke_runs_are_recorded_and_refused_by_a_real_staging(smoke):
    from code.common.results.selection import choose, scan
    from code.common.submission.tree import SMOKE_MARKER

    logs = smoke["build"] / "smoke" / "logs" / "submission" / "v6.1_edge_smoke"
    runs, _ = scan([logs])
    assert len(runs) == 4 and all(r.meta["control"]["smoke"] is True for r in runs)
    sel = choose(runs)                        # a real submission's staging: nothing
    assert not sel.performance and not sel.accuracy
    assert all("--smoke=True" in why for _, why in sel.skipped), sel.skipped
    assert choose(runs, allow=("smoke",)).accuracy       # the smoke plan's own exception
    home = smoke["build"] / "smoke" / "submission_plan" / "v6.1_edge_smoke"
    assert (home / "staging" / SMOKE_MARKER).is_file() and (home / "submission" / SMOKE_MARKER).is_file()
    assert list((home / "submission" / "closed" / "OpenHarness" / "results").glob("*/resnet/Offline/TEST04"))
    assert (home / "report" / "index.html").is_file()


def test_final_table_names_checker_errors_with_fixes(smoke):
    out = smoke["second"].stdout
    table = out[out.index("items complete"):]
    for step in ("stage", "truncate", "export", "pre-flight", "official checker", "report"):
        assert re.search(rf"step {step}\s+ok", table), table
    errors = re.findall(r"^  - (pre-flight|official): (.*)\n      fix: (.*)$", table, re.M)
    assert errors, table
    assert all(fix.startswith("make ") or fix.startswith("fill in ") for _, _, fix in errors)
    # the smoke run's short duration is named, with the full-length run of the real model that meets it
    assert any("Offline" in msg and "make run_harness ROUND=v6.1" in fix and "--scenarios=Offline" in fix
               and "tiny" not in fix for _, msg, fix in errors), errors
    if os.environ.get("MLPERF_INFERENCE_DIR"):
        assert any(c == "official" for c, _, _ in errors)


def test_missing_inputs_tiny_built_real_refused_in_one_line(tmp_path, monkeypatch):
    """Before any run: a tiny plan's missing models and data are built (the three data actions of each benchmark, in
    this process); a real plan's are refused in one line naming the make commands, nothing run."""
    from code.common.errors import HarnessError
    from code.common.submission import flow
    from code.main import plan

    monkeypatch.setenv("MLPERF_SCRATCH_PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("MLPERF_BUILD_DIR", str(tmp_path / "build"))
    calls = []
    monkeypatch.setattr(flow, "_dispatch", lambda _plan, argv: calls.append(argv) or 0)
    common = ["--action=run_harness", "--benchmarks=resnet50,bert", "--scenarios=Offline", "--round=v6.1"]
    flow._inputs(plan([*common, "--model_variant=tiny"])[1], "tiny", plan)
    assert calls == [[f"--action={a}", f"--benchmarks={b}", "--model_variant=tiny"] for b in ("resnet50", "bert")
                     for a in ("download_model", "download_data", "preprocess_data")]
    calls.clear()
    with pytest.raises(HarnessError) as e:
        flow._inputs(plan(common)[1], "reference", plan)
    assert calls == [] and str(e.value).startswith("the plan's models or data are not here: model not found: ")
    assert e.value.fix == ("make download_model BENCHMARKS=resnet50,bert && make download_data BENCHMARKS=resnet50,bert"
                           " && make preprocess_data BENCHMARKS=resnet50,bert")
