"""Entry point: ``python -m code.main --action=<action> [flags]``. Errors print one line, no traceback."""
from __future__ import annotations

import os
import sys
from typing import Any

from code.common.errors import HarnessError


def plan(argv: list[str]) -> tuple[dict[str, Any], list]:
    """Parse flags and resolve settings for every benchmark × scenario. Returns (cli, [RunSettings])."""
    from code.common import args as A
    from code.common import benchmarks as B
    from code.common.configs import resolve
    from code.common.fields import registry
    from code.common.settings import RunSettings
    from code.common.systems import detect, match_system

    reg = registry()
    cli = A.parse_argv(argv, reg)
    action = cli.get("action", "run_harness")
    if action in ("docs", "build"):
        return cli, []
    names = cli.get("benchmarks") or ()
    if not names:
        raise HarnessError("no benchmark given", "add --benchmarks=resnet50 (or BENCHMARKS=resnet50 for make targets)")
    specs = []
    for n in names:
        s = B.resolve(n)
        if s not in specs:
            specs.append(s)
    scen = {s.name: A.parse_scenarios(cli.get("scenarios", ()), s.scenarios) for s in specs}
    A.check_applicable(cli, reg, action, [s.name for s in specs], scen)
    if action == "run_audit_harness" and not cli.get("audit_test"):
        raise HarnessError("--action=run_audit_harness needs --audit_test", "add --audit_test=TEST01 (or TEST04)")
    system = match_system(detect(), cli.get("system_name"))
    derived = {"backend": (default_backend(system), f"detected hardware ({system.accelerator})")}
    out = []
    for spec in specs:
        for sc in scen[spec.name] if action not in ("download_model", "download_data", "preprocess_data") \
                else scen[spec.name][:1]:
            values, sources, path = resolve(spec, sc, system, reg, cli, cli.get("config_ver", "default"), derived)
            if values["precision"] not in spec.precisions:
                raise HarnessError(f"precision {values['precision']} is not supported by {spec.name} "
                                   f"(supported: {', '.join(spec.precisions)})",
                                   f"use --precision={spec.precisions[0]}")
            out.append(RunSettings(spec, sc, system, values, sources, path))
    return cli, out


def default_backend(system) -> str:
    if system.accelerator != "gpu":
        return "onnxruntime"
    from code.common.backends import backend_class

    return "tensorrt" if backend_class("tensorrt").available()[0] else "pytorch"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        from code.common.args import render_help
        from code.common.fields import registry

        print(render_help(registry()))
        return 0
    try:
        cli, settings = plan(argv)
        from code.common import actions

        return actions.dispatch(cli.get("action", "run_harness"), cli, settings) or 0
    except HarnessError as e:
        print(e.render(), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # an unexpected bug: still one line for the user, details on request
        if os.environ.get("MLPERF_DEBUG"):
            raise
        print(f"error: internal error: {type(e).__name__}: {e}\n  fix: rerun with MLPERF_DEBUG=1 for the traceback "
              "and report it", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
