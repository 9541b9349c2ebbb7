"""Results of the MLCommons endpoints client (``inference-endpoint benchmark offline|online``), staged where the
official checker reads them (``make update_results RUN_ARGS="--endpoints_results=[SCENARIO=]DIR,..."``).

For the models its round allows (``Round.endpoints_models``: llama3.1-8b and llama3.1-8b-edge in v6.1), the
checker takes a scenario without LoadGen logs as an endpoints result (tools/submission/submission_checker:
loader.py, parsers/endpoints_parser.py) and reads, in the scenario directory::

    results/<system>/<benchmark>/<scenario>/config.yaml                         the client's settings (seeds, duration)
    results/<system>/<benchmark>/<scenario>/performance/result_summary.json    its performance report
    results/<system>/<benchmark>/<scenario>/accuracy/accuracy_results.json     its accuracy report
    results/<system>/<benchmark>/<scenario>/audit/audit_<test>.json            audits, where the round requires one

One report directory of ``--mode both`` (a performance and an accuracy dataset) holds all of them: it is one
scenario of one benchmark. The benchmark is the model the server served (``model_params.name``, or a submission
run's ``submission_ref.model``): ``make run_llm_server`` serves ``<benchmark>`` (``<benchmark>-tiny``); another
name is given as ``BENCHMARK/SCENARIO=DIR``. The scenario is the run's type (offline: Offline, online: Server),
or the one ``SCENARIO=`` names (Interactive: an online Poisson run at those bounds; SingleStream: online at
concurrency 1, filed as the edge twin). The system is the one the harness detects here (``--system_name``
overrides), named as ``--backend=openai`` runs name it (``<system id>_OAI``): stage on the machine that served.

Staging writes a run record (``metadata.json``, the shape of a harness run's: benchmark, scenario, system,
variant, machine, effective seeds and duration, the report's numbers) beside the staged files; selection,
system descriptions and the pre-flight read that record, never the client's stdout. Everything is checked
before anything is written.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import shutil
from pathlib import Path

from code.common import rounds, scenarios
from code.common.errors import HarnessError
from code.common.fileio import read_json
from code.common.results.selection import Run
from code.common.submission import measurements
from code.common.submission.tree import link_or_copy

CONFIG_NAMES = ("config.yaml", "config.yml")
PERF_SUMMARY = Path("performance") / "result_summary.json"
ACC_RESULTS = Path("accuracy") / "accuracy_results.json"
AUDIT_DIR = "audit"
# the client's name of each audit (audit/audit_<name>.json; the checker's ENDPOINTS_COMPLIANCE_MAPPING)
AUDIT_NAMES = {"TEST01": "accuracy_in_performance_test", "TEST04": "output_caching_test",
               "TEST06": "consistency_output_test"}
TINY_SUFFIX = "-tiny"          # make run_llm_server serves a tiny variant as <benchmark>-tiny
# the client's run type -> the scenarios a report of it can be filed as (the first: the default)
TYPE_SCENARIOS = {"offline": ("Offline",), "online": ("Server", "Interactive", "SingleStream")}
RERUN = ("inference-endpoint benchmark {type} --mode both --dataset perf:<performance set> --dataset "
         "acc:<accuracy set>,accuracy_config.eval_method=... --report-dir <DIR>")


def is_endpoints_dir(d: Path) -> bool:
    """Does the staged or exported scenario directory ``d`` hold an endpoints result (and no LoadGen run)?"""
    return (d / PERF_SUMMARY).is_file() and not (d / "performance" / "run_1").exists()


@dataclasses.dataclass(frozen=True)
class Item:
    """One ``--endpoints_results`` entry: ``[[BENCHMARK/]SCENARIO=]DIR``."""
    dir: Path
    scenario: str | None = None
    benchmark: str | None = None

    @classmethod
    def parse(cls, text: str) -> "Item":
        key, sep, path = text.partition("=")
        if not sep:
            return cls(Path(text))
        bench, slash, scen = key.rpartition("/")
        wanted = {n.lower(): n for n in scenarios.NAMES}
        if scen.lower() not in wanted:
            from code.common.errors import did_you_mean

            raise HarnessError(f"--endpoints_results={text}: '{scen}' is not a scenario"
                               f"{did_you_mean(scen, scenarios.NAMES)}",
                               f"write [BENCHMARK/]SCENARIO=DIR with SCENARIO one of {', '.join(scenarios.NAMES)}, "
                               f"e.g. --endpoints_results=Offline={path or 'DIR'}")
        return cls(Path(path), wanted[scen.lower()], bench if slash else None)


def _yaml(path: Path, fix: str) -> dict:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise HarnessError(f"{path}: not a readable YAML file ({str(e).splitlines()[0]})", fix) from None
    if not isinstance(data, dict):
        raise HarnessError(f"{path}: expected a YAML mapping, found {type(data).__name__}", fix)
    return data


def _get(d: dict, dotted: str):
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def _entry(item: Item, model: str, scenario: str, rnd: rounds.Round) -> tuple[rounds.RoundBenchmark, str, str]:
    """(round entry, harness benchmark package, model variant) of the report's model."""
    from code.common.benchmarks import resolve

    variant = "tiny" if model.endswith(TINY_SUFFIX) else "reference"
    name = item.benchmark or (model[:-len(TINY_SUFFIX)] if variant == "tiny" else model)
    rb = rnd.by_submission_name(name)
    if rb is None:
        try:
            pkg = resolve(name).name
        except HarnessError:
            raise HarnessError(f"{item.dir}: the report's model '{model}' names no benchmark of this harness",
                               f"name it: --endpoints_results=<benchmark>/{scenario}={item.dir} (e.g. llama3.1-8b), or "
                               "serve the model under the benchmark's name (make run_llm_server does)") from None
        if not rnd.entries(pkg):
            raise rounds.not_in_round(rnd, pkg)
        variants = {e.accuracy_variant for e in rnd.entries(pkg)} - {""}
        rb = rnd.entry(pkg, variants.pop() if len(variants) == 1 else None,     # a round's only variant is meant
                       edge=scenarios.get(scenario).categories == ("edge",))
    if not rnd.accepts_endpoints(rb):
        allowed = ", ".join(sorted(rnd.endpoints_models)) or "no benchmark"
        raise HarnessError(f"{item.dir}: MLPerf Inference {rnd.version} accepts endpoints-client results for "
                           f"{allowed}, not {rb.name}",
                           f"run {rb.name} through LoadGen: make run_harness RUN_ARGS=\"--benchmarks={rb.benchmark} "
                           f"--scenarios={scenario} --backend=openai\" (against the same server), then "
                           "make update_results")
    if scenario not in rb.scenarios:
        raise HarnessError(f"{item.dir}: {rb.name} has no {scenario} scenario in {rnd.version} (it has: "
                           f"{', '.join(rb.scenarios)})", f"stage it as one of those: --endpoints_results="
                           f"{rb.name}/{rb.scenarios[0]}={item.dir}")
    return rb, rb.benchmark, variant


