"""Backends on a tiny conv net: ONNX Runtime, PyTorch, the engine cache, polygraphy, TensorRT.

CPU-only except the TensorRT tests, which skip with the reason ``TensorRTBackend.available()``
gives (never faked). Every model is built here from a fixed seed; nothing is downloaded.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import textwrap
import warnings

import numpy as np
import pytest

from code.common import fileio
from code.common.backends import get_backend
from code.common.backends.base import EngineSpec
from code.common.backends.onnxruntime import OnnxRuntimeBackend
from code.common.backends.pytorch import PyTorchBackend, _archive_format
from code.common.backends.tensorrt import TensorRTBackend
from code.common.engines import get_or_build
from code.common.errors import HarnessError

# The tiny model lives in a module written to a temp dir, so that "module:function" factory
# references import it exactly as a benchmark's own model module would be imported.
FACTORY_SRC = textwrap.dedent('''
    import torch

    class TinyNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.fc = torch.nn.Linear(8, 5)

        def forward(self, x):
            y = torch.relu(self.bn(self.conv(x)))
            return self.fc(y.mean((2, 3)))

    def make():
        torch.manual_seed(0)
        m = TinyNet().eval()
        with torch.no_grad():  # non-trivial BN statistics, so BN folding is exercised
            m.bn.running_mean.uniform_(-0.5, 0.5)
            m.bn.running_var.uniform_(0.5, 2.0)
        return m

    def factory(onnx_path, spec):
        torch.manual_seed(1)
        return make(), {"x": torch.randn(2, 3, 16, 16)}

    class DictOut(torch.nn.Module):  # returns a mapping, as Hugging Face models do
        def __init__(self):
            super().__init__()
            self.inner = make()

        def forward(self, x):
            return {"logits": self.inner(x)}

    def dict_factory(onnx_path, spec):
        return DictOut().eval(), {"x": torch.randn(1, 3, 16, 16)}  # batch 1: repeated to 2 for export
''')
SHAPES = {"x": (-1, 3, 16, 16)}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(module, onnx_path) for the tiny net, exported with a dynamic batch dim."""
    import torch

    d = tmp_path_factory.mktemp("tiny")
    (d / "bk_tiny_model.py").write_text(FACTORY_SRC)
    sys.path.insert(0, str(d))
    mod = importlib.import_module("bk_tiny_model")
    net = mod.make()
    onnx_path = d / "tiny.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(net, (torch.randn(2, 3, 16, 16),), str(onnx_path), input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17, dynamo=False)
    yield net, onnx_path
    sys.path.remove(str(d))
    sys.modules.pop("bk_tiny_model", None)


def _inputs(batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal((batch, 3, 16, 16), dtype=np.float32)}


def _torch_ref(net, feeds) -> np.ndarray:
    import torch

    with torch.no_grad():
        return net(torch.from_numpy(feeds["x"])).numpy()


def _spec(**kw) -> EngineSpec:
    base = dict(name="tiny", batch_size=4, input_shapes=SHAPES, intra_op_threads=1)
    base.update(kw)
    return EngineSpec(**base)


def _ort_engine(onnx_path, tmp_path):
    be = OnnxRuntimeBackend()
    out = tmp_path / "tiny-ort.onnx"
    be.build(str(onnx_path), str(out), _spec())
    return be.load(str(out), _spec()), out


def test_onnxruntime_build_load_infer_matches_torch(tiny, tmp_path):
    net, onnx_path = tiny
    eng, _ = _ort_engine(onnx_path, tmp_path)
    assert eng.input_names == ("x",) and eng.output_names == ("y",)
    for b in (1, 3, 4):
        feeds = _inputs(b, seed=b)
        out = eng.infer(feeds)["y"]
        assert out.shape == (b, 5)
        np.testing.assert_allclose(out, _torch_ref(net, feeds), atol=1e-5, rtol=0)


@pytest.mark.parametrize("fmt", ["export", "jit", "pickle"])
def test_pytorch_factory_matches_onnxruntime(tiny, tmp_path, fmt):
    net, onnx_path = tiny
    ort_eng, _ = _ort_engine(onnx_path, tmp_path)
    spec = _spec(extra={"torch_factory": "bk_tiny_model:factory", "torch_format": fmt, "torch_device": "cpu"})
    be = PyTorchBackend()
    path = tmp_path / f"tiny.{fmt}.pt2"
    be.build(str(onnx_path), str(path), spec)
    assert _archive_format(str(path)) == fmt
    eng = be.load(str(path), spec)
    assert eng.input_names == ("x",) and eng.output_names == ("y",)
    for b in (1, 3, 4):  # batch 1 and 3 were never seen at export: the batch dim is dynamic
        feeds = _inputs(b, seed=10 + b)
        np.testing.assert_allclose(eng.infer(feeds)["y"], ort_eng.infer(feeds)["y"], atol=1e-5, rtol=0)


