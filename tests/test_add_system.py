"""make add_system: an unknown GPU registered as data (systems/known, config blocks, description stub),
matched by make info, used by a run; idempotent; bad input."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, metadata_under, offline_samples, run_main

GPU = {"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "pci_id": "0x2BB510DE", "memory_mb": 97887}
NEW = "RTX-PRO-6000-Blackwell-Server-Edition-96GB"


def _fake(*gpus) -> str:
    return json.dumps({"gpus": list(gpus)})


def _tree_digest(*roots: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for r in roots for p in sorted(r.rglob("*")) if p.is_file()}


@pytest.fixture()
def data_env(harness_env, tmp_path) -> dict:
    """Private copies of configs/ and systems/ (the repository's stay untouched)."""
    shutil.copytree(REPO / "configs", tmp_path / "configs")
    shutil.copytree(REPO / "systems", tmp_path / "systems")
    return {**harness_env, "MLPERF_CONFIGS_DIR": str(tmp_path / "configs"), "MLPERF_SYSTEMS_DIR": str(tmp_path / "systems"),
            "MLPERF_FAKE_SYSTEM": _fake(GPU)}


def test_add_system_registers_unknown_gpu(data_env, tiny_resnet, tmp_path):
    env = data_env                       # tiny_resnet built the tiny model into the same scratch
    before = run_main("--action=info", "--benchmarks=resnet50", env=env)
    assert before.returncode == 2 and GPU["name"] in before.stderr, before.stderr
    r = run_main("--action=add_system", "--based_on=H100-SXM-80GB", env=env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    known = json.loads((tmp_path / "systems/known" / f"{NEW}.json").read_text())
    assert known["system_id"] == NEW and known["arch"] == "Blackwell" and known["pci_ids"] == ["0x2BB5"]
    assert known["memory_mb"] == 97887            # sizes its LLM blocks (llm.memory) where the GPU is not detected
    assert (tmp_path / "systems" / f"{NEW}x1_TRT.json").is_file()
    configs = sorted((tmp_path / "configs").glob("*/*/config.json"))
    for cfg in configs:
        block = json.loads(cfg.read_text())[f"{NEW}x1"]
        assert block["extends"] in json.loads(cfg.read_text()) and "make find_performance" in block["description"]
    off = json.loads((tmp_path / "configs/resnet50/Offline/config.json").read_text())
    assert off[f"{NEW}x1"]["extends"] == "H100-SXM-80GBx1"
    assert off[f"{NEW}x1"]["offline_expected_qps"] == off["H100-SXM-80GBx1"]["offline_expected_qps"]

    snap = _tree_digest(tmp_path / "configs", tmp_path / "systems")
    again = run_main("--action=add_system", "--based_on=H100-SXM-80GB", env=env)
    assert again.returncode == 0 and "0 file(s) changed" in again.stdout, again.stdout
    assert _tree_digest(tmp_path / "configs", tmp_path / "systems") == snap

    info = run_main("--action=info", "--benchmarks=resnet50", "--scenarios=Offline", env=env)
    assert info.returncode == 0 and f"system id: {NEW}x1" in info.stdout, info.stdout + info.stderr

    logs = tmp_path / "logs"
    run = run_main("--action=run_harness", "--benchmarks=resnet50", "--model_variant=tiny", "--scenarios=Offline",
                   "--backend=onnxruntime", "--precision=fp32", *offline_samples(64), f"--log_dir={logs}", env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    m = metadata_under(logs)[0]
    assert m["status"] == "ok" and m["system_id"] == f"{NEW}x1"
    # reached only through the new block's "extends" (without it: no block, or the Blackwell fallback)
    assert m["sources"]["gpu_batch_size"].endswith("#H100-SXM-80GBx1"), m["sources"]
    assert not m["notes"], m["notes"]


def test_add_system_keeps_hand_edits_unless_forced(data_env, tmp_path):
    cfg = tmp_path / "configs/resnet50/Server/config.json"
    assert run_main("--action=add_system", "--based_on=H100-SXM-80GB", env=data_env).returncode == 0
    data = json.loads(cfg.read_text())
    data[f"{NEW}x1"]["server_target_qps"] = 12345
    cfg.write_text(json.dumps(data, indent=1))
    r = run_main("--action=add_system", "--based_on=H100-SXM-80GB", env=data_env)
    assert r.returncode == 0 and f"kept resnet50/Server/config.json#{NEW}x1" in r.stdout, r.stdout
    assert json.loads(cfg.read_text())[f"{NEW}x1"]["server_target_qps"] == 12345
    r = run_main("--action=add_system", "--based_on=H100-SXM-80GB", "--force", env=data_env)
    assert r.returncode == 0 and json.loads(cfg.read_text())[f"{NEW}x1"]["server_target_qps"] != 12345


def test_add_system_nearest_by_arch_and_memory_and_gpu_count(data_env, tmp_path):
    """No --based_on: an unknown Hopper-named GPU of 96 GB extends the nearest Hopper class by memory; two
    GPUs scale the Offline rate of a one-GPU block by 2."""
    gpu = {"name": "NVIDIA H20", "pci_id": "0x232910DE", "memory_mb": 98304}
    env = {**data_env, "MLPERF_FAKE_SYSTEM": _fake(gpu, gpu)}
    r = run_main("--action=add_system", "--system_id=H20-96GB", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "based on GH200-96GB (closest Hopper GPU by memory)" in r.stdout, r.stdout
    off = json.loads((tmp_path / "configs/resnet50/Offline/config.json").read_text())
    assert "H20-96GBx2" in off
    # again, and again with --force: the new system now matches its own GPU, and must not become its own base
    snap = _tree_digest(tmp_path / "configs", tmp_path / "systems")
    again = run_main("--action=add_system", "--system_id=H20-96GB", env=env)
    assert again.returncode == 0 and "0 file(s) changed" in again.stdout and "kept" not in again.stdout, again.stdout
    assert "based on GH200-96GB" in again.stdout, again.stdout
    assert _tree_digest(tmp_path / "configs", tmp_path / "systems") == snap
    forced = run_main("--action=add_system", "--system_id=H20-96GB", "--force", env=env)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    for cfg in (tmp_path / "configs").glob("*/*/config.json"):
        assert not json.loads(cfg.read_text())["H20-96GBx2"]["extends"].startswith("H20-96GB"), cfg
    info = run_main("--action=info", "--benchmarks=resnet50", "--scenarios=Offline", env=env)
    assert info.returncode == 0 and "system id: H20-96GBx2" in info.stdout, info.stdout + info.stderr


def test_add_system_with_a_300_character_gpu_name(data_env, tmp_path):
    """A GPU name far longer than a file name may be: the proposed id is cut to 64 characters, and it works."""
    gpu = {"name": "NVIDIA " + "Very Long Accelerator Name " * 11 + "Hopper", "pci_id": "0x2BB610DE",
           "memory_mb": 81920}
    r = run_main("--action=add_system", "--based_on=H100-SXM-80GB", env={**data_env, "MLPERF_FAKE_SYSTEM": _fake(gpu)})
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    [known] = [p for p in (tmp_path / "systems" / "known").glob("*.json") if "Very-Long" in p.name]
    assert len(known.stem) <= 64 and json.loads(known.read_text())["system_id"] == known.stem


def test_add_system_changes_nothing_when_one_config_file_is_broken(data_env, tmp_path):
    """Every config file is read before any is written: a broken one midway is a one-line error naming it, and
    no file (config, systems/known, description stub) has changed."""
    broken = tmp_path / "configs/sdxl/Offline/config.json"
    broken.write_text(broken.read_text().replace("{", "{,", 1))
    snap = _tree_digest(tmp_path / "configs", tmp_path / "systems")
    r = run_main("--action=add_system", "--based_on=H100-SXM-80GB", env=data_env)
    assert r.returncode == 2 and "Traceback" not in r.stderr and str(broken) in r.stderr, r.stdout + r.stderr
    assert _tree_digest(tmp_path / "configs", tmp_path / "systems") == snap


@pytest.mark.parametrize("case", ["unknown_base", "no_gpu", "mixed", "unknown_arch", "bad_id"])
def test_add_system_bad_input(data_env, tmp_path, case):
    env, args = dict(data_env), ["--action=add_system", "--based_on=H100-SXM-80GB"]
    if case == "unknown_base":
        args[1], want = "--based_on=H100-SXM-80G", ("not a known system", "did you mean 'H100-SXM-80GB'")
    elif case == "no_gpu":
        env["MLPERF_FAKE_SYSTEM"], want = _fake(), ("no NVIDIA GPU detected",)
    elif case == "mixed":
        env["MLPERF_FAKE_SYSTEM"] = _fake(GPU, {"name": "NVIDIA L4", "pci_id": "0x27B810DE"})
        want = ("mixed GPU models", "CUDA_VISIBLE_DEVICES")
    elif case == "unknown_arch":
        env["MLPERF_FAKE_SYSTEM"], args = _fake({"name": "Mystery Accelerator", "pci_id": "0x000110DE"}), args[:1]
        want = ("cannot tell the architecture", "--based_on=")
    else:                                    # the fix names a command, not a file that was never written
        args.append("--system_id=my gpu")
        want = ("system id 'my gpu' is not usable", "--system_id=")
    snap = _tree_digest(tmp_path / "configs", tmp_path / "systems")
    r = run_main(*args, env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.startswith("error: "), r.stderr
    assert len(r.stderr.strip().splitlines()) == 2 and all(w in r.stderr for w in want), r.stderr
    assert _tree_digest(tmp_path / "configs", tmp_path / "systems") == snap
