"""Entry point: ``python -m code.main --action=<action> [flags]``. Errors print one line, no traceback."""
from __future__ import annotations

import signal
import sys
from typing import Any

from code.common.errors import HarnessError


def plan(argv: list[str]) -> tuple[dict[str, Any], list]:
    """Parse flags and resolve settings for every benchmark × scenario × config_ver.
    Returns (cli, [RunSettings]); the control values stay in cli (``RunControl.from_cli``)."""
    from code.common import args as A
    from code.common import benchmarks as B
    from code.common.configs import config_vers, resolve
    from code.common.fields import ALL, ENGINE_AND_RUN, RUN, TUNE
    from code.common.settings import RunSettings
    from code.common.systems import detect, match_system

    reg = B.registry()
    cli = A.parse_argv(argv, reg)
    action = cli.get("action", "run_harness")
    if cli.get("test_mode") == "FindPeakPerformance":      # NVIDIA's spelling of find_performance
        if action not in ("run_harness", "run"):
            raise HarnessError(f"--test_mode=FindPeakPerformance goes with make run_harness, not --action={action}",
                               "make find_performance RUN_ARGS=\"--benchmarks=... --scenarios=...\"")
        cli = {k: v for k, v in cli.items() if k != "test_mode"}
        cli["action"] = action = "find_performance"
    from code.common.fields import NO_BENCHMARK

    if action in NO_BENCHMARK or (action == "doctor" and not cli.get("benchmarks")):
        A.check_applicable(cli, reg, action, [], {})
        return cli, []
    names = cli.get("benchmarks") or ()
    if not names:
        from code.common.fields import DATA

        # the data targets and `make info` take BENCHMARKS=; the others read only RUN_ARGS
        raise HarnessError("no benchmark given",
                           f"make {action} BENCHMARKS=resnet50" if action in DATA + ("info",) else
                           f"make {action} RUN_ARGS=\"--benchmarks=resnet50\" (or --benchmarks=all)")
    specs = list(B.all_specs()) if ALL in names else []
    for n in names:
        if n != ALL and (s := B.resolve(n)) not in specs:
            specs.append(s)
    scen = {s.name: A.parse_scenarios(cli.get("scenarios", ()), s.scenarios, s.name) for s in specs}
    A.check_applicable(cli, reg, action, [s.name for s in specs], scen)
    if action == "run_audit_harness" and not cli.get("audit_test"):
        raise HarnessError("--action=run_audit_harness needs --audit_test", "add --audit_test=TEST01 (or TEST04; TEST06 for LLMs; TEST07 and TEST09 for gpt-oss-120b)")
    system = match_system(detect(), cli.get("system_name"))
    wanted_vers = cli.get("config_ver") or ("default",)
    out = []
    for spec in specs:
        derived = {"backend": (default_backend(system, spec), f"detected hardware ({system.accelerator})")}
        for sc in scen[spec.name] if action not in ("download_model", "download_data", "preprocess_data") \
                else scen[spec.name][:1]:
            vers = config_vers(spec, sc, system, reg) if ALL in wanted_vers else wanted_vers
            for ver in vers:
                values, sources, path, notes = resolve(spec, sc, system, reg, cli, ver, derived)
                check_backend(spec, values["backend"])
                if values["precision"] not in spec.precisions:
                    raise HarnessError(f"precision {values['precision']} is not supported by {spec.name} "
                                       f"(supported: {', '.join(spec.precisions)})",
                                       f"use --precision={spec.precisions[0]}")
                if not cli.get("force"):
                    check_rate(spec, sc, system, reg, cli, ver, derived, values)
                if action in RUN + TUNE:
                    check_schedule(spec, sc, system, values, sources)
                    if not cli.get("force"):
                        check_arrivals(spec, sc, values, sources)
                rs = RunSettings(spec, sc, system, values, sources, path, ver, tuple(notes))
                if action in ENGINE_AND_RUN:
                    rs.round_entry()     # a benchmark the round does not have fails here, not after a run
                out.append(rs)
    return cli, out


def check_backend(spec, backend: str) -> None:
    """An LLM benchmark runs on the LLM backends only, and the other benchmarks on the engine ones."""
    from code.common import backends

    ok = backends.for_benchmark(spec.generates_tokens)
    if backend not in ok:
        raise HarnessError(f"--backend={backend} does not run {spec.name} (it runs on: {', '.join(ok)})",
                           f"use --backend={backends.ranked('cpu', spec.generates_tokens)[0]}, or drop --backend")


OVERLOAD_FACTOR = 10      # a CLI rate this many times the system's configured one needs --force


