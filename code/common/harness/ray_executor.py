"""``executor=ray``: the SUT's workers as Ray actors on every node of a Ray cluster.

LoadGen and the batching SUT (``code.common.harness.sut``) stay in the harness child on the head node, so
LoadGen sees one SUT and the order guarantees are the local ones: each SUT worker thread drives one
``RemoteProcessor``, which sends its batch (QSL indices) to its actor and completes the batch to
LoadGen when the actor's numpy arrays come back. Nothing but Ray carries work or results.

Actors (``_Worker``): one per GPU on GPU nodes (``num_gpus=1``; Ray sets CUDA_VISIBLE_DEVICES), and
``ray_cpu_actors`` on nodes without GPUs (``ray_actor_cpus`` CPUs each), pinned to their node. Each
builds its own Benchmark from the same resolved settings (one worker of it: the actor's device), its
own QSL and Processor. LoadGen's QSL loads and unloads are sent to every live actor.

Engines and data: every node must see the data under its own ``$MLPERF_SCRATCH_PATH`` (a shared
filesystem, or the same files made there), and the engines under its ``build/engines``
(``$MLPERF_BUILD_DIR``), or get them from the head through the object store (``ray_ship_engines``).
Before the run every actor hashes its engines; a missing or different engine stops the run with the
node named. Package versions (python, numpy, onnxruntime, torch, ray, ...) are compared the same way.

Faults: a batch whose actor or node died is sent to the next live actor, at most ``ray_max_retries``
times; the run goes on, and ``record()`` (metadata.json ``executor``) holds each failure, the retry
count and the retried QSL indices. LoadGen completes each sample once: only the answer that came
back is handed to it. With no actor left, ``on_lost`` ends the run with the error (nothing is staged
from a failed run).

Thread-safety: ``Pool`` state changes under one lock; ``RemoteProcessor.process`` is called by its
own SUT worker thread only, and blocks in ``ray.get`` (which releases the GIL).
"""
from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from code.common.benchmark import Processor
from code.common.errors import HarnessError, RunError


def checked() -> tuple[str, ...]:
    """Packages whose versions must agree between the head and every actor (the engines and their inputs)."""
    from code.common.backends import library_versions

    return ("python", "numpy", *library_versions(), "ray")


RAY_START = "ray start --head --port=6379 (on the head node), then `ray start --address=<head>:6379` on the others"
PIN_FIX = "install the same pins on every node: make prebuild there (requirements.txt), from the same checkout"
SHARED_FIX = ("put build/ and $MLPERF_SCRATCH_PATH on a filesystem every node mounts (same layout), or add "
              "--ray_ship_engines to send the engines through Ray's object store")


def available() -> tuple[bool, str]:
    try:
        import ray
    except ImportError as e:
        return False, f"ray does not import ({e})"
    return True, f"ray {ray.__version__}"


def versions() -> dict[str, str | None]:
    from code.common.systems.facts import software_versions

    out = software_versions()
    try:
        import ray

        out["ray"] = ray.__version__
    except ImportError:
        out["ray"] = None
    return out


def _failure_types() -> tuple[type, ...]:
    """What a dead actor or node raises in ray.get (RayActorError covers ActorDiedError and
    ActorUnavailableError)."""
    import ray.exceptions as rx

    names = ("RayActorError", "WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OwnerDiedError",
             "LocalRayletDiedError")
    return tuple(getattr(rx, n) for n in names if hasattr(rx, n))