def _scenario(item: Item, run_type: str, load: dict) -> str:
    """The scenario the report is filed as, checked against what the client ran."""
    fix = RERUN.format(type=run_type or "offline|online")
    if run_type not in TYPE_SCENARIOS:
        raise HarnessError(f"{item.dir}: config.yaml type is '{run_type}', not an offline or online benchmark run",
                           fix)
    scen = item.scenario or TYPE_SCENARIOS[run_type][0]
    if scen not in TYPE_SCENARIOS[run_type]:
        other = next(t for t, s in TYPE_SCENARIOS.items() if scen in s)
        raise HarnessError(f"{item.dir}: an {run_type} run (config.yaml type: {run_type}) cannot be the {scen} result",
                           f"stage it as {TYPE_SCENARIOS[run_type][0]}={item.dir}, or run inference-endpoint "
                           f"benchmark {other} for {scen}")
    pattern = str(load.get("type") or "")
    if scenarios.get(scen).runs_as_server and pattern != "poisson":
        raise HarnessError(f"{item.dir}: {scen} is LoadGen's Poisson arrivals; this online run's load pattern is "
                           f"'{pattern}'", f"rerun with inference-endpoint benchmark online --load-pattern poisson "
                           f"--target-qps <rate> --mode both --report-dir {item.dir}")
    if scen == "SingleStream" and (pattern != "concurrency" or load.get("target_concurrency") != 1):
        at = f" at concurrency {load.get('target_concurrency')}" if pattern == "concurrency" else ""
        raise HarnessError(f"{item.dir}: SingleStream is one query at a time; this online run's load pattern is "
                           f"'{pattern}'{at}",
                           f"rerun with inference-endpoint benchmark online --load-pattern concurrency --concurrency 1 "
                           f"--mode both --report-dir {item.dir}")
    return scen


