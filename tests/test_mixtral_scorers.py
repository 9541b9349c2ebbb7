"""Mixtral-8x7B's GSM8K and MBXP scorers on hand-made cases (no model, no LoadGen).

MBXP programs really run: python always, javascript / cpp where node / g++ are installed. The
containment checks use a local TCP server (a blocked connect must never reach it) and a file outside
the program's folder (it must never be written)."""
from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
import time
import types

import pytest

from code.common.errors import HarnessError
from code.mixtral_8x7b import gsm8k, mbxp


# --- GSM8K ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("prediction, truth, answer", [
    ("Tom has 3 apples and buys 4. The answer is 7.", "7", "7"),                   # delimiter
    ("3 apples plus 4 apples makes 7", "7", "7"),                                   # last number
    ("The answer is 1,234 dollars.", "1234", "1234"),                               # thousands separator
    ("It drops 12 degrees. The answer is -5.", "-5", "-5"),                         # negative
    ("Half of 5 is 2.5, so the answer is 2.5. The answer is 2.5", "2.5", "2.5"),    # decimal
    ("The answer is 12 apples and 3 pears", "12", "12"),                            # first after the delimiter
    ("First 5. The answer is unknown", "5", "5"),                                   # delimiter without a number
    ("The answer is 9.", "10", "9"),                                                # wrong
    ("I cannot tell.", "4", ""),                                                    # no answer
    ("The answer is 8.\nQ: Sam has 99 marbles. The answer is 99.", "8", "8"),       # continuation ignored
    ("So she pays 8 in all\nQ: A train goes 60 miles", "8", "8"),                   # continuation, no delimiter
])
def test_gsm8k_extraction(prediction, truth, answer):
    assert gsm8k.extract_answer(prediction) == answer
    assert gsm8k.is_correct(prediction, truth) == (answer != "" and float(answer) == float(truth))


def test_gsm8k_score_counts_no_answer_in_the_denominator():
    preds = ["The answer is 7.", "The answer is 1,000", "no idea", "The answer is 3\nQ: 5", "It is 6"]
    truths = ["7", "1000", "2", "3", "5"]
    r = gsm8k.score(preds, truths)
    assert r == {"gsm8k": 60.0, "correct": 3, "total": 5, "no_answer": 1}
    assert gsm8k.find_number("x 1,5 y", delimiter="y") == "1,5"       # commas survive find_number
    assert gsm8k.score([], []) == {"gsm8k": 0.0, "correct": 0, "total": 0, "no_answer": 0}
    with pytest.raises(HarnessError, match="2 predictions for 1 ground truths"):
        gsm8k.score(["1", "2"], ["1"])
    with pytest.raises(HarnessError, match="prediction 0 is a list"):
        gsm8k.score([[1, 2]], ["1"])


# --- MBXP helpers --------------------------------------------------------------------------------

class Listener:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            c.close()

    def close(self):
        self.sock.close()


@pytest.fixture()
def listener():
    s = Listener()
    yield s
    s.close()


@pytest.fixture()
def sandbox_root(tmp_path):
    root = tmp_path / "sandboxes"
    root.mkdir()
    return root


PY_TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n"


def py(entry: str, response: str, test: str = PY_TEST) -> dict:
    return {"lang": "python", "entry_point": entry, "test_code": test, "response": response}


def by_key(result: dict) -> dict:
    return {d["key"]: d for d in result["details"]}


# --- MBXP: python (always) ----------------------------------------------------------------------

