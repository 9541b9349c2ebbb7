"""The contract every ``code/<benchmark>/`` package fulfils.

A benchmark package is discovered, not registered by hand: its ``__init__.py`` defines
``SPEC = BenchmarkSpec(...)`` and imports nothing heavy. ``SPEC.impl`` names the class that does
the work as ``"module:attr"``; it is imported only when an action needs it.
"""
from __future__ import annotations

import abc
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from code.common.backends import EngineSpec
    from code.common.calibration import CalibrationSet, Recipe
    from code.common.fields import Field
    from code.common.llm.memory import LLMShape
    from code.common.settings import RunSettings


@dataclasses.dataclass(frozen=True)
class BenchmarkSpec:
    name: str                      # importable package name: "resnet50", "sdxl"
    mlperf_name: str               # MLPerf name used in submissions: "resnet50", "stable-diffusion-xl"
    loadgen_model: str             # model name in LoadGen's compiled-in mlperf.conf
    aliases: tuple[str, ...]       # other spellings accepted by --benchmarks
    scenarios: tuple[str, ...]     # scenarios this harness supports
    impl: str                      # "code.<pkg>.harness:Class", imported lazily
    fields: tuple["Field", ...] = ()   # benchmark-specific schema fields (flags and config keys)
    precisions: tuple[str, ...] = ("fp32",)
    starting_weights: str = ""     # measurements JSON: what the reference implementation downloads
    input_data_types: Mapping[str, str] = dataclasses.field(default_factory=dict)  # precision -> input type
    watchdog_s: float = 120.0      # default stall limit (no sample completed, no progress this long): scaled per benchmark
    generates_tokens: bool = False # an LLM: the SUT streams tokens (code.common.llm), results are tokens/s
    scratch_gb: float = 50.0       # rough GB the reference variant's models and data take in the scratch folder (doctor)
    backends: tuple[str, ...] = () # backends that run it, in order of preference on a GPU ("" : the engine backends)
    llm_shape: LLMShape | None = None  # an LLM's real model and dataset shape: sizes weights + KV cache (llm.memory)
    # Accuracy targets, submission names and audits are the round table's (code.common.rounds),
    # keyed by this package name.


def make_fix(benchmark: str, action: str, variant: str = "reference") -> str:
    """The make command that produces what ``action`` produces, for this benchmark and model variant
    (every fix line for missing data or models names the variant, or it would fix the wrong files)."""
    return f"make {action} BENCHMARKS={benchmark}" + (" MODEL_VARIANT=tiny" if variant == "tiny" else "")


class QSL(abc.ABC):
    """Query sample library. ``load``/``unload`` are called by LoadGen on its own thread."""

    total_count: int
    performance_count: int

    @abc.abstractmethod
    def load(self, indices: Sequence[int]) -> None: ...

    @abc.abstractmethod
    def unload(self, indices: Sequence[int]) -> None: ...


class Processor(abc.ABC):
    """Runs batches of samples on one device worker.

    ``process(indices)`` receives QSL indices (len <= batch size) and returns one C-contiguous numpy
    array per index; the SUT hands their memory to LoadGen and keeps the arrays alive until
    ``QuerySamplesComplete`` returns. One Processor instance is used by one worker thread only.
    """

    batch_size: int = 1
    cores: tuple[int, ...] | None = None   # CPU cores this worker's thread is pinned to (Benchmark.worker_specs)

    @abc.abstractmethod
    def process(self, indices: Sequence[int]) -> list["np.ndarray"]: ...

    def warmup(self) -> None:  # optional
        return None

    def thread_init(self) -> None:
        """Called once on the worker thread that will use this Processor, before its first batch: pins
        that thread to ``cores`` when set (Linux: pid 0 is the calling thread; ORT's pool threads are
        pinned by the session)."""
        if self.cores:
            import os

            os.sched_setaffinity(0, self.cores)

    def close(self) -> None:
        return None