def _served(spec, scenario: str, variant: str, edge: bool, system_name: str | None, version: str):
    """The run settings the harness serves ``spec`` with on this system (``make run_llm_server``'s): the system
    name (``--backend=openai``'s) and the precision come from them."""
    from code.common import benchmarks as B
    from code.common.configs import resolve
    from code.common.settings import RunSettings
    from code.common.systems import detect, match_system

    system = match_system(detect(), system_name)
    cli = {"model_variant": variant, "backend": "openai", "round": version,
           **({"category": "edge"} if edge else {})}
    values, sources, path, notes = resolve(spec, scenario, system, B.registry(), cli, "default",
                                           {"backend": ("openai", "endpoints client")})
    return RunSettings(spec, scenario, system, values, sources, path, "default", tuple(notes))


def read(item: Item, rnd: rounds.Round, system_name: str | None = None) -> tuple[rounds.RoundBenchmark, Run]:
    """One report directory as a staged run (its round entry and record), its files checked; nothing written."""
    from code.common.benchmarks import resolve
    from code.common.systems.facts import machine_record

    d = item.dir
    if not d.is_dir():
        raise HarnessError(f"--endpoints_results: {d} is not a directory",
                           "give the --report-dir of an inference-endpoint benchmark run")
    conf = next((d / n for n in CONFIG_NAMES if (d / n).is_file()), None)
    fix = RERUN.format(type="offline|online")
    if conf is None:
        raise HarnessError(f"{d}: no config.yaml: not the report directory of an inference-endpoint benchmark run",
                           f"give the --report-dir of {fix.split(' --report-dir')[0]}")
    cfg = _yaml(conf, fix)
    sub = cfg.get("submission_ref") if isinstance(cfg.get("submission_ref"), dict) else {}
    run_type = str(cfg.get("benchmark_mode") if cfg.get("type") == "submission" else cfg.get("type") or "")
    load = _get(cfg, "settings.load_pattern") or {}
    scen = _scenario(item, run_type, load if isinstance(load, dict) else {})
    model = str(sub.get("model") or _get(cfg, "model_params.name") or "")
    rb, pkg, variant = _entry(item, model, scen, rnd)
    fix = RERUN.format(type=run_type)
    kinds = {str(ds.get("type")) for ds in cfg.get("datasets") or [] if isinstance(ds, dict)}
    for rel, kind in ((PERF_SUMMARY, "performance"), (ACC_RESULTS, "accuracy")):
        if not (d / rel).is_file():
            why = f"the run had no {kind} dataset" if kind not in kinds else "the run did not finish"
            raise HarnessError(f"{d}: missing {rel}, which the {rnd.version} checker reads ({why}; it needs one "
                               f"--mode both run per scenario)", fix.replace("<DIR>", str(d)))
    perf = read_json(d / PERF_SUMMARY, fix)
    acc = read_json(d / ACC_RESULTS, fix)
    failed, done = perf.get("n_samples_failed") or 0, perf.get("n_samples_completed")
    if failed or not perf.get("complete", True) or not done:
        raise HarnessError(f"{d}: the performance run did not complete ({done} samples completed, {failed} failed)",
                           f"rerun it: {fix.replace('<DIR>', str(d))}")
    scores = [s for s in acc.get("accuracy_scores") or [] if isinstance(s, dict) and s.get("score") is not None]
    if not scores:
        raise HarnessError(f"{d}: {ACC_RESULTS} holds no accuracy score", f"rerun it: {fix.replace('<DIR>', str(d))}")
    spec = resolve(pkg)
    served = _served(spec, scen, variant, rb.name.endswith("-edge"), system_name, rnd.version)
    runtime = _get(cfg, "settings.runtime") or {}
    when = dt.datetime.fromtimestamp((d / PERF_SUMMARY).stat().st_mtime).astimezone().isoformat(timespec="seconds")
    sc = scenarios.get(scen)
    meta = {
        "schema": 2, "source": "inference-endpoint", "benchmark": pkg, "log_name": pkg,
        "loadgen_model": rb.loadgen_model, "accuracy_target": rb.accuracy_variant or None, "round": rnd.version,
        "scenario": scen, "test_mode": "SubmissionRun", "audit_test": None, "system_id": served.system_id,
        "system_name": served.system_name, "config_ver": "default", "model_variant": variant, "backend": None,
        "precision": served.precision, "status": "ok", "error": None, "valid": True, "result_validity": None,
        "metric": sc.metric, "metric_unit": sc.unit,
        "metric_value": _get(perf, "latency.avg") if sc.latency_sized else perf.get("qps"),
        "effective": {"effective_min_duration_ms": runtime.get("min_duration_ms"),
                      "effective_sample_index_rng_seed": runtime.get("dataloader_random_seed"),
                      "effective_schedule_rng_seed": runtime.get("scheduler_random_seed")},
        "endpoints": {"report_dir": str(d.resolve()), "type": run_type, "served_model": model,
                      "endpoints": _get(cfg, "endpoint_config.endpoints"), "load_pattern": load,
                      "duration_ns": perf.get("duration_ns"), "n_samples_completed": done,
                      "accuracy": [{k: x.get(k) for k in ("dataset_name", "score", "total_samples")} for x in scores]},
        "versions": {"inference-endpoint": str(perf.get("version") or "")},
        "machine": machine_record(), "finished": when,
    }
    return rb, Run(d, meta)


