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
import subprocess
import sys
import tempfile
import time
from typing import Sequence

from code.common.errors import HarnessError, from_os_error
from code.common.llm.contained import (  # noqa: F401  (the runner moved there; its names stay reachable here)
    _PY_BOOT, _rmtree, containment, namespace_available, node_path, run_contained)

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
