"""LiveCodeBench code-generation judging as the references run it, in the contained runner (``contained``).

The MLPerf references (language/deepseek-r1 and language/gpt-oss-120b eval_accuracy.py, mlcommons/inference
b66003e) judge a LiveCodeBench answer with lcb_runner (github.com/LiveCodeBench/LiveCodeBench): the code the
reference extracted (``exact_match.code``) against every test of the question whose ``question_id`` is the
sample's ground truth, in the Hugging Face dataset ``livecodebench/code_generation_lite`` at ``version_tag``
``release_v1`` (DeepSeek-R1) or ``release_v6`` (GPT-OSS-120B), with ``timeout=60`` (seconds per test). What is
reproduced here, from lcb_runner's behaviour (benchmarks/code_generation.py, evaluation/testing_util.py and
compute_code_generation_metrics.py):

- a question's tests are its public then its private test cases; private ones are JSON, or (most of them) a
  base64 string of zlib-compressed pickled JSON; ``metadata.func_name`` set makes the question call-based
  (LeetCode: ``class Solution`` instantiated, the method called with each input line parsed as JSON, the result,
  a tuple read as a list, compared with ``==`` to the JSON output), else stdin/stdout (the program wrapped in a
  function, ``if __name__ == '__main__':`` at its end unwrapped, stdin / ``open`` / ``sys.stdin.*`` patched to
  the input, stdout captured; outputs equal line by line after stripping, or as lists of Decimals);
- lcb's star-imports (string, re, datetime, collections, heapq, ... typing) precede the program,
  recursion limit 50,000, int-to-str digits 50,000, and its ``reliability_guard`` (os.remove, os.getcwd,
  subprocess.Popen, quit, ... set to None);
- each test (and compiling) under a ``timeout`` s alarm; the first wrong answer, time-out or error ends the
  question; the whole question under lcb's global limit (timeout + 1) x tests + 5 s;
- passed only when every test passed.

Differences: the program runs in ``contained`` (fresh folder, no network, read-only filesystem where user
namespaces work, 4 GiB address-space limit, audit hook) instead of a forked child with no memory limit: a
solution that needs more than 4 GiB, or that writes outside its folder, fails here and may pass there.
"""
from __future__ import annotations

import base64
import concurrent.futures
import io
import json
import os
import pickle
import re
import secrets
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Iterable, Sequence

from code.common.errors import HarnessError, MissingDataError
from code.common.llm.contained import _PY_BOOT, _rmtree, namespace_available, run_contained

REPO = "livecodebench/code_generation_lite"
# the dataset's loading script: each release adds one file to the previous release's
RELEASE_FILES = {f"release_v{n}": tuple(["test.jsonl"] + [f"test{i}.jsonl" for i in range(2, n + 1)])
                 for n in range(1, 7)}
TIMEOUT_S = 60                # the references' lcb_runner args.timeout (per test)
RECORD = "download.json"
_ID = re.compile(r'"question_id":\s*"((?:[^"\\]|\\.)*)"')   # unescaped quotes: never inside a string value


# --- the dataset ---------------------------------------------------------------------------------

