"""Every built-in KnownSystems class resolves for every benchmark and scenario; workers spread over GPUs."""
from __future__ import annotations

import json
from typing import Mapping, Sequence

import numpy as np
import pytest

from code.common.systems import KnownSystems

CPU = {"vendor": "AuthenticAMD", "model_name": "AMD EPYC 9654", "cores": 96, "sockets": 2, "arch": "x86_64"}
CASES = [(c, n) for c in KnownSystems.gpu_classes() for n in c.counts]


def fake(monkeypatch, cls, n):
    pci = f"0x{cls.pci_ids[0].upper()}10DE"
    gpus = [{"name": cls.gpu_names[0], "pci_id": pci, "memory_mb": cls.memory_mb or 80000}] * n
    monkeypatch.setenv("MLPERF_FAKE_SYSTEM", json.dumps({"gpus": gpus, "cpu": CPU, "memory_gb": 2048}))


@pytest.mark.parametrize("cls,n", CASES, ids=[f"{c.system_id}x{n}" for c, n in CASES])
def test_systems_every_known_class_plans_every_benchmark_and_scenario(cls, n, monkeypatch):
    from code.common.benchmarks import all_specs
    from code.main import plan

    fake(monkeypatch, cls, n)
    _, settings = plan(["--action=info", "--benchmarks=all", "--scenarios=all"])
    got = {(s.benchmark, s.scenario) for s in settings}
    assert got == {(spec.name, sc) for spec in all_specs() for sc in spec.scenarios}
    for s in settings:
        assert s.system_id == f"{cls.system_id}x{n}"
        blocks = json.loads(open(s.config_file).read())
        own = s.system_id in blocks or cls.system_id in blocks
        # a fallback block (one-GPU or architecture): make info shows which, and why
        assert bool(s.notes) != own, (s.benchmark, s.scenario, s.notes)
        if not own:
            assert f"no block for {s.system_id}" in s.notes[0]
        assert s.precision in s.spec.precisions


def test_systems_fallback_scales_throughput_by_gpu_count(monkeypatch):
    from code.main import plan

    fake(monkeypatch, KnownSystems.L4, 4)           # resnet50 Offline has L4x1 only
    _, [one] = plan(["--action=info", "--benchmarks=resnet50", "--scenarios=Offline"])
    assert one.offline_expected_qps == 4 * 13500 and "x4/1 GPUs" in one.sources["offline_expected_qps"]
    assert any("one-GPU block 'L4x1'" in n for n in one.notes)
    fake(monkeypatch, KnownSystems.GH200_96GB, 1)   # no GH200 block anywhere: the Hopper block
    _, [gh] = plan(["--action=info", "--benchmarks=resnet50", "--scenarios=Offline"])
    assert gh.offline_expected_qps == 90000 and any("Hopper architecture block" in n for n in gh.notes)
    fake(monkeypatch, KnownSystems.H100_SXM_80GB, 8)   # SingleStream runs on one GPU: never scaled
    _, [ss] = plan(["--action=info", "--benchmarks=resnet50", "--scenarios=SingleStream"])
    assert ss.single_stream_expected_latency_ns == 400000


def test_systems_info_prints_fallback_note(monkeypatch, capsys):
    from code.main import main

    fake(monkeypatch, KnownSystems.H100_NVL, 2)
    assert main(["--action=info", "--benchmarks=sdxl", "--scenarios=Offline"]) == 0
    out = capsys.readouterr().out
    assert "note:" in out and "Hopper architecture block" in out and "--fast" in out


def test_systems_lists_of_benchmarks_and_config_vers(monkeypatch, tmp_path):
    import shutil

    from code.common import paths
    from code.main import plan

    monkeypatch.delenv("MLPERF_FAKE_SYSTEM", raising=False)
    _, a = plan(["--action=info", "--benchmarks=resnet50 sdxl", "--scenarios=Offline"])   # NVIDIA's spaces
    assert [s.benchmark for s in a] == ["resnet50", "sdxl"]
    shutil.copytree(paths.configs_dir() / "resnet50", tmp_path / "resnet50")
    f = tmp_path / "resnet50" / "Offline" / "config.json"
    cfg = json.loads(f.read_text())
    cfg["default"]["config_ver"] = {"high_accuracy": {"gpu_batch_size": 4}, "maxq": {"gpu_batch_size": 2}}
    f.write_text(json.dumps(cfg))
    monkeypatch.setenv("MLPERF_CONFIGS_DIR", str(tmp_path))
    _, b = plan(["--action=info", "--benchmarks=resnet50", "--scenarios=Offline", "--config_ver=default,high_accuracy"])
    assert [(s.config_ver, s.accuracy_target, s.gpu_batch_size) for s in b] == [("default", "99", 8),
                                                                                ("high_accuracy", "99.9", 4)]
    _, c = plan(["--action=info", "--benchmarks=resnet50", "--scenarios=Offline", "--config_ver=all"])
    assert [s.config_ver for s in c] == ["default", "high_accuracy", "maxq"]
    assert c[2].system_name.endswith("_maxq") and not c[1].system_name.endswith("_high_accuracy")


class RecordingBackend:
    """Stands in for TensorRT on a fake 8-GPU machine: records the device of every engine it loads."""

    name, short, engine_suffix, precisions = "tensorrt", "TRT", ".plan", ("fp32", "fp16", "int8", "fp8")
    loaded: list[int] = []

    class Engine:
        def infer(self, feeds: Mapping[str, np.ndarray]) -> dict:
            x = next(iter(feeds.values()))
            return {"ArgMax:0": np.ones((x.shape[0],), np.int64)}

    def load(self, path: str, spec) -> "RecordingBackend.Engine":
        self.loaded.append(spec.device_id)
        return self.Engine()


class FakeQSL:
    images = np.zeros((8, 3, 224, 224), np.uint8)

    def batch(self, indices: Sequence[int]) -> np.ndarray:
        return np.zeros((len(indices), 3, 224, 224), np.float32)


def test_resnet50_workers_spread_over_eight_gpus(monkeypatch):
    import code.resnet50.harness as h
    from code.main import plan

    fake(monkeypatch, KnownSystems.H100_SXM_80GB, 8)
    _, [s] = plan(["--action=info", "--benchmarks=resnet50", "--scenarios=Offline", "--gpu_inference_streams=2"])
    rec = RecordingBackend()
    rec.loaded = []
    monkeypatch.setattr(h, "get_backend", lambda name: rec)
    procs = h.ResNet50Benchmark(s).make_processors(FakeQSL(), {"resnet50": "unused.plan"})
    assert rec.loaded == [0, 1, 2, 3, 4, 5, 6, 7] * 2 and len(procs) == 16
    # an inline scenario runs one worker on device 0
    _, [ss] = plan(["--action=info", "--benchmarks=resnet50", "--scenarios=SingleStream"])
    rec.loaded = []
    h.ResNet50Benchmark(ss).make_processors(FakeQSL(), {"resnet50": "unused.plan"})
    assert rec.loaded == [0]
