"""Shared fixtures. Every test runs against a private build/ and scratch folder, never the user's."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable

# Three test workers share two cores. OpenMP threads that spin between torch's parallel regions burn the CPU the
# other worker needs (tests/test_llm_layer.py: 34 s user spinning, 26 s passive, same wall time alone): wait
# passively, in this process and in every run it starts. Set before anything imports torch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# The same for ONNX Runtime's pools: cpu_spin_wait=auto never spins where other work shares the cores
# (code.common.backends.base.cpu_spin; a tiny ResNet50 Server run: 13.0 CPU-s spinning, 5.8 not, same wall time).
os.environ.setdefault("MLPERF_SHARED_CPU", "1")

# A run measured against a latency bound (a submission tree's Server runs) gets the CPU first: as root (CI) it
# starts at nice -10 and the other runs stay at 0; elsewhere it stays at 0 and every other run the tests start
# yields at nice 5. Beside the other worker's busy processes a few of 460 Server queries used to wait out
# DLRM-v2's 60 ms bound, and LoadGen's p99 early stopping forgives none at that count.
LATENCY_NICE, BACKGROUND_NICE = (-10, 0) if os.geteuid() == 0 else (0, 5)
# ... and a run that must come out VALID at the round's own bound (a submission tree's Server runs, ``latency="strict"``)
# gets it before those: with three workers, two other Server runs (tiny LLMs decoding at nice -10) once held both
# cores while tiny DLRM-v2 served at 10.8 QPS, and 2 of its 460 queries missed 60 ms three times in a row.
STRICT_LATENCY_NICE = -19 if os.geteuid() == 0 else 0


def _nice(latency: bool | str) -> int:
    return STRICT_LATENCY_NICE if latency == "strict" else LATENCY_NICE if latency else BACKGROUND_NICE


def _priority(latency: bool | str):
    n = _nice(latency)

    def pre() -> None:
        try:
            os.nice(n)
        except OSError:          # not allowed after all (a container without CAP_SYS_NICE): as it is
            pass
    return pre if n else None


def offline_samples(n: int) -> tuple[str, ...]:
    """Offline sized by sample count, never by rate: LoadGen's one Offline query carries
    max(min_query_count, expected QPS x min_duration) samples, so with a 1 ms min_duration and an
    expected rate of 1 it carries ``n``, and lasts as long as this machine needs for ``n`` (a rate
    set above the machine's speed made runs take minutes on a slow machine; one below it ended the
    run before min_duration, INVALID)."""
    return ("--min_duration=1", f"--min_query_count={n}", "--offline_expected_qps=1")


def assert_audit_passed(rec: dict) -> bool:
    """An audit verification record passed; returns True when it did outright.

    The one failure accepted is a timed comparison that is the audit's only failure: accuracy passed,
    no errors, both runs VALID, and the verdict is the official rule applied to the two scores (they
    differ by more than the threshold). Two short timed runs on a shared 2-core CI machine can differ
    by more than 10% whatever the harness does; what the test checks is that the audit machinery
    passes an honest SUT, so such a run is reported as a warning, not a failure.
    """
    if rec["passed"]:
        return True
    p = rec.get("performance") or {}
    assert rec.get("accuracy", {}).get("passed", True), rec.get("accuracy")
    assert not rec.get("errors"), rec["errors"]
    assert "reference_score" in p and not p["passed"], p
    assert p["verdict"] == "TEST FAIL: Test score invalid", p
    assert abs(p["test_score"] / p["reference_score"] - 1) > p["threshold"], p
    warnings.warn(f"{rec['test']} timed comparison outside {p['threshold']:.0%} on this machine "
                  f"(reference {p['reference_score']:.6g}, audit {p['test_score']:.6g}); accuracy passed")
    return False


def run_main(*args: str, env: dict | None = None, check: bool = False, timeout: int = 900,
             latency: bool | str = False, cwd: Path = REPO,
             drop_env: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run ``python -m code.main`` exactly as a user would; returns the completed process. ``latency``: a run
    whose latency bound must hold on this shared CPU (it gets the CPU first, see _priority; "strict": before the
    other latency runs). ``cwd``: the tree
    whose ``code`` runs (a copy, tests/test_add_benchmark.py); ``drop_env``: variables of this process it must
    not inherit."""
    e = {k: v for k, v in os.environ.items() if k not in drop_env}
    e.update(env or {})
    e.setdefault("PYTHONUNBUFFERED", "1")
    t0, c0 = time.monotonic(), _cpu_seconds()
    r = _forked_main(args, cwd, e, timeout, latency)
    if r is None:
        r = subprocess.run([PY, "-m", "code.main", *args], cwd=cwd, env=e, capture_output=True, text=True,
                           timeout=timeout, preexec_fn=_priority(latency))
    if os.environ.get("RUN_MAIN_LOG"):      # where the suite's time goes, run by run
        with open(os.environ["RUN_MAIN_LOG"], "a") as f:
            f.write(f"{time.monotonic() - t0:7.1f} s wall {_cpu_seconds() - c0:7.1f} s CPU  {' '.join(args)}\n")
    if check and r.returncode != 0:
        raise AssertionError(f"code.main {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def _forked_main(args: tuple[str, ...], cwd: Path, env: dict, timeout: int,
                 latency: bool | str) -> subprocess.CompletedProcess | None:
    """``python -m code.main args`` forked by this worker's zygote (harness_zygote), which has torch, transformers and
    diffusers imported: the suite's CLI calls (tiny builds, calibration, scoring, staging) otherwise import them
    afresh, 3-6 CPU-s each where the action needs them (tests/test_bert_harness.py alone: 56 CPU-s before, 47.5 after). The harness child of a run is the zygote's next fork,
    as before. None where the zygote cannot serve it (not started yet, another tree, an import-time variable that
    differs, another PYTHONPATH or working tree): the caller starts a fresh interpreter. ``MLPERF_TEST_ZYGOTE_MAIN=0`` turns this off."""
    if os.environ.get("MLPERF_TEST_ZYGOTE_MAIN", "1") == "0" or not env.get("MLPERF_ZYGOTE"):
        return None
    if env.get("PYTHONPATH") != os.environ.get("PYTHONPATH") or Path(cwd).resolve() != REPO:
        return None          # a module put ahead of the installed ones (tests/test_doctor.py), or another tree's
                             # ``code`` (tests/test_add_benchmark.py): sys.path is the zygote's, this repository's
    import tempfile

    from code.common.harness import zygote

    n = _nice(latency)
    with open(os.devnull) as stdin, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = zygote.start("code.main", list(args), cwd, env, fds=(stdin.fileno(), out.fileno(), err.fileno()),
                             nice=n, keep_zygote=True)
        if child is None:
            return None
        try:
            rc = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise subprocess.TimeoutExpired([PY, "-m", "code.main", *args], timeout) from None
        out.seek(0), err.seek(0)
        return subprocess.CompletedProcess([PY, "-m", "code.main", *args], rc,
                                           out.read().decode(errors="replace"), err.read().decode(errors="replace"))


