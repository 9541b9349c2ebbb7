"""MBXP pass@1 as the MLPerf Mixtral-8x7B reference scores it (``language/mixtral-8x7b/evaluate_mbxp.py``
on top of mxeval's ``check_correctness*``), with the model-generated code run in a contained subprocess.

What is scored, as the reference:

- only ``cpp, python, php, javascript, ruby, typescript`` problems count; others are left out of both
  numerator and denominator ("not scored by the reference");
- the response is cut at its first "```", python responses are ``lstrip``-ped (go / scala get the
  reference's own clean-up), every "\\_" becomes "_", and the prompt is not prepended (Mixtral repeats it);
- python: ``solution + "\\n" + test + "\\n" + f"check({entry_point})"`` executed with empty globals,
  passed when nothing is raised (``SystemExit`` included, as mxeval's ``except BaseException``);
- the others: ``solution + test`` in one file, compiled (g++; ``tsc --target es5 --lib es2016``) and
  run (the binary; node; php; ruby), passed when the run exits 0. As mxeval, tsc counts as
  "compiled" only when it exits 2 (JavaScript emitted with type errors; a clean exit 0 fails).
  Compiling gets mxeval's 100 s, each run ``timeout`` (the reference's 20 s).

Which evaluator runs: mxeval's functions when ``mxeval`` imports (the reference's way, and its own, weak,
containment), else this module's runner ("harness").

The denominator is the reference's: every problem in a scored language. A problem whose language runtime
is not installed here is not run and counts as failed (as in the reference, where mxeval's compile or run
step fails); the score is then not the official one, and the result's ``unofficial`` holds one line per
such language with the command that installs it (accuracy.txt writes them as ``UNOFFICIAL:`` lines). Every
MBXP javascript test does ``require("lodash")`` (the reference's image installs it with npm), so
javascript also needs lodash: it is looked up through the caller's NODE_PATH, then the global modules of
the node on PATH.

Where the harness runner differs from mxeval: python runs in a fresh interpreter under the audit hook
below instead of in a forked child with mxeval's ``reliability_guard`` (which sets ``os.remove``,
``os.getcwd``, ``subprocess.Popen``... to None). Programs that create processes or touch files outside
their folder fail with both; one that, say, calls ``os.getcwd()`` or removes its own scratch file
passes here and fails under mxeval. MBXP's solutions do neither.

Containment of the harness runner (generated code is untrusted):

- each program runs in a fresh temporary folder (removed afterwards) with HOME and TMPDIR inside it, a
  minimal environment, a wall-clock limit (its process group and every descendant are SIGKILLed: the
  launcher is a child subreaper, or PID 1 of its namespace), and resource limits (address space, file
  size, CPU seconds, no core files; processes in namespace mode, which the kernel does not apply to root);
- where unprivileged user namespaces work (probed once): ``unshare --user --map-root-user --net --mount
  --pid``: no network (loopback down: connect gives ENETUNREACH), every mount read-only except the
  program's folder (bind-mounted onto itself; writes elsewhere give EROFS; the program runs with no
  capabilities and no_new_privs, so it cannot remount anything writable), and a PID namespace so a
  process that leaves the process group still dies with the run;
- python programs also run under an audit hook that refuses sockets, name lookups, process creation,
  ctypes and file writes / removals outside the folder: a second layer that also holds where namespaces
  are not permitted (then ``containment`` says "audit-hook only (python); none for other languages").
"""
from __future__ import annotations

import concurrent.futures
import functools
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from typing import Sequence

from code.common.errors import HarnessError, from_os_error

REFERENCE_LANGUAGES = ("cpp", "python", "php", "javascript", "ruby", "typescript")
"""The languages ``evaluate_mbxp.py`` scores; problems in any other language are skipped."""

MXEVAL_CHECKERS = {"cpp": "check_correctness_cpp", "csharp": "check_correctness_csharp",
                   "go": "check_correctness_go", "java": "check_correctness_java",
                   "javascript": "check_correctness_javascript", "kotlin": "check_correctness_kotlin",
                   "perl": "check_correctness_perl", "php": "check_correctness_php",
                   "python": "check_correctness", "ruby": "check_correctness_ruby",
                   "scala": "check_correctness_scala", "swift": "check_correctness_swift",
                   "typescript": "check_correctness_typescript"}

