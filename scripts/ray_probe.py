"""Probe a real local multi-node Ray cluster (tests/ray_cluster.py): start-up, connect, actors pinned
per node, call latency/throughput, RSS, what a driver sees when a node's raylet dies, and which
way of passing the repo reaches actor processes for ``import code.common``.

    .venv/bin/python scripts/ray_probe.py [--skip-import-variants]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from ray_cluster import DRIVER_ENV, LocalRayCluster, loopback_driver, ray_available  # noqa: E402

ok, why = ray_available()
if not ok:
    sys.exit(f"ray_probe: {why}")
import numpy as np  # noqa: E402
import ray  # noqa: E402


@ray.remote(num_cpus=0)
class Probe:
    def where(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def ping(self) -> int:
        return 1

    def arr(self, n: int = 1000) -> np.ndarray:
        return np.arange(n, dtype=np.float32)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.ones((4, 3), np.float32), np.arange(5, dtype=np.int64)

    def slow(self, s: float) -> str:
        time.sleep(s)
        return "done"

    def import_repo(self) -> str:
        import os
        try:
            import code.common.errors as e  # noqa: F401 - the point is whether it imports
            return f"OK code from {sys.modules['code'].__file__}"
        except Exception as ex:  # noqa: BLE001
            return (f"FAIL {type(ex).__name__}: {ex}; code={getattr(sys.modules.get('code'), '__file__', None)}; "
                    f"PYTHONPATH={os.environ.get('PYTHONPATH')!r}; sys.path[:4]={sys.path[:4]}; "
                    f"repo in sys.path: {str(REPO) in sys.path}")


class RssSampler(threading.Thread):
    """Peak summed RSS (MiB) of one cluster's processes, and each process kind's peak."""

    def __init__(self, cluster: LocalRayCluster):
        super().__init__(daemon=True)
        self.cluster, self.stop_ev, self.peak_total, self.peak_kind = cluster, threading.Event(), 0.0, {}

    def run(self) -> None:
        while not self.stop_ev.is_set():
            total = 0.0
            for pid, _, argv in self.cluster.procs():
                try:
                    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmRSS"))
                except (OSError, StopIteration):
                    continue
                mib = int(line.split()[1]) / 1024
                total += mib
                kind = Path(argv[0]).name if argv else "?"
                if "python" in kind:
                    kind = next((Path(a).name for a in argv[1:] if a.endswith(".py")), "python")
                elif kind.startswith("ray::"):
                    kind = argv[0].split()[0].split(".")[0]
                self.peak_kind[kind] = max(self.peak_kind.get(kind, 0.0), mib)
            self.peak_total = max(self.peak_total, total)
            self.stop_ev.wait(0.25)


def timed(f, *a, **k):
    t = time.monotonic()
    r = f(*a, **k)
    return r, time.monotonic() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-import-variants", action="store_true")
    ap.add_argument("--system-config", default=None, help="JSON for the head's --system-config")
    ap.add_argument("--kill-everything", action="store_true", help="kill all of w1's processes, not just its raylet")
    ap.add_argument("--linger", type=float, default=0, help="stay this long after stop() (GCS-client leak check)")
    args = ap.parse_args()
    syscfg = json.loads(args.system_config) if args.system_config else None
    t_all = time.monotonic()
    print(f"ray {ray.__version__}, numpy {np.__version__}, python {sys.version.split()[0]}")
    cluster = LocalRayCluster(workers=2, system_config=syscfg)
    rss = RssSampler(cluster)
    rss.start()
    try:
        _, t_up = timed(cluster.start)
        print(f"cluster up in {t_up:.2f}s at {cluster.address}; `ray start` wall per node (workers started "
              f"in parallel after the head): {({k: round(v, 2) for k, v in cluster.start_times.items()})}")
        for n in cluster.nodes:
            print(f"  node {n['name']}: id {n['node_id'][:12]}.. raylet pid {n['raylet_pid']} resource {n['resource']}")
        loopback_driver()
        _, t = timed(ray.init, address=cluster.address, log_to_driver=False)
        print(f"driver ray.init: {t:.2f}s; nodes seen {len(ray.nodes())}; cluster resources {ray.cluster_resources()}")

        t0 = time.monotonic()
        actors = {n["name"]: Probe.options(resources={n["resource"]: 0.01}, max_restarts=0).remote() for n in cluster.nodes}
        where = {}
        for name, a in actors.items():
            where[name] = ray.get(a.where.remote(), timeout=60)
            print(f"  actor {name} ready at +{time.monotonic() - t0:.2f}s")
        print(f"actor creation (3 in parallel, to first reply): {time.monotonic() - t0:.2f}s")
        for n in cluster.nodes:
            assert where[n["name"]] == n["node_id"], (n, where)
        print("each actor runs on its own node: OK")
        x, y = ray.get(actors["w2"].arrays.remote())
        print(f"numpy from w2: {x.dtype}{x.shape} {y.dtype}{y.shape} writeable={x.flags.writeable}")
        a1, _ = timed(ray.get, actors["w1"].arr.remote(1000))
        print(f"first arr(1000) from w1: {a1.dtype} {a1.shape}")

        for name in ("head", "w1"):
            lat = []
            for _ in range(200):
                t = time.perf_counter()
                ray.get(actors[name].ping.remote())
                lat.append(time.perf_counter() - t)
            print(f"trivial call round trip to {name}: median {statistics.median(lat) * 1e3:.3f} ms, "
                  f"p90 {sorted(lat)[179] * 1e3:.3f} ms")
        for name in ("head", "w1"):
            n = 2000
            t = time.perf_counter()
            for _ in range(n // 4):
                ray.get(actors[name].arr.remote(1000))
            seq = (n // 4) / (time.perf_counter() - t)
            t = time.perf_counter()
            out = ray.get([actors[name].arr.remote(1000) for _ in range(n)])
            pip = n / (time.perf_counter() - t)
            assert len(out) == n and out[-1].shape == (1000,)
            print(f"arr(1000 float32) calls to {name}: sequential {seq:.0f}/s, {n} pipelined {pip:.0f}/s")

        for name in cluster.nodes:
            print(f"import code.common in actor on {name['name']}: {ray.get(actors[name['name']].import_repo.remote())}")

        # --- node death -------------------------------------------------------------------
        report_listeners(cluster)
        w1_before = cluster.procs("w1")
        ref = actors["w1"].slow.remote(20)
        time.sleep(1.0)
        t_kill = time.monotonic()
        cluster.kill_node("w1", everything=args.kill_everything)
        try:
            ray.get(ref, timeout=120)
            print("in-flight call: returned normally (!)")
        except Exception as e:  # noqa: BLE001
            print(f"in-flight call raised after {time.monotonic() - t_kill:.2f}s: {type(e).__module__}.{type(e).__name__} "
                  f"(mro: {[c.__name__ for c in type(e).__mro__[1:4]]}); msg: {str(e).splitlines()[0][:160]}")
        for k in range(2):
            t = time.monotonic()
            try:
                ray.get(actors["w1"].ping.remote(), timeout=120)
                print(f"new call #{k} after kill: returned normally")
            except Exception as e:  # noqa: BLE001
                print(f"new call #{k} to dead actor raised after {time.monotonic() - t:.2f}s "
                      f"(+{time.monotonic() - t_kill:.2f}s since kill): {type(e).__name__}")
        alive_at = {}
        while time.monotonic() - t_kill < 90 and cluster.node("w1")["node_id"] in cluster.alive_node_ids():
            time.sleep(0.2)
        alive_at["marked_dead"] = time.monotonic() - t_kill
        print(f"GCS marked w1 dead {alive_at['marked_dead']:.2f}s after the kill; ray.nodes() alive: "
              f"{sum(n['Alive'] for n in ray.nodes())}")
        t = time.monotonic()
        try:
            ray.get(actors["w1"].ping.remote(), timeout=60)
        except Exception as e:  # noqa: BLE001
            print(f"call after node marked dead raised in {time.monotonic() - t:.3f}s: {type(e).__name__}")
        print(f"w1 processes before kill: {[short(a) for _, _, a in w1_before]}")
        print(f"w1 processes alive at death mark: {[short(a) for _, _, a in cluster.procs('w1')]}")
        time.sleep(10)
        print(f"w1 processes alive 10s later: {[short(a) for _, _, a in cluster.procs('w1')]}")
        print(f"surviving actors: w2 ping={ray.get(actors['w2'].ping.remote(), timeout=30)}, "
              f"head ping={ray.get(actors['head'].ping.remote(), timeout=30)}")
        # a replacement actor pinned to the dead node's resource stays pending (no node has it)
        r = Probe.options(resources={"node_w1": 0.01}).remote()
        try:
            ray.get(r.ping.remote(), timeout=3)
        except ray.exceptions.GetTimeoutError:
            print("actor pinned to dead node's resource: pending (GetTimeoutError after 3s) as expected")
    finally:
        rss.stop_ev.set()
        rss.join()
        _, t = timed(cluster.stop)
        left = cluster.procs()
        print(f"stop(): {t:.2f}s, leftover processes: {len(left)}")
    print(f"peak summed RSS of the cluster's processes: {rss.peak_total:.0f} MiB; per kind peak (MiB): "
          f"{({k: round(v) for k, v in sorted(rss.peak_kind.items())})}")
    print(f"main probe wall: {time.monotonic() - t_all:.1f}s")

    if args.linger:
        time.sleep(args.linger)
        print(f"driver still alive {args.linger}s after its cluster stopped: OK")
    if not args.skip_import_variants:
        import_variants()


def short(argv: list[str]) -> str:
    a0 = Path(argv[0]).name if argv else "?"
    return next((Path(a).name for a in argv[1:] if a.endswith(".py")), a0) if "python" in a0 else a0[:40]


def report_listeners(cluster: LocalRayCluster) -> None:
    """Every TCP listener of the cluster's processes and this driver, by address."""
    pids = {p for p, _, _ in cluster.procs()} | {os.getpid()}
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    addrs: dict[str, int] = {}
    for line in out.splitlines():
        f = line.split()
        if any(f"pid={p}," in line for p in pids):
            host = f[3].rsplit(":", 1)[0]
            addrs[host] = addrs.get(host, 0) + 1
    print(f"TCP listeners of cluster+driver by bind address: {addrs}")


