"""make calibrate: int8/fp8 Q/DQ models, their records and reuse, int8 engines on ONNX Runtime through
LoadGen, the Q/DQ structure TensorRT is given, every int8/fp8 config block up to TensorRT, and bad input."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import metadata_under, no_partials, private_scratch, route, run_main

TINY = ("--model_variant=tiny",)
REPO_CONFIGS = Path(__file__).resolve().parents[1] / "configs"
GPUS = {"H100-SXM-80GB": ("NVIDIA H100 80GB HBM3", "0x233010DE"), "L4": ("NVIDIA L4", "0x27B810DE"),
        "L40S": ("NVIDIA L40S", "0x26B910DE"), "A100-SXM-80GB": ("NVIDIA A100-SXM4-80GB", "0x20B210DE")}


def _one_error(r, code: int, *needles: str) -> str:
    """A one-line cause and a fix line, no traceback, the exit code; returns stderr."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    err = r.stderr.strip()
    assert "Traceback" not in err and err.startswith("error: "), err
    lines = err.splitlines()
    assert len(lines) == 2 and lines[1].lstrip().startswith("fix: "), err
    for n in needles:
        assert n in err, (n, err)
    return err


def _record(scratch: Path, bench: str, comp: str, precision: str) -> dict:
    return json.loads((scratch / "models" / bench / "tiny" / "calibrated" / f"{comp}-{precision}" / "record.json").read_text())


