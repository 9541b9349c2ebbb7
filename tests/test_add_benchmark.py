"""Adding a benchmark touches no framework file (the round table excepted).

A module fixture copies the tree into a temporary folder, drops tests/toybench in as ``code/toybench``
(its configs as ``configs/toybench/``), gives it a line in the round table, and then runs the real CLI
(``python -m code.main``) in that copy: the data targets, an accuracy run, a performance run and a
misspelt name. The last test compares the copy with what was copied: only the new package, its
configs and the round table file may differ, so any framework edit a new benchmark needed would fail it.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import metadata_under, run_main

REPO = Path(__file__).resolve().parents[1]
TOY = Path(__file__).resolve().parent / "toybench"
TREE = ("code", "configs", "systems", "data_maps")           # what `python -m code.main` reads from the repo
ROUND_TABLE = "code/common/rounds/v6.py"
ROUND = "v6.1"
# The new benchmark's round-table entry: an edge benchmark with a top-1 target, 64 samples.
ROUND_ENTRY = ('        "toybench": entry("toybench", "toybench", "resnet50", edge=("SingleStream", "Offline"), '
               'size=64, psc=64, acc=("acc", 99.0)),\n')
BASE = ("--benchmarks=toybench", "--model_variant=tiny")
# SingleStream sized by query count, never by time (as tests.conftest.offline_samples does for Offline): a toy
# query takes ~30 us, far below any expected latency, so a duration-sized run would run out of generated queries.
# 256 queries (LoadGen's p90 early-stopping estimate needs 64) outlast the 1 ms minimum on any machine.
SHORT = ("--min_duration=1", "--min_query_count=256")
# variables that would point the copy's runs at the original tree's folders
POINTERS = ("MLPERF_CONFIGS_DIR", "MLPERF_SYSTEMS_DIR", "MLPERF_DATA_MAPS_DIR", "MLPERF_STAGING_ROOT", "PYTHONPATH")


def _ignore(folder: str, names: list[str]) -> set[str]:
    """copytree's filter: bytecode and half-written files are no part of the tree."""
    return {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".partial"))}


