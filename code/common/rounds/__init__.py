"""The round table: per MLPerf Inference round, the benchmarks and their submission names (with the
-99 / -99.9 accuracy variants), required scenarios per category, accuracy targets, audits, seeds.

Facts are read from the official submission checker (``tools/submission/submission_checker``) of
mlcommons/inference at the commit named in ``v6.py``; no checker code is imported.
``tests/test_rounds_official.py`` compares the tables with a checkout when ``MLPERF_INFERENCE_DIR``
names one. Which round a run is filed for: ``--round`` / ``ROUND=``, else the one whose seeds the
installed LoadGen carries (``loadgen_round``).
"""
from __future__ import annotations

from code.common.errors import HarnessError
from code.common.rounds.model import AUDIT_TESTS, DEFAULT_ACCURACY_TARGET, Round, RoundBenchmark  # noqa: F401
from code.common.rounds.v5 import V5_0, V5_1
from code.common.rounds.v6 import V6_0, V6_1

ROUNDS: dict[str, Round] = {r.version: r for r in (V5_0, V5_1, V6_0, V6_1)}
VERSIONS = tuple(ROUNDS)


def not_in_round(rnd: Round, benchmark: str) -> HarnessError:
    older = [r.version for r in ROUNDS.values() if r.entries(benchmark)]
    fix = (f"pick a round that has it: --round={older[-1]} (ROUND={older[-1]} for make targets)" if older
           else f"{rnd.version} has: {', '.join(sorted({b.benchmark for b in rnd.benchmarks.values()}))}")
    return HarnessError(f"benchmark '{benchmark}' is not part of MLPerf Inference {rnd.version}", fix)


def entry(benchmark: str, accuracy_target: str | None = None, version: str | None = None, *,
          edge: bool = False) -> RoundBenchmark:
    """The round entry (submission name, targets, audits) for harness package ``benchmark`` (its edge
    twin with ``edge``: llama3.1-8b-edge)."""
    rnd = current(version)
    if not rnd.entries(benchmark):
        raise not_in_round(rnd, benchmark)
    return rnd.entry(benchmark, accuracy_target, edge=edge)


def has_variants(benchmark: str) -> bool:
    """Does any round file ``benchmark`` under 99 / 99.9 accuracy variants?"""
    return any(e.accuracy_variant for r in ROUNDS.values() for e in r.entries(benchmark))


def loadgen_version() -> str:
    try:
        from importlib.metadata import version

        return version("mlcommons-loadgen")
    except Exception:  # noqa: BLE001 - not installed: report plainly below
        return ""


def loadgen_round() -> Round:
    """The round whose seeds the installed LoadGen carries."""
    lg = loadgen_version()
    for r in ROUNDS.values():
        if r.carried_by(lg):
            return r
    raise HarnessError(f"installed LoadGen {lg or '(none)'} carries no round this harness knows",
                       "pip install mlcommons-loadgen==6.0.17, or pass --round=" + "|".join(ROUNDS))


def current(version: str | None = None) -> Round:
    """The round to file for: ``version`` if given, else the one matching the installed LoadGen."""
    if version:
        if version not in ROUNDS:
            from code.common.errors import did_you_mean

            raise HarnessError(f"MLPerf Inference round '{version}' is not known here{did_you_mean(version, ROUNDS)}",
                               f"use one of: {', '.join(ROUNDS)}")
        return ROUNDS[version]
    return loadgen_round()
