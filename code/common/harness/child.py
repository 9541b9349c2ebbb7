"""Child process: exactly one LoadGen test (FromConfig is called once per process).

Run by code.common.harness.runner with cwd = the run's staging folder holding request.json and user.conf
(and audit.config for compliance runs). Writes LoadGen's logs, accuracy.txt (accuracy mode) and
child_result.json there. Exit code 0 even when the benchmark fails: the error is data.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path


def main(request_path: str) -> int:
    stage = Path(request_path).parent
    req = json.loads(Path(request_path).read_text())
    from code.common.systems.facts import machine_record, software_versions

    result: dict = {"versions": software_versions()}
    try:
        result["machine"] = machine_record()      # what staging describes the system from (metadata.json)
        run(req, stage, result)
    except BaseException as e:  # reported as data; the parent turns it into a one-line error
        from code.common.errors import HarnessError, from_os_error

        if isinstance(e, OSError) and from_os_error(e) is not None:   # a full disk, a read-only folder
            e = from_os_error(e)
        if isinstance(e, HarnessError):   # a user error: keep its cause, fix command and exit code
            result["error"], result["error_fix"], result["error_exit_code"] = e.cause, e.fix, e.exit_code
        else:
            result["error"] = f"{type(e).__name__}: {e}"
        try:
            (stage / "child_traceback.txt").write_text(traceback.format_exc())
        except OSError:                   # a full disk: the result below says what failed
            pass
    try:
        from code.common.fileio import write_json

        write_json(stage / "child_result.json", result)      # staged: never half-written
    except OSError:              # a full disk: the parent sees no result and says why (code.common.errors.disk_full)
        return 1
    return 0


def run(req: dict, stage: Path, result: dict) -> None:
    import mlperf_loadgen as lg

    from code.common import scenarios
    from code.common.harness import fast_sizing, monitor, ray_executor
    from code.common.errors import HarnessError, RunError
    from code.common.benchmarks import implementation, resolve
    from code.common.harness.runner import system_from_json
    from code.common.settings import RunControl, RunSettings
    from code.common.harness.sut import BatchingSUT, CachingProcessor, NullProcessor, pending_bound
    from code.common.power import sampler as power_sampler

    spec = resolve(req["settings"]["benchmark"])
    settings = RunSettings.from_json(req["settings"], spec, system_from_json(req["system"]))
    control = RunControl(**req["control"])
    bench = implementation(spec)(settings)
    bench.test_mode = control.test_mode
    bench.audit_test = control.audit_test
    bench.control = control
    engines = req.get("engines") or {}
    result["engines"] = engines

    lg_scenario = scenarios.get(settings.scenario).loadgen_enum
    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, lg_scenario)
    ts.mode = getattr(lg.TestMode, control.test_mode)
    if ts.FromConfig("user.conf", settings.loadgen_model, lg_scenario) != 0:
        raise RuntimeError("LoadGen rejected user.conf")
    if settings.values.get("round"):
        # Filing for another round than the installed LoadGen's: that round's seeds (user.conf cannot
        # set them; LoadGen takes its compiled-in mlperf.conf's). The detail log shows the effective ones.
        from code.common import rounds

        for key, value in rounds.current(settings.values["round"]).seeds.items():
            setattr(ts, key, value)
    if req.get("audit"):
        if not Path("audit.config").exists():
            raise RuntimeError("audit run without audit.config in the working directory")
        ts.FromConfig("audit.config", settings.loadgen_model, lg_scenario, 2)
        if control.audit_test == "TEST06" and ts.infer_token_latencies:
            # TEST06 reads each answer's token_count and (but in Offline) its first token, which LoadGen logs only
            # with use_token_latencies; mlperf.conf infers GPT-J's tokens instead, so its audit reports them
            ts.use_token_latencies = True

    t0 = time.time()
    qsl_impl = bench.make_qsl()
    # mlperf.conf's accuracy_sample_count_override (gpt-oss-120b: 4,395) past a smaller QSL (a tiny set, an
    # --llm_sample_count subset): LoadGen would pair responses with the wrong samples; an accuracy run covers the QSL
    if 0 < qsl_impl.total_count < getattr(ts, "accuracy_sample_count_override", 0):
        ts.accuracy_sample_count_override = qsl_impl.total_count
    # TEST07/TEST09 issue each sample once (performance_issue_unique) over a set smaller than mlperf.conf's
    # performance_sample_count_override (gpt-oss-120b: 6,396 against TEST07's 990): LoadGen would pick indices
    # past the QSL (a SIGSEGV); the audit's set is the whole QSL
    if ts.performance_issue_unique and 0 < qsl_impl.total_count < ts.performance_sample_count_override:
        ts.performance_sample_count_override = qsl_impl.total_count
    dispatch = scenarios.dispatch_for(settings.scenario, spec)
    pool = None
    if dispatch == "stream":           # an LLM: token streaming over generation workers (code.common.llm)
        from code.common.llm.sut import StreamingSUT

        if settings.values.get("executor") == "ray":     # the engine spans the cluster itself
            result["executor"] = ray_executor.llm_cluster(settings)

        procs = bench.null_processors() if control.null_processor else bench.make_processors(qsl_impl, engines)
        gen = bench.generation()
        cap = control.plant_output_limit or gen.max_new_tokens       # TEST ONLY: truncated answers (TEST09)
        sut_impl = StreamingSUT(lg, procs, qsl_impl.prompt, max_new_tokens=min(gen.max_new_tokens, cap),
                                min_new_tokens=min(gen.min_new_tokens, cap), token_latencies=bool(ts.use_token_latencies),
                                plant_first_token=control.plant_first_token,
                                stop=qsl_impl.stop if qsl_impl.stops else None, strip_eos=gen.strip_eos,
                                media=getattr(qsl_impl, "media", None), respond=bench.response_bytes())
    else:
        if settings.values.get("executor") == "ray":     # the workers are Ray actors (code.common.harness.ray_executor)
            pool = ray_pool(req, settings, engines, stage, result)
            procs = pool.processors()
            qsl_impl = ray_executor.RemoteQSL(qsl_impl, pool)
        elif control.null_processor:
            bs = settings.batch_size() if not isinstance(settings.gpu_batch_size, dict) else 1
            procs = [NullProcessor(bs, control.null_service_ms / 1000) for _ in bench.workers()]
        else:
            procs = bench.make_processors(qsl_impl, engines)
            if control.use_cached_responses:
                procs = [CachingProcessor(p) for p in procs]
        sut_impl = BatchingSUT(lg, dispatch, procs, bench.batch_timeout_s(),
                               order_key=None if control.null_processor else bench.offline_order_key(qsl_impl))
    sut_impl.start()
    if settings.fast and control.test_mode == "PerformanceOnly" and not req.get("audit"):
        result["fast_sizing"] = (fast_sizing.size_stream(ts, settings, sut_impl, qsl_impl.total_count)
                                 if dispatch == "stream" else fast_sizing.size(ts, settings, procs, qsl_impl))
        if result["fast_sizing"]:
            f = result["fast_sizing"]
            print(f"[fast] measured {f['measured']}: {f['setting']} {f['configured']:g} -> {f['set']:g}", flush=True)
    server = scenarios.get(settings.scenario).runs_as_server
    if dispatch == "batcher" or (dispatch == "stream" and server):
        # the effective target and bound, after user.conf, mlperf.conf and --fast; LLMs judged per token
        # (target_latency 0) are bounded by their TTFT
        queries = max(ts.min_query_count, ts.server_target_qps * ts.min_duration_ms / 1000)
        bound_ns = ts.server_target_latency_ns or (ts.ttft_latency if ts.use_token_latencies else 0)
        bs = max(1, getattr(procs[0], "batch_size", 0) or getattr(procs[0], "max_batch_size", 1))
        sut_impl.max_pending = pending_bound(ts.server_target_qps, bound_ns / 1e9, ts.server_target_latency_percentile,
                                             queries, bs, len(procs))
    if control.verbose:
        print(f"[child] set-up {time.time() - t0:.1f}s; {len(procs)} worker(s), batch "
              f"{getattr(sut_impl, 'batch_size', settings.values.get('gpu_batch_size'))}", flush=True)
    limit = settings.watchdog_s or spec.watchdog_s
    expected = monitor.expected_samples(ts, settings.scenario, control.test_mode, qsl_impl.total_count)
    mon = monitor.Monitor(sut_impl, limit, expected, f"{settings.benchmark} {settings.scenario}",
                          lambda stall: monitor.stall_exit(stage, result, stall)).start()

    sut = lg.ConstructSUT(sut_impl.issue_queries, sut_impl.flush_queries)
    qsl = lg.ConstructQSL(qsl_impl.total_count, qsl_impl.performance_count, qsl_impl.load, qsl_impl.unload)
    out = lg.LogOutputSettings()
    out.outdir = str(stage)
    out.copy_summary_to_stdout = bool(control.verbose)
    log = lg.LogSettings()
    log.log_output = out
    log.enable_trace = False
    print(f"[run] {settings.benchmark} {settings.scenario} {control.test_mode} on {settings.system_name} ...", flush=True)
    power = power_sampler.for_run(lambda line: print(line, flush=True))     # informative power (NVML, RAPL)
    with power:
        lg.StartTestWithLogSettings(sut, qsl, ts, log)
    mon.stop()
    sut_impl.stop()
    if pool is not None:
        result["executor"] = pool.record()
        pool.close()
    lg.DestroyQSL(qsl)
    lg.DestroySUT(sut)
    result["completed_samples"] = sut_impl.completed
    result["power"] = power_sampler.record(power, stage, sut_impl.completed)
    result["timeline"] = sut_impl.timeline.save(stage)
    if dispatch == "stream":
        result["generation"] = sut_impl.stats()
    if sut_impl.overload is not None:
        result["overload"] = {**sut_impl.overload, "shed": sut_impl.shed,
                              "target_qps": ts.server_target_qps}
    if sut_impl.errors:
        e = sut_impl.errors[0]
        cause = f"{len(sut_impl.errors)} batch(es) failed; first: {type(e).__name__}: {e}"
        if isinstance(e, HarnessError):       # a Processor's own check (NaN output, wrong shape): keep its fix
            raise RunError(cause, e.fix)
        raise RuntimeError(cause)
    if control.test_mode == "AccuracyOnly":
        result["accuracy"] = bench.accuracy(str(stage / "mlperf_log_accuracy.json"), str(stage))


def ray_pool(req: dict, settings, engines: dict, stage: Path, result: dict):
    """The run's Ray actors; with none left mid-run, the child ends with the error and the record."""
    from code.common.harness import monitor, ray_executor

    pool = None

    def lost(cause: str, fix: str) -> None:
        if pool is not None:
            result["executor"] = pool.record()
        monitor.abort_exit(stage, result, cause, fix)
    s = settings
    pool = ray_executor.Pool(req, engines, address=s.ray_address, cpu_actors=s.ray_cpu_actors,
                             actor_cpus=s.ray_actor_cpus, max_retries=s.ray_max_retries,
                             ship_engines=s.ray_ship_engines, in_flight=s.ray_batches_in_flight, on_lost=lost)
    return pool


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    # Ctrl-C and SIGTERM end the child at once: while LoadGen's C++ holds the main thread, Python
    # handlers would run only after the test. The parent removes the staging folder and reports.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(main(sys.argv[1]))