# --- pytest-xdist: in which order ------------------------------------------------------------------------
# `make test` runs three workers with --dist loadfile --no-loadscope-reorder: a test module is one work unit (its
# module fixtures are built once, on one worker), handed out in the order the workers collected them. Here that
# order is heaviest first (HEAVY: a module's seconds in one full three-worker run, 2026-12-06 at 6b549fd; ordered by the seconds
# of 2026-12-07 the suite ran 884 s, in this order 808 s and 946 s: within this machine's drift, so this one stays), so the long
# units start at once and the short ones fill the end; the rest follow in file order. (--dist loadgroup would split a module further,
# but pytest 9 ignores the node-id suffix xdist 3.8 marks groups with, so the submission trees are one file per
# round instead.)
HEAVY = ("test_llm_harness",                     # 125 s
         "test_deepseek_r1",                     # 122 (a build, 6 LLM runs)
         "test_submission_official_v51",         # 106
         "test_submission_official",             # 99 (v6.1)
         "test_gpu_check",                       # 96 (the CPU dry-run)
         "test_submission_official_v60",         # 94
         "test_calibration",                     # 93
         "test_llama3_1_405b",                   # 64 + ~25 (est.: VALID Server and Interactive, TEST06; +24 s alone)
         "test_ray_executor",                    # 85
         "test_whisper",                         # 77
         "test_gpt_oss_120b",                    # 72
         "test_retinanet_harness",               # 58
         "test_compliance_sdxl",                 # 53
         "test_llm_moe_llama31_harness",         # 48
         "test_find_performance",                # 48
         "test_sdxl_fidelity",                   # 47
         "test_submission_endpoints",            # 47 (a server, two endpoints-client runs)
         "test_qwen3_vl",                        # 47
         "test_llm_http",                        # 46 (two servers started)
         "test_submission_pipeline",             # 45
         "test_yolo",                            # 41
         "test_sdxl_harness",                    # 37
         "test_report",                          # 36
         "test_resnet50_harness",                # 32
         "test_rgat",                            # 31
         "test_sdxl_accuracy",                   # 29
         "test_wan",                             # 28
         "test_doctor")                          # 28


