"""DLRM-v2 against the official reference (recommendation/dlrm_v2/pytorch in MLPERF_INFERENCE_DIR), run as it
is in a child process: its python/multihot_criteo.py reads our tiny day-23 files and aggregates the queries,
and its python/backend_pytorch_native.py builds its own model (torchrec DLRM_DCN in DLRMTrain, distributed
with DistributedModelParallel on one CPU rank, gloo) at the tiny sizes, predicts those queries, and writes
that model with torchsnapshot (``Snapshot.take(app_state={"model": <the DMP model>})``: the format its load()
restores with ``Snapshot.restore``). Our loader then reads that snapshot, so its key names and shapes come
from the reference's model definition, never from our key map.

torchrec is not in requirements.txt (torchrec 1.9.2 declares the CUDA fbgemm-gpu); the child process finds
it in the venv or in build/torchrec_site, installed with the command in code/dlrm_v2/reference-torchrec.txt,
and the tests skip with that command when it is in neither. Tiny local equivalents, given through the
reference's own arguments: the data set is our tiny synthetic day-23 set (data_path, name "multihot-criteo"),
the weights are the reference model's own (debug=True: no checkpoint to download), every tensor redrawn
after it is built (tables N(0, 1), matrices N(0, 1/fan_in), biases N(0, 0.1^2)) so that none is zero and a
tensor put in the wrong place shows. One shim, of an API only: numpy 2 moved
np.lib.format._read_array_header (multihot_criteo._load_from_npz calls it), so the child aliases it back.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO, official_root

QUERIES = (0, 5, 33, 63)          # a handful of the tiny set's 64 queries, the cut last one among them
SEED = 7
TORCHREC_SITE = REPO / "build" / "torchrec_site"
INSTALL = ".venv/bin/pip install --no-deps --target build/torchrec_site -r code/dlrm_v2/reference-torchrec.txt"

# The child: the reference's dataset and backend, called the way its main.py calls them.
_DRIVER = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    args = json.loads(sys.argv[1])
    ref, out, cfg = args["reference"], args["out"], args["cfg"]
    sys.path.insert(0, os.path.join(ref, "python"))
    import torch
    if not hasattr(np.lib.format, "_read_array_header"):          # numpy >= 2.3 moved it (an API alias only)
        from numpy.lib import _format_impl
        np.lib.format._read_array_header = _format_impl._read_array_header
    np.random.seed(123)                                             # main.py: --numpy-rand-seed default
    import multihot_criteo
    from backend_pytorch_native import BackendPytorchNative
    from torchsnapshot import Snapshot
    ds = multihot_criteo.MultihotCriteo(
        data_path=args["data"], name="multihot-criteo", num_embeddings_per_feature=cfg["num_embeddings"],
        pre_process=multihot_criteo.pre_process_criteo_dlrm,
        samples_to_aggregate_quantile_file=os.path.join(ref, "tools", "dist_quantile.txt"),
        samples_to_aggregate_trace_file=os.path.join(out, "trace.txt"), randomize="total", memory_map=True)
    q = args["queries"]
    ds.load_query_samples(q)
    samples, _ = ds.get_samples(q)
    torch.manual_seed(args["seed"])
    b = BackendPytorchNative(num_embeddings_per_feature=cfg["num_embeddings"], embedding_dim=cfg["dim"],
                             dcn_num_layers=cfg["dcn_layers"], dcn_low_rank_dim=cfg["low_rank"],
                             dense_arch_layer_sizes=list(cfg["dense_arch"]), over_arch_layer_sizes=list(cfg["over_arch"]),
                             use_gpu=False, debug=True)
    b.load(os.path.join(out, "model_weights"))
    with torch.no_grad():   # every tensor redrawn, none left at its init (zero biases would hide a swap)
        for k, v in b.model.state_dict().items():
            for t in ([s.tensor for s in v.local_shards()] if hasattr(v, "local_shards") else [v]):
                if "embedding_bags" in k:
                    t.normal_(0, 1.0)
                elif t.dim() == 2:
                    t.normal_(0, t.shape[1] ** -0.5)
                else:
                    t.normal_(0, 0.1)
    preds = b.predict(samples)
    Snapshot.take(path=os.path.join(out, "model_weights"), app_state={"model": b.model})
    arrays = {}
    for i, s, p in zip(q, samples, preds):
        kjt = s.sparse_features
        arrays[f"dense_{i}"], arrays[f"labels_{i}"], arrays[f"pred_{i}"] = (
            s.dense_features.numpy(), s.labels.numpy(), p.numpy())
        for k, key in enumerate(kjt.keys()):
            arrays[f"values_{i}_{k}"] = kjt[key].values().numpy()
            arrays[f"lengths_{i}_{k}"] = kjt[key].lengths().numpy()
    np.savez(os.path.join(out, "reference.npz"), **arrays)
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump({"keys": {k: list(v.shape) for k, v in b.model.state_dict().items()},
                   "item_count": ds.get_item_count(), "manifest": sorted(Snapshot(path=os.path.join(out,
                   "model_weights")).get_manifest())}, f)
""")