class _StrOnly(pickle.Unpickler):
    """lcb's private tests are a pickled str: refuse anything that would import (no code from the file runs)."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused global {module}.{name} in a LiveCodeBench test field")


def decode_tests(field: str) -> list[dict]:
    """A test-case field: JSON, else base64(zlib(pickle(JSON str))) as lcb stores private tests."""
    try:
        return json.loads(field)
    except (json.JSONDecodeError, TypeError):
        pass
    raw = _StrOnly(io.BytesIO(zlib.decompress(base64.b64decode(field.encode("utf-8"))))).load()
    return json.loads(raw)


def encode_private(tests: list[dict]) -> str:
    """The stored form of private tests (for synthetic sets): base64(zlib(pickle(json)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode("ascii")


def question(row: dict) -> dict:
    """{question_id, fn_name, inputs, outputs} of a dataset row (public tests, then private)."""
    tests = decode_tests(row["public_test_cases"]) + decode_tests(row["private_test_cases"])
    meta = json.loads(row["metadata"]) if isinstance(row.get("metadata"), str) else (row.get("metadata") or {})
    return {"question_id": str(row["question_id"]), "fn_name": meta.get("func_name"),
            "inputs": [t["input"] for t in tests], "outputs": [t["output"] for t in tests]}


def fix_command(benchmark: str) -> str:
    return f"make download_data BENCHMARKS={benchmark}"


def load_questions(folder: Path, release: str, wanted: Iterable[str] | None, fix: str) -> dict[str, dict]:
    """The questions of ``release`` in ``folder`` (its files as ``download`` leaves them), only ``wanted`` ids
    decoded when given. A missing file is a one-line MissingDataError naming ``fix``."""
    folder = Path(folder)
    want = None if wanted is None else set(map(str, wanted))
    out: dict[str, dict] = {}
    for name in RELEASE_FILES[release]:
        path = folder / name
        if not path.is_file():
            raise MissingDataError(f"LiveCodeBench test data not found: {path} (code_generation_lite {release})", fix)
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                if want is not None:               # one scan of the line for its id; only wanted rows are decoded
                    m = _ID.search(line)
                    if m is None or m.group(1) not in want:
                        continue
                try:
                    row = json.loads(line)
                    if want is None or str(row["question_id"]) in want:
                        out[str(row["question_id"])] = question(row)
                except (ValueError, KeyError, TypeError, zlib.error, pickle.UnpicklingError) as e:
                    raise MissingDataError(f"{path}:{n}: not a LiveCodeBench row ({type(e).__name__}: {e})"[:300],
                                           fix) from None
    return out


def download(dest: Path, release: str, *, revision: str | None = None, fix: str, log=print) -> Path:
    """``release``'s files of ``REPO`` into ``dest``, at one commit (``revision``, default the main branch,
    resolved once), each checked against the Hub's size and sha256 (its LFS record) as the Hub serves them to
    ``datasets.load_dataset``; fetched by URL (honours $MLPERF_DOWNLOAD_MIRROR), reused when already verified.
    ``dest/download.json`` records the commit and checksums."""
    from code.common import fileio
    from code.common.llm import download as dl

    dest = Path(dest)
    info = dl.hf_resolve(REPO, revision=revision, repo_type="dataset", rerun=fix)
    siblings = {s.rfilename: s for s in (info.siblings or [])}
    record = {"source": "huggingface", "repo": REPO, "revision": info.sha, "release": release, "files": {}}
    for name in RELEASE_FILES[release]:
        s = siblings.get(name)
        if s is None:
            raise MissingDataError(f"{REPO}@{info.sha[:12]} has no {name} ({release})",
                                   f"check {dl.hf_page(REPO, 'dataset')}")
        lfs = getattr(s, "lfs", None)
        sha = getattr(lfs, "sha256", None) if lfs is not None else None
        target = dest / name
        if dl.hf_file_ok(target, s) is None:
            log(f"[livecodebench] {name} present and verified")
        else:
            url = f"{dl.HF}/datasets/{REPO}/resolve/{info.sha}/{name}"
            log(f"[livecodebench] {url} -> {target}")

            def check(p: Path, s=s) -> None:
                why = dl.hf_file_ok(p, s)
                if why is not None:
                    raise HarnessError(f"{REPO} {name}: {why} (file discarded)", fix, 3)
            fileio.download(url, target, sha256=sha, check=check, fix=fix)
        record["files"][name] = {"sha256": sha, "size": target.stat().st_size}
    fileio.write_json(dest / RECORD, record)
    return dest


# --- synthetic questions (tests) -----------------------------------------------------------------

def synthetic_rows() -> list[dict]:
    """A few questions in the dataset's row format, both kinds, private tests compressed as lcb stores them."""
    def row(qid, public, private, meta):
        return {"question_id": qid, "question_title": qid, "question_content": f"synthetic question {qid}",
                "platform": "leetcode" if meta else "atcoder", "public_test_cases": json.dumps(public), "private_test_cases": encode_private(private),
                "metadata": json.dumps(meta), "starter_code": "", "difficulty": "easy",
                "contest_id": "syn", "contest_date": "2024-01-01T00:00:00"}
    std = "stdin"
    fun = "functional"
    return [
        row("syn_sum", [{"input": "1 2\n", "output": "3\n", "testtype": std}],
            [{"input": "10 -4\n", "output": "6\n", "testtype": std},
             {"input": "1000000000000 1\n", "output": "1000000000001\n", "testtype": std}], {}),
        row("syn_half", [{"input": "3\n", "output": "1.5\n", "testtype": std}],
            [{"input": "4\n", "output": "2.0\n", "testtype": std}], {}),
        row("syn_twosum", [{"input": "[2,7,11,15]\n9", "output": "[0, 1]", "testtype": fun}],
            [{"input": "[3,2,4]\n6", "output": "[1, 2]", "testtype": fun},
             {"input": "[3,3]\n6", "output": "[0, 1]", "testtype": fun}], {"func_name": "twoSum"}),
        row("syn_count", [{"input": "\"abca\"\n\"a\"", "output": "2", "testtype": fun}],
            [{"input": "\"zzz\"\n\"z\"", "output": "3", "testtype": fun}], {"func_name": "countChar"}),
    ]


# --- the program run in the contained runner -----------------------------------------------------

# Runs inside PY_BOOT (audit hook installed) with argv[1] = the work folder. Reads q.json, solution.py and
# the nonce (then removes it), grades as lcb_runner's testing_util, and writes one line "<nonce> <json>" to
# fd 1 (the run's log): {"results": [...], "reason": ...}; results hold True per passed test, then -2 (wrong
# answer), -3 (time limit) or -4 (runtime error) for the one that ended it.
_DRIVER = r'''
import ast, builtins, json, os, signal, sys, time
from decimal import Decimal
from io import StringIO
from unittest import mock

work = sys.argv[1]
_write, _exit = os.write, os._exit
with open(os.path.join(work, "nonce")) as f:
    nonce = f.read().strip()
os.remove(os.path.join(work, "nonce"))
with open(os.path.join(work, "q.json")) as f:
    q = json.load(f)
with open(os.path.join(work, "solution.py"), encoding="utf-8") as f:
    code = f.read()
timeout = int(q["timeout"])
sys.set_int_max_str_digits(50000)
STARS = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics",
         "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing")
PLAIN = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics",
         "itertools", "functools", "operator", "io", "sys", "json")
PRELUDE = "".join("from %s import *\n" % m for m in STARS) + "".join("import %s\n" % m for m in PLAIN) \
    + "sys.setrecursionlimit(50000)\n"


def report(results, reason):
    _write(1, ("\n" + nonce + " " + json.dumps({"results": results, "reason": reason[:300]}) + "\n").encode())
    _exit(0)


class Timeout(Exception):
    pass


def on_alarm(*_):
    raise Timeout()


signal.signal(signal.SIGALRM, on_alarm)


def guard():
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork",
                 "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown",
                 "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"):
        setattr(os, name, None)
    import shutil, subprocess
    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = None
    builtins.help = None
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None


def module_of(src):
    signal.alarm(timeout)
    try:
        ns = {"__name__": "tmp_sol", "__builtins__": builtins}
        exec(src, ns)
        return ns
    finally:
        signal.alarm(0)


def unwrap_main(src):
    try:
        tree = ast.parse(src)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            src = ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
    except Exception:
        pass
    return src


def as_function(src):
    try:
        tree = ast.parse(src)
        imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        rest = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        fn = ast.FunctionDef(name="wrapped_function", args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[],
                             kw_defaults=[], defaults=[]), body=rest, decorator_list=[], lineno=-1)
        if "type_params" in ast.FunctionDef._fields:
            fn.type_params = []
        return PRELUDE + "\n" + ast.unparse(imports) + "\n" + ast.unparse(fn)
    except Exception:
        return src


class Buffer:
    def __init__(self, text):
        self.data = text.encode("utf-8")

    def read(self, *a):
        return self.data

    def readline(self, *a):
        return self.data.split(b"\n")[0] + b"\n"


class Stdin:
    def __init__(self, text):
        self.inputs = text
        self._io = StringIO(text)
        self.buffer = Buffer(text)

    def read(self, *a):
        return self.inputs

    def readline(self, *a):
        return self._io.readline(*a)

    def readlines(self, *a):
        return self.inputs.split("\n")

    def __getattr__(self, name):
        return getattr(self._io, name)


def run_stdio(fn, text):
    # as lcb's stacked mock.patch decorators apply: read/readlines/readline on the stdin object in place first,
    # then sys.stdin replaced, then open
    lines = iter(text.split("\n"))
    patches = [mock.patch("sys.stdin.read", lambda *a: text),
               mock.patch("sys.stdin.readlines", lambda *a: text.split("\n")),
               mock.patch("sys.stdin.readline", lambda *a: next(lines)),
               mock.patch("sys.stdin", Stdin(text)),
               mock.patch("builtins.open", mock.mock_open(read_data=text))]
    done = []
    try:
        for p in patches:
            p.start()
            done.append(p)
        try:
            fn()
        except SystemExit:
            pass
    finally:
        for p in reversed(done):
            p.stop()


def lines_of(s):
    return [x.strip() for x in s.strip().split("\n")]


def decimals(line):
    try:
        return [Decimal(x) for x in line.split()]
    except Exception:
        return None


def failed(e, results):
    if isinstance(e, Timeout):
        results.append(-3)
        return "time limit exceeded"
    results.append(-4)
    return "runtime error: %s: %s" % (type(e).__name__, e)


def grade_stdio(results):
    ns = module_of(as_function(unwrap_main(code)))
    fn = ns.get("wrapped_function")
    if fn is None:
        raise RuntimeError("no wrapped_function")
    for inp, out in zip(q["inputs"], q["outputs"]):
        if isinstance(inp, list):
            inp = "\n".join(inp)
        real, cap = sys.stdout, StringIO()
        sys.stdout = cap
        signal.alarm(timeout)
        try:
            run_stdio(fn, inp)
            signal.alarm(0)
        except BaseException as e:
            signal.alarm(0)
            sys.stdout = real
            return failed(e, results)
        finally:
            signal.alarm(0)
            sys.stdout = real
        got, want = lines_of(cap.getvalue()), lines_of(out)
        if len(got) != len(want):
            results.append(-2)
            return "wrong answer: %d lines, expected %d" % (len(got), len(want))
        for i, (g, w) in enumerate(zip(got, want)):
            if g == w:
                continue
            dg, dw = decimals(g), decimals(w)
            if dg is None or dw is None or dg != dw:
                results.append(-2)
                return "wrong answer at line %d: %r != %r" % (i, g[:100], w[:100])
        results.append(True)
    return "passed"


def grade_call(results):
    ns = module_of(PRELUDE + "\n\n" + code)
    sol = ns["Solution"]() if "class Solution" in code else None
    method = getattr(sol, q["fn_name"], None) if sol is not None else ns.get(q["fn_name"])
    if method is None:
        raise RuntimeError("no function %s" % q["fn_name"])
    args = [[json.loads(x) for x in inp.split("\n")] for inp in q["inputs"]]
    outs = [json.loads(x) for x in q["outputs"]]
    for a, want in zip(args, outs):
        signal.alarm(timeout)
        try:
            got = method(*a)
            signal.alarm(0)
        except BaseException as e:
            signal.alarm(0)
            return failed(e, results)
        finally:
            signal.alarm(0)
        if isinstance(got, tuple):
            got = list(got)
        if not got == want:
            results.append(-2)
            return "wrong answer: %r != %r" % (str(got)[:100], str(want)[:100])
        results.append(True)
    return "passed"


guard()
results = []
try:
    signal.alarm(timeout)
    reason = grade_call(results) if q["fn_name"] else grade_stdio(results)
except BaseException as e:
    results, reason = [-4], "error during testing: %s: %s" % (type(e).__name__, e)
finally:
    signal.alarm(0)
report(results, reason)
'''


def global_limit(n_tests: int, timeout: float) -> float:
    """lcb's check_correctness: the whole question gets (timeout + 1) x tests + 5 seconds."""
    return (timeout + 1) * n_tests + 5


def judge(code: str | None, q: dict | None, *, timeout: float = TIMEOUT_S, namespace: bool | None = None,
          tmp_root: str | None = None) -> tuple[bool, str]:
    """(passed, reason) of one extracted program against one question (from ``question`` / ``load_questions``).
    No code or no question: failed, as the references' evaluate_livecodebench."""
    if not code or q is None:
        return False, "no code" if not code else "question not in the dataset"
    if namespace is None:
        namespace = namespace_available()
    root = tempfile.mkdtemp(prefix="lcb-", dir=tmp_root)
    try:
        work = os.path.join(root, "work")
        os.mkdir(work)
        nonce = secrets.token_hex(16)
        files = {"main.py": _DRIVER, "solution.py": code, "nonce": nonce,
                 "q.json": json.dumps({**q, "timeout": max(1, int(timeout))})}
        for name, text in files.items():
            with open(os.path.join(work, name), "w", encoding="utf-8", errors="replace") as f:
                f.write(text)
        limit = global_limit(len(q["inputs"]), timeout)
        rc, tail, _ = run_contained([sys.executable, "-I", "-B", "-c", _PY_BOOT, work, "main.py"], work, limit,
                                    namespace=namespace)
        found = [ln for ln in tail.splitlines() if ln.startswith(nonce + " ")]
        if not found:
            why = "global time limit" if rc is None else f"exit {rc}"
            return False, f"no verdict ({why}): {tail.strip()[-200:]}"
        verdict = json.loads(found[-1][len(nonce) + 1:])
        res = verdict["results"]
        return bool(res) and all(r is True for r in res) and len(res) == len(q["inputs"]), verdict["reason"]
    finally:
        _rmtree(root)


def judge_many(items: Sequence[tuple[str | None, dict | None]], *, workers: int = 2, timeout: float = TIMEOUT_S
               ) -> list[tuple[bool, str]]:
    """``judge`` over (code, question) pairs, ``workers`` at a time, in input order."""
    namespace = namespace_available()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(lambda it: judge(it[0], it[1], timeout=timeout, namespace=namespace), items))


class Judge:
    """The code judge ``exact_match.score`` calls: the questions of ``release`` read from ``folder`` on first use
    (a MissingDataError naming ``fix`` when absent)."""

    def __init__(self, folder: Path, release: str, fix: str, *, workers: int = 2, timeout: float = TIMEOUT_S):
        self.folder, self.release, self.fix, self.workers, self.timeout = Path(folder), release, fix, workers, timeout

    def __call__(self, pairs: Sequence[tuple[str | None, str]]) -> list[bool]:
        ids = {str(qid) for _, qid in pairs}
        qs = load_questions(self.folder, self.release, ids, self.fix)
        verdicts = judge_many([(c, qs.get(str(qid))) for c, qid in pairs], workers=self.workers, timeout=self.timeout)
        return [ok for ok, _ in verdicts]


def folder_of(raw_dir: Path) -> Path:
    """Where a benchmark keeps its LiveCodeBench test data: beside its own raw data."""
    return Path(raw_dir) / "livecodebench"


def benchmark_judge(raw_dir: Path, release: str, fix: str) -> Judge:
    """The judge a benchmark's scorer passes to ``exact_match.score`` (one worker per core, at most 8)."""
    return Judge(folder_of(raw_dir), release, fix, workers=max(1, min(8, os.cpu_count() or 1)))
