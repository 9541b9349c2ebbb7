"""A real multi-node Ray cluster on 127.0.0.1 for tests (not a test file).

One ``ray start`` per node: the head and N workers (``--address=127.0.0.1:<gcs port>``) on this
host, CPU only, no dashboard, small object store, each its own ``--temp-dir`` (Ray 2.60 takes
several nodes per host; a driver on this host attaches to the head's raylet).

Contracts:
- Loopback only. On Linux Ray rewrites 127.0.0.1 to the host's routable IP and binds its gRPC
  servers on ``*``; ``_SHIM`` runs the ray CLI with ``get_node_ip_address()`` answering 127.0.0.1,
  so every server binds 127.0.0.1 only. A driver needs the same: ``DRIVER_ENV`` (subprocess, read at
  ``import ray``) or ``loopback_driver()`` (this process); without it ``ray.init`` cannot connect.
- No default port: every port is picked free at start; worker ports are random (``0``).
- Ownership: each ``ray start`` runs in a new session; all processes of that node (gcs_server,
  raylet, agents, log monitor, workers, their children) keep that session id through reparenting
  and setproctitle (which blanks ``/proc/<pid>/environ``, so an env tag would not do). ``procs()``
  maps session -> node; ``stop()``/``kill_node()`` kill only those, never ``ray stop``.
- Raylet pid and node id per node come from that scan (process ``raylet``, its ``--node_id=``).
- ``stop()`` is bounded (SIGKILL, re-scan for at most ``timeout`` s) and idempotent; it first shuts
  down this process's driver if attached here (a driver whose GCS vanished exits ~60 s later).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# Environment of every Ray process: no usage stats, no OOM killer (a busy CI box must not lose
# workers to it), no `uv run` propagation, and PYTHONPATH=repo so actors can ``import code.common``:
# ray imports the stdlib ``code`` (via pdb) at worker start, so the repo must precede the stdlib
# (the driver's sys.path that Ray propagates is applied too late).
# Token auth off: a private cluster that ray.init() once started on this machine leaves ~/.ray/auth_token,
# which nodes started here would otherwise pick up half of.
BASE_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_memory_monitor_refresh_ms": "0", "RAY_AUTH_MODE": "disabled",
            "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
# A driver subprocess's environment: makes ray.init resolve 127.0.0.1 to itself (read at import).
DRIVER_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
# system_config for the head: a dead raylet is marked dead in ~1.2 s instead of ~12-15 s.
FAST_HEALTH = {"health_check_initial_delay_ms": 1000, "health_check_period_ms": 500,
               "health_check_timeout_ms": 500, "health_check_failure_threshold": 3}
_SHIM = ("import sys, ray._private.services as s; s.get_node_ip_address = lambda address=None: '127.0.0.1'; "
         "from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()")


def ray_available() -> tuple[bool, str]:
    """(True, version) when a cluster can be started here, else (False, why) for a skip."""
    if not sys.platform.startswith("linux"):
        return False, "LocalRayCluster needs Linux (/proc)"
    try:
        import ray
    except Exception as e:  # noqa: BLE001 - any import failure means "skip"
        return False, f"ray is not importable: {e!r}"
    return True, f"ray {ray.__version__}"


def loopback_driver() -> None:
    """Make this process's ray.init treat 127.0.0.1 as this node (what DRIVER_ENV does at import)."""
    import ray._private.ray_constants as rc
    rc.ENABLE_RAY_CLUSTER = False