def check_rate(spec, scenario, system, reg, cli, config_ver, derived, values) -> None:
    """A rate given on the command line far above the system's configured one would make LoadGen
    generate more queries than the run can serve (memory grows, nothing is printed): refuse it
    without --force, naming both rates and the query count it implies."""
    from code.common import scenarios
    from code.common.configs import resolve
    from code.common.settings import min_duration_ms

    sizing = scenarios.get(scenario).sizing
    if sizing.endswith("_ns") or sizing not in cli:
        return
    configured = resolve(spec, scenario, system, reg, {k: v for k, v in cli.items() if k != sizing},
                         config_ver, derived)[0][sizing]
    want = values[sizing]
    if configured and want > OVERLOAD_FACTOR * configured:
        seconds = min_duration_ms(values) / 1000
        raise HarnessError(f"--{sizing}={want:g} is {want / configured:.0f}x the {configured:g} this system's "
                           f"config expects for {spec.name} {scenario}: LoadGen would generate about "
                           f"{want * seconds:,.0f} samples for a {seconds:g} s run",
                           f"measure the real rate (make run_harness RUN_ARGS=\"--benchmarks={spec.name} "
                           f"--scenarios={scenario} --fast\"), or add --force to run it anyway")


# LoadGen builds a performance run's whole query schedule before the first query, and the Python SUT receives each
# sample as an object: 367-481 bytes per sample here (scripts/bench_loadgen_memory.py), 512 with headroom
LOADGEN_BYTES_PER_SAMPLE = 512
SCHEDULE_MEMORY_SHARE = 0.5     # of the machine's memory; the rest is the model's, the data's and the OS's


def check_schedule(spec, scenario, system, values, sources) -> None:
    """The samples a run's effective settings make LoadGen schedule (whatever set them: a flag, config.json,
    --fast's defaults) must fit in memory: past SCHEDULE_MEMORY_SHARE of it the machine would swap or kill the
    run long before its first result, so this holds even with --force."""
    from code.common import scenarios
    from code.common.settings import min_duration_ms

    sc = scenarios.get(scenario)
    n = sc.planned_samples(values, min_duration_ms(values))
    budget = system.info.memory_gb * 1e9 * SCHEDULE_MEMORY_SHARE
    need = n * LOADGEN_BYTES_PER_SAMPLE
    if not budget or need <= budget:
        return
    per_query = values.get(sc.samples_per_query) or 1 if sc.samples_per_query else 1
    culprit = "min_query_count" if (values.get("min_query_count") or 0) * per_query >= n else sc.sizing
    raise HarnessError(f"{spec.name} {scenario}: LoadGen would schedule about {n:,.0f} samples ({need / 1e9:,.1f} GB) "
                       f"before the run starts, more than this machine's {system.info.memory_gb:,.0f} GB can hold "
                       f"({culprit} = {values.get(culprit):,.0f}, from {sources.get(culprit, 'the defaults')})",
                       f"{'raise' if culprit == sc.sizing and sc.latency_sized else 'lower'} {culprit} (make run_harness RUN_ARGS=\"--benchmarks={spec.name} --scenarios={scenario} "
                       f"--fast\" measures a rate this system serves)")


ARRIVAL_GAP_S = 60.0    # a mean gap between Server queries longer than this (and than min_duration) is refused


def check_arrivals(spec, scenario, values, sources) -> None:
    """A Server-like run whose rate brings less than one query in its minimum duration, a minute apart or more,
    would sit waiting for LoadGen's next Poisson arrival with nothing outstanding (so no watchdog speaks): say so
    before it starts."""
    from code.common import scenarios
    from code.common.settings import min_duration_ms

    sc = scenarios.get(scenario)
    qps = values.get(sc.sizing) if sc.runs_as_server else None
    seconds = min_duration_ms(values) / 1000
    if not qps or 1 / qps <= max(seconds, ARRIVAL_GAP_S):
        return
    raise HarnessError(f"{spec.name} {scenario}: {sc.sizing} = {qps:g} (from {sources.get(sc.sizing, 'the defaults')}) "
                       f"brings one query every {1 / qps:,.0f} s on average, less than one in the run's {seconds:g} s",
                       f"raise {sc.sizing} (make run_harness RUN_ARGS=\"--benchmarks={spec.name} --scenarios={scenario} "
                       "--fast\" measures a rate this system serves), or add --force to wait for it")


def default_backend(system, spec=None) -> str:
    from code.common.backends import default_for

    return default_for("gpu" if system.accelerator == "gpu" else "cpu",
                       spec is not None and spec.generates_tokens)


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        from code.common.args import render_help
        from code.common.benchmarks import registry

        print(render_help(registry()))
        return 0
    signal.signal(signal.SIGTERM, _sigterm)   # `timeout`, batch schedulers, `docker stop`: like Ctrl-C
    from code.common.cli import guarded

    return guarded(_plan_and_dispatch, argv,
                   interrupted="interrupted: the run was stopped and its partial logs removed")


def _plan_and_dispatch(argv: list[str]) -> int:
    from code.common import actions

    from code.common.engines import rebuilding

    cli, settings = plan(argv)
    if cli.get("action") == "submission":      # a whole plan of the other actions, each planned here (plan)
        from code.common.submission.flow import submission

        return submission(cli, plan)
    with rebuilding(cli.get("force_rebuild", False)):
        return actions.dispatch(cli.get("action", "run_harness"), cli, settings) or 0


if __name__ == "__main__":
    sys.exit(main())