def _module(item: pytest.Item) -> str:
    return item.module.__name__.rsplit(".", 1)[-1]


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return                        # in-process: collection order
    rank = {m: i for i, m in enumerate(HEAVY)}
    items.sort(key=lambda it: rank.get(_module(it), len(HEAVY)))       # stable: a module's tests keep their order


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch at one intra-op thread for a module (``pytestmark = pytest.mark.usefixtures("one_torch_thread")``) that
    runs torch models in the worker: with the cores shared (three workers on two), a second OpenMP thread spin-waits
    for a core another worker holds (the SDXL scorers: 2.3x the CPU-s of one thread), as the harness's SDXL accuracy
    step does under MLPERF_SHARED_CPU."""
    from code.common.backends.pytorch import one_thread

    with one_thread():
        yield


@pytest.fixture(scope="session")
def harness_env(tmp_path_factory) -> dict:
    """Private MLPERF_BUILD_DIR/MLPERF_SCRATCH_PATH for the whole session, exported to os.environ too.

    Under pytest-xdist (`make test` runs three workers) the build folder stays private to each worker, and the
    scratch folder, where the tiny models and data sets are built (``build_tiny``), is shared by all the
    workers of the run: each tiny variant is built once per run. Tests never write into the shared scratch:
    a test that damages files works on a private copy (``private_scratch``)."""
    root = tmp_path_factory.mktemp("harness")
    shared = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else root
    env = {"MLPERF_BUILD_DIR": str(root / "build"), "MLPERF_SCRATCH_PATH": str(shared / "scratch")}
    os.environ.update(env)
    return env


@pytest.fixture(scope="session", autouse=True)
def harness_zygote():
    """One zygote per test process (code/common/harness/zygote.py): the LoadGen runs the tests start fork their
    harness child from a process that has imported torch, transformers and diffusers once, instead of importing
    them again in each of ~400 fresh interpreters (6-9 CPU-s each). ``MLPERF_TEST_ZYGOTE=0`` turns it off; a run
    whose environment differs from the zygote's in a variable libraries read at import gets a fresh interpreter."""
    if os.environ.get("MLPERF_TEST_ZYGOTE", "1") == "0" or os.environ.get("MLPERF_ZYGOTE"):
        yield None
        return
    import shutil
    import tempfile

    from code.common.harness import zygote

    d = tempfile.mkdtemp(prefix="mlperf-zygote-")       # short: a unix socket path is at most 107 bytes
    path = os.path.join(d, "socket")
    proc = zygote.launch(path, log=os.path.join(d, "log"))
    os.environ["MLPERF_ZYGOTE"] = path
    _ZYGOTE_PID.append(proc.pid)
    try:
        yield path
    finally:
        os.environ.pop("MLPERF_ZYGOTE", None)
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        _ZYGOTE_PID.clear()
        shutil.rmtree(d, ignore_errors=True)


NO_OFFICIAL = "MLPERF_INFERENCE_DIR is not set"
OFFICIAL_USED: set[str] = set()      # node ids of the tests that called official_root (in this process)


def official_root(*parts: str) -> Path:
    """A path inside the official mlcommons/inference tree ($MLPERF_INFERENCE_DIR; `make test` points it at
    ../shared/mlcommons-inference when that exists); skips the test with the reason when it is not there."""
    d = os.environ.get("MLPERF_INFERENCE_DIR")
    if not d:
        pytest.skip(f"{NO_OFFICIAL} (`make test` sets it to ../shared/mlcommons-inference when "
                    "that folder exists; else point it at a checkout of mlcommons/inference)")
    p = Path(d).joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} is not in MLPERF_INFERENCE_DIR={d}")
    OFFICIAL_USED.add(os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0])
    return p


_ZYGOTE_PID: list[int] = []            # this worker's zygote (harness_zygote), while it runs


def _cpu_seconds() -> float:
    """User + system CPU of this process and of the children it has waited for (the runs it started), and of its
    zygote with the children that zygote has reaped (the runs it forked for this process, _forked_main)."""
    import resource

    own = sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))
    # pytest loads this file as ``conftest`` (it starts the zygote), the tests import it as ``tests.conftest``
    pids = _ZYGOTE_PID or getattr(sys.modules.get("conftest"), "_ZYGOTE_PID", [])
    for pid in pids:                        # utime stime cutime cstime: fields 14-17 of /proc/<pid>/stat
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            own += sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass                            # reaped: its CPU is in RUSAGE_CHILDREN now
    return own