# --- ResNet50: calibrate, reuse, int8 through LoadGen --------------------------------------------------
@pytest.fixture(scope="module")
def resnet_int8(tiny_resnet, tmp_path_factory) -> dict:
    """A private copy of the tiny ResNet50 scratch: generate_engines before calibrating, calibrate, calibrate
    again, --force_calibration, and an int8 AccuracyOnly Offline run; the outputs of each."""
    tmp = tmp_path_factory.mktemp("rn50_int8")
    env, scratch = private_scratch(tiny_resnet, tmp, ("models", "data", "preprocessed_data"))
    base = ("--benchmarks=resnet50", *TINY)
    out = {"env": env, "scratch": scratch,
           "before": run_main("--action=generate_engines", *base, "--scenarios=Offline", "--precision=int8", env=env),
           "first": run_main("--action=calibrate", *base, env=env, check=True),
           "again": run_main("--action=calibrate", *base, env=env, check=True),
           "forced": run_main("--action=calibrate", *base, "--force_calibration", env=env, check=True)}
    logs = tmp / "logs"
    r = run_main("--action=run_harness", *base, "--scenarios=Offline", "--precision=int8", "--test_mode=AccuracyOnly",
                 f"--log_dir={logs}", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    out["run"] = metadata_under(logs)[0]
    return out


def test_resnet50_int8_needs_calibration_first(resnet_int8):
    _one_error(resnet_int8["before"], 3, "no calibrated int8 model",
               'make calibrate RUN_ARGS="--benchmarks=resnet50 --precision=int8 --model_variant=tiny"')


def test_resnet50_calibrate_record_and_reuse(resnet_int8):
    rec = _record(resnet_int8["scratch"], "resnet50", "resnet50", "int8")
    cs = rec["calibration_set"]
    assert cs["items"] == 128 and cs["inputs_fed"] == 8 and len(cs["list_sha256"]) == 64 and len(cs["data_sha256"]) == 64
    assert rec["method"] == "minmax" and rec["versions"]["onnxruntime"] and rec["tool"].startswith("onnxruntime")
    assert set(rec["models"]) == {"tensorrt", "onnxruntime"}
    folder = resnet_int8["scratch"] / "models/resnet50/tiny/calibrated/resnet50-int8"
    assert (folder / "ranges.json").is_file() and json.loads((folder / "ranges.json").read_text())
    assert "[calibrate] reuse" not in resnet_int8["first"].stdout
    assert "[calibrate] reuse" in resnet_int8["again"].stdout
    assert "[calibrate] reuse" not in resnet_int8["forced"].stdout
    no_partials(resnet_int8["scratch"] / "models")


def test_resnet50_offline_int8_accuracy(resnet_int8):
    """The tiny labels are the fp32 model's predictions: accuracy is int8-vs-fp32 top-1 agreement."""
    m = resnet_int8["run"]
    assert m["status"] == "ok" and m["precision"] == "int8", m.get("error")
    rec = _record(resnet_int8["scratch"], "resnet50", "resnet50", "int8")
    assert m["calibration"]["resnet50"]["key"] == rec["key"] and m["calibration"]["resnet50"]["model"].endswith("model_cpu.onnx")
    agree = m["accuracy"]["metrics"]["acc"]
    print(f"\n[fidelity] tiny ResNet50 int8 vs fp32 top-1 agreement over the tiny set: {agree:.2f}%")
    assert agree >= 99.0


def test_resnet50_int8_engine_key_covers_calibration(resnet_int8):
    rec = _record(resnet_int8["scratch"], "resnet50", "resnet50", "int8")
    metas = list(Path(resnet_int8["env"]["MLPERF_BUILD_DIR"]).rglob("resnet50-b*-int8.onnx.json"))
    assert metas, "no int8 engine record"
    spec = json.loads(metas[0].read_text())["spec"]
    assert spec["extra"]["calibration"] == rec["key"]
    assert json.loads(metas[0].read_text())["source"].endswith("model_cpu.onnx")


def test_resnet50_qdq_model_for_tensorrt(resnet_int8):
    """What TensorRT is given: int8 weights per output channel (Conv axis 0; the fc, a Gemm with transB,
    axis 0), symmetric int8 activations (zero point 0); the CPU model's activations are uint8."""
    import onnx
    from onnx import numpy_helper

    folder = resnet_int8["scratch"] / "models/resnet50/tiny/calibrated/resnet50-int8"
    rec = _record(resnet_int8["scratch"], "resnet50", "resnet50", "int8")
    q = rec["models"]["tensorrt"]["qdq"]
    assert q["quantize_nodes"] > 0 and q["dequantize_nodes"] > q["quantize_nodes"]
    assert q["float_weight_nodes"] == [] and q["quantized_softmax_nodes"] == []
    for w in q["weights"].values():
        assert w["dtype"] == "INT8" and w["axis"] == 0, w
    for name, want in (("model.onnx", np.int8), ("model_cpu.onnx", np.uint8)):
        g = onnx.load(str(folder / name)).graph
        inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
        zps = [inits[n.input[2]] for n in g.node if n.op_type == "QuantizeLinear"]
        assert zps and all(z.dtype == want for z in zps), name
        if want == np.int8:
            assert all(int(z.max()) == 0 == int(z.min()) for z in zps), "TensorRT needs symmetric activations"


def test_resnet50_corrupt_calibrated_model(resnet_int8, tmp_path):
    env, scratch = private_scratch(resnet_int8["env"], tmp_path, ("models", "data", "preprocessed_data"))
    model = scratch / "models/resnet50/tiny/calibrated/resnet50-int8/model_cpu.onnx"
    model.write_bytes(b"\0" * 64)
    r = run_main("--action=generate_engines", "--benchmarks=resnet50", *TINY, "--scenarios=Offline", "--precision=int8",
                 env=env)
    _one_error(r, 3, "is damaged", "--force_calibration")


def test_resnet50_fp8_on_cpu_is_refused(resnet_int8):
    r = run_main("--action=generate_engines", "--benchmarks=resnet50", *TINY, "--scenarios=Offline", "--precision=fp8",
                 env=resnet_int8["env"])
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "precision fp8 is not supported by resnet50" in r.stderr


@pytest.mark.parametrize("case", ["missing_list", "empty_list", "missing_images"])
def test_resnet50_calibration_bad_input(resnet_int8, tmp_path, case):
    env, scratch = private_scratch(resnet_int8["env"], tmp_path, ("models", "data", "preprocessed_data"))
    cal = scratch / "data/imagenet/tiny/cal_image_list.txt"
    shutil.rmtree(scratch / "models/resnet50/tiny/calibrated")
    if case == "missing_list":
        cal.unlink()
        needles = ("calibration list", "not found", "make download_data BENCHMARKS=resnet50 MODEL_VARIANT=tiny")
    elif case == "empty_list":
        cal.write_text("\n")
        needles = ("calibration set of size 0",)
    else:
        cal.write_text("ILSVRC2012_val_00000001.JPEG\nno_such_image.JPEG\n")
        needles = ("1 of the 2 calibration images", "no_such_image.JPEG", "--calibration_dir")
    r = run_main("--action=calibrate", "--benchmarks=resnet50", *TINY, env=env)
    _one_error(r, 3, *needles)
    assert not (scratch / "models/resnet50/tiny/calibrated/resnet50-int8").exists()
    no_partials(scratch / "models")


def test_resnet50_calibration_dir_and_official_list(resnet_int8, tmp_path, mirror):
    """The reference variant fetches the pinned official list (here from a local mirror) and reads the
    images from --calibration_dir; a list whose sha256 is not the pinned one is refused."""
    from code.resnet50 import harness

    env, scratch = private_scratch(resnet_int8["env"], tmp_path, ())
    env["MLPERF_DATA_MAPS_DIR"] = str(tmp_path / "maps")
    mirror.routes[route(harness.CAL_URL)] = b"ILSVRC2012_val_00000001.JPEG\n"
    r = run_main("--action=calibrate", "--benchmarks=resnet50", f"--calibration_dir={tmp_path}", env=env)
    assert r.returncode == 3 and "sha256" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "maps/imagenet" / harness.CAL_LIST).exists()