RUNTIMES = {"python": (), "cpp": ("g++",), "javascript": ("node",), "php": ("php",), "ruby": ("ruby",),
            "typescript": ("tsc", "node")}
"""Executables each scored language needs on PATH (python runs on this interpreter)."""

INSTALL = {"g++": "apt-get install g++", "node": "apt-get install nodejs", "php": "apt-get install php-cli",
           "ruby": "apt-get install ruby", "tsc": "npm install -g typescript", "npx": "apt-get install npm",
           "node module lodash": "npm install -g lodash"}
"""The command that installs each runtime piece (Debian / Ubuntu names; the reference's Dockerfile.eval
installs the same tools)."""

COMPILE_TIMEOUT_S = 100.0      # mxeval's compile_timeout for g++ and tsc
MEMORY_BYTES = 4 << 30         # RLIMIT_AS: g++ and node need well under this
FILE_BYTES = 256 << 20         # RLIMIT_FSIZE: one binary, one output file
MAX_PROCESSES = 256            # RLIMIT_NPROC, namespace mode only (counted per user namespace; the
                               # kernel does not apply it to real root)
OUTPUT_TAIL = 400              # characters of a failing program's output kept as its reason

NOT_INSTALLED = "runtime not installed"     # counted as failed (the reference's denominator)
NOT_REFERENCE = "not scored by the reference"
_FIX = "regenerate the Mixtral dataset: make preprocess_data BENCHMARKS=mixtral_8x7b"


# --- post-processing and program construction (the reference's rules) ----------------------------

def _clean_go(code: str) -> str:
    code = code.replace("package main", "")
    code = re.sub(r"^import \(\n(.+)((?:\n.+)+)\n\)", "", code, flags=re.MULTILINE)
    code = re.sub(r"^import \".*\"", "", code)
    return re.sub(r"^func main.*^}", "", code, flags=re.MULTILINE | re.DOTALL)


def _clean_scala(code: str) -> str:
    code = code.replace("object Main extends App {", "")
    return "".join(code.splitlines(True)[:-1])


def postprocess(lang: str, response: str) -> str:
    """The solution the reference runs: cut at the first "```", per-language clean-up, "\\_" -> "_"."""
    fence = response.find("```")
    solution = response if fence < 0 else response[:fence]
    if lang == "python":
        solution = solution.lstrip()
    elif lang == "go":
        solution = _clean_go(solution)
    elif lang == "scala":
        solution = _clean_scala(solution)
    return solution.replace("\\_", "_")


def build_program(lang: str, entry_point: str, test_code: str, solution: str) -> str:
    """The source mxeval runs (the prompt is empty, as the reference sets it)."""
    if lang == "python":
        return solution + "\n" + test_code + "\n" + f"check({entry_point})"
    return solution + test_code


# --- runtimes ------------------------------------------------------------------------------------

def _mxeval_import() -> tuple[object | None, str]:
    """(mxeval.execution or None, why not)."""
    try:
        from mxeval import execution
    except ImportError:
        return None, "mxeval not installed"
    except Exception as e:       # broken install: the harness runner scores instead, and says so
        return None, f"mxeval failed to import: {type(e).__name__}: {e}"[:200]
    return execution, "mxeval installed"


def _mxeval_execution():
    return _mxeval_import()[0]


def node_path() -> str:
    """NODE_PATH for the programs: the caller's, then the global modules of the node on PATH (every MBXP
    javascript test does ``require("lodash")``; the reference installs it with ``npm install -g``)."""
    parts = [p for p in os.environ.get("NODE_PATH", "").split(os.pathsep) if p]
    node = shutil.which("node")
    if node:
        parts.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(node))), "lib", "node_modules"))
    return os.pathsep.join(dict.fromkeys(parts))


