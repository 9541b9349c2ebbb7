"""A contained runner for model-generated programs (untrusted code), shared by the code-executing scorers: MBXP
(``code.mixtral_8x7b.mbxp``) and LiveCodeBench (``code.common.llm.livecodebench``).

- each program runs in a fresh temporary folder (removed afterwards) with HOME and TMPDIR inside it, a
  minimal environment, a wall-clock limit (its process group and every descendant are SIGKILLed: the
  launcher is a child subreaper, or PID 1 of its namespace), and resource limits (address space, file
  size, CPU seconds, no core files; processes in namespace mode, which the kernel does not apply to root);
- where unprivileged user namespaces work (probed once): ``unshare --user --map-root-user --net --mount
  --pid``: no network, every mount read-only except the program's folder, no capabilities, and a PID
  namespace so a process that leaves the process group still dies with the run;
- python programs also run under an audit hook (``PY_BOOT``) that refuses sockets, name lookups, process
  creation, ctypes and file writes / removals outside the folder: a second layer that also holds where
  namespaces are not permitted.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from typing import Sequence

MEMORY_BYTES = 4 << 30         # RLIMIT_AS: g++ and node need well under this
FILE_BYTES = 256 << 20         # RLIMIT_FSIZE: one binary, one output file
MAX_PROCESSES = 256            # RLIMIT_NPROC, namespace mode only (counted per user namespace; the
                               # kernel does not apply it to real root)


def node_path() -> str:
    """NODE_PATH for the programs: the caller's, then the global modules of the node on PATH (every MBXP
    javascript test does ``require("lodash")``; the reference installs it with ``npm install -g``)."""
    parts = [p for p in os.environ.get("NODE_PATH", "").split(os.pathsep) if p]
    node = shutil.which("node")
    if node:
        parts.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(node))), "lib", "node_modules"))
    return os.pathsep.join(dict.fromkeys(parts))



# --- the runner ------------------------------------------------------------------------

# Runs first inside the sandbox (as PID 1 of its namespace when there is one): makes every mount but
# the work folder read-only, sets resource limits, then forks the program and returns its status.
_LAUNCHER = r'''
import ctypes, json, os, re, resource, signal, sys
spec = json.loads(sys.argv[1])
work = spec["work"]
def die(msg):
    os.write(2, ("sandbox: " + msg + "\n").encode())
    os._exit(125)
if spec["ns"]:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p)
    def mount(src, target, flags):
        if libc.mount(src, target.encode(), None, flags, None) == 0:
            return 0
        return ctypes.get_errno()
    RO, BIND, REMOUNT, REC = 1, 4096, 32, 16384
    KEEP = {"nosuid": 2, "nodev": 4, "noexec": 8, "noatime": 1024, "nodiratime": 2048,
            "relatime": 1 << 21, "strictatime": 1 << 24}
    err = mount(work.encode(), work, BIND | REC)
    if err:
        die("cannot bind-mount %s: %s" % (work, os.strerror(err)))
    special = {"proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "debugfs", "tracefs", "securityfs",
               "pstore", "bpf", "fusectl", "configfs", "hugetlbfs", "binfmt_misc", "autofs", "nsfs", "efivarfs"}
    must = []
    with open("/proc/self/mountinfo") as f:
        rows = f.read().splitlines()
    for row in rows:
        left, _, right = row.partition(" - ")
        fields = left.split()
        mp = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        if mp == work or mp.startswith(work.rstrip("/") + "/"):
            continue
        flags = REMOUNT | BIND | RO
        for opt in fields[5].split(","):
            flags |= KEEP.get(opt, 0)
        fstype = right.split()[0] if right else ""
        if mount(None, mp, flags) and fstype not in special:
            must.append(mp)
    for mp in ["/"] + must:
        try:
            if not os.statvfs(mp).f_flag & os.ST_RDONLY:
                die("cannot make %s read-only" % mp)
        except OSError:
            pass
def limit():
    for name, value in spec["limits"].items():
        which = getattr(resource, name)
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))
def children():
    me, out = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for d in entries:
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d, "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == me:
                out.append(int(d))
    return out
def kill_all(pid):
    # as PID 1 of a namespace, exiting kills everything in it; otherwise kill every descendant (a
    # subreaper inherits the orphans) until none is left
    if pid is not None:          # not reaped yet: the number is still ours
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    if os.getpid() == 1:
        return
    for _ in range(1000):
        kids = children()
        for k in kids:
            for f in (os.killpg, os.kill):
                try:
                    f(k, 9)
                except OSError:
                    pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            if not kids:
                return
class Expired(Exception):
    pass
def expired(*_):
    raise Expired()
if os.getpid() != 1:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)     # PR_SET_CHILD_SUBREAPER
    except (AttributeError, OSError):                             # not Linux: no orphan hunting
        pass
os.chdir(work)
signal.signal(signal.SIGALRM, expired)
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    try:
        limit()
        if spec["ns"]:
            # the program is root of its user namespace: without capabilities it cannot remount
            # anything read-write (a nested namespace of its own gets the mounts locked read-only)
            for cap in range(64):
                libc.prctl(24, cap, 0, 0, 0)                         # PR_CAPBSET_DROP
            if libc.prctl(38, 1, 0, 0, 0) != 0:                      # PR_SET_NO_NEW_PRIVS
                die("cannot set no_new_privs")
            with open("/proc/self/status") as f:
                inh = [ln for ln in f if ln.startswith(("CapInh:", "CapAmb:", "CapBnd:"))]
            if any(int(ln.split()[1], 16) for ln in inh):
                die("cannot drop capabilities")
        os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
    except OSError as e:
        os.write(2, ("sandbox: cannot run %s: %s\n" % (spec["argv"][0], e.strerror)).encode())
    os._exit(127)
code = 125
try:
    signal.setitimer(signal.ITIMER_REAL, spec["timeout"])
    while True:
        try:
            got, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if got == pid:
            code = os.waitstatus_to_exitcode(status)
            code = code if code >= 0 else 128 - code
            pid = None
            break
    signal.setitimer(signal.ITIMER_REAL, 0)
except Expired:
    os.write(2, b"\nsandbox: timed out\n")
    code = 124
kill_all(pid)
os._exit(code)
'''

# Runs a python program: the audit hook first, then the program as mxeval executes it. The hook is a
# second layer against accidents (the namespace is the boundary): it is built in a function that has
# returned, over captured builtins, so the program cannot reach or patch it (gc walks are refused; frames
# are not, the standard library needs them).
_PY_BOOT = r'''
import sys
def _install(work):
    import posix
    getcwd, lstat, readlink, fspath = posix.getcwd, posix.lstat, posix.readlink, posix.fspath
    _int, _str, _bytes, _type, _any = int, str, bytes, type, any
    Refused, fsenc = PermissionError, sys.getfilesystemencoding()
    net = frozenset(("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
                     "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr",
                     "socket.getnameinfo"))
    proc = frozenset(("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                      "subprocess.Popen", "os.kill", "os.killpg", "signal.pthread_kill", "pty.spawn",
                      "os.startfile", "gc.get_objects", "gc.get_referrers", "gc.get_referents"))
    one = frozenset(("os.remove", "os.rmdir", "os.mkdir", "os.truncate", "os.chmod", "os.chown", "os.utime",
                     "os.chflags", "os.lchflags", "os.setxattr", "os.removexattr", "shutil.rmtree",
                     "shutil.chown", "os.mkfifo", "os.mknod"))
    two = frozenset(("os.rename", "os.link", "os.symlink", "shutil.copyfile", "shutil.copytree", "shutil.move"))
    writing_flags = posix.O_WRONLY | posix.O_RDWR | posix.O_CREAT | posix.O_TRUNC | posix.O_APPEND

    def resolve(p):
        # an absolute path without symlinks (realpath on captured primitives), or None
        t = _type(p)
        if t is not _str and t is not _bytes:
            try:
                p = fspath(p)
            except Exception:
                return None
            t = _type(p)
        if t is _bytes:
            p = p.decode(fsenc, "surrogateescape")
        elif t is not _str:
            return None
        if not p.startswith("/"):
            p = getcwd() + "/" + p
        todo, done, hops = p.split("/")[::-1], [], 0
        while todo:
            part = todo.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if done:
                    done.pop()
                continue
            here = "/" + "/".join(done + [part])
            try:
                link = (lstat(here).st_mode & 0o170000) == 0o120000
            except OSError:
                link = False
            if link:
                hops += 1
                if hops > 40:
                    return None
                target = readlink(here)
                if target.startswith("/"):
                    done = []
                todo.extend(target.split("/")[::-1])
            else:
                done.append(part)
        return "/" + "/".join(done)

    root = resolve(work)

    def inside(p):
        if _type(p) is _int:
            return False
        r = resolve(p)
        return r is not None and (r == root or r.startswith(root + "/") or r == "/dev/null")

    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            if _type(path) is _int:
                return
            w = (mode is not None and _any(c in mode for c in "wax+")) or ((flags or 0) & writing_flags) != 0
            if w and not inside(path):
                raise Refused("sandbox: writing %s is not allowed" % (path,))
        elif event in net or event in proc or event.startswith("ctypes."):
            raise Refused("sandbox: %s is not allowed" % event)
        elif event in one or event in two:
            n = 2 if event in two else 1
            for a in args[:n]:
                if not inside(a):
                    raise Refused("sandbox: %s %s is not allowed" % (event, a))
    sys.addaudithook(hook)
_install(sys.argv[1])
del _install
with open(sys.argv[2], encoding="utf-8") as _f:
    _src = _f.read()
del _f
import os
try:
    exec(compile(_src, "main.py", "exec"), {})
except BaseException as e:
    try:
        msg = "failed: %s: %s" % (type(e).__name__, e)
    except BaseException:
        msg = "failed: %s" % type(e).__name__
    sys.stdout.flush()
    sys.stderr.write("\n" + msg[:2000] + "\n")
    sys.stderr.flush()
    os._exit(1)
sys.stdout.flush()
os._exit(0)
'''

_UNSHARE = ("unshare", "--user", "--map-root-user", "--net", "--mount", "--pid", "--fork", "--kill-child", "--")
_LIMITS = {"RLIMIT_AS": MEMORY_BYTES, "RLIMIT_FSIZE": FILE_BYTES, "RLIMIT_NPROC": MAX_PROCESSES,
           "RLIMIT_CORE": 0}


def _env(work: str) -> dict[str, str]:
    """Only what the toolchains need: nothing from the harness's environment (tokens, proxies) leaks."""
    return {"PATH": os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin", "HOME": work, "TMPDIR": work,
            "TMP": work, "TEMP": work, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "NODE_PATH": node_path(),
            "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}


def run_contained(argv: Sequence[str], work: str, timeout: float, *, namespace: bool,
                  log: str | None = None) -> tuple[int | None, str, float]:
    """Run ``argv`` in the folder ``work`` (the only writable place when ``namespace``), under the
    resource limits, killed with its whole process group after ``timeout`` s. Returns (exit code,
    None on timeout; the tail of its output; seconds)."""
    work = os.path.realpath(work)
    log = log or os.path.join(os.path.dirname(work), "output.txt")
    spec = {"work": work, "ns": namespace, "argv": list(argv), "env": _env(work),
            "timeout": float(timeout), "limits": dict(_LIMITS, RLIMIT_CPU=max(1, int(timeout) + 1))}
    if not namespace:            # outside a user namespace RLIMIT_NPROC counts all of the user's processes
        del spec["limits"]["RLIMIT_NPROC"]
    cmd = [sys.executable, "-I", "-S", "-c", _LAUNCHER, json.dumps(spec)]
    if namespace:
        cmd = list(_UNSHARE) + cmd
    start = time.monotonic()
    with open(log, "wb") as out:
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    cwd=work, env=_env(work), start_new_session=True, close_fds=True)
        except OSError as e:
            return 125, f"sandbox: cannot start {cmd[0]}: {e.strerror}", 0.0
        rc = None
        try:
            rc = proc.wait(timeout=timeout + 10)     # the launcher keeps the time itself; this is a backstop
        except subprocess.TimeoutExpired:
            pass
        finally:
            if proc.returncode is None:     # not reaped, so the group id is still this run's
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
    elapsed = time.monotonic() - start
    with open(log, "rb") as f:
        f.seek(max(0, os.path.getsize(log) - 8192))
        tail = f.read().decode("utf-8", "replace")
    if rc == 124 and tail.rstrip().endswith("sandbox: timed out"):
        rc = None
    return rc, tail, elapsed