class Benchmark(abc.ABC):
    """One benchmark's actions. Constructed with the resolved, frozen RunSettings."""

    spec: BenchmarkSpec
    # the LoadGen mode of the run this object serves (the harness child sets it before make_qsl): a benchmark whose
    # accuracy and performance sets differ (GPT-OSS-120B) picks its QSL and generation limits by it
    test_mode: str = "PerformanceOnly"
    # the compliance test the run serves (None: none); TEST07 runs over a set of its own (GPT-OSS-120B's)
    audit_test: str | None = None
    # the run's RunControl (the harness child sets it before make_processors): its TEST ONLY plants, where a
    # benchmark's own Processor applies one (DLRM-v3's plant_prediction_shift)
    control: Any = None

    def __init__(self, settings: "RunSettings"):
        self.settings = settings

    def audit_overrides(self, test: str) -> dict[str, float]:
        """audit.config values of ``test`` that differ from the official file for this variant's data (a tiny
        set: its sample count, thresholds measured on its own model); an audit with any is not the official one."""
        return {}

    def audit_score(self, accuracy_log: str) -> tuple[dict[str, Any], str]:
        """TEST07: (metrics, printed text) of a performance-mode log over the audit's own set."""
        from code.common.errors import HarnessError

        raise HarnessError(f"{self.spec.name} has no TEST07 scorer", "TEST07 is gpt-oss-120b's audit")

    def official_accuracy_command(self, root: Path, test: str) -> str | None:
        """TEST07: the reference's accuracy script as run_verification.py runs it (``{accuracy_log}`` for the log)."""
        return None

    @property
    def tiny(self) -> bool:
        return self.settings.model_variant == "tiny"

    def fix(self, action: str) -> str:
        """``make <action> BENCHMARKS=<this> [MODEL_VARIANT=tiny]``: see make_fix."""
        return make_fix(self.spec.name, action, self.settings.model_variant)

    @property
    def model_dir(self) -> Path:
        """Where ``download_model`` puts this variant's model files."""
        from code.common import paths

        return paths.models_dir(self.spec.name, self.settings.model_variant)

    def model_file(self, name: str) -> Path:
        """A file ``download_model`` writes, or the one-line error naming it and the command that makes it."""
        from code.common.errors import MissingDataError

        p = self.model_dir / name
        if not p.exists():
            raise MissingDataError(f"model not found: {p}", self.fix("download_model"))
        return p

    def engine_spec_for(self, name: str, batch_size: int, input_shapes: Mapping[str, tuple[int, ...]],
                        device_id: int = 0, **fields: Any) -> "EngineSpec":
        """An engine spec with this run's precision, workspace, CPU threads and spin policy (what every engine of
        every benchmark shares); ``fields`` sets the rest or overrides (``precision`` per component)."""
        from code.common.backends import EngineSpec
        from code.common.backends.base import cpu_spin

        s = self.settings
        base = {"precision": s.precision, "workspace_bytes": s.workspace_size,
                "intra_op_threads": self.intra_op_threads(),
                "allow_spinning": cpu_spin(s.cpu_spin_wait, len(self.workers()))}
        return EngineSpec(name=name, batch_size=batch_size, input_shapes=input_shapes, device_id=device_id,
                          **{**base, **fields})

    # --- data and model -----------------------------------------------------------------
    @abc.abstractmethod
    def download_model(self) -> None: ...

    @abc.abstractmethod
    def download_data(self) -> None: ...

    @abc.abstractmethod
    def preprocess_data(self) -> None: ...

    @abc.abstractmethod
    def generate_engines(self) -> dict[str, str]:
        """Build (or reuse) the engines for settings; return component -> engine path.

        Called once per run, in the parent; the child receives the paths (``make_processors``)."""

    # --- quantization (make calibrate; code.common.calibration) ---------------------------
    def calibration_recipes(self, precision: str) -> dict[str, "Recipe"]:
        """Component -> how its int8/fp8 engine is quantized. Empty: no recipe yet, so this benchmark's
        int8/fp8 engines cannot be built (``make calibrate`` says so)."""
        return {}

    def calibration_set(self) -> "CalibrationSet":
        """The official calibration list (the tiny variant: a fixed slice of its own data)."""
        raise NotImplementedError

    def calibration_model(self, component: str) -> Path:
        """The float ONNX model the component is quantized from."""
        raise NotImplementedError

    def calibration_feeds(self, component: str, cset: "CalibrationSet") -> Iterable[dict]:
        """The component's inputs (input name -> array, one dict per step) over the calibration set."""
        raise NotImplementedError

    # --- run ----------------------------------------------------------------------------
    @abc.abstractmethod
    def make_qsl(self) -> QSL: ...

    @abc.abstractmethod
    def make_processors(self, qsl: QSL, engines: Mapping[str, str]) -> list[Processor]:
        """One Processor per entry of ``workers()``, loading the engines ``generate_engines`` returned."""

    def workers(self) -> list[int]:
        """Device id per worker. Scenarios that dispatch inline run one worker (device 0); the others
        run ``gpu_inference_streams`` workers per GPU, assigned round-robin over the GPUs (0, 1, ...,
        N-1, 0, 1, ...), or ``gpu_inference_streams`` CPU workers (device 0) on a CPU system."""
        from code.common import scenarios

        s = self.settings
        if scenarios.dispatch_for(s.scenario, self.spec) == "inline":
            return [0]
        gpus = s.system.gpu_count if s.system.accelerator == "gpu" else 1
        return [d for _ in range(max(1, s.gpu_inference_streams)) for d in range(max(1, gpus))]

    def cpu_slices(self) -> list[tuple[int, ...]] | None:
        """``cpu_pin_cores`` on a CPU system: the cores of each worker (one slice of this process's
        cores per worker, in order); None when not pinning."""
        import os

        s = self.settings
        if not s.cpu_pin_cores or s.system.accelerator == "gpu":
            return None
        cores = sorted(os.sched_getaffinity(0))
        n = len(self.workers())
        per = max(1, len(cores) // n)
        return [tuple(cores[i * per:(i + 1) * per]) or (cores[i % len(cores)],) for i in range(n)]

    def intra_op_threads(self) -> int:
        """CPU threads per engine: ``cpu_threads``, else this process's cores shared out over the workers."""
        import os

        return self.settings.cpu_threads or max(1, len(os.sched_getaffinity(0)) // len(self.workers()))

    def worker_specs(self) -> list[tuple[Any, tuple[int, ...] | None]]:
        """(engine spec, pinned cores or None) per worker: ``engine_spec(device)`` of each entry of
        ``workers()``, with the worker's ``cpu_slices()`` slice as a load-time option (``extra["cpu_cores"]``:
        the engine file and its build key stay the same)."""
        slices = self.cpu_slices() or [None] * len(self.workers())
        out = []
        for dev, cores in zip(self.workers(), slices):
            spec = self.engine_spec(dev)
            if cores:
                spec = dataclasses.replace(spec, extra={**spec.extra, "cpu_cores": cores})
            out.append((spec, cores))
        return out

    def offline_order_key(self, qsl: QSL):
        """Offline: a function QSL index -> sort key by which the SUT orders the one big query before
        cutting it into batches (None: LoadGen's order). BERT sorts by sequence length, so each batch
        holds features of one length bucket (NVIDIA's seqlen-aware batching over the whole query)."""
        return None

    def batch_timeout_s(self) -> float:
        """Server batcher: a partial batch is sent once its oldest sample has waited this long."""
        return self.settings.server_batch_timeout_ms / 1000.0

    @abc.abstractmethod
    def accuracy(self, accuracy_log: str, out_dir: str) -> dict[str, Any]:
        """Score mlperf_log_accuracy.json; write accuracy.txt into out_dir.

        Returns {"metrics": {...}, "passed": bool|None, "text": "..."}.
        """