def reachable(address: str, timeout_s: float = 5.0) -> str | None:
    """None when host:port accepts a TCP connection, else why not (checked before ray.init, which
    would retry for a minute)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return f"'{address}' is not host:port"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}"


LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def _loopback_only() -> None:
    """Make this driver (and the cluster it starts) use 127.0.0.1 only. Ray's node-IP discovery picks
    the machine's routable address and listens on every interface; a private one-run cluster, or a
    cluster started on 127.0.0.1, needs neither."""
    import ray._private.ray_constants as rc
    import ray._private.services as services

    services.get_node_ip_address = lambda address=None: "127.0.0.1"
    rc.ENABLE_RAY_CLUSTER = False


def connect(address: str | None, *, num_cpus: int | None = None) -> dict[str, Any]:
    """Join the cluster at ``address`` ('auto': the one started on this machine), or start a private
    single-node one. Returns the cluster as ``describe()`` says it."""
    ok, why = available()
    if not ok:
        raise HarnessError(f"--executor=ray needs Ray: {why}", "make prebuild (requirements.txt pins ray)")
    import ray

    if ray.is_initialized():
        return describe()
    if address and address != "auto":
        problem = reachable(address)
        if problem:
            raise HarnessError(f"the Ray cluster at --ray_address={address} is unreachable ({problem})",
                               f"start it: {RAY_START}; or drop --ray_address for a private local cluster")
    from code.common import paths

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # actors import the harness from the same checkout path on every node (ray's own import of the
    # stdlib ``code`` module must not win: the repo goes first on their path)
    pythonpath = f"{paths.REPO_ROOT}{os.pathsep}${{PYTHONPATH}}"      # the node's own PYTHONPATH after it
    kw: dict[str, Any] = {"log_to_driver": False, "configure_logging": False,
                          "runtime_env": {"env_vars": {"PYTHONPATH": pythonpath, "RAY_USAGE_STATS_ENABLED": "0"}}}
    if not address or address.rpartition(":")[0] in LOOPBACK:
        _loopback_only()
    if address:
        kw["address"] = address
    else:                                 # private: this machine only, on the loopback address
        kw.update(include_dashboard=False, num_cpus=num_cpus, _node_ip_address="127.0.0.1")
    try:
        ray.init(**kw)
        if not address:                   # a run that aborts (watchdog, no actor left) stops it too
            from code.common.harness import monitor

            monitor.at_abort(ray.shutdown)
    except Exception as e:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError ...
        raise HarnessError(f"cannot join the Ray cluster at {address or 'a new local cluster'}: "
                           f"{str(e).splitlines()[0] if str(e) else type(e).__name__}",
                           f"check it with `ray status --address={address}`; start it: {RAY_START}" if address
                           else "see `ray start --help`; or run with --executor=local") from None
    return describe()


def describe() -> dict[str, Any]:
    """The connected cluster: its live nodes (address, CPUs, GPUs) and totals."""
    import ray

    nodes = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        res = n.get("Resources") or {}
        nodes.append({"node_id": n["NodeID"], "address": n.get("NodeManagerAddress"),
                      "hostname": n.get("NodeManagerHostname"), "cpus": res.get("CPU", 0),
                      "gpus": int(res.get("GPU", 0)), "head": "node:__internal_head__" in res})
    nodes.sort(key=lambda n: (not n["head"], n["address"] or "", n["node_id"]))
    return {"nodes": nodes, "node_count": len(nodes), "gpus": sum(n["gpus"] for n in nodes),
            "cpus": sum(n["cpus"] for n in nodes)}


def llm_cluster(settings) -> dict[str, Any]:
    """executor=ray for an LLM: join the cluster (vLLM / TensorRT-LLM find it through RAY_ADDRESS) and
    return what metadata.json records; the engine places its own workers."""
    v = settings.values
    cluster = connect(v.get("ray_address"))
    import ray

    os.environ["RAY_ADDRESS"] = ray.get_runtime_context().gcs_address
    return {"kind": "ray", "mode": "engine", "address": v.get("ray_address") or "private local cluster",
            "node_count": cluster["node_count"], "nodes": cluster["nodes"], "cluster_gpus": cluster["gpus"],
            "llm_distributed_backend": v.get("llm_distributed_backend"),
            "tensor_parallel_size": v.get("tensor_parallel_size"),
            "pipeline_parallel_size": v.get("pipeline_parallel_size")}


def cluster_gpus() -> int | None:
    """GPUs of the connected cluster, or None when this process is not connected."""
    try:
        import ray
    except ImportError:
        return None
    return describe()["gpus"] if ray.is_initialized() else None


def actors_on(node: Mapping[str, Any], cpu_actors: int, actor_cpus: float) -> int:
    """Actors a node hosts: one per GPU, else ``cpu_actors`` where it has ``actor_cpus`` CPUs for one
    (a head started with 0 CPUs hosts none)."""
    if node["gpus"]:
        return int(node["gpus"])
    return cpu_actors if node["cpus"] >= actor_cpus else 0


def sha256(path: str | os.PathLike) -> str | None:
    """sha256 of a file, or of a folder's files (sorted relative paths and each file's sha256); None if
    absent. Contents, not mtimes: the copies on other nodes are compared with it."""
    from code.common.fileio import sha256_file

    p = Path(path)
    if not p.exists():
        return None
    if p.is_file():
        return sha256_file(p)
    h = hashlib.sha256()
    for f in sorted(x for x in p.rglob("*") if x.is_file()):
        h.update(f"{f.relative_to(p)}\0{sha256_file(f)}\n".encode())
    return h.hexdigest()


class _Worker:
    """One actor: its own Benchmark, QSL and Processor (decorated with ray.remote in ``Pool``)."""

    def __init__(self, request: Mapping[str, Any], head_engines_dir: str):
        self.request, self.head_engines_dir = request, head_engines_dir
        control = request.get("control") or {}
        self.slow_s = float(control.get("slow_batch_ms") or 0) / 1000
        self.null = bool(control.get("null_processor"))
        self.null_service_s = float(control.get("null_service_ms") or 0) / 1000
        self.engines: dict[str, str] = {}
        self.qsl = self.proc = None

    def node(self) -> dict[str, Any]:
        import ray

        ctx = ray.get_runtime_context()
        return {"node_id": ctx.get_node_id(), "host": socket.gethostname(), "pid": os.getpid(),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()], "versions": versions()}

    def local_engine(self, path: str) -> str:
        """The head's engine path as this node sees it: the same place under its own build/engines."""
        from code.common import paths

        try:
            rel = Path(path).resolve().relative_to(Path(self.head_engines_dir).resolve())
        except ValueError:
            return path
        return str(paths.engines_dir() / rel)

    def check_engines(self, engines: Mapping[str, str]) -> dict[str, tuple[str, str | None]]:
        """component -> (path on this node, its sha256 or None when absent)."""
        out = {}
        for comp, path in engines.items():
            mine = self.engines.get(comp) or self.local_engine(path)
            out[comp] = (mine, sha256(mine))
        return out

    def install_engine(self, comp: str, name: str, files: Mapping[str, bytes], digest: str) -> str:
        """Write a shipped engine under this node's build/engines/shipped/<sha256 prefix>/<name> (staged;
        kept for later runs). ``files``: {"": bytes} for a file, {relative path: bytes} for a folder."""
        from code.common import paths
        from code.common.fileio import staged_dir

        dest = paths.engines_dir() / "shipped" / digest[:16]
        target = dest / name
        if sha256(target) != digest:
            with staged_dir(dest) as tmp:
                for rel, data in files.items():
                    out = tmp / name / rel if rel else tmp / name
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(data)
        self.engines[comp] = str(target)
        return str(target)

    def build(self, engines: Mapping[str, str]) -> dict[str, Any]:
        from code.common.benchmarks import implementation, resolve
        from code.common.harness.runner import system_from_json
        from code.common.settings import RunSettings

        req = self.request
        spec = resolve(req["settings"]["benchmark"])
        settings = RunSettings.from_json(req["settings"], spec, system_from_json(req["system"]))
        bench = implementation(spec)(settings)
        local = {c: self.engines.get(c) or self.local_engine(p) for c, p in engines.items()}
        self.qsl = bench.make_qsl()
        if self.null:                    # the harness's own ceiling: no model work on the actor either
            from code.common.harness.sut import NullProcessor

            bs = settings.batch_size() if not isinstance(settings.gpu_batch_size, dict) else 1
            procs = [NullProcessor(bs, self.null_service_s)]
        else:
            procs = bench.make_processors(self.qsl, local)
        self.proc = procs[0]
        for extra in procs[1:]:          # one worker per actor (one_worker_request); never more
            extra.close()
        self.proc.warmup()
        self.proc.thread_init()
        return {"batch_size": self.proc.batch_size, "engines": local}

    def load(self, indices: Sequence[int]) -> int:
        self.qsl.load(list(indices))
        return len(indices)

    def unload(self, indices: Sequence[int]) -> int:
        self.qsl.unload(list(indices))
        return len(indices)

    def process(self, indices: Sequence[int]):
        """The batch's outputs: one stacked array when they share shape and dtype (one buffer to
        serialize; the head splits it into row views), else the list."""
        import numpy as np

        t0 = time.monotonic()
        outs = self.proc.process(list(indices))
        if self.slow_s:
            time.sleep(max(0.0, self.slow_s - (time.monotonic() - t0)))
        if outs and all(o.shape == outs[0].shape and o.dtype == outs[0].dtype for o in outs):
            return np.stack(outs)
        return outs