def _rmtree(path: str) -> None:
    def retry(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, stat.S_IRWXU)
            func(p)
        except OSError:
            pass
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:
        shutil.rmtree(path, onerror=retry)


_PROBE = ("import os\nopen('ok', 'w').write('1')\n"
          "try:\n    open('../escape', 'w')\nexcept OSError:\n    pass\nelse:\n    raise SystemExit(3)\n")


@functools.lru_cache(maxsize=1)
def namespace_available() -> bool:
    """Whether the unshare layer works here and confines writes (probed once per process)."""
    if not shutil.which("unshare"):
        return False
    root = tempfile.mkdtemp(prefix="mbxp-probe-")
    try:
        work = os.path.join(root, "work")
        os.mkdir(work)
        rc, _, _ = run_contained([sys.executable, "-S", "-c", _PROBE], work, 30.0, namespace=True)
        return rc == 0 and os.path.exists(os.path.join(work, "ok")) \
            and not os.path.exists(os.path.join(root, "escape"))
    finally:
        _rmtree(root)


def containment(evaluator: str, namespace: bool) -> str:
    if evaluator == "mxeval":
        return "mxeval's own (python: reliability_guard in a child process; other languages: none)"
    limits = "time, memory, file-size and CPU limits"
    if namespace:
        nproc = "" if os.geteuid() == 0 else ", process-count limit"    # the kernel exempts real root
        return ("unshare user+net+mount+pid namespace without capabilities: no network, read-only filesystem "
                f"except the program's temp folder; {limits}{nproc}; audit hook (python)")
    return f"audit-hook only (python); none for other languages (beyond {limits})"