def test_python_programs_pass_fail_and_are_contained(tmp_path, sandbox_root, listener, monkeypatch):
    monkeypatch.setenv("MBXP_TEST_SECRET", "do-not-leak")
    outside = tmp_path / "outside.txt"
    probs = [
        py("add", "def add(a, b):\n    return a + b\n```\nThat is all."),          # fence cut off
        py("add\\_two", "  def add\\_two(a, b):\n    return a + b\n"),             # lstrip, "\_" -> "_"
        py("wrong", "def wrong(a, b):\n    return a - b\n"),
        py("syntax", "def syntax(a, b)\n    return a + b\n"),
        py("forever", "def forever(a, b):\n    while True:\n        pass\n"),
        py("net", f"import socket\ndef net(a, b):\n    socket.create_connection(('127.0.0.1', {listener.port}), 2)\n"
                  "    return a + b\n"),
        py("escape", f"def escape(a, b):\n    open({str(outside)!r}, 'w').write('x')\n    return a + b\n"),
        py("env", "import os\ndef env(a, b):\n    assert os.environ['HOME'] == os.getcwd() == os.environ['TMPDIR']\n"
                  "    assert 'MBXP_TEST_SECRET' not in os.environ\n    open('scratch.txt', 'w').write('ok')\n"
                  "    return a + b\n"),
    ]
    probs[1]["entry_point"] = "add_two"
    t0 = time.monotonic()
    r = mbxp.evaluate(probs, workers=2, timeout=2, evaluator="harness", tmp_root=str(sandbox_root))
    took = time.monotonic() - t0
    d = by_key(r)
    assert d["python_add"]["passed"] and d["python_add_two"]["passed"] and d["python_env"]["passed"], d
    assert not d["python_wrong"]["passed"] and "AssertionError" in d["python_wrong"]["reason"]
    assert not d["python_syntax"]["passed"] and "SyntaxError" in d["python_syntax"]["reason"]
    assert not d["python_forever"]["passed"] and "timed out" in d["python_forever"]["reason"]
    assert took < 15, took
    assert not d["python_net"]["passed"] and listener.hits == 0
    assert not d["python_escape"]["passed"] and not outside.exists()
    assert list(sandbox_root.iterdir()) == []                         # every temp folder removed
    assert (r["passed"], r["scored"], r["total"]) == (3, 8, 8)
    assert r["mbxp"] == pytest.approx(37.5)
    assert r["by_language"] == {"python": {"passed": 3, "scored": 8}}
    assert r["evaluator"] == "harness" and r["not_scored"] == {} and r["missing_runtimes"] == []
    assert r["unofficial"] == []
    if mbxp.namespace_available():
        assert r["containment"].startswith("unshare")


def test_audit_hook_alone_blocks_network_and_outside_writes(tmp_path, sandbox_root, listener, monkeypatch):
    """With the namespace layer unavailable (probe patched), python programs are still contained."""
    monkeypatch.setattr(mbxp, "namespace_available", lambda: False)
    outside = tmp_path / "outside.txt"
    probs = [
        py("net", f"import socket\ndef net(a, b):\n    socket.create_connection(('127.0.0.1', {listener.port}), 2)\n"
                  "    return a + b\n"),
        py("escape", f"def escape(a, b):\n    open({str(outside)!r}, 'w').write('x')\n    return a + b\n"),
        py("osopen", f"import os\ndef osopen(a, b):\n    os.close(os.open({str(outside)!r}, os.O_WRONLY | os.O_CREAT))\n"
                     "    return a + b\n"),
        py("spawn", f"import subprocess\ndef spawn(a, b):\n    subprocess.run(['touch', {str(outside)!r}])\n"
                    "    return a + b\n"),
        py("ok", "def ok(a, b):\n    open('inside.txt', 'w').write('fine')\n    return a + b\n"),
        py("tamper", "import builtins, os, os.path\n"                   # patching what the hook could use
                     "os.path.realpath = os.path.abspath = lambda p: os.getcwd() + '/x'\n"
                     "builtins.isinstance = builtins.any = lambda *a: True\nos.getcwd = lambda: '/'\n"
                     f"def tamper(a, b):\n    open({str(outside)!r}, 'w').write('x')\n    return a + b\n"),
        py("walk", "import gc\ndef walk(a, b):\n    gc.get_objects()\n    return a + b\n"),     # reach the hook
        py("forever", "def forever(a, b):\n    while True:\n        pass\n"),
    ]
    t0 = time.monotonic()
    r = mbxp.evaluate(probs, workers=2, timeout=2, evaluator="harness", tmp_root=str(sandbox_root))
    assert time.monotonic() - t0 < 15
    assert "timed out" in by_key(r)["python_forever"]["reason"]
    d = by_key(r)
    for k in ("net", "escape", "osopen", "spawn", "tamper", "walk"):
        assert not d[f"python_{k}"]["passed"] and "sandbox:" in d[f"python_{k}"]["reason"], d[f"python_{k}"]
    assert d["python_ok"]["passed"], d["python_ok"]
    assert listener.hits == 0 and not outside.exists()
    assert r["containment"].startswith("audit-hook only (python); none for other languages")
    assert "containment: audit-hook only (python)" in mbxp.summary(r)
    assert list(sandbox_root.iterdir()) == []