_CPU_MARK = [_cpu_seconds()]           # this process's CPU when the last test phase ended
CPU_BY_FILE: dict[str, float] = {}     # test file -> CPU seconds its phases used (summed on the controller)
CPU_BY_PHASE: dict[str, float] = {}    # "<node id> <setup|call|teardown>" -> CPU seconds


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Marks the report of a test that reached the official tree through official_root (in this test or in a
    fixture it set up first), so that the summary can count them across xdist workers; and carries the CPU the
    phase used (this worker and the runs it waited for) to the summary's CPU table."""
    outcome = yield
    rep = outcome.get_result()
    now = _cpu_seconds()
    rep.user_properties.append(("cpu_s", round(now - _CPU_MARK[0], 3)))
    _CPU_MARK[0] = now
    helpers = sys.modules.get("tests.conftest")      # the module the tests import official_root from
    if rep.when == "call" and helpers is not None and item.nodeid in helpers.OFFICIAL_USED:
        rep.user_properties.append(("official_tools", True))


def pytest_runtest_logreport(report):
    # as it happens, not at the end of the run; once (by the controller where pytest-xdist runs workers)
    if report.failed and os.environ.get("MLPERF_TEST_FAILURES_LOG") and not os.environ.get("PYTEST_XDIST_WORKER"):
        with open(os.environ["MLPERF_TEST_FAILURES_LOG"], "a") as f:
            f.write(f"===== {time.strftime('%H:%M:%S')} FAILED {report.nodeid} ({report.when})\n"
                    f"{report.longreprtext[-6000:]}\n")
    for k, v in report.user_properties:
        if k == "cpu_s":
            f = report.nodeid.split("::")[0]
            CPU_BY_FILE[f] = CPU_BY_FILE.get(f, 0.0) + v
            CPU_BY_PHASE[f"{report.nodeid} {report.when}"] = v


def pytest_terminal_summary(terminalreporter):
    """In every run's log: the FIGURE lines the passing tests printed (ours against the official tools, side by
    side), and one line saying how many tests ran the official MLCommons tools and how many skipped for want
    of them."""
    passed = [r for r in terminalreporter.stats.get("passed", []) if r.when == "call"]
    figures = [ln for r in passed for ln in r.capstdout.splitlines() if ln.startswith("FIGURE ")]
    if figures:
        terminalreporter.write_sep("-", f"{len(figures)} FIGURE lines")
        for ln in figures:
            terminalreporter.write_line(ln)
    ran = [r for r in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", [])
           if r.when == "call" and ("official_tools", True) in r.user_properties]
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if NO_OFFICIAL in str(r.longrepr)]
    terminalreporter.write_line(f"official MLCommons tools (MLPERF_INFERENCE_DIR="
                                f"{os.environ.get('MLPERF_INFERENCE_DIR') or 'unset'}): {len(ran)} tests ran them, "
                                f"{len(skipped)} skipped without them")
    if CPU_BY_FILE:          # where `make test`'s CPU goes (the suite is CPU-bound on two cores)
        top = sorted(CPU_BY_FILE.items(), key=lambda kv: -kv[1])
        terminalreporter.write_sep("-", f"CPU by test file: {sum(CPU_BY_FILE.values()) / 60:.1f} min in all "
                                        "(user + sys of the workers, the runs they waited for and their zygotes' forks)")
        for f, s in top[:25]:
            terminalreporter.write_line(f"CPU {s:8.1f} s  {f}")
        terminalreporter.write_sep("-", "CPU by test phase, the 40 largest (a module fixture counts in the setup "
                                        "of the first test that needs it)")
        for f, s in sorted(CPU_BY_PHASE.items(), key=lambda kv: -kv[1])[:40]:
            terminalreporter.write_line(f"CPU {s:8.1f} s  {f}")


