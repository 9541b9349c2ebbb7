"""The shape of code/: no import cycle between its modules, counting imports inside functions (only
``if TYPE_CHECKING:`` blocks, which never run, are left out); the hardware package imports no workload code;
the framework names no benchmark and the benchmarks name no backend."""
from __future__ import annotations

import ast
from pathlib import Path

CODE = Path(__file__).resolve().parents[1] / "code"


def _modules(root: Path = CODE) -> dict[str, Path]:
    out = {}
    for p in root.rglob("*.py"):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def import_graph(root: Path = CODE) -> dict[str, set[str]]:
    """Module -> the code modules it imports anywhere in its body (module level or inside functions)."""
    mods = _modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for t in targets:
                r = resolve(t) if t.split(".")[0] == "code" else None
                if r and r != mod:
                    graph[mod].add(r)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_a_function_level_cycle(tmp_path):
    """The check can fail: two modules importing each other, one of them only inside a function."""
    pkg = tmp_path / "code" / "common"
    pkg.mkdir(parents=True)
    (tmp_path / "code" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from code.common import b\n")
    (pkg / "b.py").write_text("def f():\n    from code.common.a import g\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from code.common import a\n")
    (pkg / "d.py").write_text("from . import c\n")
    g = import_graph(tmp_path / "code")
    assert cycles(g) == [["code.common.a", "code.common.b"]]
    assert g["code.common.c"] == set() and g["code.common.d"] == {"code.common.c"}


def test_no_import_cycle_in_code():
    found = cycles(import_graph())
    assert not found, "import cycles (module -> what it imports of the cycle):\n" + "\n".join(
        "  " + ", ".join(c) for c in found)


def test_the_run_machinery_and_the_results_have_their_rooms():
    """code/common/harness/ runs, code/common/results/ reads what ran; neither is a loose module any more."""
    common = CODE / "common"
    for room, names in (("harness", ("runner", "child", "sut", "monitor", "fast_sizing", "ray_executor", "timeline")),
                        ("results", ("records", "loadgen_logs", "explain", "accuracy_text", "selection"))):
        for n in names:
            assert (common / room / f"{n}.py").exists(), (room, n)
    loose = {"runner", "harness_child", "sut", "monitor", "fast_sizing", "ray_executor", "timeline", "results",
             "loadgen_logs", "explain", "accuracy_text", "selection"}
    assert not {p.stem for p in common.glob("*.py")} & loose
    graph = import_graph()
    results_uses = {t for m, ts in graph.items() if m.startswith("code.common.results.") for t in ts}
    assert not {t for t in results_uses if t.startswith("code.common.harness.")}, \
        "reading records must not need the run machinery"


def test_the_hardware_package_imports_no_workload_code():
    """systems/ describes machines: it imports no configs, benchmarks or submission code."""
    graph = import_graph()
    bad = {}
    for mod, targets in graph.items():
        if not mod.startswith("code.common.systems"):
            continue
        wrong = {t for t in targets if t.startswith(("code.common.configs", "code.common.submission",
                                                     "code.common.benchmarks", "code.common.actions"))
                 or (t.count(".") >= 1 and t.split(".")[1] != "common")}
        if wrong:
            bad[mod] = sorted(wrong)
    assert not bad, bad


# Strings that are a benchmark's name and also a model architecture's: transformers' model_type of the tiny LLMs.
ARCHITECTURES = {("common/llm/tiny.py", "gptj")}


def test_the_framework_names_no_benchmark_and_the_benchmarks_name_no_backend():
    """Benchmark names appear in code/common only in the round table (and in help/example text); backend
    names appear in no benchmark package: they ask the backend's capabilities."""
    from code.common.backends import _IMPLS
    from code.common.benchmarks import all_specs

    names = {s.name for s in all_specs()} | {s.mlperf_name for s in all_specs()}
    backend_names = set(_IMPLS)
    hits = []
    for path in (CODE / "common").rglob("*.py"):
        if "rounds" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names \
                    and (path.relative_to(CODE).as_posix(), node.value) not in ARCHITECTURES:
                hits.append(f"{path.relative_to(CODE)}:{node.lineno}: {node.value!r}")
    assert not hits, "benchmark names in framework code:\n" + "\n".join(hits)
    for spec in all_specs():
        for path in (CODE / spec.name).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Compare):
                    for c in ast.walk(node):
                        if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value in backend_names:
                            hits.append(f"{path.relative_to(CODE)}:{node.lineno}: compares with {c.value!r}")
    assert not hits, "benchmark code branching on backend names:\n" + "\n".join(hits)