VARIANT_DRIVER = """
import sys, ray
ray.init(address=sys.argv[1], log_to_driver=False)
@ray.remote(num_cpus=0)
def imp():
    import os, sys
    try:
        import code.common.errors
        return "OK code from " + sys.modules["code"].__file__
    except Exception as e:
        return f"FAIL {type(e).__name__}: {e}; PYTHONPATH={os.environ.get('PYTHONPATH')!r}; sys.path[:3]={sys.path[:3]}"
print(ray.get(imp.remote(), timeout=120))
print(ray.get(imp.options(runtime_env={"env_vars": {"PYTHONPATH": sys.argv[2]}}).remote(), timeout=120))
"""


def import_variants() -> None:
    """`import code.common` in workers: (a) PYTHONPATH unset on `ray start`, driver in /work/main;
    (b) same, runtime_env env_vars PYTHONPATH; and a driver subprocess using DRIVER_ENV."""
    t = time.monotonic()
    with LocalRayCluster(workers=0, env={"PYTHONPATH": ""}) as c:
        env = {**os.environ, **DRIVER_ENV}
        env.pop("PYTHONPATH", None)
        r = subprocess.run([sys.executable, "-c", VARIANT_DRIVER, c.address, str(REPO)], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=240)
        lines = [x for x in r.stdout.splitlines() if x.startswith(("OK", "FAIL"))]
        print(f"subprocess driver (cwd=repo, DRIVER_ENV) rc={r.returncode}")
        print(f"  no PYTHONPATH on ray start: {lines[0] if lines else r.stderr[-800:]}")
        print(f"  + runtime_env env_vars PYTHONPATH: {lines[1] if len(lines) > 1 else r.stderr[-800:]}")
    print(f"import-variant cluster (head only) total: {time.monotonic() - t:.1f}s")


if __name__ == "__main__":
    main()