@functools.lru_cache(maxsize=16)
def _node_module_found(module: str, cwd: str, search: str) -> bool:
    env = {"PATH": os.environ.get("PATH") or "/usr/bin:/bin", "NODE_PATH": search, "HOME": cwd}
    try:
        return subprocess.run(["node", "-e", f"require.resolve({json.dumps(module)})"], cwd=cwd, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def install_command(missing: str) -> str:
    """The command that installs what ``missing_runtime`` names ("g++, node" -> both commands)."""
    return "; ".join(INSTALL.get(m.strip(), f"install {m.strip()}") for m in missing.split(","))


def missing_runtime(lang: str, evaluator: str = "harness", execution=None) -> str | None:
    """What ``lang`` lacks to be run here ("g++", "node module lodash"), or None when it can run."""
    tools = RUNTIMES.get(lang, ())
    if evaluator == "mxeval" and lang == "typescript":
        tools = tools + ("npx",)          # mxeval runs "npx tsc" (the reference's image patches it to tsc)
    absent = [t for t in tools if not shutil.which(t)]
    if absent:
        return ", ".join(absent)
    if lang == "javascript":
        where = getattr(execution, "__file__", None) if evaluator == "mxeval" else None
        cwd = os.path.dirname(where) if where else tempfile.gettempdir()
        search = os.environ.get("NODE_PATH", "") if evaluator == "mxeval" else node_path()
        if not _node_module_found("lodash", cwd, search):
            return "node module lodash"
    return None


def languages_available(evaluator: str = "harness") -> dict[str, bool]:
    """For each scored language, whether it can run here: its executables on PATH (mxeval's typescript
    also needs npx) and, for javascript, the lodash module every MBXP test requires."""
    execution = _mxeval_execution() if evaluator == "mxeval" else None
    return {lang: missing_runtime(lang, evaluator, execution) is None for lang in RUNTIMES}


# --- the contained runner ------------------------------------------------------------------------

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


_ERROR_LINE = re.compile(r"^(?:\w*(?:Error|Exception)\b|error\b|sandbox:)|: error:|\b(?:failed|Assertion)\b")


def _tail(text: str) -> str:
    """The line of a failed run's output that says why: the last error-looking one, else the last."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    return next((ln for ln in reversed(lines) if _ERROR_LINE.search(ln)), lines[-1])[-OUTPUT_TAIL:]


_FILES = {"python": "main.py", "cpp": "main.cpp", "javascript": "main.js", "php": "main.php",
          "ruby": "main.rb", "typescript": "main.ts"}


def _steps(lang: str, work: str) -> list[tuple[str, list[str]]]:
    """(kind, argv) to compile and run ``_FILES[lang]`` in ``work``, as mxeval's commands."""
    if lang == "python":
        return [("run", [sys.executable, "-I", "-B", "-c", _PY_BOOT, work, "main.py"])]
    if lang == "cpp":
        return [("compile", ["g++", "main.cpp", "-o", "main_cpp"]), ("run", ["./main_cpp"])]
    if lang == "typescript":
        return [("compile", ["tsc", "main.ts", "--target", "es5", "--lib", "es2016"]), ("run", ["node", "main.js"])]
    return [("run", [{"javascript": "node", "php": "php", "ruby": "ruby"}[lang], _FILES[lang]])]


def check_contained(lang: str, program: str, timeout: float, *, namespace: bool,
                    compile_timeout: float = COMPILE_TIMEOUT_S, tmp_root: str | None = None) -> tuple[bool, str]:
    """Compile and run one program in a fresh folder (removed afterwards): (passed, reason)."""
    root = tempfile.mkdtemp(prefix="mbxp-", dir=tmp_root)
    try:
        work = os.path.join(root, "work")
        os.mkdir(work)
        with open(os.path.join(work, _FILES[lang]), "w", encoding="utf-8", errors="replace") as f:
            f.write(program)
        for kind, argv in _steps(lang, work):
            limit = compile_timeout if kind == "compile" else timeout
            rc, out, _ = run_contained(argv, work, limit, namespace=namespace)
            if rc is None:
                return False, f"timed out ({kind}, {limit:g} s)"
            if rc == 125 and "sandbox:" in out:
                return False, _tail(out[out.rfind("sandbox:"):])
            if kind == "compile":
                ok = rc == 2 if lang == "typescript" else rc == 0
                if not ok:
                    why = f"tsc exit {rc} (mxeval counts only exit 2 as compiled)" if lang == "typescript" \
                        else f"exit {rc}"
                    return False, f"compile error ({why}): {_tail(out)}"
            elif rc != 0:
                return False, f"failed (exit {rc}): {_tail(out)}"
        return True, "passed"
    finally:
        _rmtree(root)


def _check_mxeval(execution, problem: dict, solution: str, timeout: float) -> tuple[bool, str]:
    task = {"task_id": problem["key"], "prompt": "", "test": problem["test_code"],
            "entry_point": problem["entry_point"], "lang": problem["lang"]}
    try:
        res = getattr(execution, MXEVAL_CHECKERS[problem["lang"]])(task, solution, timeout=timeout)
    except Exception as e:        # the reference prints it and counts a failure
        return False, f"mxeval error: {e}"[:OUTPUT_TAIL]
    passed = bool(res["passed"])
    return passed, "passed" if passed else f"failed: {_tail(str(res.get('result') or ''))}"


# --- evaluation ----------------------------------------------------------------------------------

_KEYS = ("lang", "entry_point", "test_code", "response")


def make_problem(sample_id: str, test_code: str, response: str) -> dict:
    """One problem from a dataset row, as the reference's ``create_mbxp_dict``: ``id`` is
    "<lang>_<entry_point>" (split at the first "_"), ``gt_output`` the test code."""
    lang, sep, entry_point = str(sample_id).partition("_")
    if not sep or not lang or not entry_point:
        raise HarnessError(f"MBXP sample id {sample_id!r} is not <language>_<entry point>", _FIX)
    return {"lang": lang, "entry_point": entry_point, "test_code": test_code, "response": response}


def _validate(problems) -> list[dict]:
    if not isinstance(problems, (list, tuple)):
        raise HarnessError(f"MBXP problems must be a list of dicts, got a {type(problems).__name__}", _FIX)
    out = []
    for i, p in enumerate(problems):
        if not isinstance(p, dict):
            raise HarnessError(f"MBXP problem {i} is a {type(p).__name__}, not a dict", _FIX)
        for k in _KEYS:
            if not isinstance(p.get(k), str):
                what = "missing" if k not in p else f"a {type(p[k]).__name__}, not text"
                raise HarnessError(f"MBXP problem {i}: '{k}' is {what}", _FIX)
        out.append({**{k: p[k] for k in _KEYS}, "key": f"{p['lang']}_{p['entry_point']}"})
    return out


def evaluate(problems: Sequence[dict], workers: int = 2, timeout: float = 20.0, *, evaluator: str = "auto",
             compile_timeout: float = COMPILE_TIMEOUT_S, tmp_root: str | None = None) -> dict:
    """Score MBXP problems ``{"lang", "entry_point", "test_code", "response"}`` (``response``: the decoded
    model output; ``test_code``: the dataset's ``gt_output``).

    ``evaluator``: "auto" (mxeval when it imports, else "harness"), "mxeval" or "harness". Programs run
    ``workers`` at a time. Returns ``mbxp`` (100*passed/scored; 0.0 when nothing is scored), ``passed``,
    ``scored`` (the reference's denominator: every problem in a REFERENCE_LANGUAGES language, those whose
    runtime is missing included, as failed), ``total``, ``by_language`` {lang: {"passed", "scored"}},
    ``not_scored`` {lang: count} (languages the reference leaves out), ``not_run`` {lang: count} and
    ``missing_runtimes`` / ``missing_tools`` (languages counted as failed for want of a runtime),
    ``unofficial`` (one line per such language, with its install command; empty when the score is the
    official one), ``evaluator``, ``evaluator_note``, ``containment`` and ``details``: one {key, lang,
    passed, reason} per problem in input order (``passed`` None for a problem the reference leaves out).
    """
    items = _validate(problems)
    if not isinstance(workers, int) or workers < 1:
        raise HarnessError(f"MBXP workers must be a whole number >= 1, got {workers!r}",
                           "pass --mbxp_workers=2 (or more)")
    if not timeout or timeout <= 0:
        raise HarnessError(f"MBXP timeout must be > 0 s, got {timeout!r}", "pass --mbxp_timeout_s=20")
    if evaluator not in ("auto", "mxeval", "harness"):
        raise HarnessError(f"unknown MBXP evaluator {evaluator!r}", "use auto, mxeval or harness")
    execution, note = _mxeval_import() if evaluator in ("auto", "mxeval") else (None, "harness runner chosen")
    if evaluator == "mxeval" and execution is None:
        raise HarnessError(f"MBXP evaluator mxeval unavailable: {note}",
                           "pip install git+https://github.com/amazon-science/mxeval, or use evaluator=harness")
    used = "harness" if execution is None else "mxeval"
    namespace = used == "harness" and namespace_available()
    present = {p["lang"] for p in items}
    missing = {lang: missing_runtime(lang, used, execution) for lang in RUNTIMES if lang in present}

    details: list[dict] = [{"key": p["key"], "lang": p["lang"], "passed": None, "reason": ""} for p in items]
    not_scored: dict[str, int] = {}
    not_run: dict[str, int] = {}
    by_language: dict[str, dict[str, int]] = {}
    todo = []
    for i, p in enumerate(items):
        lang = p["lang"]
        if lang not in REFERENCE_LANGUAGES:
            not_scored[lang] = not_scored.get(lang, 0) + 1
            details[i]["reason"] = f"not scored: {NOT_REFERENCE}"
            continue
        by_language.setdefault(lang, {"passed": 0, "scored": 0})["scored"] += 1
        if missing.get(lang):         # in the denominator, as the reference counts it: failed
            not_run[lang] = not_run.get(lang, 0) + 1
            details[i]["passed"] = False
            details[i]["reason"] = f"failed: not run, {NOT_INSTALLED} ({missing[lang]})"
        else:
            todo.append(i)

    def one(i: int) -> tuple[int, bool, str]:
        p = items[i]
        solution = postprocess(p["lang"], p["response"])
        if used == "mxeval":
            return (i, *_check_mxeval(execution, p, solution, timeout))
        program = build_program(p["lang"], p["entry_point"], p["test_code"], solution)
        return (i, *check_contained(p["lang"], program, timeout, namespace=namespace,
                                    compile_timeout=compile_timeout, tmp_root=tmp_root))

    start = time.monotonic()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            for i, passed, reason in pool.map(one, todo):
                details[i]["passed"], details[i]["reason"] = passed, reason
                by_language[items[i]["lang"]]["passed"] += passed
    except OSError as e:         # the temp folder: full disk, read-only, missing
        raise from_os_error(e) or HarnessError(f"MBXP: cannot run programs: {e}",
                                               "point TMPDIR at a writable folder with free space") from None
    n_passed = sum(b["passed"] for b in by_language.values())
    n_scored = sum(b["scored"] for b in by_language.values())
    tools = {lang: missing[lang] for lang in sorted(not_run)}
    unofficial = [f"MBXP: no runtime for {lang} ({install_command(tools[lang])}); {not_run[lang]} of {n_scored} "
                  f"problems counted as failed" for lang in sorted(not_run)]
    return {"mbxp": 100.0 * n_passed / n_scored if n_scored else 0.0, "passed": n_passed, "scored": n_scored,
            "total": len(items), "by_language": by_language, "not_scored": not_scored, "not_run": not_run,
            "missing_runtimes": sorted(not_run), "missing_tools": tools, "unofficial": unofficial,
            "evaluator": used, "evaluator_note": note, "containment": containment(used, namespace),
            "namespace": namespace, "elapsed_s": round(time.monotonic() - start, 3), "details": details}


def summary(result: dict) -> str:
    """One line for accuracy.txt: what was scored, what was counted as failed without running and why,
    what the reference leaves out, which evaluator, which containment."""
    langs = sorted(result["by_language"].items(), key=lambda kv: (-kv[1]["scored"], kv[0]))
    line = (f"MBXP: scored {result['scored']} of {result['total']} problems"
            + (" (" + ", ".join(f"{lang} {b['scored']}" for lang, b in langs) + ")" if langs else "")
            + f", passed {result['passed']} ({result['mbxp']:.2f}%)")
    if result["not_run"]:
        line += "; counted as failed, not run (" + NOT_INSTALLED + "): " + ", ".join(
            f"{lang} {n} ({result['missing_tools'][lang]})" for lang, n in sorted(result["not_run"].items()))
    if result["not_scored"]:
        line += "; not scored: " + ", ".join(f"{lang} {n}" for lang, n in sorted(
            result["not_scored"].items(), key=lambda kv: (-kv[1], kv[0]))) + f" ({NOT_REFERENCE})"
    return line + f"; evaluator: {result['evaluator']} ({result['evaluator_note']}); containment: {result['containment']}"
