"""What each --action does, given the resolved RunSettings."""
from __future__ import annotations

import shutil
import sys
from typing import Any

from code.common.errors import HarnessError


def dispatch(action: str, cli: dict[str, Any], settings: list) -> int:
    fn = globals().get(f"action_{action}")
    if fn is None:  # the schema's choices and this module disagree: a bug, not user error
        raise HarnessError(f"action {action} has no implementation", "report this")
    return fn(cli, settings) or 0


def _bench(s):
    from code.common.benchmarks import implementation

    return implementation(s.spec)(s)


def action_docs(cli, settings) -> int:
    from code.common import paths
    from code.common.args import render_markdown
    from code.common.benchmarks import registry
    from code.common.fileio import write_text

    out = paths.REPO_ROOT / "docs" / "flags.md"
    write_text(out, render_markdown(registry()))
    print(f"wrote {out}")
    return 0


def action_build(cli, settings) -> int:
    """Check that LoadGen imports and say which optional GPU pieces are missing."""
    from importlib import metadata as im

    from code.common.backends import backend_class, names

    try:
        import mlperf_loadgen  # noqa: F401
    except ImportError as e:
        raise HarnessError(f"LoadGen does not import: {e}", "make prebuild (reinstalls requirements.txt into .venv)")
    print(f"LoadGen {im.version('mlcommons-loadgen')} OK")
    for b in names():
        ok, why = backend_class(b).available()
        print(f"backend {b:12s} {'OK' if ok else 'missing: ' + why}")
    for tool in ("nvidia-smi", "trtexec"):
        print(f"tool {tool:15s} {'found' if shutil.which(tool) else 'not found'}")
    return 0


def action_info(cli, settings) -> int:
    if not settings:
        return 0
    sysm = settings[0].system
    print(f"detected: {sysm.info.describe()} [{sysm.info.source}]")
    print(f"system id: {sysm.system_id} (class {sysm.class_id}, {sysm.accelerator}, {sysm.arch})")
    refused = []
    for s in settings:
        print(f"\n== {s.benchmark} {s.scenario} config_ver={s.config_ver}  ({s.config_file}; system name "
              f"{s.system_name}; {_filed_as(s)})")
        for n in s.notes:
            print(f"  note: {n}")
        for k in sorted(s.values):
            src = s.sources[k]
            if src == "schema default" and not cli.get("verbose"):
                continue
            print(f"  {k:36s} = {s.values[k]!r:28s} <- {src}")
        refused += _print_memory(s)
    ray_runs = [s for s in settings if s.values.get("executor") == "ray"]
    if ray_runs:
        _print_cluster(ray_runs[0])
    if not cli.get("verbose"):
        print("\n(schema defaults hidden; add --verbose to list every setting)")
    if refused:
        raise refused[0]
    return 0


def _print_memory(s) -> list[HarnessError]:
    """An LLM block on a GPU: weights + KV cache per GPU (code.common.llm.memory); what cannot fit is refused."""
    if not s.spec.generates_tokens:
        return []
    bench = _bench(s)
    p = bench.memory_plan()
    if p is None:
        return []
    print(f"  memory: {p.describe()}: {'fits' if p.fits else 'DOES NOT FIT'}")
    try:
        bench.check_memory()
    except HarnessError as e:
        return [e]
    return []


def _print_cluster(s) -> None:
    """executor=ray: the cluster the runs would use, and what they are filed under."""
    from code.common.harness import ray_executor

    c = ray_executor.connect(s.values.get("ray_address"))
    print(f"\nRay cluster {s.values.get('ray_address') or '(private, started for each run)'}: {c['node_count']} node(s), "
          f"{c['gpus']} GPU(s), {c['cpus']:g} CPU(s)")
    for n in c["nodes"]:
        actors = ray_executor.actors_on(n, s.ray_cpu_actors, s.ray_actor_cpus)
        print(f"  {'head ' if n['head'] else 'node '} {n['address']:15s} {n['hostname'] or '':20s} {n['gpus']} GPU(s), "
              f"{n['cpus']:g} CPU(s) -> {actors} actor(s)")
    print(f"results are filed under system {s.system_name} (the submission system describes the whole cluster: "
          f"number_of_nodes {c['node_count']})")