def one_worker_request(request: Mapping[str, Any], gpu: bool, cpus: float) -> dict[str, Any]:
    """The run request as one actor builds it: a single worker on the actor's device (its one GPU, or
    its CPUs as engine threads), nothing pinned (Ray places the actor)."""
    req = {**request, "settings": {**request["settings"], "values": dict(request["settings"]["values"])},
           "system": {**request["system"], "info": dict(request["system"]["info"])}}
    values = req["settings"]["values"]
    values["gpu_inference_streams"] = 1
    values["cpu_pin_cores"] = False
    info = req["system"]["info"]
    if gpu:
        info["gpus"] = list(info.get("gpus") or [])[:1]
    elif not values.get("cpu_threads"):
        values["cpu_threads"] = max(1, int(cpus))
    return req


class Pool:
    """The actors of one run and what happened to them."""

    def __init__(self, request: Mapping[str, Any], engines: Mapping[str, str], *, address: str | None,
                 cpu_actors: int, actor_cpus: float, max_retries: int, ship_engines: bool, in_flight: int = 2,
                 on_lost: Callable[[str, str], None] | None = None, log=print):
        import ray

        self.ray, self.log = ray, log
        self.cluster = connect(address)
        self.address = address or "private local cluster"
        self.max_retries, self.on_lost, self.in_flight = max_retries, on_lost, max(1, in_flight)
        self.failure_types = _failure_types()
        self._lock = threading.Lock()
        self.failures: list[dict[str, Any]] = []
        self.retried: list[int] = []
        self.retries = 0
        self._lost = False
        self.t0 = time.monotonic()
        self.actors: list[dict[str, Any]] = []
        self._place(request, engines, cpu_actors, actor_cpus)
        self.engine_sha = {c: sha256(p) for c, p in engines.items()}
        self._check(engines, ship_engines)
        built = self._all(lambda a: a.build.remote(engines), "building its engine")
        self.batch_size = built[0]["batch_size"]
        log(f"[ray] {len(self.actors)} actor(s) on {self.cluster['node_count']} node(s) of {self.address}: "
            + ", ".join(f"{a['name']}@{a['host']}" for a in self.actors))

    # --- set-up ---------------------------------------------------------------------------------------
    def _place(self, request, engines, cpu_actors: int, actor_cpus: float) -> None:
        from code.common import paths
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = self.ray.remote(_Worker)
        for n in self.cluster["nodes"]:
            gpu = n["gpus"] > 0
            for k in range(actors_on(n, cpu_actors, actor_cpus)):
                # a GPU actor reserves one CPU, or its share where the node has fewer CPUs than GPUs
                opts = {"num_gpus": 1, "num_cpus": min(1.0, n["cpus"] / n["gpus"])} if gpu else {"num_cpus": actor_cpus}
                actor = remote.options(max_restarts=0, max_task_retries=0, **opts, scheduling_strategy=
                                       NodeAffinitySchedulingStrategy(n["node_id"], soft=False)).remote(
                    one_worker_request(request, gpu, actor_cpus), str(paths.engines_dir()))
                self.actors.append({"handle": actor, "node_id": n["node_id"], "node": n["address"],
                                    "name": f"{'gpu' if gpu else 'cpu'}{k}@{n['node_id'][:8]}", "alive": True,
                                    "host": n["hostname"]})
        if not self.actors:
            raise HarnessError(f"the Ray cluster at {self.address} has no node to place an actor on "
                               f"({self.cluster['node_count']} node(s), none with a GPU, ray_cpu_actors=0)",
                               "set --ray_cpu_actors=1 (or more) for CPU nodes, or add GPU nodes to the cluster")
        infos = self._all(lambda a: a.node.remote(), "starting", timeout=300)
        head, keys = versions(), checked()
        for a, info in zip(self.actors, infos):
            a["host"], a["pid"], a["gpu_ids"] = info["host"], info["pid"], info["gpu_ids"]
            diff = [f"{k} {info['versions'].get(k)} (head: {head.get(k)})" for k in keys
                    if info["versions"].get(k) != head.get(k)]
            if diff:
                raise HarnessError(f"Ray node {a['node']} ({a['host']}) has other package versions than the head: "
                                   + ", ".join(diff), PIN_FIX)

    def _check(self, engines: Mapping[str, str], ship: bool) -> None:
        """Every actor must hold each engine with the head's sha256 (or gets it shipped)."""
        seen = self._all(lambda a: a.check_engines.remote(dict(engines)), "checking its engines")
        for a, found in zip(self.actors, seen):
            for comp, (path, digest) in found.items():
                want = self.engine_sha[comp]
                if digest == want:
                    continue
                if ship and want:
                    files = _engine_files(engines[comp])
                    self.ray.get(a["handle"].install_engine.remote(comp, Path(engines[comp]).name, files, want))
                    path2, d2 = self.ray.get(a["handle"].check_engines.remote({comp: engines[comp]}))[comp]
                    if d2 == want:
                        continue
                    digest, path = d2, path2
                what = "has no engine" if digest is None else f"has another engine (sha256 {digest[:12]}, head {want[:12]})"
                raise HarnessError(f"Ray node {a['node']} ({a['host']}) {what} for {comp} at {path}", SHARED_FIX)
        self.shipped = ship

    def _all(self, call, doing: str, timeout: float | None = None) -> list:
        """Run ``call(actor)`` on every actor; an actor's failure is a one-line error naming its node."""
        refs = [call(a["handle"]) for a in self.actors]
        out = []
        for a, ref in zip(self.actors, refs):
            try:
                out.append(self.ray.get(ref, timeout=timeout))
            except Exception as e:  # noqa: BLE001 - RayTaskError wraps the actor's own exception
                cause = getattr(e, "cause", None) or e
                if isinstance(cause, HarnessError):
                    raise HarnessError(f"Ray node {a['node']} ({a['host']}): {cause.cause}", cause.fix) from None
                first = str(cause).strip().splitlines()[-1] if str(cause).strip() else type(cause).__name__
                raise HarnessError(f"Ray actor {a['name']} on node {a['node']} failed {doing}: {first[:300]}",
                                   "see the node's Ray logs (/tmp/ray/session_latest/logs); " + PIN_FIX) from None
        return out

    # --- the run --------------------------------------------------------------------------------------
    def processors(self) -> list["RemoteProcessor"]:
        """``in_flight`` SUT workers per actor: while the actor runs one batch, the next is already queued
        there (an actor runs its calls one at a time), so the round trip hides behind the compute."""
        return [RemoteProcessor(self, i) for _ in range(self.in_flight) for i in range(len(self.actors))]

    def live(self) -> list[int]:
        with self._lock:
            return [i for i, a in enumerate(self.actors) if a["alive"]]

    def pick(self, preferred: int) -> int:
        """The preferred actor if alive, else the next live one after it; RunError when none is left."""
        live = self.live()
        if not live:
            cause = (f"every Ray actor is gone ({len(self.failures)} failure(s); last: "
                     f"{self.failures[-1]['error'] if self.failures else '?'})")
            fix = f"check the nodes with `ray status`, restart them ({RAY_START}), and rerun"
            with self._lock:
                first, self._lost = not self._lost, True
            if first and self.on_lost is not None:     # once, whichever worker thread sees it first
                self.on_lost(cause, fix)
            raise RunError(cause, fix)
        return preferred if preferred in live else next((i for i in live if i > preferred), live[0])

    def failed(self, i: int, error: BaseException, indices: Sequence[int]) -> None:
        with self._lock:
            a = self.actors[i]
            first = a["alive"]
            a["alive"] = False
            self.failures.append({"actor": a["name"], "node": a["node"], "node_id": a["node_id"], "host": a["host"],
                                  "error": f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}",
                                  "at_s": round(time.monotonic() - self.t0, 3), "samples": len(indices)})
        if first:
            left = len(self.live())
            self.log(f"[ray] actor {a['name']} on node {a['node']} failed ({type(error).__name__}); {left} actor(s) "
                     f"left{'; its batch goes to another' if left else ''}", flush=True)

    def note_retry(self, indices: Sequence[int]) -> None:
        with self._lock:
            self.retries += 1
            self.retried.extend(int(i) for i in indices)

    def broadcast(self, method: str, indices: Sequence[int]) -> None:
        """QSL load/unload on every live actor; an actor that died meanwhile is marked so."""
        idx = list(indices)
        live = self.live()
        refs = [(i, getattr(self.actors[i]["handle"], method).remote(idx)) for i in live]
        for i, ref in refs:
            try:
                self.ray.get(ref)
            except Exception as e:  # noqa: BLE001 - a node gone, or the load itself failing there
                self.failed(i, getattr(e, "cause", None) or e, [])
        self.pick(0)                         # none left: the run ends here

    def record(self) -> dict[str, Any]:
        """metadata.json ``executor``."""
        with self._lock:
            return {"kind": "ray", "address": self.address, "node_count": self.cluster["node_count"],
                    "nodes": self.cluster["nodes"], "engines_sha256": self.engine_sha,
                    "engines_shipped": self.shipped, "max_retries": self.max_retries,
                    "actors": [{k: a.get(k) for k in ("name", "node", "node_id", "host", "pid", "gpu_ids", "alive")}
                               for a in self.actors],
                    "failures": list(self.failures), "retries": self.retries,
                    "retried_samples": sorted(self.retried)}

    def close(self) -> None:
        for a in self.actors:
            try:
                self.ray.kill(a["handle"])
            except Exception:  # noqa: BLE001 - already gone
                pass