def official_env(**extra: str | None) -> dict:
    """The environment of an official script's process: ours with PYTHONDONTWRITEBYTECODE=1 (in CI the official
    tree is read-only, so nothing may be written beside its files); ``extra`` sets variables, None drops one."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def run_official(argv: list, cwd: str | Path, env: dict | None = None,
                 timeout: int = 600) -> subprocess.CompletedProcess:
    """``python *argv`` (an official script, or a driver importing one) run from ``cwd``, a tmp folder, with
    official_env() unless ``env`` is given; asserts exit 0, showing the tails of its output."""
    r = subprocess.run([sys.executable, *map(str, argv)], cwd=cwd, env=official_env() if env is None else env,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-4000:]
    return r


def _build_lock(bench: str) -> str:
    """The lock a tiny build takes: the token-generating benchmarks share the tiny tokenizer
    (models/llm_tokenizer) and the tiny punkt_tab (nltk_data/tiny), so they take one; every other has its own."""
    from code.common.benchmarks import resolve

    return "llm" if resolve(bench).generates_tokens else bench


def build_tiny(bench: str, env: dict) -> dict:
    """download_model, download_data and preprocess_data of ``bench``'s tiny variant through the CLI, once
    per scratch folder: the first worker to need it builds it under its lock (_build_lock), the others wait
    and reuse it; two workers build two benchmarks that share nothing at the same time."""
    from filelock import FileLock

    scratch = Path(env["MLPERF_SCRATCH_PATH"])
    scratch.mkdir(parents=True, exist_ok=True)
    done = scratch / f".tiny-{bench}.built"
    with FileLock(str(scratch / f".tiny-build-{_build_lock(bench)}.lock")):
        if not done.is_file():
            for action in ("download_model", "download_data", "preprocess_data"):
                run_main(f"--action={action}", f"--benchmarks={bench}", "--model_variant=tiny", env=env, check=True)
            done.write_text("built\n")
    return env


def _tiny_fixture(name: str, bench: str, doc: str):
    """A session fixture that builds ``bench``'s tiny variant once (build_tiny) and returns the env."""
    def fixture(harness_env) -> dict:
        return build_tiny(bench, harness_env)
    fixture.__doc__ = doc
    return pytest.fixture(scope="session", name=name)(fixture)


tiny_resnet = _tiny_fixture("tiny_resnet", "resnet50", "The tiny ResNet50 model, data and preprocessed set.")
tiny_sdxl = _tiny_fixture("tiny_sdxl", "sdxl", "The tiny SDXL pipeline, scorers, captions and preprocessed tokens.")
tiny_llama = _tiny_fixture("tiny_llama", "llama2_70b", "The tiny Llama2-70B stand-in: model, OpenORCA-format pickle, prompts.")
tiny_gptj = _tiny_fixture("tiny_gptj", "gptj", "The tiny GPT-J: model, synthetic cnn_eval.json and prompts.")
tiny_retinanet = _tiny_fixture("tiny_retinanet", "retinanet", "The tiny RetinaNet: model, synthetic OpenImages-format set and annotations.")
tiny_unet3d = _tiny_fixture("tiny_unet3d", "unet3d", "The tiny 3D-UNet: model, synthetic KiTS19-format cases and preprocessed volumes.")
tiny_bert = _tiny_fixture("tiny_bert", "bert", "The tiny BERT: model, WordPiece vocab, synthetic SQuAD v1.1 JSON and features.")
tiny_mixtral = _tiny_fixture("tiny_mixtral", "mixtral_8x7b", "The tiny Mixtral (4 experts, top-2): model, 15k-format pickle of all three kinds, prompts.")
tiny_llama31 = _tiny_fixture("tiny_llama31", "llama3_1_8b", "The tiny Llama3.1-8B: model, cnn_eval.json + edge subset, prompts of both twins.")
tiny_deepseek = _tiny_fixture("tiny_deepseek", "deepseek_r1", "The tiny DeepSeek-R1 (DeepSeek-V3 shape: MLA, 8 routed experts): model, 4,388-format pickle of three families, prompts.")
tiny_gpt_oss = _tiny_fixture("tiny_gpt_oss", "gpt_oss_120b", "The tiny GPT-OSS-120B (GptOss shape: sliding/full attention, sinks, 4 experts top-2): model, harmony-format accuracy and performance Parquet sets, prompts.")
tiny_llama405 = _tiny_fixture("tiny_llama405", "llama3_1_405b", "The tiny Llama3.1-405B (Llama shape): model, 8,313-format pickle of the three metrics, prompts.")
tiny_dlrm = _tiny_fixture("tiny_dlrm", "dlrm_v2", "The tiny DLRM-v2: DCNv2 model, synthetic multi-hot Criteo day-23 set and query trace.")
tiny_yolo = _tiny_fixture("tiny_yolo", "yolo", "The tiny YOLO11: seeded detector, synthetic COCO-format safe subset, letterboxed set.")


# A Server latency bound no hiccup of a busy 2-core machine breaks: the runs that use it test the Server path and
# LoadGen's verdict on query counts, not this machine's tail latency.
LOOSE_SERVER_BOUND = "--server_target_latency_ns=2000000000"


