"""A process that has the heavy libraries imported and forks harness children from itself (``MLPERF_ZYGOTE``).

Every LoadGen test runs in a fresh child (FromConfig once per process), and a fresh interpreter imports torch,
transformers, diffusers ... again before it does anything: 6-10 s of CPU per run on a 2-core machine (torch
2.8 s, torch._dynamo 2.4 s through torchvision, transformers' import structure 3 s). Where many short runs follow
one another (the test suite runs ~170), a zygote imports those libraries once and forks each child from itself;
the child then runs the same module a fresh ``python -m code.common.harness.child`` runs, with them already imported.

- ``python -m code.common.harness.zygote SOCKET [--preload MODULE ...]`` serves until killed, until its socket file is removed, or until
  the process that started it dies. The runner (``start``) uses it when ``MLPERF_ZYGOTE`` names its socket; a
  zygote that is absent, still importing, or that refuses the request (another repository or interpreter, or a
  different value of a variable libraries read at import: ``IMPORT_TIME_ENV``) means a fresh interpreter, as
  without it. Nothing of ours is preloaded: code/ is imported afresh in every child.
- One connection per child: the client sends a JSON request {module, args, cwd, env, repo, python} with its
  stdin/stdout/stderr (SCM_RIGHTS); the zygote forks, answers {"pid": n}, and {"rc": code} when the child ends
  (negative: the signal that ended it, as ``subprocess``). A connection closed before that (the parent died)
  sends the child SIGTERM, as the parent-death signal does for a fresh child.
- The zygote forks only while it has one thread (checked after the imports): forking a threaded process can
  leave a lock held forever in the child. So it imports numpy with OpenBLAS's pool at one thread (a fresh child
  would start one more thread per core) and leaves onnxruntime out (its import starts a thread; 0.6 s).
- What a fork does not carry over is set in the child: the client's niceness, fresh seeds for ``random`` and
  numpy's global generator, the client's environment and working folder; torch's generator starts from its
  fixed default in both cases.
- Used by the test suite (tests/conftest.py starts one per worker, and forks its ``python -m code.main`` calls from it
  too, ``keep_zygote``); a user's ``make run_harness`` never sets it.
"""
from __future__ import annotations

import array
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PRELOAD = ("numpy", "torch", "torchvision", "transformers", "transformers.modeling_utils",
           "transformers.models.llama.modeling_llama", "transformers.models.mixtral.modeling_mixtral",
           "transformers.models.deepseek_v3.modeling_deepseek_v3", "transformers.models.gpt_oss.modeling_gpt_oss",
           "transformers.models.gptj.modeling_gptj",
           "transformers.models.bert.modeling_bert", "diffusers", "open_clip", "pytorch_fid.inception")
# variables libraries read once, at import (cache folders, hub endpoints, thread pools, devices): a request whose
# values differ from the zygote's gets a fresh interpreter
IMPORT_TIME_ENV = ("HF_", "HUGGINGFACE", "TRANSFORMERS", "TORCH", "PYTORCH", "DIFFUSERS", "CUDA", "NVIDIA", "OMP_",
                   "MKL_", "KMP_", "OPENBLAS", "XDG_", "LD_", "ORT_", "TOKENIZERS", "PYTHON", "HOME")
# not compared: sys.path comes from the zygote's (the same repository); the rest are read only when used, never at
# import (TORCHINDUCTOR_CACHE_DIR: torch sets it in a process that compiled), or by a library the zygote does not load
# (KMP_*: Intel's OpenMP; sklearn and joblib set them in whichever process imports them); TOKENIZERS_PARALLELISM is
# read at each call, and the tokenizers library sets it itself in a process that forks after using its pool
_IGNORED = {"PYTHONPATH", "PYTHONUNBUFFERED", "TORCHINDUCTOR_CACHE_DIR", "KMP_DUPLICATE_LIB_OK", "KMP_INIT_AT_FORK",
            "TOKENIZERS_PARALLELISM"}


def _import_env(env: dict) -> dict:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_ENV) and k not in _IGNORED}


# --- client (the runner) --------------------------------------------------------------------------------------------