def _filed_as(s) -> str:
    from code.common import rounds

    try:
        e = s.round_entry()
        return f"filed as {e.name} in {rounds.current(s.values.get('round')).version}"
    except HarnessError as err:
        return f"not submittable: {err.cause}"


def _once_per_benchmark(settings):
    seen = set()
    for s in settings:
        if s.benchmark not in seen:
            seen.add(s.benchmark)
            yield s


def action_download_model(cli, settings) -> int:
    for s in _once_per_benchmark(settings):
        _bench(s).download_model()
    return 0


def action_download_data(cli, settings) -> int:
    for s in _once_per_benchmark(settings):
        _bench(s).download_data()
    return 0


def action_preprocess_data(cli, settings) -> int:
    for s in _once_per_benchmark(settings):
        _bench(s).preprocess_data()
    return 0


def action_calibrate(cli, settings) -> int:
    """int8/fp8 Q/DQ models from the calibration sets (code.common.calibration), once per benchmark,
    model variant and precision."""
    from code.common import calibration

    seen = set()
    for s in settings:
        key = (s.benchmark, s.model_variant, calibration.precision_to_calibrate(s))
        if key in seen:
            continue
        seen.add(key)
        for rec in calibration.run(_bench(s), force=cli.get("force_calibration", False)):
            cs = rec["calibration_set"]
            print(f"[calibrate] {s.benchmark} {rec['component']}: {cs['inputs_fed']} inputs from "
                  f"{cs['items']} items of {cs['name']} ({rec['method']}); record key {rec['key']}")
    return 0


def action_generate_engines(cli, settings) -> int:
    for s in settings:
        for p in _bench(s).generate_engines().values():
            print(f"[generate_engines] {s.benchmark} {s.scenario}: {p}")
    return 0


def action_run_llm_server(cli, settings) -> int:
    """Start the serving engine of one LLM benchmark, one server per model instance (code.common.llm.servers)."""
    import dataclasses

    from code.common.fileio import write_json
    from code.common.llm import servers

    names = sorted({s.benchmark for s in settings})
    if len(names) != 1:
        raise HarnessError(f"make run_llm_server serves one benchmark at a time, not {', '.join(names)}",
                           'make run_llm_server RUN_ARGS="--benchmarks=<one LLM benchmark>"')
    s = settings[0]
    if not s.spec.generates_tokens:
        raise HarnessError(f"{s.benchmark} generates no tokens: there is nothing to serve over HTTP",
                           'make run_llm_server RUN_ARGS="--benchmarks=llama2-70b"')
    bench = _bench(s)
    bench.model_config()
    bench.check_tokenizer()
    v = s.values
    gpu = s.system.accelerator == "gpu"
    engine = servers.pick_engine(v.get("llm_server_engine") or "auto", gpu)
    served = servers.served_name(s.spec.name, s.model_variant)
    host, port0 = v.get("llm_server_host") or "127.0.0.1", int(v.get("llm_server_port") or 8000)
    launches = []
    for i, w in enumerate(bench.worker_specs(str(bench.checkpoint), local=True)):
        spec_file = None
        if engine == "harness":
            spec_file = servers.state_dir() / f"{port0 + i}.spec.json"
            write_json(spec_file, {"worker": dataclasses.asdict(w), "backend": "transformers", "served_model": served,
                                   "tokenizer": str(bench.checkpoint),
                                   "max_new_tokens": bench.generation().max_new_tokens})
        launches.append(servers.command(engine, w, port=port0 + i, host=host, served=served, spec_file=spec_file))
    rec = servers.start(launches, benchmark=s.spec.name, variant=s.model_variant, engine=engine, served=served,
                        host=host, start_s=float(v.get("llm_server_start_s") or 1800))
    urls = ",".join(x["url"] for x in rec["servers"])
    print(f"[llm_server] {len(rec['servers'])} {engine} server(s) for {served}: {urls} ({servers.endpoints_file()})")
    print(f'[llm_server] run: make run_harness RUN_ARGS="--benchmarks={s.benchmark}'
          f'{" --model_variant=tiny" if s.model_variant == "tiny" else ""} --backend=openai"; stop: make stop_llm_server')
    return 0