from code.common.results.explain import load_only  # noqa: E402 - what counts as INVALID for the load alone
from code.common.results.records import server_rate  # noqa: E402,F401 - the tests' Server rates


def server_run(args: tuple[str, ...], log_dir: Path, env: dict, qps: float,
               tries: int = 2) -> tuple[dict, float, subprocess.CompletedProcess]:
    """A Server (or Interactive) run at ``qps`` with the CPU first; if LoadGen calls it INVALID for the load alone
    (``explain.load_only``: the reasons explain gives for a bound or early stopping missed, a backlog; a copy of three
    of its phrases here missed "latency bound not met ... queued too long", and the Ray Server test failed without a
    retry), again at half the rate, up to ``tries`` runs, as its own advice says. The rate comes from an
    Offline run made minutes before, and the other test worker's load changes in between: the tiny DeepSeek-R1 at
    40% of its Offline rate held 26.7 QPS with a 19.5 ms TTFT p99 in one run and missed 400 ms at 13.6 in another
    (and at 9.6, 520 ms, with two more busy processes beside the two test workers).
    Returns the last run's metadata, its rate and its process; each run has its own folder under ``log_dir``."""
    for n in range(tries):
        d = Path(log_dir) / f"try{n}"
        r = run_main(*args, f"--server_target_qps={qps}", f"--log_dir={d}", env=env, check=True, latency=True)
        [m] = metadata_under(d)
        if valid_or_short(m) or not load_only(m["invalid_reasons"]):
            break
        qps = round(0.5 * qps, 2)
    return m, qps, r


def valid_or_short(m: dict) -> bool:
    """VALID, or INVALID only because its few hundred queries cannot prove the p99 to LoadGen's early stopping
    (a tiny run is sized near that minimum: two slow queries of 480 on a busy 2-core machine asked for 182 more,
    all within the bound); the p99 itself is asserted by the caller."""
    return bool(m["valid"] or (m["invalid_reasons"] and all("early stopping" in w for w in m["invalid_reasons"])))


def assert_short_of_early_stopping(m: dict) -> None:
    """A run sized on purpose below LoadGen's early-stopping minimum for its percentile (662 queries for a
    p99): INVALID for that reason alone, with the duration, the query count and any latency bound all met."""
    s = (Path(m["log_dir"]) / "mlperf_log_summary.txt").read_text()
    assert m["status"] == "ok" and m["loadgen_errors"] == [], m.get("error")
    assert m["result_validity"] == "INVALID", s
    assert "Min duration satisfied : Yes" in s and "Min queries satisfied : Yes" in s, s
    assert "Performance constraints satisfied : NO" not in s, s
    assert "Early stopping satisfied: NO" in s and re.search(
        r"Need to process at least \d+ queries|Would need to run at least \d+ more queries", s), s


def metadata_under(root: str | Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(Path(root).rglob("metadata.json"))]



def flip_first_byte(data: str) -> str:
    """A response's hex with its first byte changed (the usual planted corruption)."""
    return ("00" if data[:2] != "00" else "01") + data[2:]


def verify_corrupted_test01(audit_dir: Path, bench: str, run_args: tuple[str, ...], tmp_path: Path, *,
                            corrupt=flip_first_byte, pick=lambda entry: True, scenario: str = "Offline",
                            version: str | None = None) -> tuple[dict, Path]:
    """TEST01 against an accuracy-mode log with one result corrupted (``corrupt`` applied to the hex of
    the first logged entry ``pick`` accepts): the byte comparison must fail (TEST FAIL) and the
    non-deterministic fallback score both subsets with the benchmark's own accuracy code (and the
    official script where configured). The environment (MLPERF_BUILD_DIR ...) must already be in
    os.environ. Returns the verification record and the audit's working copy."""
    from code.common import rounds
    from code.common.benchmarks import implementation
    from code.common.compliance.audit import reference_runs, verify_audit_dir
    from code.main import plan

    system = audit_dir.parts[-3]
    perf, acc = reference_runs(system, bench, scenario)
    bad = tmp_path / "acc"
    shutil.copytree(acc.dir, bad)
    logged = {e["qsl_idx"] for e in json.loads((audit_dir / "mlperf_log_accuracy.json").read_text())}
    entries = json.loads((bad / "mlperf_log_accuracy.json").read_text())
    victim = next(e for e in entries if e["qsl_idx"] in logged and pick(e))
    victim["data"] = corrupt(victim["data"])
    (bad / "mlperf_log_accuracy.json").write_text(json.dumps(entries))
    work = tmp_path / "audit"
    shutil.copytree(audit_dir, work)
    _, settings = plan(["--action=run_harness", *run_args])
    b = implementation(settings[0].spec)(settings[0])
    rec = verify_audit_dir("TEST01", work, perf_ref=perf.dir, acc_ref=bad, rb=rounds.current(version).entry(bench),
                           scorer=b.accuracy, run_official=True)
    text = (work / "verify_accuracy.txt").read_text()
    assert "TEST FAIL" in text and "num_perf_log_data_mismatch = 0" not in text
    assert not rec["passed"] and rec["accuracy"]["num_perf_log_data_mismatch"] >= 1
    assert rec["fallback"]["applied"] and (work / "accuracy" / "baseline_accuracy.txt").is_file()
    return rec, work


