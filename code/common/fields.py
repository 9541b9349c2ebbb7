"""The one typed schema for every RUN_ARGS flag and every config.json key.

The argument parser (code.common.args), config validation (code.common.configs) and the
generated docs (``python -m code.main --action=docs``) all read the registry
(``code.common.benchmarks.registry()``: ``CORE_FIELDS`` plus each ``BenchmarkSpec.fields``); nothing
else declares a setting. Which scenarios a core field applies to is said by code.common.scenarios.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterable

from code.common import scenarios
from code.common.backends import NAMES as BACKENDS
from code.common.errors import did_you_mean
from code.common.rounds import AUDIT_TESTS, VERSIONS as ROUND_VERSIONS

ACTIONS = ("build", "info", "download_model", "download_data", "preprocess_data", "calibrate", "generate_engines",
           "run_harness", "run", "run_audit_harness", "find_performance", "docs", "add_system", "doctor", "report",
           "update_results", "truncate_results", "export_submission", "check_submission", "run_llm_server",
           "stop_llm_server", "submission", "run_power_harness")
# FindPeakPerformance is NVIDIA's spelling of find_performance (run_harness hands it over)
TEST_MODES = ("PerformanceOnly", "AccuracyOnly", "SubmissionRun", "FindPeakPerformance")
CONFIG_VERS = ("default", "high_accuracy", "maxq", "triton")
VARIANTS = ("reference", "tiny")
ACCURACY_TARGETS = ("99", "99.9", "95")
ALL = "all"                       # --benchmarks=all, --scenarios=all, --config_ver=all


# --- value parsers: str -> typed value; raise ValueError with a short reason ---------------------

def parse_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on", ""):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true/false, got {v!r}")


def parse_int(v: Any) -> int:
    if isinstance(v, bool):
        raise ValueError(f"expected an integer, got {v!r}")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    try:
        return int(str(v).replace("_", ""))
    except ValueError:
        raise ValueError(f"expected an integer, got {v!r}") from None


def parse_float(v: Any) -> float:
    if isinstance(v, bool):
        raise ValueError(f"expected a number, got {v!r}")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {v!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"expected a finite number, got {v!r}")
    return x


def parse_str(v: Any) -> str:
    if not isinstance(v, (str, int, float)) or isinstance(v, bool):
        raise ValueError(f"expected a string, got {v!r}")
    return str(v)


def parse_list(v: Any) -> tuple[str, ...]:
    """Comma- or space-separated (NVIDIA's ``BENCHMARKS="resnet50 sdxl"``); JSON lists too."""
    if isinstance(v, (list, tuple)):
        return tuple(str(x).strip() for x in v if str(x).strip())
    return tuple(x for x in str(v).replace(",", " ").split() if x)


def parse_batch_size(v: Any) -> int | dict[str, int]:
    """An int, or a per-component mapping ``clip1:8,unet:8`` (JSON: {"clip1": 8, ...})."""
    if isinstance(v, dict):
        out = {str(k): parse_int(x) for k, x in v.items()}
    elif isinstance(v, (int, float)) or (isinstance(v, str) and ":" not in v):
        n = parse_int(v)
        if n < 1:
            raise ValueError(f"batch size must be >= 1, got {n}")
        return n
    else:
        out = {}
        for part in str(v).split(","):
            if not part.strip():
                continue
            if ":" not in part:
                raise ValueError(f"expected component:size, got {part!r}")
            k, x = part.split(":", 1)
            out[k.strip()] = parse_int(x)
    for k, n in out.items():
        if n < 1:
            raise ValueError(f"batch size for {k} must be >= 1, got {n}")
    return out


TYPE_NAMES = {parse_bool: "bool", parse_int: "int", parse_float: "float", parse_str: "str",
              parse_list: "list", parse_batch_size: "int|component:int,..."}


@dataclasses.dataclass(frozen=True)
class Field:
    name: str
    parse: Callable[[Any], Any]
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    unit: str = ""
    cli: bool = True                 # accepted as --flag in RUN_ARGS
    config: bool = True              # accepted as a key in config.json
    actions: tuple[str, ...] | None = None     # None: every action
    scenarios: tuple[str, ...] | None = None   # benchmark fields only; core fields ask code.common.scenarios
    benchmarks: tuple[str, ...] | None = None  # None: every benchmark (package names)
    aliases: tuple[str, ...] = ()
    control: bool = False            # steers one invocation (RunControl); not a workload setting (RunSettings)
    flag_value: Any = None           # value of a bare ``--flag`` (bools: True)
    minimum: float | None = None
    maximum: float | None = None

    def scenario_scope(self) -> tuple[str, ...] | None:
        """Scenarios this field applies to (None: all). Core fields: as code.common.scenarios says."""
        if self.scenarios is not None:
            return self.scenarios
        return scenarios.scenarios_of(self.name)

    @property
    def type_name(self) -> str:
        return TYPE_NAMES.get(self.parse, getattr(self.parse, "__name__", "value"))

    def coerce(self, raw: Any) -> Any:
        """Parse and check a raw value; raises ValueError with a user-readable reason."""
        v = self.parse(raw)
        if self.choices is not None:
            if isinstance(v, tuple):
                for x in v:
                    if x not in self.choices:
                        raise ValueError(f"{x!r} is not one of {', '.join(self.choices)}"
                                         + did_you_mean(x, self.choices))
            else:
                canon = {c.lower(): c for c in self.choices}
                if str(v).lower() not in canon:
                    raise ValueError(f"{v!r} is not one of {', '.join(self.choices)}" + did_you_mean(str(v), self.choices))
                v = canon[str(v).lower()]
        if self.minimum is not None and isinstance(v, (int, float)) and v < self.minimum:
            raise ValueError(f"must be >= {self.minimum}, got {v}")
        if self.maximum is not None and isinstance(v, (int, float)) and v > self.maximum:
            raise ValueError(f"must be <= {self.maximum:g}, got {v}")
        return v


# "run": NVIDIA's `make run` (engines, then the harness); "run_power_harness": run_harness under the power server
RUN = ("run_harness", "run", "run_audit_harness", "run_power_harness")
TUNE = ("find_performance",)
ENGINE_AND_RUN = ("generate_engines",) + RUN + TUNE
DATA = ("download_model", "download_data", "preprocess_data")
# the submission tools: they read staged runs and trees, not benchmarks
SUBMISSION = ("update_results", "truncate_results", "export_submission", "check_submission")
NO_BENCHMARK = ("docs", "build", "add_system", "report", "stop_llm_server", "submission") + SUBMISSION     # actions that take no --benchmarks

# Scenario scope: a core field that only some scenarios use is listed in their
# code.common.scenarios entry (Scenario.settings), not here.
CORE_FIELDS: tuple[Field, ...] = (
    # --- what to run (control: steers this invocation, never part of RunSettings) ---
    Field("action", parse_str, "run_harness", "What to do.", choices=ACTIONS, config=False, control=True),
    Field("benchmarks", parse_list, (), "Benchmarks, comma- or space-separated, or 'all' (aliases accepted: sdxl, "
          "resnet, stable-diffusion-xl, ...).", config=False, control=True),
    Field("scenarios", parse_list, (), "Scenarios, comma-separated, or 'all' (case-insensitive). Default: all the "
          "benchmark supports (submission: the plan's, restricted to these).", config=False,
          actions=ENGINE_AND_RUN + ("info", "report", "submission"), control=True),
    Field("config_ver", parse_list, ("default",), "Config variants inside each system block, comma-separated, or "
          "'all' (every variant the system's blocks define). high_accuracy selects the 99.9 accuracy target.",
          choices=CONFIG_VERS + (ALL,), config=False, control=True),
    Field("test_mode", parse_str, "PerformanceOnly", "LoadGen mode.", choices=TEST_MODES, config=False,
          actions=RUN, control=True),
    Field("audit_test", parse_str, None, "Compliance test to run (with --action=run_audit_harness).",
          choices=AUDIT_TESTS, config=False, actions=("run_audit_harness",), control=True),
    Field("power_server", parse_str, None, "run_power_harness: the MLCommons power server (mlcommons/power-dev "
          "server.py, talking to PTDaemon) as host or host:port (port 4950 by default); each run is made twice "
          "under it, a ranging run and the testing run, and its power logs land beside the runs for staging. "
          "submission (make submission POWER_SERVER=...): every planned performance run becomes such a power run; "
          "the server is checked reachable before anything runs.",
          config=False, actions=("run_power_harness", "submission"), control=True),
    Field("verbose", parse_bool, False, "More logging.", flag_value=True, config=False, control=True),
    Field("log_dir", parse_str, None, "Directory for this invocation's logs (default build/logs/<timestamp>).",
          config=False, actions=RUN + TUNE, control=True),
    Field("system_name", parse_str, None, "Use this KnownSystems id instead of the detected one.", config=False,
          control=True),
    Field("overwrite", parse_bool, False, "Replace the logs of an earlier run in the same --log_dir (otherwise an "
          "existing run folder is an error).", flag_value=True, config=False, actions=RUN, control=True),
    Field("force", parse_bool, False, "Run even when the requested rate is far beyond what this system's config "
          "expects (the run would generate far more queries than the system can serve in its duration); "
          "add_system: replace config blocks edited by hand.",
          flag_value=True, config=False, actions=ENGINE_AND_RUN + ("info", "add_system"), control=True),
    Field("system_id", parse_str, None, "add_system: the id to register the detected GPUs under (default: one "
          "proposed from the GPU name and memory).", config=False, actions=("add_system",), control=True),
    Field("based_on", parse_str, None, "add_system: the known system id (class, e.g. H100-SXM-80GB) whose config "
          "blocks the new ones extend (default: the same GPU model if known, else the closest architecture and "
          "memory).", config=False, actions=("add_system",), control=True),
    Field("report_logs", parse_list, (), "report: run folders, or folders holding runs at any depth (an invocation's "
          "build/logs/<timestamp>, all of build/logs). Default: the latest make run_harness invocation "
          "(build/logs/LATEST).", config=False, actions=("report",), control=True),
    Field("report_dir", parse_str, None, "report: where index.html, summary.json, summary.md and the pictures go "
          "(default build/report; replaced as a whole, never half-written).", config=False, actions=("report",),
          control=True),
    Field("submitter", parse_str, "OpenHarness", "The submitting organization (a directory name of the submission "
          "tree; make ... SUBMITTER=<org>).", config=False,
          actions=("update_results", "export_submission", "check_submission", "submission"), control=True),
    Field("division", parse_str, "closed", "Submission division (make ... DIVISION=open).", choices=("closed", "open"),
          config=False, actions=("update_results", "export_submission", "submission"), control=True),
    Field("system_type", parse_str, None, "submission: the category the whole plan is for (make submission "
          "SYSTEM_TYPE=edge): its required scenarios, and for datacenter LLMs one of the optional ones.",
          choices=("datacenter", "edge"), config=False, actions=("submission",), control=True),
    Field("dry_run", parse_bool, False, "submission: print the plan (each run, audit and its estimated time) and "
          "exit.", flag_value=True, config=False, actions=("submission",), control=True),
    Field("smoke", parse_bool, False, "submission: short runs of the whole flow (64 queries, 662 where a p99 "
          "is judged; minimum durations of 1-100 ms), recorded as smoke runs in their metadata and never "
          "submittable: staged only into the plan's "
          "own smoke tree (build/smoke/...).", flag_value=True, config=False, actions=RUN + ("submission",),
          control=True),
    Field("staging_root", parse_str, None, "Where results/, measurements/, compliance/ and systems/ are staged "
          "(default: $MLPERF_STAGING_ROOT, else the repository root).", config=False,
          actions=("update_results", "truncate_results", "export_submission"), control=True),
    Field("stage_logs", parse_list, (), "update_results: the log folders to choose runs from (default build/logs).",
          config=False, actions=("update_results",), control=True),
    Field("endpoints_results", parse_list, (), "update_results: report folders of the MLCommons endpoints client "
          "(inference-endpoint benchmark offline|online --mode both --report-dir DIR), comma-separated; each is "
          "staged as one scenario's result where the official checker reads it (config.yaml, "
          "performance/result_summary.json, accuracy/accuracy_results.json), for the models the round allows (v6.1: "
          "llama3.1-8b, llama3.1-8b-edge). Its benchmark is the model the server served (make run_llm_server serves "
          "it under the benchmark's name), its scenario the run's type (offline: Offline, online: Server); "
          "Interactive=DIR, SingleStream=DIR (online at concurrency 1) or BENCHMARK/SCENARIO=DIR say otherwise. The "
          "system is this machine's (or --system_name's), named as --backend=openai runs name it: stage on the "
          "machine that served.", config=False, actions=("update_results",), control=True),
    Field("submission_dir", parse_str, None, "export_submission: where the tree is written (it replaces only "
          "<division>/<submitter> there); check_submission: the tree to check (default build/submission).",
          config=False, actions=("export_submission", "check_submission"), control=True),
    Field("tarball", parse_bool, True, "export_submission: also write build/mlperf_submission_<submitter>.tar.gz "
          "and its .sha1 (--tarball=false: the tree only).", config=False, actions=("export_submission",),
          control=True),
    Field("docker", parse_bool, False, "doctor: also check docker and the NVIDIA container runtime (for make "
          "prebuild).", flag_value=True, config=False, actions=("doctor",), control=True),
    Field("force_rebuild", parse_bool, False, "Build every engine this invocation uses again, even when the cache "
          "holds an intact one built from the same model and settings.", flag_value=True, config=False,
          actions=ENGINE_AND_RUN, control=True),
    Field("force_calibration", parse_bool, False, "calibrate: quantize again even when an intact calibrated model "
          "from the same model, recipe, calibration list and tool versions exists.", flag_value=True, config=False,
          actions=("calibrate",), control=True),
    Field("calibration_dir", parse_str, None, "calibrate: folder holding the calibration set's files (ResNet50: the "
          "ImageNet validation JPEGs the official list names; SDXL: the reference's calibration captions.tsv). "
          "Default: the benchmark's data folder.", config=False, actions=("calibrate",)),
    Field("find_probe_seconds", parse_float, 10.0, "find_performance: length of each probe run.", unit="s",
          config=False, actions=TUNE, control=True, minimum=0.1),
    Field("find_confirm_seconds", parse_float, 60.0, "find_performance: length of the Server confirmation run at "
          "the found QPS.", unit="s", config=False, actions=TUNE, control=True, minimum=0.1),
    Field("write_config", parse_bool, False, "find_performance: write the chosen values into this system's block of "
          "configs/<benchmark>/<scenario>/config.json (the rest of the file is kept as it is).", flag_value=True,
          config=False, actions=TUNE, control=True),
    Field("use_cached_responses", parse_bool, False, "TEST ONLY: cache responses per sample (makes TEST04 fail).",
          flag_value=True, config=False, actions=RUN, control=True),
    Field("plant_first_token", parse_bool, False, "TEST ONLY, LLMs: report a first token that differs from the "
          "output's first token (makes TEST06 fail).", flag_value=True, config=False, actions=RUN, control=True),
    Field("plant_output_limit", parse_int, 0, "TEST ONLY, LLMs: cut every answer at this many tokens, the truncation "
          "TEST09 (and TEST07's accuracy) exists to catch; 0: off.", config=False, actions=RUN, control=True, minimum=0),
    Field("plant_prediction_shift", parse_float, 0.0, "TEST ONLY, DLRM-v3: add this to every click probability a "
          "performance-mode run answers (clipped to [0, 1]), the drift TEST08 exists to catch; 0: off.",
          config=False, actions=RUN, control=True, minimum=-1.0, maximum=1.0),
    # --- workload (RunSettings) ---
    Field("round", parse_str, None, "MLPerf Inference round to file for (default: the one whose seeds the installed "
          "LoadGen carries). RetinaNet, GPT-J, DLRM-v2 and Mixtral need an older round.",
          choices=ROUND_VERSIONS, config=False),
    Field("accuracy_target", parse_str, None, "Accuracy variant for benchmarks with 99 / 99.9 (yolo: 95 / 99) targets "
          "(default: 99, or 99.9 with --config_ver=high_accuracy). The submission name follows.",
          choices=ACCURACY_TARGETS, config=False),
    Field("fast", parse_bool, False, "Trial run: min_duration 60000 ms and min_query_count 1. Never valid for submission.",
          aliases=("test_run",), flag_value=True, config=False, actions=RUN + ("info",)),
    Field("model_variant", parse_str, "reference", "reference: the real MLPerf model; tiny: seeded small model + synthetic data.",
          choices=VARIANTS, config=False),
    Field("backend", parse_str, None, "Inference backend. Default: tensorrt on NVIDIA GPUs, else onnxruntime; LLM "
          "benchmarks: tensorrt_llm, else vllm, else transformers on GPUs, transformers on CPUs.",
          choices=BACKENDS),
    Field("data_dir", parse_str, None, "Folder holding the dataset files to use instead of downloading them "
          "(e.g. a local copy of the official files).", config=False, actions=DATA + RUN),
    # --- engine and batching ---
    Field("gpu_batch_size", parse_batch_size, 1, "Batch size (or per-component mapping, e.g. clip1:8,unet:8,vae:2)."),
    Field("precision", parse_str, "fp32", "Engine precision (bf16: LLM backends; fp4: a checkpoint's own 4-bit "
          "weights, GPT-OSS-120B's MXFP4 experts, which vLLM / SGLang / TensorRT-LLM read from its quantization config).",
          choices=("fp32", "fp16", "bf16", "int8", "fp8", "fp4")),
    Field("calibration_method", parse_str, None, "int8/fp8 calibration: how activation ranges are chosen (default: "
          "the benchmark's recipe; ONNX Runtime's MinMax, Entropy, Percentile or Distribution calibrator).",
          choices=("minmax", "entropy", "percentile", "distribution"), actions=("calibrate", "info")),
    Field("gpu_copy_streams", parse_int, 1, "Accepted for NVIDIA-config compatibility; only 1 is supported: each "
          "TensorRT worker copies on its own compute stream, and copies overlap other workers' compute. Use "
          "gpu_inference_streams for more overlap.", minimum=1, maximum=1),
    Field("gpu_inference_streams", parse_int, 1, "Inference workers per device.", minimum=1),
    Field("workspace_size", parse_int, 4 << 30, "TensorRT builder workspace.", unit="bytes", minimum=0),
    Field("power_limit", parse_float, 0.0, "GPU power limit set through NVML for the run and restored after it "
          "(NVIDIA's MaxQ key; needs root; 0: leave it).", unit="W", minimum=0, actions=RUN + TUNE),
    Field("gpu_clock_lock", parse_int, 0, "Lock the GPU clock through NVML for the run, reset after it (needs root; "
          "0: leave it).", unit="MHz", minimum=0, actions=RUN + TUNE),
    Field("memory_clock_lock", parse_int, 0, "Lock the GPU memory clock through NVML for the run, reset after it "
          "(needs root; 0: leave it).", unit="MHz", minimum=0, actions=RUN + TUNE),
    Field("cpu_threads", parse_int, 0, "ONNX Runtime and torch intra-op threads per worker (0: all cores / workers; an LLM's "
          "CPU worker: 1 where MLPERF_SHARED_CPU=1 says other work shares the cores).", minimum=0),
    Field("cpu_pin_cores", parse_bool, False, "CPU systems: give each worker (gpu_inference_streams of them) its own "
          "slice of the cores and pin its thread and its ONNX Runtime pool there (N instances, no oversubscription).",
          flag_value=True),
    Field("cpu_spin_wait", parse_str, "auto", "ORT idle threads spin-wait (auto: only with one worker, and not where the "
          "environment sets MLPERF_SHARED_CPU=1: other work shares the cores, as in the test suite).",
          choices=("auto", "on", "off")),
    # --- where the workers run (code.common.harness.ray_executor) ---
    Field("executor", parse_str, "local", "Where the SUT's workers run. local: threads in the harness child. ray: one "
          "Ray actor per GPU on every node of a Ray cluster (ray_cpu_actors on CPU-only nodes), each with its own "
          "engine; LoadGen stays in the harness child on the head. LLM benchmarks keep their engine's own "
          "multi-node mode (llm_distributed_backend).", choices=("local", "ray")),
    Field("ray_address", parse_str, None, "executor=ray: the cluster to join, host:port of its head (as `ray start "
          "--head` prints), or 'auto' for the cluster started on this machine. Default: a private single-node "
          "cluster for the run."),
    Field("ray_cpu_actors", parse_int, 1, "executor=ray: actors per node without GPUs.", minimum=0),
    Field("ray_actor_cpus", parse_float, 1.0, "executor=ray: CPUs each CPU actor reserves (its engine's threads).",
          minimum=0.1),
    Field("ray_batches_in_flight", parse_int, 2, "executor=ray: batches sent to each actor before its answer comes "
          "back (the next one waits on the actor while it computes, hiding the round trip).", minimum=1),
    Field("ray_max_retries", parse_int, 3, "executor=ray: times one batch is retried on another actor after its "
          "actor or node died, before the run fails.", minimum=0),
    Field("ray_ship_engines", parse_bool, False, "executor=ray: send the engines to every node through Ray's object "
          "store (nodes without a shared build/ folder). Otherwise each node must see them under its own "
          "build/engines ($MLPERF_BUILD_DIR), and their sha256 is checked on every actor before the run.",
          flag_value=True),
    Field("server_batch_timeout_ms", parse_float, 2.0, "Server: the batcher sends a partial batch after its oldest "
          "sample has waited this long.", unit="ms", minimum=0),
    # --- LoadGen settings ---
    Field("offline_expected_qps", parse_float, 0.0, "Offline target QPS (sizes the query).", unit="samples/s", minimum=0),
    Field("server_target_qps", parse_float, 0.0, "Server target QPS.", unit="queries/s", minimum=0),
    Field("server_target_latency_ns", parse_int, 0, "Server latency bound override (0: mlperf.conf).", unit="ns",
          minimum=0),
    Field("single_stream_expected_latency_ns", parse_int, 0, "SingleStream expected latency.", unit="ns", minimum=0),
    Field("multi_stream_expected_latency_ns", parse_int, 0, "MultiStream expected latency per query.", unit="ns",
          minimum=0),
    Field("multi_stream_samples_per_query", parse_int, 8, "MultiStream samples per query.", minimum=1),
    Field("min_duration", parse_int, 0, "Override min_duration (0: mlperf.conf).", unit="ms", minimum=0),
    Field("min_query_count", parse_int, 0, "Override min_query_count (0: mlperf.conf).", minimum=0),
    Field("max_query_count", parse_int, 0, "Cap the query count (0: no cap). Makes a run invalid for submission.", minimum=0),
    Field("performance_sample_count", parse_int, 0, "Override performance_sample_count (0: mlperf.conf).", minimum=0),
    Field("watchdog_s", parse_float, 0.0, "Stop a run in which no sample completed and nothing progressed (LLMs: no "
          "first token, engine step or streamed chunk) for this long while samples were outstanding, and report "
          "the stall (0: the benchmark's default, 120 s; SDXL 600 s).", unit="s", minimum=0),
    Field("audit_server_qps_factor", parse_float, 0.92, "Server target QPS multiplier for audit runs.",
          actions=("run_audit_harness",), minimum=0),
)


class Registry:
    """All fields: the core ones plus those the benchmarks declare."""

    def __init__(self, fields: Iterable[Field]):
        self.by_name: dict[str, Field] = {}
        self.by_alias: dict[str, Field] = {}
        for f in fields:
            self.add(f)

    def add(self, f: Field) -> None:
        for n in (f.name, *f.aliases):
            if n in self.by_alias:
                raise RuntimeError(f"schema: field name {n!r} declared twice")
            self.by_alias[n] = f
        self.by_name[f.name] = f

    def get(self, name: str) -> Field | None:
        return self.by_alias.get(name)

    def __iter__(self):
        return iter(self.by_name.values())

    def names(self, *, cli: bool | None = None, config: bool | None = None) -> list[str]:
        out = []
        for f in self.by_name.values():
            if cli is not None and f.cli != cli:
                continue
            if config is not None and f.config != config:
                continue
            out.append(f.name)
        return out