def action_stop_llm_server(cli, settings) -> int:
    from code.common.llm import servers

    return servers.stop()


def action_run_harness(cli, settings) -> int:
    from code.common import paths
    from code.common.results import records
    from code.common.harness import runner
    from code.common.fileio import prune_empty_dirs, sweep_stale_partials
    from code.common.settings import RunControl

    for root in (paths.logs_dir(), paths.compliance_logs_dir()):
        for p in sweep_stale_partials(root):
            print(f"[run_harness] removed {p} (left by a run that was killed)")
    stamp = runner.timestamp()
    modes = ["PerformanceOnly", "AccuracyOnly"] if cli.get("test_mode") == "SubmissionRun" else \
        [cli.get("test_mode", "PerformanceOnly")]
    jobs: dict[int, list] = {}       # settings index -> [(control, log_dir)]
    seen: dict = {}
    for i, s in enumerate(settings):  # before any work: an existing or shared run folder stops the invocation
        for mode in modes:
            control = RunControl.from_cli(cli, test_mode=mode)
            d = runner.default_log_dir(s, mode, stamp, control.log_dir)
            if d in seen:
                raise HarnessError(f"{s.benchmark} {s.scenario} config_ver {s.config_ver} and config_ver {seen[d]} "
                                   f"would write the same folder {d}", "run the config_vers in separate invocations")
            seen[d] = s.config_ver
            runner.refuse_existing(d, control)
            jobs.setdefault(i, []).append((control, d))
    metas = []
    root = None
    try:
        for i, s in enumerate(settings):
            for n in s.notes:
                print(f"[run_harness] note: {n}")
            engines = _bench(s).generate_engines()   # once, before the timed child starts; the child gets the paths
            for control, log_dir in jobs[i]:
                root = log_dir.parents[3]
                metas.append(runner.run_one(s, control, log_dir, engines))
    finally:                        # a stopped or failed invocation leaves no empty folders of its own
        for d, given in {(log_dir.parents[3], bool(c.log_dir)) for js in jobs.values() for c, log_dir in js}:
            prune_empty_dirs(d, keep_root=given)     # a --log_dir the user named stays, even empty
    if root is not None:
        records.set_latest(root)
        print(f"\nResults of this invocation ({root}; again: python scripts/print_harness_result.py {root})")
        print(records.table(metas))   # this invocation's records only, never an earlier run's
        for m in metas:
            for why in m.get("invalid_reasons") or ():
                print(f"INVALID {m['benchmark']} {m['scenario']}: {why}")
    failed = [m for m in metas if m["status"] != "ok"]
    for m in failed:
        print(f"error: {m['benchmark']} {m['scenario']} {m['test_mode']}: {m['error']}\n"
              f"  fix: {m.get('error_fix') or 'see ' + m['log_dir'] + ' (child_traceback.txt, mlperf_log_detail.txt)'}",
              file=sys.stderr)
    return max((m.get("error_exit_code") or 4 for m in failed), default=0)


def action_run(cli, settings) -> int:
    """NVIDIA's ``make run``: generate_engines then run_harness, one invocation, so every flag that
    applies to either step is accepted (run_harness builds or reuses the engines before each run)."""
    return action_run_harness(cli, settings)