def offline_audit_env(tiny_env: dict, tmp_path_factory, bench: str, base: tuple[str, ...],
                      short: tuple[str, ...]) -> dict:
    """A private build/ with the two reference runs an Offline audit is verified against
    (PerformanceOnly and AccuracyOnly of ``base`` + ``short``)."""
    e = dict(tiny_env, MLPERF_BUILD_DIR=str(tmp_path_factory.mktemp(f"{bench}_audit") / "build"))
    for mode in ("PerformanceOnly", "AccuracyOnly"):
        r = run_main("--action=run_harness", *base, f"--test_mode={mode}", *short, env=e)
        assert r.returncode == 0, r.stdout + r.stderr
    return e


def audit_config_values(text: str, full_keys: bool = True) -> dict[str, str]:
    """``key = value`` of an audit.config, the last line of a key winning (as LoadGen and run_verification.py);
    ``full_keys=False``: keyed by the last dotted part alone (``*.*.mode`` -> ``mode``)."""
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            k, v = (x.strip() for x in line.split("=", 1))
            out[k if full_keys else k.split(".")[-1]] = v
    return out


# what the official checker cannot help reporting of a tiny CPU run's staged export (a few seconds, a few samples)
TINY_UNAVOIDABLE = (r"Test duration less than", r"minimum samples per query", r"does not cover all dataset",
                    r"Some (performance checks|accuracy checks|compliance check) Checks failed",
                    r"Compliance test performance check", r"NoResults ")


def staged_official_check(env: dict, tmp_path: Path, round_: str) -> tuple[Path, list[str]]:
    """A module's runs and audits (its private build/) staged, truncated and exported for ``round_`` in a copy,
    then the official checker on the export: (the submission folder, the checker's ERROR lines). The checker must
    not crash, and must have read the runs (a tiny run is always shorter than 600 s)."""
    from code.common.submission import check

    build = tmp_path / "build"
    for d in ("logs", "compliance_logs"):
        shutil.copytree(Path(env["MLPERF_BUILD_DIR"]) / d, build / d)
    e = dict(env, MLPERF_BUILD_DIR=str(build), MLPERF_STAGING_ROOT=str(tmp_path / "stage"))
    for action in ("update_results", "truncate_results", "export_submission"):
        r = run_main(f"--action={action}", *([] if action == "truncate_results" else [f"--round={round_}"]), env=e)
        assert r.returncode == 0, (action, r.stdout, r.stderr)
    sub = build / "submission"
    _, lines = check.run_official_checker(sub, "OpenHarness", round_, official_root())
    errors = [ln for ln in lines if "ERROR" in ln and "SUMMARY" not in ln]
    print("\n".join(errors))
    assert not [ln for ln in lines if "Traceback" in ln], lines
    assert any("Test duration less than 600s" in ln for ln in errors), errors      # it did read the runs
    return sub, errors


def audit_dir(env: dict, test: str, bench: str, scenario: str = "Offline") -> Path:
    return next((Path(env["MLPERF_BUILD_DIR"]) / "compliance_logs" / test).glob(f"*/{bench}/{scenario}"))


def run_audit(env: dict, test: str, bench: str, base: tuple[str, ...], short: tuple[str, ...], attempts: int = 3):
    """``make run_audit_harness`` of ``test``; when only its ±10% timed comparison failed (a shared CPU),
    a fresh reference performance run and another try. Returns (process, audit dir, verification record)."""
    for attempt in range(attempts):
        if attempt:
            for perf in (Path(env["MLPERF_BUILD_DIR"]) / "logs").glob(f"*/*/{bench}/Offline/performance"):
                shutil.rmtree(perf)
            run_main("--action=run_harness", *base, "--test_mode=PerformanceOnly", *short, env=env, check=True)
        r = run_main("--action=run_audit_harness", f"--audit_test={test}", *base, *short, env=env)
        rec = json.loads((audit_dir(env, test, bench) / "verification.json").read_text())
        if rec.get("accepted") or rec.get("accuracy", {}).get("passed") is False:
            break
    return r, audit_dir(env, test, bench), rec


