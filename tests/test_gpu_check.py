"""`make gpu_check` (scripts/gpu_check.py, issue 29): without a GPU it runs its CPU dry-run, the same steps at tiny
sizes, over the suite's tiny builds. One dry-run, asserted many ways; and one step stopped at its limit."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "gpu_check.py"


def gpu_check(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--dry_run", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def dry_run(tiny_resnet, tiny_sdxl, tiny_llama31, tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check")
    r = gpu_check("--out", str(out), "--tiny_scratch", tiny_resnet["MLPERF_SCRATCH_PATH"], "--budget_s", "840")
    return r, out, json.loads((out / "gpu_check.json").read_text()) if (out / "gpu_check.json").exists() else None


def figures(report: dict, step: str) -> dict:
    s = next(s for s in report["steps"] if s["name"] == step)
    return {f["figure"]: f["value"] for f in s["figures"]}


def test_dry_run_says_no_gpu_and_every_step_works(dry_run):
    r, out, report = dry_run
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:] + (out / "steps.log").read_text()[-6000:]
    assert report["mode"] == "dry-run"
    md = (out / "gpu_check.md").read_text()
    assert md.splitlines()[2].startswith("**No GPU was found: this is the CPU dry-run")
    assert [s["name"] for s in report["steps"]] == ["env", "resnet50", "sdxl", "llm", "models", "multigpu"]
    status = {s["name"]: s["status"] for s in report["steps"]}
    assert set(status.values()) == {"ok"}, status
    for s in report["steps"]:                  # every figure is in the table, with its step's line
        for f in s["figures"]:
            assert f"| {f['figure']} |" in md
    assert "===== llm =====" in (out / "steps.log").read_text()


def test_dry_run_figures(dry_run):
    _, _, report = dry_run
    env = figures(report, "env")
    assert env["doctor"].endswith("0 FAIL") and env["system matched (KnownSystems)"] != "none"
    assert "mlperf_loadgen yes" in env["packages"]
    rn = figures(report, "resnet50")
    assert rn["pytorch raw engine loop, batch 1, p90"] > 0
    assert rn["harness Offline (pytorch), LoadGen"] > 0 and rn["harness Offline validity"] == "VALID"
    assert rn["harness SingleStream p90 (pytorch)"] > 0 and rn["harness SingleStream validity"] == "VALID"
    sd = figures(report, "sdxl")
    assert sd["harness Offline (pytorch), LoadGen"] > 0 and sd["harness Offline validity"] == "VALID"
    llm = figures(report, "llm")
    assert llm["in-process transformers Offline"] > 0 and llm["in-process transformers Offline validity"] == "VALID"
    assert llm["in-process transformers Server TTFT p99"] > 0 and llm["in-process transformers Server TPOT p99"] > 0
    assert llm["HTTP (harness server) Offline"] > 0 and llm["HTTP (harness server) Offline validity"] == "VALID"
    notes = next(s for s in report["steps"] if s["name"] == "llm")["notes"]
    assert any(n.startswith("vLLM: skipped") for n in notes) or "vLLM in-process Offline" in llm
    place = figures(report, "multigpu")          # a faked 4xH200: a worker per GPU, an 8B or fp8 70B per GPU
    assert place["resnet50 Offline: engine workers (GPU each)"] == "4: [0, 1, 2, 3]"
    assert place["llama2_70b Offline: LLM instances (GPUs each)"] == "4: [(0,), (1,), (2,), (3,)]"
    models = figures(report, "models")
    for m in ("bert", "retinanet", "unet3d", "dlrm_v2"):
        assert any(k.startswith(f"{m} raw engine loop") and v > 0 for k, v in models.items()), (m, models)


def test_a_step_is_stopped_at_its_limit_and_keeps_its_figures(tmp_path, tiny_llama31):
    """The llm step capped at 5 s (its first harness run takes longer): stopped, with what it measured by then,
    and its table line says so; the parent returns 1."""
    r = gpu_check("--out", str(tmp_path), "--steps", "llm", "--step_limit_s", "5",
                  "--tiny_scratch", tiny_llama31["MLPERF_SCRATCH_PATH"], "--work", str(tmp_path / "work"))
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    [llm] = report["steps"]
    assert r.returncode == 1 and llm["status"] == "stopped", r.stdout + r.stderr
    assert llm["seconds"] < 5 + 20 and any("stopped at its limit (5 s)" in n for n in llm["notes"])
    assert "| llm | stopped (" in (tmp_path / "gpu_check.md").read_text()


def test_unknown_step_is_one_line(tmp_path):
    r = gpu_check("--out", str(tmp_path), "--steps", "resnet5O")
    assert r.returncode == 2 and r.stderr.startswith("error: unknown step(s) resnet5O") and "Traceback" not in r.stderr
    assert not (tmp_path / "gpu_check.json").exists()