def _engine_files(path: str) -> dict[str, bytes]:
    """An engine's bytes for shipping: {"": bytes} for a file, {relative path: bytes} for a folder."""
    p = Path(path)
    if p.is_file():
        return {"": p.read_bytes()}
    return {str(f.relative_to(p)): f.read_bytes() for f in sorted(p.rglob("*")) if f.is_file()}


class RemoteProcessor(Processor):
    """The SUT's view of one actor: ``process`` runs the batch there (or, after its actor died, on the
    next live one), returning the actor's arrays."""

    def __init__(self, pool: Pool, slot: int):
        self.pool, self.slot = pool, slot
        self.batch_size = pool.batch_size

    def process(self, indices: Sequence[int]) -> list:
        pool, idx = self.pool, list(indices)
        i, tries = pool.pick(self.slot), 0
        while True:
            try:
                out = pool.ray.get(pool.actors[i]["handle"].process.remote(idx))
                return list(out)             # a stacked array: its rows (views into one buffer)
            except pool.failure_types as e:
                pool.failed(i, e, idx)
                if tries >= pool.max_retries:
                    raise RunError(f"a batch of {len(idx)} sample(s) failed on {tries + 1} Ray actor(s); last: "
                                   f"{type(e).__name__}", "check the nodes with `ray status`; raise "
                                   "--ray_max_retries if nodes come and go") from None
                tries += 1
                i = pool.pick(i)
                pool.note_retry(idx)
            except Exception as e:  # noqa: BLE001 - the actor's own error (RayTaskError): its cause, with its fix
                cause = getattr(e, "cause", None)
                raise cause if isinstance(cause, HarnessError) else e from None


class RemoteQSL:
    """The head's QSL with loads and unloads sent to every actor (the head holds no samples)."""

    def __init__(self, qsl, pool: Pool):
        self._qsl, self._pool = qsl, pool

    def load(self, indices) -> None:
        self._pool.broadcast("load", indices)

    def unload(self, indices) -> None:
        self._pool.broadcast("unload", indices)

    def __getattr__(self, name):
        return getattr(self._qsl, name)