# --- SDXL: the int8 unet --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sdxl_int8(tiny_sdxl, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("sdxl_int8")
    env, scratch = private_scratch(tiny_sdxl, tmp, ("models", "data", "preprocessed_data"))
    shutil.rmtree(scratch / "models/sdxl/tiny/calibrated", ignore_errors=True)
    cal = run_main("--action=calibrate", "--benchmarks=sdxl", *TINY, env=env, check=True)
    logs = tmp / "logs"
    r = run_main("--action=run_harness", "--benchmarks=sdxl", *TINY, "--scenarios=Offline", "--precision=int8",
                 "--test_mode=AccuracyOnly", "--sdxl_sample_count=12", f"--log_dir={logs}", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return {"env": env, "scratch": scratch, "calibrate": cal, "run": metadata_under(logs)[0]}


def test_sdxl_unet_qdq_keeps_nvidia_layers(sdxl_int8):
    """The unet TensorRT is given: convs per output channel (axis 0), linear weights (MatMul [K, N]) per
    output column (axis 1); the first/last convs, time/add embeddings and shortcut convs float; no
    Softmax behind a DequantizeLinear; only the unet is calibrated."""
    rec = _record(sdxl_int8["scratch"], "sdxl", "unet", "int8")
    q = rec["models"]["tensorrt"]["qdq"]
    assert rec["calibration_set"]["items"] == 4 and rec["calibration_set"]["inputs_fed"] == 4 * 20
    assert q["quantized_softmax_nodes"] == []
    kept = set(q["float_weight_nodes"])
    assert kept == set(rec["kept"]) and "/m/conv_in/Conv" in kept and "/m/conv_out/Conv" in kept
    assert any("time_emb" in k for k in kept) and any("add_embedding" in k for k in kept)
    for w in q["weights"].values():
        assert w["dtype"] == "INT8" and w["axis"] == (0 if len(w["shape"]) == 4 else 1), w
    assert q["quantized_weights"] > 50
    calibrated = sdxl_int8["scratch"] / "models/sdxl/tiny/calibrated"
    assert sorted(p.name for p in calibrated.iterdir()) == ["unet-int8"]


def test_sdxl_offline_int8_accuracy(sdxl_int8):
    m = sdxl_int8["run"]
    assert m["status"] == "ok" and m["precision"] == "int8", m.get("error")
    assert set(m["calibration"]) == {"unet"}
    metrics = m["accuracy"]["metrics"]
    print(f"\n[fidelity] tiny SDXL int8 unet, 12 images: {metrics}")
    assert np.isfinite(metrics["CLIP_SCORE"]) and np.isfinite(metrics["FID_SCORE"])
    assert len(list((Path(m["log_dir"]) / "images").glob("*.png"))) == 10


def test_sdxl_calibration_ids_not_in_captions(sdxl_int8, tmp_path):
    env, scratch = private_scratch(sdxl_int8["env"], tmp_path, ("models", "data", "preprocessed_data"))
    (scratch / "data/sdxl/tiny/coco_cal_captions_list.txt").write_text("0\n99999\n")
    r = run_main("--action=calibrate", "--benchmarks=sdxl", *TINY, "--force_calibration", env=env)
    _one_error(r, 3, "1 calibration caption ids", "99999")


# --- fp8 Q/DQ (what TensorRT builds on Ada/Hopper/Blackwell), on a small model ----------------------------
def test_fp8_qdq_model(tmp_path):
    """ONNX Runtime's float8 QDQ (nvidia-modelopt's when it imports): E4M3 weights per channel; the kept
    conv and the softmax stay float."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from code.common import calibration

    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w2")
    w3 = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w3")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="conv_in", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2"], ["b"], name="body", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["a", "b"], ["c"], name="add"),
             helper.make_node("GlobalAveragePool", ["c"], ["d"], name="pool"),
             helper.make_node("Flatten", ["d"], ["e"], name="flat"),
             helper.make_node("MatMul", ["e", "w3"], ["f"], name="proj"),
             helper.make_node("Softmax", ["f"], ["y"], name="softmax")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [w1, w2, w3])
    src = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]), src)
    cset = calibration.CalibrationSet("synthetic", "test", tuple(str(i) for i in range(4)), "0" * 64)
    feeds = lambda: ({"x": rng.standard_normal((2, 3, 8, 8)).astype(np.float32)} for _ in range(4))  # noqa: E731
    rec = calibration.calibrate(src, tmp_path / "out", calibration.Recipe("fp8", "distribution", keep=("conv_in",)),
                                cset, feeds, fix="x")
    assert set(rec["models"]) == {"tensorrt"} and rec["calibration_set"]["inputs_fed"] == 4
    q = rec["models"]["tensorrt"]["qdq"]
    assert q["float_weight_nodes"] == ["conv_in"] and q["quantized_softmax_nodes"] == []
    assert {w["dtype"] for w in q["weights"].values()} == {"FLOAT8E4M3FN"}
    assert {n: w["axis"] for n, w in q["weights"].items()} == {"w2_quantized": 0, "w3_quantized": 1}
    again = calibration.calibrate(src, tmp_path / "out", calibration.Recipe("fp8", "distribution", keep=("conv_in",)),
                                  cset, feeds, fix="x")
    assert again["key"] == rec["key"]


# --- every int8/fp8 block of configs/: calibrate + generate_engines up to TensorRT ----------------------
def _quantized_blocks() -> list[tuple[str, str, str]]:
    from code.common import paths

    out = []
    for bench in ("resnet50", "sdxl"):
        for cfg in sorted((paths.REPO_ROOT / "configs" / bench).glob("*/config.json")):
            for block, body in json.loads(cfg.read_text()).items():
                cls = block.rsplit("x", 1)[0]
                if isinstance(body, dict) and body.get("precision") in ("int8", "fp8") and cls in GPUS:
                    out.append((bench, cfg.parent.name, block))
    return out


class _Done:
    """What code.main.main returned and printed (run in this process: 24 blocks, no interpreter start each)."""

    def __init__(self, rc: int, out: str, err: str):
        self.returncode, self.stdout, self.stderr = rc, out, err


def test_config_blocks_quantized_up_to_tensorrt(tiny_resnet, tiny_sdxl, resnet_int8, sdxl_int8, tmp_path, monkeypatch,
                                                capsys, one_torch_thread):
    """On each block's fake GPU system: generate_engines first asks for make calibrate (exit 3); after
    it, the only thing missing is TensorRT. The int8 models the module's fixtures calibrated (the calibrate action
    is tested there) are copied in rather than calibrated again; fp8 is calibrated here (in this process: torch at
    one thread, one_torch_thread)."""
    from code.common.backends import backend_class
    from code.main import main

    if backend_class("tensorrt").available()[0]:
        pytest.skip("TensorRT is installed: the engines would be built")
    blocks = _quantized_blocks()
    assert {b for b, _, _ in blocks} == {"resnet50", "sdxl"} and len(blocks) >= 15, blocks
    env, scratch = private_scratch(tiny_resnet, tmp_path, ("models", "data", "preprocessed_data"))
    for p in ("models/resnet50/tiny/calibrated", "models/sdxl/tiny/calibrated"):
        shutil.rmtree(scratch / p, ignore_errors=True)
    for k, v in env.items():
        monkeypatch.setenv(k, v)

    def run(*args: str) -> _Done:
        capsys.readouterr()
        rc = main(list(args))
        got = capsys.readouterr()
        return _Done(rc, got.out, got.err)

    calibrated = set()
    for bench, scenario, block in blocks:
        cls, count = block.rsplit("x", 1)
        name, pci = GPUS[cls]
        monkeypatch.setenv("MLPERF_FAKE_SYSTEM", json.dumps({"gpus": [{"name": name, "pci_id": pci}] * int(count)}))
        args = ("--action=generate_engines", f"--benchmarks={bench}", f"--scenarios={scenario}", *TINY)
        precision = json.loads((REPO_CONFIGS / bench / scenario / "config.json").read_text())[block]["precision"]
        if (bench, precision) not in calibrated:
            _one_error(run(*args), 3, f"no calibrated {precision} model", "make calibrate")
            done = {"resnet50": resnet_int8, "sdxl": sdxl_int8}[bench]["scratch"] / "models" / bench / "tiny" / "calibrated"
            if precision == "int8":
                for d in done.glob("*-int8"):
                    shutil.copytree(d, scratch / "models" / bench / "tiny" / "calibrated" / d.name)
            else:
                assert run("--action=calibrate", f"--benchmarks={bench}", *TINY, f"--precision={precision}").returncode == 0
            calibrated.add((bench, precision))
        err = _one_error(run(*args), 2)
        assert "TensorRT, which is not usable here" in err and "make prebuild GPU_EXTRAS=1" in err, (block, err)


def test_calibrate_benchmark_without_recipe(harness_env):
    r = run_main("--action=calibrate", "--benchmarks=bert", *TINY, env=harness_env)
    _one_error(r, 2, "bert has no int8 calibration recipe yet", "--precision=fp16")


def test_calibrate_refuses_a_float_precision_given_on_the_command_line(harness_env):
    """--precision=fp16 asks for something make calibrate does not make: an error, not an int8 calibration
    (or the reuse of one) in its place."""
    r = run_main("--action=calibrate", "--benchmarks=resnet50", *TINY, "--precision=fp16", env=harness_env)
    _one_error(r, 2, "--precision=fp16 needs no calibration", "--precision=int8")


# --- the real calibration sets' download paths, against a local server ------------------------------------
def test_resnet50_official_list_fetched_pinned(harness_env, tmp_path, mirror, monkeypatch):
    """The reference variant fetches cal_image_list_option_1.txt from the pinned commit (served locally,
    its pin swapped for the served bytes' sha256) and reads it as the calibration set."""
    import hashlib

    from code.main import plan
    from code.resnet50 import harness

    body = b"".join(f"ILSVRC2012_val_{i:08d}.JPEG\n".encode() for i in (27145, 42168, 41705))
    mirror.routes[route(harness.CAL_URL)] = body
    monkeypatch.setattr(harness, "CAL_SHA256", hashlib.sha256(body).hexdigest())
    monkeypatch.setenv("MLPERF_DATA_MAPS_DIR", str(tmp_path / "maps"))
    s = plan(["--action=calibrate", "--benchmarks=resnet50"])[1][0]
    cset = harness.ResNet50Benchmark(s).calibration_set()
    assert cset.items == ("ILSVRC2012_val_00027145.JPEG", "ILSVRC2012_val_00042168.JPEG", "ILSVRC2012_val_00041705.JPEG")
    assert (tmp_path / "maps/imagenet" / harness.CAL_LIST).read_bytes() == body
    assert cset.list_sha256 == hashlib.sha256(body).hexdigest() and "mlcommons/inference@b66003e" in cset.name


def test_sdxl_calibration_captions_from_coco_annotations(tmp_path, mirror, monkeypatch):
    """Captions of the listed ids come out of COCO's annotations archive (served locally, sha256 pin swapped),
    cleaned as the reference's coco_calibration.py does; the archive is not kept; the reference's own
    captions.tsv in --calibration_dir is read instead when given; a missing id is a one-line error."""
    import hashlib
    import io
    import zipfile

    from code.common.errors import MissingDataError
    from code.sdxl import download

    anns = {"annotations": [{"id": 282, "image_id": 1, "caption": "A cat\non a mat. "},
                            {"id": 655, "image_id": 2, "caption": " Two dogs."}, {"id": 9, "image_id": 3, "caption": "x"}]}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("annotations/captions_train2014.json", json.dumps(anns))
    mirror.routes[route(download.COCO_ANNOTATIONS_URL)] = buf.getvalue()
    monkeypatch.setattr(download, "COCO_ANNOTATIONS_SHA256", hashlib.sha256(buf.getvalue()).hexdigest())
    raw = tmp_path / "raw"
    raw.mkdir()
    got = download.calibration_captions(raw, ["282", "655"], None, log=lambda *_: None)
    assert got == {"282": "A caton a mat.", "655": "Two dogs."}
    assert (raw / download.CAL_CAPTIONS).is_file() and not (raw / "annotations_trainval2014.zip").exists()
    mirror.routes.clear()                               # the extraction is reused, nothing fetched again
    assert download.calibration_captions(raw, ["655"], None) == {"655": "Two dogs."}
    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "captions.tsv").write_text("id\timage_id\tcaption\n282\t1\tfrom the reference\n")
    assert download.calibration_captions(raw, ["282"], str(ref)) == {"282": "from the reference"}
    with pytest.raises(MissingDataError, match="1 of the 2 calibration caption ids"):
        download.calibration_captions(raw, ["282", "1919"], str(ref))