def _free_ports(n: int) -> list[int]:
    """n distinct ports free on 127.0.0.1 right now (all held open at once so they differ)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _procs(sessions: dict[int, str]) -> list[tuple[int, str, list[str]]]:
    """(pid, node name, argv) of each live, non-zombie process in one of ``sessions`` (sid -> name)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            name = sessions.get(os.getsid(int(d)))
            if name is None or Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            argv = [a.decode(errors="replace") for a in Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0") if a]
        except OSError:  # gone meanwhile
            continue
        out.append((int(d), name, argv))
    return out


class LocalRayCluster:
    """``with LocalRayCluster(workers=2) as c: loopback_driver(); ray.init(address=c.address)``.

    Nodes are named "head", "w1".."wN"; each carries the custom resource ``node_<name>: 1`` so
    actors can be pinned with ``resources={"node_w1": 0.01}``. ``nodes`` entries:
    {"name", "node_id", "raylet_pid", "resource"}. ``start_times``: name -> seconds its
    ``ray start`` took (workers start in parallel once the head is up).
    """

    def __init__(self, workers: int = 2, cpus_per_node: int = 1, head_cpus: int = 1,
                 object_store_mb: int = 128, env: dict[str, str] | None = None,
                 system_config: dict[str, Any] | None = None, start_timeout: float = 90.0):
        self.workers, self.cpus_per_node, self.head_cpus = workers, cpus_per_node, head_cpus
        self.object_store_mb, self.system_config, self.start_timeout = object_store_mb, system_config, start_timeout
        self.env = {**os.environ, **BASE_ENV, **(env or {})}
        self.root = Path(tempfile.mkdtemp(prefix="lrc_"))  # short: unix socket paths are <108 bytes
        self.address = ""
        self.nodes: list[dict[str, Any]] = []
        self.sessions: dict[int, str] = {}  # session id (= pid of its `ray start`) -> node name
        self.start_times: dict[str, float] = {}
        self.node_env: dict[str, dict[str, str]] = {}     # name -> extra environment of that node
        self.node_gpus: dict[str, int] = {}                # name -> GPUs it declares (a resource only: no device)

    def __enter__(self) -> "LocalRayCluster":
        """Start the cluster; a `ray start` that fails (a port picked free and taken before Ray bound
        it, a start slower than its timeout on a loaded machine) is retried once from scratch."""
        for attempt in (1, 2):
            try:
                self.start()
                return self
            except RuntimeError:
                self.stop()
                if attempt == 2:
                    raise
                self.root = Path(tempfile.mkdtemp(prefix="lrc_"))
                self.address, self.nodes, self.sessions, self.start_times = "", [], {}, {}
            except BaseException:
                self.stop()
                raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _cmd(self, name: str) -> list[str]:
        p = _free_ports(8)
        cmd = [sys.executable, "-c", _SHIM, "start", "--node-ip-address=127.0.0.1", f"--node-name={name}",
               f"--num-cpus={self.head_cpus if name == 'head' else self.cpus_per_node}",
               f"--num-gpus={self.node_gpus.get(name, 0)}",
               f'--resources={{"node_{name}": 1}}', f"--object-store-memory={self.object_store_mb << 20}",
               f"--temp-dir={self.root / name}", "--disable-usage-stats", "--min-worker-port=0",
               "--max-worker-port=0", f"--node-manager-port={p[1]}", f"--object-manager-port={p[2]}",
               f"--dashboard-agent-listen-port={p[3]}", f"--dashboard-agent-grpc-port={p[4]}",
               f"--runtime-env-agent-port={p[5]}", f"--metrics-export-port={p[6]}"]
        if name != "head":
            return cmd + [f"--address={self.address}"]
        self.address = f"127.0.0.1:{p[0]}"
        cmd += ["--head", f"--port={p[0]}", "--include-dashboard=false", f"--dashboard-port={p[7]}", "--no-monitor"]
        return cmd + ([f"--system-config={json.dumps(self.system_config)}"] if self.system_config else [])

    def _launch(self, names: list[str]) -> None:
        """`ray start` each name concurrently; RuntimeError with its log if one fails or times out."""
        t0, running = time.monotonic(), {}
        for n in names:
            with open(self.root / f"start_{n}.log", "wb") as log:
                proc = subprocess.Popen(self._cmd(n), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env={**self.env, **self.node_env.get(n, {})}, cwd=self.root,
                                        start_new_session=True)
            self.sessions[proc.pid] = n
            running[n] = proc
        for n, proc in running.items():
            try:
                rc: object = proc.wait(timeout=max(1.0, self.start_timeout - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = "timeout"
            self.start_times[n] = time.monotonic() - t0
            if rc != 0:
                log = (self.root / f"start_{n}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"`ray start` for node {n} failed ({rc}):\n{log}")

    def start(self) -> None:
        self._launch(["head"])
        self._launch([f"w{i}" for i in range(1, self.workers + 1)])
        self.wait_nodes(self.workers + 1, timeout=self.start_timeout)
        found = {}
        for pid, name, argv in self.procs():
            if argv and Path(argv[0]).name == "raylet":
                nid = next(a.split("=", 1)[1] for a in argv if a.startswith("--node_id="))
                found[name] = {"name": name, "node_id": nid, "raylet_pid": pid, "resource": f"node_{name}"}
        self.nodes = [found[n] for n in ["head"] + [f"w{i}" for i in range(1, self.workers + 1)]]

    def add_node(self, name: str, env: dict[str, str] | None = None, gpus: int = 0) -> dict[str, Any]:
        """Start one more worker node (its own environment on top of the cluster's; ``gpus`` declared as
        Ray resources, no device behind them) and return its entry."""
        self.node_env[name] = dict(env or {})
        self.node_gpus[name] = gpus
        alive = len(self.alive_node_ids())
        self._launch([name])
        self.wait_nodes(alive + 1, timeout=self.start_timeout)
        for pid, n, argv in self.procs(name):
            if argv and Path(argv[0]).name == "raylet":
                nid = next(a.split("=", 1)[1] for a in argv if a.startswith("--node_id="))
                entry = {"name": name, "node_id": nid, "raylet_pid": pid, "resource": f"node_{name}"}
                self.nodes.append(entry)
                return entry
        raise RuntimeError(f"node {name} started but has no raylet")

    def remove_node(self, name: str, timeout: float = 30.0) -> None:
        """Kill every process of that node and wait until the GCS no longer counts it alive."""
        nid = self.node(name)["node_id"]
        self.kill_node(name, everything=True)
        t0 = time.monotonic()
        while nid in self.alive_node_ids():
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"node {name} still alive after {timeout}s")
            time.sleep(0.2)

    def procs(self, name: str | None = None) -> list[tuple[int, str, list[str]]]:
        """(pid, node name, argv) of this cluster's live processes, or of one node's."""
        return [t for t in _procs(self.sessions) if name is None or t[1] == name]

    def alive_node_ids(self) -> set[str]:
        """Node ids the GCS reports alive (ray's private GlobalState, what ray.nodes() reads)."""
        from ray._private import services, state
        gs = state.GlobalState()
        gs._initialize_global_state(services._get_gcs_client_options(self.address))
        try:
            return {n["NodeID"] for n in gs.node_table() if n["Alive"]}
        finally:
            gs.disconnect()

    def wait_nodes(self, n: int, timeout: float = 60.0) -> float:
        """Wait until exactly n nodes are alive; returns seconds waited, else TimeoutError."""
        t0 = time.monotonic()
        while (alive := len(self.alive_node_ids())) != n:
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"{alive} alive nodes after {timeout}s, wanted {n}")
            time.sleep(0.2)
        return time.monotonic() - t0

    def node(self, name: str) -> dict[str, Any]:
        return next(d for d in self.nodes if d["name"] == name)

    def kill_node(self, name: str, everything: bool = False) -> None:
        """SIGKILL that node's raylet (the GCS marks the node dead when its health checks fail);
        everything=True kills all of that node's processes, as losing the machine would."""
        pids = [p for p, _, _ in self.procs(name)] if everything else [self.node(name)["raylet_pid"]]
        _kill(pids)

    def stop(self, timeout: float = 10.0) -> None:
        """Kill every process of this cluster and remove its temp dirs; bounded and idempotent."""
        if "ray" in sys.modules:
            import ray
            try:
                if ray.is_initialized() and ray.get_runtime_context().gcs_address.endswith(":" + self.address.split(":")[-1]):
                    ray.shutdown()
            except Exception:  # noqa: BLE001 - teardown goes on regardless
                pass
        deadline = time.monotonic() + timeout
        while (pids := [p for p, _, _ in self.procs()]) and time.monotonic() < deadline:
            _kill(pids)
            time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