def test_namespace_layer_blocks_any_program(tmp_path, listener):
    """The unshare layer on its own (no audit hook): a shell write outside and a raw python connect."""
    if not mbxp.namespace_available():
        pytest.skip("unprivileged user namespaces (unshare -rn) are not permitted here")
    work = tmp_path / "box" / "work"
    work.mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    rc, out, _ = mbxp.run_contained(["sh", "-c", f"echo x > inside && echo x > {outside}"], str(work), 10,
                                    namespace=True)
    assert rc != 0 and "Read-only file system" in out and not outside.exists() and (work / "inside").exists()
    rc, out, _ = mbxp.run_contained(["sh", "-c", f"mount -o remount,rw / ; echo x > {outside}"], str(work), 10,
                                    namespace=True)                # root of its namespace, but no capabilities
    assert rc != 0 and not outside.exists()
    rc, out, _ = mbxp.run_contained([sys.executable, "-c", "import socket; socket.create_connection("
                                     f"('127.0.0.1', {listener.port}), 2)"], str(work), 10, namespace=True)
    assert rc != 0 and "Network is unreachable" in out and listener.hits == 0


def test_descendants_die_with_the_run(tmp_path):
    """Without namespaces, a process that leaves the group (setsid) is still killed at the end."""
    if not shutil.which("setsid"):
        pytest.skip("setsid not installed")
    work = tmp_path / "box" / "work"
    work.mkdir(parents=True)
    rc, out, _ = mbxp.run_contained(["sh", "-c", "setsid sleep 60 & echo $!"], str(work), 10, namespace=False)
    pid = int(out.split()[-1])
    assert rc == 0
    time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split(")")[1][:3]


# --- MBXP: javascript and cpp (where installed) ------------------------------------------------

@pytest.fixture()
def lodash(tmp_path, monkeypatch):
    """Every MBXP javascript test requires lodash: where it is not installed, a stand-in with the one
    function the tests use, found through NODE_PATH (which the sandbox passes on)."""
    mbxp._node_module_found.cache_clear()
    if shutil.which("node") and mbxp.missing_runtime("javascript") == "node module lodash":
        mod = tmp_path / "node_modules" / "lodash"
        mod.mkdir(parents=True)
        (mod / "index.js").write_text("module.exports = { isEqual: require('util').isDeepStrictEqual };\n")
        monkeypatch.setenv("NODE_PATH", str(tmp_path / "node_modules"))
        mbxp._node_module_found.cache_clear()
    yield
    mbxp._node_module_found.cache_clear()