def test_pytorch_mapping_outputs_take_onnx_names(tiny, tmp_path):
    net, onnx_path = tiny
    spec = _spec(extra={"torch_factory": "bk_tiny_model:dict_factory", "torch_device": "cpu"})
    path = tmp_path / "dict.pt2"
    PyTorchBackend().build(str(onnx_path), str(path), spec)
    feeds = _inputs(3, seed=7)
    out = PyTorchBackend().load(str(path), spec).infer(feeds)
    assert list(out) == ["y"]
    np.testing.assert_allclose(out["y"], _torch_ref(net, feeds), atol=1e-5, rtol=0)


def test_pytorch_bad_factory_is_a_harness_error(tiny, tmp_path):
    _, onnx_path = tiny
    for ref in ("bk_tiny_model", "bk_tiny_model:nope", "no_such_module_xyz:f"):
        with pytest.raises(HarnessError, match="torch_factory"):
            PyTorchBackend().build(str(onnx_path), str(tmp_path / "x.pt2"), _spec(extra={"torch_factory": ref}))


def test_pytorch_default_format_is_export(tiny, tmp_path):
    _, onnx_path = tiny
    spec = _spec(extra={"torch_factory": "bk_tiny_model:factory"})
    path = tmp_path / "tiny.pt2"
    PyTorchBackend().build(str(onnx_path), str(path), spec)
    assert _archive_format(str(path)) == "export"


def test_pytorch_from_onnx_via_onnx2torch(tiny, tmp_path):
    """The ONNX path (no factory): a batch-4 engine runs batch 1, 3 and 4, and a batch-1 engine (SingleStream's)
    runs batch 1 (its program was once saved static at an example batch of 2 and failed every query)."""
    pytest.importorskip("onnx2torch", reason="onnx2torch not installed (pip install onnx2torch==1.5.15)")
    net, onnx_path = tiny
    be = PyTorchBackend()
    for batch, runs in ((4, (1, 3, 4)), (1, (1,))):
        spec = _spec(batch_size=batch, extra={"torch_device": "cpu"})
        path = tmp_path / f"tiny-o2t-b{batch}.pt2"
        be.build(str(onnx_path), str(path), spec)
        eng = be.load(str(path), spec)
        for b in runs:
            feeds = _inputs(b, seed=b)
            np.testing.assert_allclose(eng.infer(feeds)["y"], _torch_ref(net, feeds), atol=1e-5, rtol=0)


def test_pytorch_without_factory_or_onnx2torch_is_a_harness_error(tiny, tmp_path, monkeypatch):
    _, onnx_path = tiny
    monkeypatch.setitem(sys.modules, "onnx2torch", None)  # makes `import onnx2torch` fail
    with pytest.raises(HarnessError, match="onnx2torch") as e:
        PyTorchBackend().build(str(onnx_path), str(tmp_path / "x.pt2"), _spec())
    assert e.value.fix and "torch_factory" in e.value.fix


def test_pytorch_rejects_int8(tiny, tmp_path):
    _, onnx_path = tiny
    with pytest.raises(HarnessError, match="not int8"):
        PyTorchBackend().build(str(onnx_path), str(tmp_path / "x.pt2"), _spec(precision="int8"))


def _cache(tmp_path, monkeypatch, backend: str, system_id: str):
    """(backend, its [engine] log lines, get_or_build's keyword arguments) in a private build folder."""
    monkeypatch.setenv("MLPERF_BUILD_DIR", str(tmp_path / "build"))
    logs: list[str] = []
    return get_backend(backend), logs, dict(system_id=system_id, benchmark="tiny", scenario="Offline",
                                            log=logs.append)