def action_run_power_harness(cli, settings) -> int:
    """A power run (MaxQ, or MaxP with power): each benchmark and scenario's PerformanceOnly run made as
    mlcommons/power-dev's client makes it, a ranging run then the testing run, each under the power server
    (``--power_server``, checked reachable before any run); the server's logs and both runs' LoadGen logs form a
    result folder (build/power_results/<timestamp>/<benchmark>/<scenario>/performance, code.common.power.ptd), and
    the testing run's record points to it, so update_results stages it with its power logs. The two runs' logs go to
    <--log_dir, default build/logs/power>/<timestamp>/<benchmark>_<scenario>_<config_ver>/."""
    import tempfile
    from pathlib import Path

    from code.common import paths
    from code.common.harness import runner
    from code.common.power import ptd

    server = cli.get("power_server")
    if not server:
        raise HarnessError("--action=run_power_harness needs --power_server",
                           "add --power_server=HOST[:PORT] (the host running power-dev's server.py next to PTDaemon)")
    if cli.get("test_mode", "PerformanceOnly") != "PerformanceOnly":
        raise HarnessError(f"a power run is a PerformanceOnly run, not --test_mode={cli['test_mode']}",
                           "make the accuracy run with make run_harness, and the power run without --test_mode")
    host, port_n = ptd.check_server(server)          # reachable, before any run
    stamp = runner.timestamp()
    run_cli = {k: v for k, v in cli.items() if k != "power_server"}
    root = Path(cli.get("log_dir") or paths.logs_dir() / "power") / stamp
    for s in settings:
        logs = root / f"{s.benchmark}_{s.scenario}_{s.config_ver}"
        out = paths.build_dir() / "power_results" / stamp / s.benchmark / s.scenario / s.config_ver / "performance"
        logs.mkdir(parents=True, exist_ok=True)

        def workload(s=s, logs=logs) -> None:      # a fresh log folder for each of the two runs
            rc = action_run_harness({**run_cli, "action": "run_harness", "log_dir": tempfile.mkdtemp(dir=logs)}, [s])
            if rc:
                raise HarnessError(f"the {s.benchmark} {s.scenario} run under the power server ended with exit {rc}",
                                   "see its output above; fix the run with make run_harness first")

        ptd.run(host, workload, logs, out, port=port_n, label=f"{s.benchmark}-{s.scenario}".replace(".", "_"))
        print(f"[power] {s.benchmark} {s.scenario}: power result in {out}")
    return 0


def action_run_audit_harness(cli, settings) -> int:
    from code.common.compliance.audit import run_audits

    return run_audits(cli, settings)


def action_find_performance(cli, settings) -> int:
    from code.common.tuning import action_find_performance as find

    return find(cli, settings)


def action_add_system(cli, settings) -> int:
    """Register the detected GPUs as a system (systems/known/<id>.json) with config blocks for it."""
    from code.common.add_system import add_system

    return add_system(cli)


def action_doctor(cli, settings) -> int:
    """One line per check (ok / warn / FAIL with the fixing command); exit 0 only when nothing FAILs."""
    from code.common.doctor import doctor

    return doctor(cli, settings)


def _given(cli: dict, name: str):
    """A flag's value: the one given, else the schema's default."""
    from code.common.benchmarks import registry

    return cli[name] if name in cli else registry().get(name).default


def _staging_root(cli):
    from pathlib import Path

    from code.common.submission.stage import staging_root

    return Path(cli["staging_root"]) if cli.get("staging_root") else staging_root()


def action_update_results(cli, settings) -> int:
    """Stage the best runs of build/logs (or --stage_logs), and the endpoints-client reports of
    --endpoints_results, into the staging root's results/, measurements/, compliance/ and systems/."""
    from pathlib import Path

    from code.common.submission import stage

    stage.stage(submitter=_given(cli, "submitter"), division=_given(cli, "division"), version=cli.get("round"),
                log_roots=[Path(p) for p in cli.get("stage_logs") or ()] or None, root=_staging_root(cli),
                endpoints_results=cli.get("endpoints_results") or (), system_name=cli.get("system_name"))
    return 0


def action_truncate_results(cli, settings) -> int:
    from code.common.submission.truncate import truncate_all

    return 1 if truncate_all(_staging_root(cli))["errors"] else 0


def action_export_submission(cli, settings) -> int:
    from code.common.submission import export

    export.export(submitter=_given(cli, "submitter"), division=_given(cli, "division"), version=cli.get("round"),
                  root=_staging_root(cli), out=cli.get("submission_dir"), tarball=_given(cli, "tarball"))
    return 0


def action_check_submission(cli, settings) -> int:
    from pathlib import Path

    from code.common import paths
    from code.common.submission.check import check_submission

    return check_submission(Path(cli.get("submission_dir") or paths.build_dir() / "submission"),
                            submitter=cli.get("submitter"), version=cli.get("round"))


def action_report(cli, settings) -> int:
    """build/report: index.html with the summary table and pictures, summary.json and summary.md."""
    from code.common.report import report

    return report(cli)