def test_javascript_and_cpp(tmp_path, sandbox_root, listener, lodash):
    have = mbxp.languages_available()
    if not (have["javascript"] or have["cpp"]):
        pytest.skip("neither node nor g++ is installed")
    assert have["javascript"] == bool(shutil.which("node"))        # with the lodash stand-in
    outside = tmp_path / "outside.txt"
    js_test = ("\nconst _ = require('lodash')\nfunction compare(a, b) { return _.isEqual(a, b) }\n"   # MBXP's form
               "if (!compare(add(2, 3), 5)) { throw 'Error at 1th assert statement.'; }\n")
    cpp_test = "\n#include <cassert>\nint main() { assert(add(2, 3) == 5); return 0; }\n"
    probs = []
    if have["javascript"]:
        probs += [
            {"lang": "javascript", "entry_point": "ok", "test_code": js_test,
             "response": "function add(a, b) { return a + b; }\n```\n"},
            {"lang": "javascript", "entry_point": "wrong", "test_code": js_test,
             "response": "function add(a, b) { return a - b; }\n"},
            {"lang": "javascript", "entry_point": "syntax", "test_code": js_test,
             "response": "function add(a, b) { return a + ; }\n"},
        ]
        if mbxp.namespace_available():
            probs += [
                {"lang": "javascript", "entry_point": "net", "test_code": "", "response":
                 f"const s = require('net').connect({listener.port}, '127.0.0.1');\n"
                 "s.on('connect', () => process.exit(0));\n"
                 "s.on('error', (e) => { console.error(e.code); process.exit(1); });\n"},
                {"lang": "javascript", "entry_point": "escape", "test_code": "",
                 "response": f"require('fs').writeFileSync({str(outside)!r}, 'x');\n"},
            ]
    if have["cpp"]:
        probs += [
            {"lang": "cpp", "entry_point": "ok", "test_code": cpp_test,
             "response": "int add(int a, int b) { return a + b; }\n"},
            {"lang": "cpp", "entry_point": "wrong", "test_code": cpp_test,
             "response": "int add(int a, int b) { return a - b; }\n"},
            {"lang": "cpp", "entry_point": "syntax", "test_code": cpp_test,
             "response": "int add(int a, int b) { return a + }\n"},
            {"lang": "cpp", "entry_point": "forever", "test_code": cpp_test,
             "response": "int add(int a, int b) { for (;;) {} }\n"},
        ]
    t0 = time.monotonic()
    r = mbxp.evaluate(probs, workers=2, timeout=2, evaluator="harness", tmp_root=str(sandbox_root))
    took = time.monotonic() - t0
    d = by_key(r)
    for lang in ("javascript", "cpp"):
        if have[lang]:
            assert d[f"{lang}_ok"]["passed"], d[f"{lang}_ok"]
            assert not d[f"{lang}_wrong"]["passed"] and not d[f"{lang}_syntax"]["passed"]
    if have["cpp"]:
        assert "compile error" in d["cpp_syntax"]["reason"]
        assert not d["cpp_forever"]["passed"] and "timed out" in d["cpp_forever"]["reason"]
    if "javascript_net" in d:
        assert not d["javascript_net"]["passed"] and "ENETUNREACH" in d["javascript_net"]["reason"]
        assert not d["javascript_escape"]["passed"] and "EROFS" in d["javascript_escape"]["reason"]
    assert listener.hits == 0 and not outside.exists()
    assert took < 15, took
    assert list(sandbox_root.iterdir()) == []