def test_engine_cache_reuses_and_rebuilds(tiny, tmp_path, monkeypatch):
    _, onnx_path = tiny
    be, logs, where = _cache(tmp_path, monkeypatch, "onnxruntime", "cpu_test")

    p1 = get_or_build(be, onnx_path, _spec(), **where)
    assert p1.is_relative_to(tmp_path / "build" / "engines" / "cpu_test" / "tiny" / "Offline")
    assert p1.name == "tiny-b4-fp32.onnx" and p1.with_name(p1.name + ".json").exists()
    stamp = p1.stat().st_mtime_ns
    assert get_or_build(be, onnx_path, _spec(), **where) == p1
    assert logs[-1].startswith("[engine] reuse") and p1.stat().st_mtime_ns == stamp
    size = p1.stat().st_size                             # a truncated engine is never reused
    p1.write_bytes(p1.read_bytes()[: size // 2])
    assert get_or_build(be, onnx_path, _spec(), **where) == p1 and logs[-1].startswith("[engine] build")
    assert p1.stat().st_size == size

    # A same-size overwrite with its mtime put back (issue 27, item 11) is seen by the sampled fingerprint:
    # whole-file under 64 MiB, sampled blocks above (fileio.sampled_sha256; both regimes here).
    for whole_below, block in ((fileio.WHOLE_BELOW, fileio.SAMPLED_BLOCK), (0, 16)):
        monkeypatch.setattr(fileio, "WHOLE_BELOW", whole_below)
        monkeypatch.setattr(fileio, "SAMPLED_BLOCK", block)
        get_or_build(be, onnx_path, _spec(), **where)            # (re)built under this regime's fingerprint
        sampled = json.loads(p1.with_name(p1.name + ".json").read_text())["engine_sampled"]
        assert sampled.startswith("sampled:") == (whole_below == 0)
        st = p1.stat()
        data = bytearray(p1.read_bytes())
        data[-1] ^= 0xFF                                         # the last byte: in the last sampled block
        p1.write_bytes(bytes(data))
        os.utime(p1, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert p1.stat().st_size == st.st_size and p1.stat().st_mtime_ns == st.st_mtime_ns
        assert get_or_build(be, onnx_path, _spec(), **where) == p1
        assert logs[-1].startswith("[engine] build") and "sampled sha256 differs" in logs[-1], logs[-1]
        assert get_or_build(be, onnx_path, _spec(), **where) == p1 and logs[-1].startswith("[engine] reuse")

    # A changed spec field that keeps the file name still rebuilds (the hash covers the spec).
    assert get_or_build(be, onnx_path, _spec(intra_op_threads=2), **where) == p1
    assert logs[-1].startswith("[engine] build")
    # A changed ONNX rebuilds too.
    import onnx

    model = onnx.load(str(onnx_path))
    model.doc_string = "same graph, different bytes"
    changed = tmp_path / "changed.onnx"
    onnx.save(model, str(changed))
    get_or_build(be, changed, _spec(intra_op_threads=2), **where)
    assert logs[-1].startswith("[engine] build")
    # No staging leftovers beside the engine.
    assert not [p for p in p1.parent.iterdir() if p.name.endswith(".partial")]

    # The PyTorch backend goes through the same cache.
    pt = get_backend("pytorch")
    spec = _spec(extra={"torch_factory": "bk_tiny_model:factory", "torch_device": "cpu"})
    p2 = get_or_build(pt, onnx_path, spec, **where)
    assert p2.name == "tiny-b4-fp32.pt2"
    assert get_or_build(pt, onnx_path, spec, **where) == p2 and logs[-1].startswith("[engine] reuse")


def test_polygraphy_compares_ort_engine_with_original_onnx(tiny, tmp_path):
    from polygraphy.backend.onnxrt import OnnxrtRunner, SessionFromOnnx
    from polygraphy.comparator import Comparator, SimpleCompareFunc

    _, onnx_path = tiny
    _, engine_file = _ort_engine(onnx_path, tmp_path)
    runners = [OnnxrtRunner(SessionFromOnnx(str(onnx_path)), name="onnx"),
               OnnxrtRunner(SessionFromOnnx(str(engine_file)), name="ort-engine")]
    results = Comparator.run(runners, data_loader=[_inputs(b, seed=20 + b) for b in (1, 4)])
    assert [len(iters) for _, iters in results] == [2, 2]
    assert bool(Comparator.compare_accuracy(results, compare_func=SimpleCompareFunc(atol=1e-5, rtol=0)))


# --- TensorRT ------------------------------------------------------------------------------------

TRT_OK, TRT_WHY = TensorRTBackend.available()
needs_trt = pytest.mark.skipif(not TRT_OK, reason=f"TensorRT backend unavailable: {TRT_WHY}")


def test_tensorrt_unavailable_is_reported_not_faked():
    if TRT_OK:
        pytest.skip("TensorRT and a GPU are usable here")
    assert TRT_WHY and "\n" not in TRT_WHY
    with pytest.raises(HarnessError) as e:
        get_backend("tensorrt")
    assert TRT_WHY in e.value.cause and e.value.fix
    assert get_backend("tensorrt", require=False).name == "tensorrt"  # import itself never fails
    assert TensorRTBackend.versions()["tensorrt"] is None or isinstance(TensorRTBackend.versions()["tensorrt"], str)


def test_cuda_helper_reports_why_without_gpu():
    from code.common.backends import cuda

    ok, why = cuda.probe()
    if ok:
        pytest.skip("a GPU is visible here")
    assert why and "\n" not in why


@needs_trt
@pytest.mark.parametrize("precision,atol", [("fp32", 1e-4), ("fp16", 2e-2)])
def test_tensorrt_matches_onnxruntime(tiny, tmp_path, precision, atol):
    _, onnx_path = tiny
    ort_eng, _ = _ort_engine(onnx_path, tmp_path)
    be = TensorRTBackend()
    spec = _spec(precision=precision, profile_batch_sizes=(1, 2, 4), workspace_bytes=1 << 28)
    plan = tmp_path / f"tiny-{precision}.plan"
    be.build(str(onnx_path), str(plan), spec)
    eng = be.load(str(plan), spec)
    try:
        assert eng.capacity == [1, 2, 4]
        for b in (1, 3, 4, 2):
            feeds = _inputs(b, seed=30 + b)
            np.testing.assert_allclose(eng.infer(feeds)["y"], ort_eng.infer(feeds)["y"], atol=atol, rtol=0)
        with pytest.raises(HarnessError, match="exceeds"):
            eng.infer(_inputs(5))
    finally:
        eng.close()


@needs_trt
def test_tensorrt_engine_cache(tiny, tmp_path, monkeypatch):
    _, onnx_path = tiny
    be, logs, where = _cache(tmp_path, monkeypatch, "tensorrt", "gpu_test")
    p = get_or_build(be, onnx_path, _spec(workspace_bytes=1 << 28), **where)
    assert p.name == "tiny-b4-fp32.plan"
    assert get_or_build(be, onnx_path, _spec(workspace_bytes=1 << 28), **where) == p
    assert logs[-1].startswith("[engine] reuse")
    eng, twin = be.load(str(p), _spec()), be.load(str(p), _spec())
    try:
        assert twin.engine is eng.engine  # one deserialized engine; separate contexts and buffers
        feeds = _inputs(2)
        np.testing.assert_array_equal(eng.infer(feeds)["y"], twin.infer(feeds)["y"])
    finally:
        eng.close()
        twin.close()


# --- the registry: backend facts live on the backend classes ---------------------------------------------
def test_registry_defaults_and_benchmark_backends_come_from_the_classes(monkeypatch):
    """What the framework asked by name before (default per system, LLM or engine backends, Ray placement,
    Q/DQ target, versions, display names) now comes from the classes' facts."""
    from code.common import backends, calibration
    from code.common.llm.backends import TransformersBackend, VLLMBackend

    assert backends.for_benchmark(True) == ("transformers", "vllm", "tensorrt_llm", "openai")
    assert backends.for_benchmark(False) == ("onnxruntime", "tensorrt", "pytorch")
    assert backends.ranked("gpu", True) == ("tensorrt_llm", "vllm", "transformers")
    assert backends.ranked("cpu", False) == ("onnxruntime", "pytorch")
    assert backends.default_for("cpu", False) == "onnxruntime" and backends.default_for("cpu", True) == "transformers"
    # a GPU system without TensorRT, vLLM or TensorRT-LLM: pytorch, and transformers for an LLM
    monkeypatch.setattr(TensorRTBackend, "available", classmethod(lambda cls: (False, "absent")))
    monkeypatch.setattr(VLLMBackend, "available", classmethod(lambda cls: (False, "absent")))
    from code.common.llm.backends import TensorRTLLMBackend
    monkeypatch.setattr(TensorRTLLMBackend, "available", classmethod(lambda cls: (False, "absent")))
    assert backends.default_for("gpu", False) == "pytorch" and backends.default_for("gpu", True) == "transformers"
    monkeypatch.setattr(VLLMBackend, "available", classmethod(lambda cls: (True, "")))
    assert backends.default_for("gpu", True) == "vllm"
    assert calibration.target_of("onnxruntime") == "onnxruntime" and calibration.target_of("pytorch") == "tensorrt"
    v = backends.library_versions()
    assert {"onnxruntime", "torch", "tensorrt", "transformers", "vllm", "tensorrt_llm"} <= set(v)
    assert v["onnxruntime"] and v["tensorrt"] is None
    assert TransformersBackend.display_name() == "Hugging Face Transformers"


def test_a_new_backend_is_one_registration_line(monkeypatch):
    """A backend class with its facts plus one _IMPLS line: it is a choice for the benchmarks it serves, the
    default where it ranks first, named in system descriptions, and its library's version is recorded and
    compared between Ray nodes; nothing else in the framework names it."""
    import types

    from code.common import backends
    from code.common.harness import ray_executor
    from code.common.systems.facts import software_versions
    from code.common.submission import sysdesc

    mod = types.ModuleType("fake_backend_mod")

    class FakeBackend(OnnxRuntimeBackend):
        name, short, display, library = "fakert", "FRT", "Fake Runtime", "numpy"
        preference = {"cpu": -1}

    mod.FakeBackend = FakeBackend
    monkeypatch.setitem(sys.modules, "fake_backend_mod", mod)
    monkeypatch.setitem(backends._IMPLS, "fakert", "fake_backend_mod:FakeBackend")
    assert "fakert" in backends.for_benchmark(False) and "fakert" not in backends.for_benchmark(True)
    assert backends.default_for("cpu", False) == "fakert" and backends.default_for("cpu", True) == "transformers"
    assert sysdesc._framework("fakert", {"numpy": "9.9"}) == "Fake Runtime 9.9"
    assert "numpy" in software_versions() and "numpy" in ray_executor.checked()
    from code.main import check_backend
    from code.common.benchmarks import resolve

    check_backend(resolve("resnet50"), "fakert")
    with pytest.raises(HarnessError, match="does not run llama2_70b"):
        check_backend(resolve("llama2_70b"), "fakert")


def test_pytorch_from_onnx_with_shared_initializers(tmp_path):
    """torch's exporter shares equal weights through Identity nodes (zero conv biases of a random-weight model);
    onnx2torch alone failed on that (KeyError 'onnx::Conv_503' on full-size ResNet50, make gpu_check on an H200)."""
    pytest.importorskip("onnx2torch", reason="onnx2torch not installed (pip install onnx2torch==1.5.15)")
    import onnx
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 3)).eval()
    for conv in (net[0], net[2]):
        torch.nn.init.zeros_(conv.bias)
    path = tmp_path / "shared.onnx"
    torch.onnx.export(net, (torch.zeros(1, 3, 8, 8),), str(path), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "b"}, "y": {0: "b"}}, opset_version=17, dynamo=False)
    g = onnx.load(str(path)).graph
    inits = {i.name for i in g.initializer}
    assert any(n.op_type == "Identity" and n.input[0] in inits for n in g.node), "the export shares no initializer"
    spec = EngineSpec(name="shared", batch_size=4, input_shapes={"x": (-1, 3, 8, 8)}, extra={"torch_device": "cpu"})
    be = PyTorchBackend()
    be.build(str(path), str(tmp_path / "shared.pt2"), spec)
    x = np.random.default_rng(1).standard_normal((3, 3, 8, 8)).astype(np.float32)
    with torch.no_grad():
        ref = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(be.load(str(tmp_path / "shared.pt2"), spec).infer({"x": x})["y"], ref, atol=1e-5)


@pytest.mark.parametrize("setting,workers,shared,spins", [
    ("auto", 1, "", True), ("auto", 2, "", False), ("auto", 1, "1", False), ("on", 2, "1", True), ("off", 1, "", False)])
def test_cpu_spin_wait_auto_spins_only_on_cores_one_worker_owns(monkeypatch, setting, workers, shared, spins):
    """cpu_spin_wait: "auto" spins with one worker, never where MLPERF_SHARED_CPU=1 (the suite's two workers);
    an explicit on/off wins."""
    from code.common.backends.base import cpu_spin

    monkeypatch.setenv("MLPERF_SHARED_CPU", shared)
    assert cpu_spin(setting, workers) is spins