def read_all(items, rnd: rounds.Round, system_name: str | None = None) -> dict[tuple[str, str, str], tuple]:
    """Every ``--endpoints_results`` entry read: {(system, submission name, scenario): (round entry, run)}; two
    reports for one scenario are refused."""
    out: dict[tuple[str, str, str], tuple] = {}
    for text in items:
        item = Item.parse(text)
        rb, run = read(item, rnd, system_name)
        key = (run.meta["system_name"], rb.name, run.meta["scenario"])
        if key in out:
            raise HarnessError(f"--endpoints_results: {out[key][1].dir} and {item.dir} are both the {rb.name} "
                               f"{key[2]} result of {key[0]}", "give one report directory per scenario")
        out[key] = (rb, run)
    return out


def stage_files(run: Run, dst: Path) -> None:
    """The report's files the checker reads, and the run record, into the scenario directory ``dst`` (emptied)."""
    from code.common.fileio import write_json

    if dst.exists():
        shutil.rmtree(dst)
    src = run.dir
    conf = next(src / n for n in CONFIG_NAMES if (src / n).is_file())
    link_or_copy(conf, dst / "config.yaml")
    for rel in (PERF_SUMMARY, ACC_RESULTS):
        link_or_copy(src / rel, dst / rel)
    for p in sorted((src / AUDIT_DIR).glob("*")) if (src / AUDIT_DIR).is_dir() else []:
        if p.is_file() and (p.name.startswith("audit_") and p.suffix == ".json" or p.name.startswith("verify_")):
            link_or_copy(p, dst / AUDIT_DIR / p.name)
    write_json(dst / "metadata.json", run.meta)


# what export copies of a staged endpoints scenario (the checker's files; metadata.json stays staged)
EXPORT_FILES = ("config.yaml", str(PERF_SUMMARY), str(ACC_RESULTS))


def export_files(src: Path, dst: Path) -> None:
    for rel in EXPORT_FILES:
        if (src / rel).is_file():
            link_or_copy(src / rel, dst / rel)
    for p in sorted((src / AUDIT_DIR).glob("*")) if (src / AUDIT_DIR).is_dir() else []:
        if p.is_file():
            link_or_copy(p, dst / AUDIT_DIR / p.name)


def readme(meta: dict, round_name: str) -> str:
    """README.md of an endpoints result's measurements: how it was produced and staged."""
    ep = meta.get("endpoints") or {}
    tiny = " --model_variant=tiny" if meta.get("model_variant") == "tiny" else ""
    scen = meta.get("scenario")
    lines = [
        f"# {meta.get('benchmark')} {scen} on {meta.get('system_name')}",
        "",
        f"Produced with the MLCommons endpoints client (inference-endpoint "
        f"{(meta.get('versions') or {}).get('inference-endpoint') or '?'}, `benchmark {ep.get('type')}`, "
        f"--mode both) against the OpenAI-compatible server that served `{ep.get('served_model')}`; `config.yaml` "
        "beside the reports holds the client's settings (seeds, duration, load pattern).",
        "",
        "## Reproduce",
        "",
        "```",
        f"make run_llm_server RUN_ARGS=\"--benchmarks={meta.get('benchmark')}{tiny}\"",
        f"inference-endpoint benchmark {ep.get('type')} --model {ep.get('served_model')} --endpoints <url> "
        "--mode both --dataset perf:<set> --dataset acc:<set>,accuracy_config.eval_method=... --report-dir <DIR>",
        "make stop_llm_server",
        f"make update_results SUBMITTER=<org> RUN_ARGS=\"--endpoints_results={scen}=<DIR>\"",
        f"make export_submission SUBMITTER=<org>   # layout of MLPerf Inference {round_name}",
        "make check_submission SUBMITTER=<org>",
        "```",
        "",
    ]
    return "\n".join(lines + measurements.tiny_note(meta))