class Child:
    """A child forked by the zygote, with the part of ``subprocess.Popen``'s interface the runner uses."""

    def __init__(self, conn: socket.socket, pid: int):
        self.conn, self.pid, self.returncode = conn, pid, None
        self._buf = b""

    def _read(self, timeout: float | None) -> None:
        self.conn.settimeout(timeout)
        while b"\n" not in self._buf:
            try:
                data = self.conn.recv(4096)
            except socket.timeout:
                raise subprocess.TimeoutExpired("zygote child", timeout) from None
            if not data:                  # the zygote died: so did the child (its death signal)
                self.returncode = -signal.SIGKILL
                return
            self._buf += data
        self.returncode = int(json.loads(self._buf.split(b"\n", 1)[0])["rc"])

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self._read(0.0)
            except (subprocess.TimeoutExpired, BlockingIOError):
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._read(timeout)
        self.conn.close()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start(module: str, args: list[str], cwd: str | Path, env: dict, fds: tuple[int, int, int] = (0, 1, 2),
          nice: int = 0, keep_zygote: bool = False) -> Child | None:
    """``python -m module args`` forked by the zygote ``env["MLPERF_ZYGOTE"]`` names, or None when there is no
    usable one (the caller then starts a fresh interpreter). ``fds``: the child's stdin, stdout and stderr (by
    default this process's, as a Popen without redirection); ``nice``: added to this process's niceness, as
    ``os.nice`` in a Popen's preexec_fn; ``keep_zygote``: the child may fork its own children from the zygote too
    (a test's ``python -m code.main``, whose harness child is the zygote's next fork), where by default they start
    as a fresh process would."""
    path = env.get("MLPERF_ZYGOTE")
    if not path or not os.path.exists(path):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(10)
        conn.connect(path)
        req = json.dumps({"module": module, "args": list(args), "cwd": str(cwd), "env": dict(env),
                          "repo": str(REPO), "python": sys.executable, "keep_zygote": keep_zygote,
                          "nice": os.getpriority(os.PRIO_PROCESS, 0) + nice}).encode()
        fds = list(fds)
        sys.stdout.flush(), sys.stderr.flush()
        conn.sendmsg([len(req).to_bytes(8, "big"), req], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        buf = b""
        while b"\n" not in buf:
            data = conn.recv(4096)
            if not data:
                raise OSError("the zygote closed the connection")
            buf += data
        line, rest = buf.split(b"\n", 1)
        answer = json.loads(line)
    except (OSError, ValueError):         # not listening (yet), gone, or a broken answer: a fresh interpreter
        conn.close()
        return None
    if "pid" not in answer:               # refused: {"refused": why}
        conn.close()
        return None
    child = Child(conn, int(answer["pid"]))
    child._buf = rest
    return child


# --- server -------------------------------------------------------------------------------------------------------

def _refusal(req: dict, own_env: dict) -> str | None:
    if req.get("repo") != str(REPO) or req.get("python") != sys.executable:
        return "another repository or interpreter"
    theirs = _import_env(req.get("env", {}))
    if theirs != own_env:
        keys = sorted(k for k in set(theirs) | set(own_env) if theirs.get(k) != own_env.get(k))
        return f"import-time variables differ: {', '.join(keys)}"
    return None


def _run_child(req: dict, fds: list[int]) -> None:
    """In the forked child: become ``python -m module args`` in ``cwd`` with ``env``; never returns."""
    rc = 1
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)      # dies with the zygote
        try:
            os.setpriority(os.PRIO_PROCESS, 0, int(req.get("nice", 0)))    # the client's, as exec would inherit
        except OSError:
            pass
        for sig in (signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)              # as an interpreter's start sets them
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})   # blocked by the zygote across the fork
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        if not req.get("keep_zygote"):
            os.environ.pop("MLPERF_ZYGOTE", None)       # its own children start as a fresh process would
        import random

        random.seed()                                   # a fresh interpreter's generators are seeded anew
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        import runpy

        sys.argv = [req["module"], *req["args"]]
        try:
            runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
            rc = 0
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
        except BaseException:             # noqa: BLE001 - what an interpreter prints for an uncaught exception
            import traceback

            traceback.print_exc()
            rc = 1
        import atexit
        import threading

        threading._shutdown()             # as an interpreter's exit does: wait for non-daemon threads, then atexit
        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc)