def assert_test01_passed(r: subprocess.CompletedProcess, d: Path, rec: dict, sampling_target: int) -> bool:
    """An honest SUT's TEST01: exit 0 (4 when only the timed comparison failed on a shared CPU), the
    accuracy half passed with logged entries and no mismatch, the audit's metadata and sampling target
    as the round says, and its audit.config removed. Returns whether it passed outright."""
    outright = assert_audit_passed(rec)
    assert r.returncode == (0 if outright else 4), r.stdout + r.stderr
    assert rec["accuracy"]["passed"] and rec["accuracy"]["num_perf_log_data_mismatch"] == 0
    assert rec["accuracy"]["num_perf_log_entries"] > 0
    assert "TEST PASS" in (d / "verify_accuracy.txt").read_text()
    md = json.loads((d / "metadata.json").read_text())
    assert md["audit_test"] == "TEST01" and md["status"] == "ok"
    assert md["effective"]["effective_accuracy_log_sampling_target"] == sampling_target
    assert not (d / "audit.config").exists()
    return outright


def harness_runs(env: dict, logs: Path, base: tuple[str, ...], *runs: tuple[str, tuple[str, ...]],
                 mode: str | None = None) -> dict[str, dict]:
    """``make run_harness`` once per (scenarios, extra args) in ``runs`` into ``logs``; each run's
    metadata by scenario."""
    for scen, args in runs:
        r = run_main("--action=run_harness", *base, f"--scenarios={scen}", *([f"--test_mode={mode}"] if mode else []),
                     f"--log_dir={logs}", *args, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
    return {m["scenario"]: m for m in metadata_under(logs)}


# --- shared by the download and bad-input tests -------------------------------------------------------
@pytest.fixture()
def mirror(monkeypatch):
    """A local tests.http_server.Server that every download goes through ($MLPERF_DOWNLOAD_MIRROR: the real
    urllib/fileio paths), with no local R2 downloader script configured."""
    from code.common import fileio
    from code.common.llm import download as dl
    from tests.http_server import Server

    s = Server()
    monkeypatch.setenv(fileio.MIRROR_ENV, s.base)
    monkeypatch.delenv(dl.R2_SCRIPT_ENV, raising=False)
    yield s
    s.close()


def route(url: str) -> str:
    """The mirror's route for a real URL: "/<host>/<path>"."""
    return "/" + url.split("://", 1)[1].split("?")[0]


def _staged(name: str) -> bool:
    """A file or folder still being written (code.common.fileio stages them as *.partial / *.download)."""
    return ".partial" in name or name.endswith(".download")


def no_partials(root: Path) -> None:
    """Nothing half-written under ``root``."""
    assert not [p for p in root.rglob("*") if _staged(p.name)]


def private_scratch(tiny_env: dict, tmp_path: Path, subs: tuple[str, ...]) -> tuple[dict, Path]:
    """A private copy of ``subs`` of a tiny fixture's scratch folder, and the env that points at it. The scratch
    is shared by the run's workers: what another worker is building there as it is copied (its staged *.partial
    files and folders) is left out, so the copy holds finished files only (no_partials on it saw a tiny SDXL
    scorer another worker was writing: test_calibration in the one-core suite, 2026-12-07)."""
    src = Path(tiny_env["MLPERF_SCRATCH_PATH"])
    dst = tmp_path / "scratch"
    for sub in subs:
        shutil.copytree(src / sub, dst / sub, ignore=lambda _, names: [n for n in names if _staged(n)])
    return {**tiny_env, "MLPERF_SCRATCH_PATH": str(dst), "MLPERF_BUILD_DIR": str(tmp_path / "build")}, dst


def tensorrt_accuracy_run(env: dict, base: tuple[str, ...], log_dir: Path) -> dict:
    """An Offline AccuracyOnly run with --backend=tensorrt (skipped with the reason where TensorRT cannot
    run: no GPU build here); its metadata."""
    from code.common.backends import backend_class

    ok, why = backend_class("tensorrt").available()
    if not ok:
        pytest.skip(f"TensorRT needs a GPU build here: {why}")
    r = run_main("--action=run_harness", *base, "--scenarios=Offline", "--backend=tensorrt", "--test_mode=AccuracyOnly",
                 f"--log_dir={log_dir}", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    [m] = metadata_under(log_dir)
    return m
