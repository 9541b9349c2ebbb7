"""audit.config text for each compliance test, built from the round's facts.

LoadGen reads ``audit.config`` from the working directory at StartTest, but applies only the
``*.``-prefixed keys there (it looks them up for model "*"). Keys that name a model
(``stable-diffusion-xl.Offline.min_query_count``) take effect only because the runner also calls
``TestSettings.FromConfig(path, <loadgen_model>, <scenario>, 2)``. We therefore write the official
wildcard lines plus explicit ``<loadgen_model>.<scenario>.key`` lines for model-specific values.
"""
from __future__ import annotations

from code.common import scenarios
from code.common.errors import HarnessError
from code.common.rounds import AUDIT_TESTS as TESTS, Round, RoundBenchmark
from code.common.rounds.model import TEST07_09_ACCURACY_LOG_RNG_SEED, TEST08_ACCURACY_LOG_SAMPLING_TARGET


_HEADER = """\
# The format of this config file is 'key = value'.
# The key has the format 'model.scenario.key'. Value is mostly int64_t.
# Model maybe '*' as wildcard. In that case the value applies to all models.
# All times are in milli seconds
"""


def not_applicable_test06(bench: RoundBenchmark) -> HarnessError:
    return HarnessError(f"TEST06 is not applicable to {bench.name}: it checks LLM token outputs "
                        "(first token, EOS, output length)",
                        f"run the tests {bench.name} requires: {', '.join(bench.compliance_tests) or 'none'}")


# compliance/TEST06/audit.config, verbatim: a short performance-mode run that logs 100 samples' tokens
TEST06_LINES = ("# mode dictionary (0 = submission, 1 = accuracy, 2 = performance, 3 = find peak perf)",
                "*.*.mode = 2",
                "*.*.accuracy_log_rng_seed = {seed}",
                "*.*.accuracy_log_sampling_target = 100",
                "*.*.min_query_count = 100",
                "*.*.min_duration = 0",
                "# Turn off equal issue mode for TEST06",
                "*.*.sample_concatenate_permutation = 0")


def audit_config(test: str, rnd: Round, bench: RoundBenchmark, scenario: str,
                 extra: dict[str, int | float] | None = None) -> str:
    """The audit.config text for ``test`` on ``bench``/``scenario``.

    ``extra``: additional ``<model>.<scenario>.key = value`` lines, appended last (so they win);
    meant for shortened test runs only — an audit with extra keys is not the official test.
    """
    if test not in TESTS:
        raise HarnessError(f"unknown compliance test '{test}'", f"use one of: {', '.join(TESTS)}")
    if test not in bench.compliance_tests:
        if test == "TEST06":
            raise not_applicable_test06(bench)
        raise HarnessError(f"{test} is not required for {bench.name} in {rnd.version}",
                           f"run the required tests: {', '.join(bench.compliance_tests) or 'none'}")
    # the names LoadGen matches the keys against: Interactive runs as its Server scenario under the model's
    # "-interactive" name (a "*.Interactive.key" line is never applied: the v6.1 smoke's GPT-OSS Interactive TEST07
    # logged no samples)
    model = scenarios.loadgen_model(bench.loadgen_model, scenario)
    lg_scenario = scenarios.get(scenario).loadgen_enum
    lines = [_HEADER]
    if test == "TEST01":
        lines += ["# mode dictionary (0 = submission, 1 = accuracy, 2 = performance, 3 = find peak perf)",
                  "*.*.mode = 2",
                  f"*.*.accuracy_log_rng_seed = {rnd.audit_accuracy_log_rng_seed}",
                  f"*.*.accuracy_log_sampling_target = {bench.test01_sampling_target}",
                  f"{model}.{lg_scenario}.accuracy_log_sampling_target = {bench.test01_sampling_target}"]
    elif test == "TEST06":
        lines += [ln.format(seed=rnd.audit_accuracy_log_rng_seed) for ln in TEST06_LINES]
    elif test in ("TEST07", "TEST09"):
        # compliance/TEST07|TEST09/<model>/audit.config: every sample of the set issued once and logged
        size = bench.test07_samples if test == "TEST07" else bench.dataset_size
        lines += ["# mode dictionary (0 = submission, 1 = accuracy, 2 = performance, 3 = find peak perf)",
                  "*.*.mode = 2",
                  f"*.*.accuracy_log_rng_seed = {TEST07_09_ACCURACY_LOG_RNG_SEED}",
                  f"*.*.accuracy_log_sampling_target = {size if test == 'TEST07' else max(size, 10000)}",
                  f"*.*.min_query_count = {size}",
                  "*.*.min_duration = 0",
                  "*.*.performance_issue_unique = 1",
                  "*.*.sample_concatenate_permutation = 0",
                  "# read by run_verification.py, not by LoadGen"]
        if test == "TEST07":
            lines.append(f"*.*.test07_accuracy_threshold = {bench.test07_accuracy_threshold:g}")
        else:
            lo, hi = bench.test09_output_tokens
            lines += [f"*.*.test09_min_output_tokens = {lo:g}", f"*.*.test09_max_output_tokens = {hi:g}"]
    elif test == "TEST08":
        # compliance/TEST08/dlrm-v3/audit.config: a performance-mode run logging a sample of its answers
        lines += ["# mode dictionary (0 = submission, 1 = accuracy, 2 = performance, 3 = find peak perf)",
                  "*.*.mode = 2",
                  f"*.*.accuracy_log_rng_seed = {TEST07_09_ACCURACY_LOG_RNG_SEED}",
                  f"*.*.accuracy_log_sampling_target = {TEST08_ACCURACY_LOG_SAMPLING_TARGET}"]
    elif test == "TEST04":
        for scen in scenarios.LOADGEN_SCENARIOS:
            lines += [f"*.{scen}.mode = 2", f"*.{scen}.performance_issue_unique = 0",
                      f"*.{scen}.performance_issue_same = 1", f"*.{scen}.performance_issue_same_index = 3"]
        for key, value in bench.test04_extra.get(scenario, {}).items():
            lines.append(f"{model}.{lg_scenario}.{key} = {value}")
    for key, value in (extra or {}).items():
        # LoadGen re-applies audit.config for model "*" at StartTest, so a wildcard line for the
        # same key would win over a model-specific one: drop every earlier line for the key.
        lines = [ln for ln in lines if ln.startswith("#") or "=" not in ln
                 or not ln.split("=")[0].strip().endswith("." + key)]
        lines += [f"*.{lg_scenario}.{key} = {value}", f"{model}.{lg_scenario}.{key} = {value}"]
    return "\n".join(lines) + "\n"