def _torchrec_env() -> dict:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if importlib.util.find_spec("torchrec") is None:
        if not (TORCHREC_SITE / "torchrec").is_dir():
            pytest.skip(f"torchrec is not installed (the reference backend imports it): {INSTALL}")
        env["PYTHONPATH"] = os.pathsep.join([str(TORCHREC_SITE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """In-process torch on a shared 2-core machine: an OpenMP team of 2 made these small ops 10x slower."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def reference(request, tmp_path_factory) -> dict:
    """The reference's trace, loaded queries, predictions and snapshot (see the module docstring)."""
    from code.common import paths
    from code.dlrm_v2 import model

    root = official_root("recommendation", "dlrm_v2", "pytorch")
    env = _torchrec_env()
    request.getfixturevalue("tiny_dlrm")          # after the skips: no tiny build for a test that skips
    out = tmp_path_factory.mktemp("dlrm_reference")
    cfg = model.read_config(paths.models_dir("dlrm_v2", "tiny"), "")
    args = {"reference": str(root), "out": str(out), "data": str(paths.data_dir("criteo", "tiny")),
            "queries": list(QUERIES), "seed": SEED, "cfg": cfg.to_json()}
    r = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(args)], cwd=out, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    model.write_config(out, cfg)       # our loader's one extra file: the sizes (the reference passes them in code)
    return {"dir": out, "cfg": cfg, "arrays": dict(np.load(out / "reference.npz")),
            **json.loads((out / "reference.json").read_text())}


@pytest.fixture(scope="module")
def our_qsl(tiny_dlrm):
    from code.common import paths
    from code.dlrm_v2 import constants as K
    from code.dlrm_v2 import dataset, model

    cfg = model.read_config(paths.models_dir("dlrm_v2", "tiny"), "")
    day = dataset.Day23(paths.data_dir("criteo", "tiny"), cfg.num_embeddings, cfg.multi_hot, "")
    offsets = dataset.read_trace(paths.preprocessed_dir("criteo", "tiny") / K.TRACE_FILE, "")
    qsl = dataset.CriteoQSL(day, offsets, 0)
    qsl.load(QUERIES)
    return qsl


def _reference_sparse(arrays: dict, i: int, multi_hot) -> np.ndarray:
    """The reference's KeyedJaggedTensor of query ``i`` in our (B, sum(hot)) layout (checked: fixed lengths)."""
    cols = []
    for k, h in enumerate(multi_hot):
        lengths = arrays[f"lengths_{i}_{k}"]
        assert (lengths == h).all(), (i, k, np.unique(lengths))
        cols.append(arrays[f"values_{i}_{k}"].reshape(len(lengths), h))
    return np.concatenate(cols, 1)


def test_dlrm_v2_reference_preprocessing(reference, our_qsl):
    """Our query trace equals the file the reference writes (same seed, same quantile draws), byte for byte,
    and each query's dense features, multi-hot indices (the reference's KeyedJaggedTensor, per table) and
    labels equal the arrays our QSL gathers. The reference applies no transform at inference (its
    pre_process_criteo_dlrm is the identity: dense features are stored already log-transformed), so equal
    arrays are the whole of the pre-processing."""
    from code.common import paths
    from code.dlrm_v2 import constants as K

    ours = (paths.preprocessed_dir("criteo", "tiny") / K.TRACE_FILE).read_text()
    theirs = (reference["dir"] / "trace.txt").read_text()
    assert theirs == ours
    assert reference["item_count"] == our_qsl.total_count
    a, items = reference["arrays"], 0
    for i in QUERIES:
        dense, sparse, labels = our_qsl.sample(i)
        np.testing.assert_array_equal(dense, a[f"dense_{i}"])
        np.testing.assert_array_equal(sparse, _reference_sparse(a, i, reference["cfg"].multi_hot))
        np.testing.assert_array_equal(labels, a[f"labels_{i}"].astype(np.float32))
        items += len(labels)
    print(f"FIGURE dlrm_v2 preprocessing: trace {len(theirs.splitlines())} queries identical; {len(QUERIES)} queries "
          f"({items} items): dense, 26 multi-hot tables and labels identical to the reference's")


@pytest.mark.parametrize("devices", [None, ["cpu", "cpu"]], ids=["plain", "row_sharded"])
def test_dlrm_v2_reference_checkpoint_loads(reference, our_qsl, devices):
    """The snapshot the reference's own model wrote (torchrec's names: model.sparse_arch...t_cat_<k>.weight,
    model.dense_arch.model._mlp.<j>._linear.*, model.inter_arch.crossnet.*, model.over_arch.model.{0,1}...)
    loads into our model, plain and row-sharded; its keys and shapes are exactly the ones our loader asks
    for, and our model then gives the reference's own click probabilities for the same queries. A wrong key
    map fails here (a missing entry, or a tensor in the wrong place changes the probabilities)."""
    import torch

    from code.dlrm_v2 import model

    cfg = reference["cfg"]
    want = {k: tuple(v) for k, v in reference["keys"].items()}
    assert want == model.reference_keys(cfg)
    assert {e.split("/", 2)[2] for e in reference["manifest"] if e.count("/") >= 2} == set(want)
    net = model.load_torch(reference["dir"], "", devices=devices)
    a, diffs = reference["arrays"], []
    with torch.inference_mode():
        for i in QUERIES:
            dense, sparse, _ = our_qsl.sample(i)
            got = net(torch.from_numpy(np.array(dense)), torch.from_numpy(np.array(sparse))).numpy()
            diffs.append(float(np.abs(got - a[f"pred_{i}"]).max()))
    spread = float(np.concatenate([a[f"pred_{i}"] for i in QUERIES]).std())
    print(f"FIGURE dlrm_v2 checkpoint ({'plain' if devices is None else 'sharded ' + str(len(devices))}): "
          f"{len(want)} reference keys loaded; max |p_ours - p_reference| {max(diffs):.2e} over {len(QUERIES)} "
          f"queries (spread of p {spread:.3f})")
    # plain: the same float operations (0 here); row-sharded: each bag summed in per-shard parts, so float
    # summation order only (1e-5 seen; a swapped entry moves p by 0.5, see the next test)
    assert max(diffs) <= (1e-6 if devices is None else 1e-4)
    assert spread > 0.05, "degenerate reference model"


def test_dlrm_v2_reference_checkpoint_catches_a_swapped_key(reference, our_qsl, monkeypatch):
    """The check above has the power to see a wrong key map: with two same-shaped entries swapped (the first
    two cross layers' biases) the model loads without complaint and the probabilities move."""
    import torch

    from code.dlrm_v2 import model

    right = model.checkpoint_key
    swap = {"crossnet.bias.0": "crossnet.bias.1", "crossnet.bias.1": "crossnet.bias.0"}
    monkeypatch.setattr(model, "checkpoint_key", lambda key, cfg: swap.get(right(key, cfg), right(key, cfg)))
    net = model.load_torch(reference["dir"], "")
    dense, sparse, _ = our_qsl.sample(QUERIES[0])
    with torch.inference_mode():
        got = net(torch.from_numpy(np.array(dense)), torch.from_numpy(np.array(sparse))).numpy()
    moved = float(np.abs(got - reference["arrays"][f"pred_{QUERIES[0]}"]).max())
    print(f"FIGURE dlrm_v2 checkpoint with crossnet.bias.0/1 swapped: max |p - p_reference| {moved:.3f}")
    assert moved > 1e-3