def _digests(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under the TREE folders of ``root`` (bytecode left out)."""
    out = {}
    for top in TREE:
        for p in (root / top).rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc"):
                out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def add_round_entry(text: str) -> str:
    """The round table with toybench in round ROUND: ``entry`` imported and one line at the top of the
    round's benchmarks; each anchor must be found exactly once (a reshaped table fails loudly here)."""
    imp = "from code.common.rounds.v5 import "
    assert text.count(imp) == 1, f"{ROUND_TABLE}: the import of code.common.rounds.v5 moved"
    text = text.replace(imp, imp + "entry, ")
    m = re.search(r'^V6_1 = Round\((?:.|\n)*?benchmarks=\{\n', text, re.M)
    assert m and text.count("V6_1 = Round(") == 1, f"{ROUND_TABLE}: V6_1's benchmarks={{ not found"
    return text[:m.end()] + ROUND_ENTRY + text[m.end():]


class Copy:
    """The tree copy, its private build and scratch folders, and the CLI run in it."""

    def __init__(self, root: Path, work: Path):
        self.root, self.work = root, work
        self.copied: dict[str, str] = {}      # relative path -> sha256, as copied
        self.table_before = ""                # the round table as copied
        self.env = {"MLPERF_SCRATCH_PATH": str(work / "scratch"), "MLPERF_BUILD_DIR": str(work / "build")}

    def main(self, *args: str) -> subprocess.CompletedProcess:
        """``python -m code.main`` with the copy as the working directory (so ``code`` is the copy's), without
        this session's folder pointers."""
        return run_main(*args, env=self.env, cwd=self.root, drop_env=POINTERS, timeout=300)

    def run_ok(self, *args: str) -> subprocess.CompletedProcess:
        r = self.main(*args)
        assert r.returncode == 0, \
            f"code.main {' '.join(args)} -> {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        return r


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Copy:
    """A copy of the tree with toybench added: the package, its configs and its round-table line.

    Everything lives under this worker's own tmp folder (pytest-xdist gives each worker its own), and the
    copy is compared later with the digests taken here, so edits made meanwhile to the real tree by
    someone else do not count as changes."""
    base = tmp_path_factory.mktemp("add_benchmark")
    root = base / "tree"
    for top in TREE:
        shutil.copytree(REPO / top, root / top, ignore=_ignore)
    c = Copy(root, base)
    c.copied = _digests(root)
    assert not (root / "code" / "toybench").exists() and not (root / "configs" / "toybench").exists()
    shutil.copytree(TOY, root / "code" / "toybench", ignore=lambda d, n: _ignore(d, n) | {"configs"})
    shutil.copytree(TOY / "configs", root / "configs" / "toybench", ignore=_ignore)
    table = root / ROUND_TABLE
    c.table_before = table.read_text()
    table.write_text(add_round_entry(c.table_before))
    return c


@pytest.fixture(scope="module")
def built(tree) -> Copy:
    """The tiny variant's model, data and preprocessed set, made by the make targets' actions."""
    for action in ("download_model", "download_data", "preprocess_data"):
        tree.run_ok(f"--action={action}", *BASE)
    return tree


def test_data_targets_build_the_model_and_the_sets(built):
    scratch = built.work / "scratch"
    for rel in ("models/toybench/tiny/toybench.onnx", "data/toybench/tiny/readings_uint8.npy",
                "data/toybench/tiny/labels.txt", "preprocessed_data/toybench/tiny/vectors_fp32.npy"):
        assert (scratch / rel).is_file(), rel


def test_accuracy_run_scores_100_percent(built):
    logs = built.work / "acc_logs"
    r = built.run_ok("--action=run_harness", *BASE, "--scenarios=Offline", "--test_mode=AccuracyOnly",
                     f"--round={ROUND}", f"--log_dir={logs}")
    [m] = metadata_under(logs)
    assert m["status"] == "ok", m.get("error")
    assert m["benchmark"] == "toybench" and m["scenario"] == "Offline" and m["test_mode"] == "AccuracyOnly", m
    assert m["accuracy"]["metrics"] == {"acc": 100.0, "good": 64, "total": 64}, m["accuracy"]
    text = (Path(m["log_dir"]) / "accuracy.txt").read_text()
    assert text.startswith("accuracy=100.000%, good=64, total=64"), text
    assert "[run] toybench" in r.stdout, r.stdout


def test_performance_run_is_valid(built):
    logs = built.work / "perf_logs"
    built.run_ok("--action=run_harness", *BASE, "--scenarios=SingleStream", "--test_mode=PerformanceOnly",
                 f"--round={ROUND}", f"--log_dir={logs}", *SHORT)
    [m] = metadata_under(logs)
    assert m["status"] == "ok" and m["loadgen_errors"] == [], m.get("error")
    assert m["benchmark"] == "toybench" and m["scenario"] == "SingleStream", m
    assert m["result_validity"] == "VALID", (Path(m["log_dir"]) / "mlperf_log_summary.txt").read_text()
    assert m["metric_value"] and m["metric_value"] > 0
    assert "resnet50.SingleStream.min_query_count = 256" in (Path(m["log_dir"]) / "user.conf").read_text()


def test_misspelt_name_suggests_toybench(tree):
    r = tree.main("--action=run_harness", "--benchmarks=toybnch", "--model_variant=tiny")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "unknown benchmark 'toybnch' (did you mean 'toybench'?)" in r.stdout + r.stderr, r.stdout + r.stderr


def test_only_the_package_its_configs_and_the_round_table_changed(tree):
    """Runs last: what the copy holds now against what was copied. Anything else changed (a framework
    file a new benchmark had to edit, or a run writing into the tree) fails here."""
    now = _digests(tree.root)
    changed = {p for p in now.keys() | tree.copied.keys() if now.get(p) != tree.copied.get(p)}
    toy = {f"code/toybench/{p.name}" for p in TOY.glob("*.py")}
    configs = {f"configs/toybench/{p.relative_to(TOY / 'configs').as_posix()}"
               for p in (TOY / "configs").rglob("*.json")}
    expected = toy | configs | {ROUND_TABLE}
    assert changed == expected, f"unexpected: {sorted(changed - expected)}; missing: {sorted(expected - changed)}"
    assert {"configs/toybench/Offline/config.json", "configs/toybench/SingleStream/config.json"} <= configs
    before = tree.table_before.splitlines()
    added = [ln for ln in (tree.root / ROUND_TABLE).read_text().splitlines() if ln not in before]
    assert len(added) == 2 and "toybench" in added[1], added     # the import line and the entry


def test_the_toy_package_names_no_backend():
    """As tests/test_layout.py asks of code/<benchmark>/: the package asks the settings' backend, never names one."""
    from code.common.backends import names

    text = "\n".join(p.read_text() for p in TOY.glob("*.py"))
    assert not [n for n in names() if re.search(rf"\b{n}\b", text)]
