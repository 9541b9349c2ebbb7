"""--executor=ray on a real Ray cluster on 127.0.0.1: a head and two worker nodes, each its own
`ray start` process tree with CPU resources (tests/ray_cluster.py). Tiny ResNet50 through LoadGen:
Offline and Server VALID, predictions identical to the local executor, a node killed mid-run (its
raylet, by pid) with every sample answered once and the retry recorded, and the bad inputs (an
unreachable address, a node without the engine, a node with other package versions)."""
from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import metadata_under, offline_samples, run_main, server_run
from tests.ray_cluster import DRIVER_ENV, FAST_HEALTH, LocalRayCluster, ray_available

OK, WHY = ray_available()
pytestmark = pytest.mark.skipif(not OK, reason=WHY)
RESNET = ("--benchmarks=resnet50", "--model_variant=tiny")
# Server on a 2-core machine that also runs three Ray nodes: the bound is loosened so the test asks
# whether the executor serves every query, not whether this machine meets ResNet50's 15 ms
LOOSE = "--server_target_latency_ns=500000000"


@pytest.fixture(scope="module")
def cluster(tiny_resnet):
    """Started after tiny_resnet: every node inherits its MLPERF_BUILD_DIR / MLPERF_SCRATCH_PATH (the
    shared filesystem of a real cluster)."""
    with LocalRayCluster(workers=2, cpus_per_node=1, head_cpus=1, system_config=FAST_HEALTH) as c:
        yield c


@pytest.fixture(scope="module")
def env(cluster, tiny_resnet) -> dict:
    return {**tiny_resnet, **DRIVER_ENV}


def ray_args(cluster) -> tuple[str, ...]:
    return ("--executor=ray", f"--ray_address={cluster.address}")


def one(root: Path) -> dict:
    ms = metadata_under(root)
    assert len(ms) == 1, [m.get("log_dir") for m in ms]
    return ms[0]


def predictions(m: dict) -> dict[int, str]:
    entries = json.loads((Path(m["log_dir"]) / "mlperf_log_accuracy.json").read_text())
    return {e["qsl_idx"]: e["data"] for e in entries}