def _recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    fds = array.array("i")
    head, anc, _, _ = conn.recvmsg(8, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    size, body = int.from_bytes(head, "big"), b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise OSError("request cut short")
        body += chunk
    return json.loads(body), list(fds)


def serve(path: str, preload: tuple[str, ...] = PRELOAD) -> int:
    import importlib

    own_env = _import_env(dict(os.environ))         # before the pool size below: the clients' values compare to these
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception:      # noqa: BLE001 - an optional library missing here: its users import it themselves
            pass
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    if threads != 1:
        print(f"[zygote] {threads} threads after the imports: forking would be unsafe; not serving", file=sys.stderr)
        return 1
    tmp = f"{path}.{os.getpid()}.tmp"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(tmp)
    server.listen(64)
    os.replace(tmp, path)                 # the socket appears only once the zygote can serve
    stat = os.stat(path)
    sel = selectors.DefaultSelector()
    sel.register(server, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}     # pid -> its client's connection
    by_conn: dict[socket.socket, int] = {}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        while not stop:
            for key, _ in sel.select(timeout=0.05):
                if key.fileobj is server:
                    conn, _ = server.accept()
                    try:
                        conn.settimeout(10)
                        req, fds = _recv_request(conn)
                    except (OSError, ValueError):
                        conn.close()
                        continue
                    why = _refusal(req, own_env) if len(fds) == 3 else "no stdin/stdout/stderr given"
                    if why:
                        print(f"[zygote] refused {req.get('module')}: {why}", file=sys.stderr, flush=True)
                        for fd in fds:
                            os.close(fd)
                        conn.sendall(json.dumps({"refused": why}).encode() + b"\n")
                        conn.close()
                        continue
                    sys.stdout.flush(), sys.stderr.flush()
                    # SIGTERM waits, blocked, until the child has its own handlers: one sent in between would
                    # otherwise reach the zygote's Python handler, which the child replaces before it runs
                    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
                    pid = os.fork()
                    if pid != 0:
                        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
                    if pid == 0:
                        server.close()
                        conn.close()
                        for c in by_conn:
                            c.close()
                        _run_child(req, fds)
                    for fd in fds:
                        os.close(fd)
                    print(f"[zygote] forked {pid}: {req['module']}", file=sys.stderr, flush=True)
                    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                    conn.setblocking(False)
                    children[pid], by_conn[conn] = conn, pid
                    sel.register(conn, selectors.EVENT_READ)
                else:                     # a client spoke or hung up: hung up means its parent died
                    conn = key.fileobj
                    try:
                        gone = conn.recv(1) == b""
                    except (BlockingIOError, InterruptedError):
                        gone = False
                    except OSError:
                        gone = True
                    if gone:
                        pid = by_conn.pop(conn)
                        sel.unregister(conn)
                        conn.close()
                        print(f"[zygote] the client of {pid} is gone: SIGTERM", file=sys.stderr, flush=True)
                        try:
                            os.kill(pid, signal.SIGTERM)
                        except ProcessLookupError:
                            pass
                        children[pid] = None
            while children:               # reap ended children; tell their clients
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                conn = children.pop(pid, None)
                if conn is not None:
                    by_conn.pop(conn, None)
                    sel.unregister(conn)
                    try:
                        conn.setblocking(True)
                        conn.sendall(json.dumps({"rc": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
                    except OSError:
                        pass
                    conn.close()
            try:                          # the socket file removed or replaced: stop
                if os.stat(path).st_ino != stat.st_ino:
                    break
            except FileNotFoundError:
                break
    finally:
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            if os.stat(path).st_ino == stat.st_ino:
                os.unlink(path)
        except FileNotFoundError:
            pass
    return 0


def launch(path: str | Path, env: dict | None = None, log: str | Path | None = None,
           preload: tuple[str, ...] | None = None) -> subprocess.Popen:
    """Start a zygote serving ``path`` in the background (it dies with this process); it listens once its imports
    are done, and until then ``start`` answers None."""
    from code.common.harness.deathsig import death_signal_hook

    out = open(log, "ab") if log else subprocess.DEVNULL
    try:
        return subprocess.Popen([sys.executable, "-m", "code.common.harness.zygote", str(path),
                                 *(("--preload", *preload) if preload is not None else ())], cwd=REPO,
                                env={**(env or os.environ), "PYTHONUNBUFFERED": "1"}, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=out, preexec_fn=death_signal_hook())
    finally:
        if log:
            out.close()


def wait_ready(path: str | Path, proc: subprocess.Popen | None = None, timeout: float = 120.0) -> bool:
    """True once the zygote at ``path`` listens; False if it ended or did not within ``timeout``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if os.path.exists(path):
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


if __name__ == "__main__":
    _args = sys.argv[1:]
    sys.exit(serve(_args[0], tuple(_args[2:]) if _args[1:2] == ["--preload"] else PRELOAD))