def test_typescript_compiled_means_tsc_exit_2(tmp_path, sandbox_root, monkeypatch):
    """mxeval's rule with a stand-in tsc (the real one is rarely installed): exit 2 (emitted with type
    errors) counts as compiled, exit 0 does not; then node runs main.js."""
    if not shutil.which("node"):
        pytest.skip("node is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tsc = bin_dir / "tsc"
    tsc.write_text('#!/bin/sh\n[ "$1 $2 $3 $4 $5" = "main.ts --target es5 --lib es2016" ] || exit 9\n'
                   'cp main.ts main.js\ngrep -q CLEAN main.ts && exit 0\nexit 2\n')
    tsc.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    test = "\nif (add(2, 3) !== 5) { throw new Error('wrong'); }\n"
    probs = [{"lang": "typescript", "entry_point": e, "test_code": test, "response": r} for e, r in [
        ("ok", "function add(a, b) { return a + b; }\n"),
        ("wrong", "function add(a, b) { return a - b; }\n"),
        ("clean", "// CLEAN\nfunction add(a, b) { return a + b; }\n")]]
    r = mbxp.evaluate(probs, workers=2, timeout=5, evaluator="harness", tmp_root=str(sandbox_root))
    d = by_key(r)
    assert d["typescript_ok"]["passed"] and not d["typescript_wrong"]["passed"], d
    assert not d["typescript_clean"]["passed"] and "tsc exit 0" in d["typescript_clean"]["reason"]


# --- MBXP: what is not scored, the summary, the mxeval path, bad input ---------------------------

def test_javascript_without_lodash_counts_as_failed_and_unofficial(tmp_path, monkeypatch):
    if not shutil.which("node"):
        pytest.skip("node is not installed")
    mbxp._node_module_found.cache_clear()
    monkeypatch.setattr(mbxp, "node_path", lambda: str(tmp_path / "empty"))
    monkeypatch.setattr(mbxp.tempfile, "tempdir", str(tmp_path))
    try:
        r = mbxp.evaluate([{"lang": "javascript", "entry_point": "a", "test_code": "", "response": ""}],
                          evaluator="harness")
    finally:
        mbxp._node_module_found.cache_clear()
    assert (r["scored"], r["passed"], r["mbxp"]) == (1, 0, 0.0)
    assert r["missing_tools"] == {"javascript": "node module lodash"}
    assert r["unofficial"] == ["MBXP: no runtime for javascript (npm install -g lodash); 1 of 1 problems counted "
                               "as failed"]
    assert "javascript 1 (node module lodash)" in mbxp.summary(r)


def test_missing_runtime_counts_as_failed_and_is_unofficial(sandbox_root, monkeypatch):
    """The reference's denominator (evaluate_mbxp.py: every problem of its six languages; a problem whose
    compiler or interpreter is missing fails in mxeval): problems without a runtime count as failed, and
    the score says it is not the official one, with the install command."""
    real = shutil.which
    monkeypatch.setattr(mbxp.shutil, "which", lambda t, *a, **k: None if t in ("node", "g++") else real(t, *a, **k))
    probs = [py("add", "def add(a, b):\n    return a + b\n"),
             {"lang": "javascript", "entry_point": "a", "test_code": "", "response": "process.exit(0)"},
             {"lang": "javascript", "entry_point": "b", "test_code": "", "response": "process.exit(0)"},
             {"lang": "cpp", "entry_point": "c", "test_code": "", "response": "int main() {}"},
             {"lang": "go", "entry_point": "d", "test_code": "", "response": "package main"}]
    r = mbxp.evaluate(probs, workers=1, timeout=5, evaluator="harness", tmp_root=str(sandbox_root))
    assert (r["passed"], r["scored"], r["total"], r["mbxp"]) == (1, 4, 5, 25.0)
    assert r["not_scored"] == {"go": 1} and r["not_run"] == {"javascript": 2, "cpp": 1}
    assert r["missing_runtimes"] == ["cpp", "javascript"]
    assert r["by_language"] == {"python": {"passed": 1, "scored": 1}, "javascript": {"passed": 0, "scored": 2},
                                "cpp": {"passed": 0, "scored": 1}}
    assert [d["passed"] for d in r["details"]] == [True, False, False, False, None]
    assert r["unofficial"] == [
        "MBXP: no runtime for cpp (apt-get install g++); 1 of 4 problems counted as failed",
        "MBXP: no runtime for javascript (apt-get install nodejs); 2 of 4 problems counted as failed"]
    line = mbxp.summary(r)
    assert line.startswith("MBXP: scored 4 of 5 problems (javascript 2, cpp 1, python 1), passed 1 (25.00%); "
                           "counted as failed, not run (runtime not installed): cpp 1 (g++), javascript 2 (node)"), line
    assert "go 1 (not scored by the reference)" in line
    assert r["missing_tools"] == {"cpp": "g++", "javascript": "node"}
    assert r["details"][1]["reason"] == "failed: not run, runtime not installed (node)"
    assert "evaluator: harness" in line and "\n" not in line
    empty = mbxp.evaluate(probs[1:4], evaluator="harness")
    assert empty["mbxp"] == 0.0 and empty["scored"] == 3 and len(empty["unofficial"]) == 2
    assert mbxp.evaluate([py("add", "def add(a, b):\n    return a + b\n")], evaluator="harness")["unofficial"] == []


def test_mxeval_is_used_when_it_imports(monkeypatch):
    calls = []

    def checker(problem, completion, timeout):
        calls.append((problem, completion, timeout))
        return {"passed": "return a + b" in completion, "result": "passed" if "+" in completion else "failed: x"}

    execution = types.SimpleNamespace(**{name: checker for name in mbxp.MXEVAL_CHECKERS.values()})
    pkg = types.ModuleType("mxeval")
    pkg.execution = execution
    monkeypatch.setitem(sys.modules, "mxeval", pkg)
    monkeypatch.setitem(sys.modules, "mxeval.execution", execution)
    r = mbxp.evaluate([py("add", "\n def add(a, b):\n    return a + b\n```"), py("sub", "def sub(a, b):\n    return a - b")],
                      workers=2, timeout=7)
    assert r["evaluator"] == "mxeval" and r["passed"] == 1 and r["scored"] == 2
    assert r["containment"].startswith("mxeval's own")
    problem, completion, timeout = sorted(calls, key=lambda c: c[0]["task_id"])[0]
    assert problem["prompt"] == "" and problem["test"] == PY_TEST and problem["task_id"] == "python_add"
    assert completion == "def add(a, b):\n    return a + b\n" and timeout == 7
    assert "evaluator: mxeval (mxeval installed)" in mbxp.summary(r)


def test_postprocess_as_the_reference():
    assert mbxp.postprocess("python", "\n\n  x = 1\n```\nmore") == "x = 1\n"
    assert mbxp.postprocess("cpp", "  int a\\_b;```") == "  int a_b;"
    assert mbxp.postprocess("go", 'package main\nimport "fmt"\nfunc f() {}\nfunc main() {\n}\n') == "\nimport \"fmt\"\nfunc f() {}\n\n"
    assert mbxp.build_program("python", "f", "T", "S") == "S\nT\ncheck(f)"
    assert mbxp.build_program("ruby", "f", "T", "S") == "ST"


def test_bad_input_is_one_line(tmp_path):
    with pytest.raises(HarnessError, match="MBXP: cannot run programs"):
        mbxp.evaluate([py("add", "")], evaluator="harness", tmp_root=str(tmp_path / "missing"))
    assert mbxp.make_problem("cpp_max_of_two", "T", "R") == {"lang": "cpp", "entry_point": "max_of_two",
                                                             "test_code": "T", "response": "R"}
    with pytest.raises(HarnessError, match="not <language>_<entry point>"):
        mbxp.make_problem("nounderscore", "T", "R")
    with pytest.raises(HarnessError, match=r"MBXP problem 0: 'test_code' is missing") as e:
        mbxp.evaluate([{"lang": "python", "entry_point": "f", "response": ""}])
    assert "make preprocess_data" in e.value.fix
    with pytest.raises(HarnessError, match="'response' is a NoneType"):
        mbxp.evaluate([{"lang": "python", "entry_point": "f", "test_code": "", "response": None}])
    with pytest.raises(HarnessError, match="workers"):
        mbxp.evaluate([], workers=0)
    with pytest.raises(HarnessError, match="timeout"):
        mbxp.evaluate([], timeout=0)
    if mbxp._mxeval_execution() is None:
        with pytest.raises(HarnessError, match="mxeval unavailable: mxeval not installed"):
            mbxp.evaluate([], evaluator="mxeval")