@pytest.fixture(scope="module")
def offline(cluster, env, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("ray_offline")
    run_main("--action=run_harness", *RESNET, "--scenarios=Offline", *offline_samples(512), *ray_args(cluster),
             f"--log_dir={root}", env=env, check=True)
    return one(root)


def test_ray_resnet50_offline_valid_on_three_nodes(offline, cluster):
    m = offline
    assert m["status"] == "ok" and m["result_validity"] == "VALID", m["invalid_reasons"]
    ex = m["executor"]
    assert ex["kind"] == "ray" and ex["node_count"] == 3 and len(ex["actors"]) == 3
    assert {a["node"] for a in ex["actors"]} == {"127.0.0.1"} and len({a["pid"] for a in ex["actors"]}) == 3
    assert ex["failures"] == [] and ex["retries"] == 0 and ex["engines_shipped"] is False
    assert set(ex["engines_sha256"]) == {"resnet50"}
    assert m["completed_samples"] == 512


def test_ray_resnet50_server_valid(offline, cluster, env, tmp_path):
    # 30% of what the cluster served Offline; halved once if the load alone broke the bound (CI, stop 47: a p99
    # of 587 ms at 76.6 QPS beside two other test workers)
    qps = round(max(5.0, 0.3 * offline["metric_value"]), 2)
    m, _, _ = server_run(("--action=run_harness", *RESNET, "--scenarios=Server", LOOSE, "--min_duration=1000",
                          "--min_query_count=460", *ray_args(cluster)), tmp_path, env, qps)
    assert m["status"] == "ok" and m["result_validity"] == "VALID", m["invalid_reasons"]
    assert m["executor"]["node_count"] == 3 and m["executor"]["failures"] == []


def test_ray_resnet50_accuracy_identical_to_local(cluster, env, tmp_path):
    for name, extra in (("local", ()), ("ray", ray_args(cluster))):
        run_main("--action=run_harness", *RESNET, "--scenarios=Offline", "--test_mode=AccuracyOnly", *extra,
                 f"--log_dir={tmp_path / name}", env=env, check=True)
    local, ray = one(tmp_path / "local"), one(tmp_path / "ray")
    assert local["executor"] == {"kind": "local"} and ray["executor"]["kind"] == "ray"
    assert predictions(ray) == predictions(local)            # every sample's top-1, byte for byte
    assert ray["accuracy"]["metrics"]["acc"] == local["accuracy"]["metrics"]["acc"]


def test_ray_info_shows_the_cluster(cluster, env):
    r = run_main("--action=info", *RESNET[:1], "--scenarios=Offline", *ray_args(cluster), env=env, check=True)
    assert f"Ray cluster {cluster.address}: 3 node(s)" in r.stdout
    assert r.stdout.count("-> 1 actor(s)") == 3
    assert "results are filed under system" in r.stdout and "number_of_nodes 3" in r.stdout


def test_ray_unreachable_address_is_one_line_error(env, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]            # nothing listens there once closed
    r = run_main("--action=run_harness", *RESNET, "--scenarios=Offline", *offline_samples(8), "--executor=ray",
                 f"--ray_address=127.0.0.1:{port}", f"--log_dir={tmp_path}", env=env)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert f"the Ray cluster at --ray_address=127.0.0.1:{port} is unreachable" in r.stderr
    assert "fix: start it: ray start --head" in r.stderr


def test_ray_gpu_node_without_the_engine_then_shipped(cluster, env, tmp_path):
    """A node whose build/ is its own (no shared filesystem): the run stops before it starts, naming the
    node; with --ray_ship_engines the head's engine goes through the object store and the run works.
    The node declares 2 GPUs (Ray resources; its engines still run on the CPU here): it hosts one actor
    per GPU, each with num_gpus=1 and its own CUDA_VISIBLE_DEVICES id."""
    g = cluster.add_node("w3", {"MLPERF_BUILD_DIR": str(tmp_path / "w3_build")}, gpus=2)
    try:
        r = run_main("--action=run_harness", *RESNET, "--scenarios=Offline", *offline_samples(64), *ray_args(cluster),
                     f"--log_dir={tmp_path / 'missing'}", env=env)
        assert r.returncode != 0 and "Traceback" not in r.stderr
        assert "has no engine for resnet50 at " + str(tmp_path / "w3_build" / "engines") in r.stderr
        assert "fix: put build/ and $MLPERF_SCRATCH_PATH on a filesystem every node mounts" in r.stderr
        run_main("--action=run_harness", *RESNET, "--scenarios=Offline", *offline_samples(64), *ray_args(cluster),
                 "--ray_ship_engines", f"--log_dir={tmp_path / 'shipped'}", env=env, check=True)
        m = one(tmp_path / "shipped")
        ex = m["executor"]
        assert m["status"] == "ok" and ex["engines_shipped"] and ex["node_count"] == 4
        assert list((tmp_path / "w3_build" / "engines" / "shipped").rglob("*.onnx"))
        gpu_actors = [a for a in ex["actors"] if a["node_id"] == g["node_id"]]
        assert sorted(a["name"].split("@")[0] for a in gpu_actors) == ["gpu0", "gpu1"]
        assert sorted(a["gpu_ids"][0] for a in gpu_actors) == ["0", "1"] and all(len(a["gpu_ids"]) == 1 for a in gpu_actors)
        assert next(n for n in ex["nodes"] if n["node_id"] == g["node_id"])["gpus"] == 2
    finally:
        cluster.remove_node("w3")


def test_ray_node_with_other_package_versions(cluster, env, tmp_path):
    fake = tmp_path / "site"
    (fake / "numpy-1.0.0.dist-info").mkdir(parents=True)      # what importlib.metadata reads on that node
    (fake / "numpy-1.0.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 1.0.0\n")
    cluster.add_node("w4", {"PYTHONPATH": str(fake)})
    try:
        r = run_main("--action=run_harness", *RESNET, "--scenarios=Offline", *offline_samples(64), *ray_args(cluster),
                     f"--log_dir={tmp_path / 'run'}", env=env)
        assert r.returncode != 0 and "Traceback" not in r.stderr
        assert "has other package versions than the head: numpy 1.0.0 (head: " in r.stderr
        assert "fix: install the same pins on every node: make prebuild there" in r.stderr
    finally:
        cluster.remove_node("w4")


def test_ray_node_death_mid_run_is_retried_and_every_sample_answered_once(cluster, env, tmp_path, monkeypatch):
    """Runs last: w1 is gone afterwards. Each actor batch takes at least 40 ms (slow_batch_ms), so the
    kill lands while batches are in flight whatever this machine's speed."""
    from code.common.settings import RunControl
    from code.main import plan

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    _, [s] = plan(["--action=run_harness", *RESNET, "--scenarios=Offline", "--test_mode=AccuracyOnly",
                   "--gpu_batch_size=2", *ray_args(cluster)])
    m, killed_at = run_and_kill(s, RunControl(test_mode="AccuracyOnly", slow_batch_ms=40), tmp_path, cluster, "w1")
    assert m["status"] == "ok", m["error"]
    ex = m["executor"]
    assert ex["failures"] and {f["node_id"] for f in ex["failures"]} == {cluster.node("w1")["node_id"]}
    assert {a["alive"] for a in ex["actors"]} == {True, False}
    assert ex["retries"] >= 1 and ex["retried_samples"]
    qsl = sorted(json.loads((Path(m["log_dir"]) / "mlperf_log_accuracy.json").read_text()), key=lambda e: e["qsl_idx"])
    n = m["completed_samples"]
    assert [e["qsl_idx"] for e in qsl] == list(range(n))               # none missing, none twice
    assert m["accuracy"]["metrics"]["acc"] == 100.0
    print(f"node w1 killed {time.monotonic() - killed_at:.1f}s before the test's end; {len(ex['failures'])} failure(s), "
          f"{ex['retries']} retried batch(es), samples {ex['retried_samples'][:8]}...")


def run_and_kill(s, control, tmp_path: Path, cluster: LocalRayCluster, node: str) -> tuple[dict, float]:
    """Run in a thread (the child is a process of its own); 1 s after LoadGen has started the test (its
    detail log exists in the staging folder), SIGKILL ``node``'s raylet. Returns (metadata, kill time)."""
    from code.common.harness.runner import run_one

    out: dict = {}
    t = threading.Thread(target=lambda: out.update(m=run_one(s, control, tmp_path / "run", {"resnet50": _engine(s)})))
    t.start()
    deadline = time.monotonic() + 300
    while not any(tmp_path.glob("*.partial/mlperf_log_detail.txt")):
        assert t.is_alive() and time.monotonic() < deadline, "the run ended before LoadGen started"
        time.sleep(0.05)
    time.sleep(1.0)
    cluster.kill_node(node)
    killed_at = time.monotonic()
    t.join(timeout=300)
    return out["m"], killed_at


def _engine(s) -> str:
    from code.common.benchmarks import implementation

    return implementation(s.spec)(s).generate_engines()["resnet50"]


def test_ray_llm_engine_mode_is_recorded(cluster, tiny_llama, tmp_path):
    """An LLM keeps its own engine; with executor=ray the harness joins the cluster (vLLM and
    TensorRT-LLM find it through RAY_ADDRESS) and records it."""
    run_main("--action=run_harness", "--benchmarks=llama2_70b", "--model_variant=tiny", "--scenarios=Offline",
             *offline_samples(16), "--llm_sample_count=16", *ray_args(cluster), f"--log_dir={tmp_path}",
             env={**tiny_llama, **DRIVER_ENV}, check=True)
    m = one(tmp_path)
    ex = m["executor"]
    assert m["status"] == "ok" and ex["kind"] == "ray" and ex["mode"] == "engine"
    assert ex["node_count"] >= 2 and ex["llm_distributed_backend"] == "auto" and ex["cluster_gpus"] == 0


def test_ray_no_actor_left_stops_the_run_with_the_error(tiny_resnet, tmp_path, monkeypatch):
    """A cluster whose only actor is on a worker node (the head has no CPUs for one): that node dies
    mid-run, the run ends at once with the error and its executor record, and it is not staged."""
    from code.common.results.selection import Run, _why_not_performance
    from code.common.settings import RunControl
    from code.main import plan

    with LocalRayCluster(workers=1, cpus_per_node=1, head_cpus=0, system_config=FAST_HEALTH) as c:
        for k, v in {**tiny_resnet, **DRIVER_ENV}.items():
            monkeypatch.setenv(k, v)
        _, [s] = plan(["--action=run_harness", *RESNET, "--scenarios=Offline", *offline_samples(4096),
                       "--gpu_batch_size=2", "--executor=ray", f"--ray_address={c.address}"])
        m, t0 = run_and_kill(s, RunControl(slow_batch_ms=40), tmp_path, c, "w1")
    assert m["status"] == "error" and m["error"].startswith("every Ray actor is gone ("), m["error"]
    assert "ray status" in m["error_fix"]
    assert m["executor"]["failures"] and not any(a["alive"] for a in m["executor"]["actors"])
    assert time.monotonic() - t0 < 60          # 4096 samples at 50/s would take 80 s more
    assert _why_not_performance(Run(Path(m["log_dir"]), m)) is not None    # never staged
