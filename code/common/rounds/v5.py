"""Rounds v5.0 and v5.1, transcribed from the official submission checker
(``tools/submission/submission_checker/constants.py`` of mlcommons/inference at the commit named in
``v6.py``), plus the small helpers ``v6.py`` builds its rounds with.

Sources per field: scenarios, dataset size, performance sample count, accuracy targets / upper limits /
deltas, compliance tests (``models_TEST0x``) and result-field overrides from ``MODEL_CONFIG`` /
``RESULT_FIELD_BENCHMARK_OVERWRITE`` / ``REQUIRED_ACC_BENCHMARK``; TEST01 sampling targets and the
TEST04 extras from ``compliance/TEST0x/.../audit.config``; seeds from ``loadgen/mlperf.conf`` at the
round's release (the checker's ``seeds`` agree); ``src_dir`` / ``results_hold_compliance`` from the
checker's ``SRC_PATH`` / ``COMPLIANCE_PATH``.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from code.common.rounds.model import Round, RoundBenchmark, seeds

SS, MS, OFF, SRV = "SingleStream", "MultiStream", "Offline", "Server"

MIN_DURATION_MS = 600_000                        # checker TEST_DURATION_MS
AUDIT_ACCURACY_LOG_RNG_SEED = 720381539243781796  # compliance/TEST01/*/audit.config, same in every round here

# loadgen/mlperf.conf at v5.0 (tag v5.0 / v5.0.1, LoadGen 5.0.x)
SEEDS_V50 = seeds(6023615788873153749, 15036839855038426416, 9933818062894767841)
# loadgen/mlperf.conf at v5.1 (tag v5.1 / v5.1.1, LoadGen 5.0.22 .. 6.0.4)
SEEDS_V51 = seeds(1780908523862526354, 14771362308971278857, 18209322760996052031)

# RESULT_FIELD_BENCHMARK_OVERWRITE: LLMs report tokens, not samples.
TOKENS = {OFF: "result_tokens_per_second", SRV: "result_completed_tokens_per_second"}
TOKENS_EDGE = {OFF: "result_tokens_per_second", SS: "result_90.00_percentile_latency_ns"}
# compliance/TEST04/audit.config: "stable-diffusion-xl.Offline.min_query_count = 500"
SDXL_TEST04 = {OFF: {"min_query_count": 500}}
SDXL_DELTA = {"CLIP_SCORE": 1.0, "FID_SCORE": 2.0}   # accuracy-delta-perc


def entry(name: str, benchmark: str, loadgen_model: str, variant: str = "", *, edge=(), dc=(), both=(),
          size: int, psc: int, tests=(), t01: int = 0, acc: tuple = (), up: tuple = (), **kw) -> RoundBenchmark:
    """One entry. ``acc`` / ``up`` are the checker's flat ``(metric, value, metric, value, ...)`` tuples of
    ``accuracy-target`` / ``accuracy-upper-limit``; ``t01`` is TEST01's accuracy_log_sampling_target."""
    lo = dict(zip(acc[::2], acc[1::2]))
    return RoundBenchmark(
        name=name, benchmark=benchmark, loadgen_model=loadgen_model, accuracy_variant=variant,
        edge_scenarios=tuple(edge), datacenter_scenarios=tuple(dc), both_scenarios=tuple(both),
        dataset_size=size, performance_sample_count=psc, compliance_tests=tuple(tests),
        test01_sampling_target=t01, accuracy_metrics=tuple(lo), accuracy_min=lo,
        accuracy_max=dict(zip(up[::2], up[1::2])), **kw)


def split(name: str, benchmark: str, loadgen_model: str, acc: Callable[[float], tuple],
          **kw) -> dict[str, RoundBenchmark]:
    """The ``<name>-99`` and ``<name>-99.9`` entries; ``acc(f)`` is the checker's target tuple at f = 0.99 / 0.999."""
    return {f"{name}-{v}": entry(f"{name}-{v}", benchmark, loadgen_model, v, acc=acc(f), **kw)
            for v, f in (("99", 0.99), ("99.9", 0.999))}


def edit(benchmarks: dict[str, RoundBenchmark], *names: str, **changes) -> dict[str, RoundBenchmark]:
    """Copies of ``benchmarks[names]`` with ``changes`` applied (``dataclasses.replace``)."""
    return {n: dataclasses.replace(benchmarks[n], **changes) for n in names}


def llama2_70b(name: str = "llama2-70b", dc=(OFF,), both=(OFF,), optional=("Interactive", SRV)) -> dict[str, RoundBenchmark]:
    """``name`` is also the LoadGen model: "llama2-70b" or v5.0's "llama2-70b-interactive"."""
    return split(name, "llama2_70b", name, dc=dc, both=both, size=24576, psc=24576, optional_scenarios=optional,
                 tests=("TEST06",), result_field=TOKENS, up=("TOKENS_PER_SAMPLE", 294.45 * 1.1),
                 acc=lambda f: ("ROUGE1", 44.4312 * f, "ROUGE2", 22.0352 * f, "ROUGEL", 28.6162 * f,
                                "TOKENS_PER_SAMPLE", 294.45 * 0.9))


def sdxl(images: tuple[str, ...], dc=()) -> RoundBenchmark:
    return entry("stable-diffusion-xl", "sdxl", "stable-diffusion-xl", edge=(SS, OFF), dc=dc, both=(SS, OFF, SRV),
                 size=5000, psc=5000, tests=("TEST01", "TEST04"), t01=128, test04_extra=SDXL_TEST04,
                 accuracy_delta_perc=SDXL_DELTA,
                 acc=("CLIP_SCORE", 31.68631873, "FID_SCORE", 23.01085758),
                 up=("CLIP_SCORE", 31.81331801, "FID_SCORE", 23.95007626),
                 extra_accuracy_files={"images": images})


# ---------------------------------------------------------------------------------------------- v5.0
# R-GAT (v5.0 on): Offline in the datacenter (and datacenter,edge) category; IGBH full, 788,379 validation seeds
# (dataset size = performance sample count); acc >= 0.7286 x 0.99 (a fraction); TEST01
# (compliance/TEST01/rgat/audit.config: accuracy_log_sampling_target 4096).
RGAT = entry("rgat", "rgat", "rgat", dc=(OFF,), both=(OFF,), size=788379, psc=788379, tests=("TEST01",), t01=4096,
             acc=("acc", 0.7286 * 0.99))

_V50 = {
    "rgat": RGAT,
    "resnet": entry("resnet", "resnet50", "resnet50", dc=(SRV, OFF), edge=(SS, MS, OFF), both=(SS, OFF, MS, SRV),
                    size=50_000, psc=1024, tests=("TEST01", "TEST04"), t01=4096, acc=("acc", 76.46 * 0.99)),
    "retinanet": entry("retinanet", "retinanet", "retinanet", dc=(SRV, OFF), edge=(SS, MS, OFF),
                       both=(SS, OFF, MS, SRV), size=24781, psc=64, tests=("TEST01",), t01=256,
                       acc=("mAP", 37.55 * 0.99)),
    **split("bert", "bert", "bert", edge=(SS, OFF), both=(SS, OFF), size=10833, psc=10833,
            tests=("TEST01",), t01=4096, acc=lambda f: ("F1", 90.874 * f)),
    **split("dlrm-v2", "dlrm_v2", "dlrm-v2", dc=(SRV, OFF), both=(OFF, SRV), size=330067, psc=204800,
            tests=("TEST01",), t01=4096, acc=lambda f: ("AUC", 80.31 * f)),
    **split("3d-unet", "unet3d", "3d-unet", dc=(OFF,), edge=(SS, OFF), both=(SS, OFF), size=43, psc=43,
            tests=("TEST01",), t01=64, acc=lambda f: ("DICE", 0.86170 * f)),
    # GPT-J is audited by TEST06 only; compliance/TEST01/gpt-j/audit.config still says 4096.
    **split("gptj", "gptj", "gptj", dc=(SRV, OFF), edge=(SS, OFF), both=(SS, OFF, SRV), size=13368, psc=13368,
            tests=("TEST06",), t01=4096,
            result_field={OFF: "result_inferred_tokens_per_second",
                          SRV: "result_inferred_completed_tokens_per_second"},
            acc=lambda f: ("ROUGE1", 42.9865 * f, "ROUGE2", 20.1235 * f, "ROUGEL", 29.9881 * f,
                           "GEN_LEN", 4016878 * 0.9)),
    **llama2_70b(dc=(SRV, OFF), both=(SRV, OFF), optional=()),
    # v5.0 files the interactive latency bounds as separate names whose "Server" is interactive.
    **llama2_70b("llama2-70b-interactive", dc=(SRV, OFF), both=(SRV, OFF), optional=()),
    # the checker's v5.0 image list (the same ten as its v4.0 one)
    "stable-diffusion-xl": sdxl(("4459", "4015", "2705", "1682", "4048", "4683", "3757", "1578", "3319", "95"),
                                dc=(SRV, OFF)),
    "mixtral-8x7b": entry("mixtral-8x7b", "mixtral_8x7b", "mixtral-8x7b", dc=(SRV, OFF), both=(SRV, OFF),
                          size=15000, psc=15000, tests=("TEST06",), result_field=TOKENS,
                          acc=("ROUGE1", 45.5989 * 0.99, "ROUGE2", 23.3526 * 0.99, "ROUGEL", 30.4608 * 0.99,
                               "TOKENS_PER_SAMPLE", 144.84 * 0.9, "gsm8k_accuracy", 73.66 * 0.99,
                               "mbxp_accuracy", 60.16 * 0.99),
                          up=("TOKENS_PER_SAMPLE", 145.9 * 1.1)),
}

# Llama3.1-405B (v5.0 to v6.0): v5.0 requires Server + Offline and has no audit; v5.1 on, Offline plus one of
# Interactive or Server, audited by TEST06.
_405B_ACC = dict(size=8313, psc=8313, result_field=TOKENS,
                 acc=("ROUGEL", 21.6666 * 0.99, "exact_match", 90.1335 * 0.99, "TOKENS_PER_SAMPLE", 684.68 * 0.9),
                 up=("TOKENS_PER_SAMPLE", 684.68 * 1.1))
_V50["llama3.1-405b"] = entry("llama3.1-405b", "llama3_1_405b", "llama3_1-405b", dc=(SRV, OFF), both=(SRV, OFF),
                              **_405B_ACC)
LLAMA31_405B = entry("llama3.1-405b", "llama3_1_405b", "llama3_1-405b", dc=(OFF,), both=(OFF,),
                     optional_scenarios=("Interactive", SRV), tests=("TEST06",), **_405B_ACC)

V5_0 = Round(version="v5.0", loadgen_versions=("5.0.0", "5.0.21"), seeds=SEEDS_V50,
             audit_accuracy_log_rng_seed=AUDIT_ACCURACY_LOG_RNG_SEED, min_duration_ms=MIN_DURATION_MS,
             benchmarks=_V50, src_dir="code", results_hold_compliance=False)

# ---------------------------------------------------------------------------------------------- v5.1
# GPT-J and the llama2-70b-interactive names are gone (Interactive is an optional scenario of
# llama2-70b-99/-99.9 now); ResNet50 leaves the datacenter category; llama3.1-8b (+ edge) arrive.
LLAMA31_8B = {
    "llama3.1-8b": entry("llama3.1-8b", "llama3_1_8b", "llama3_1-8b", dc=(OFF,), both=(OFF,), size=13368,
                         optional_scenarios=("Interactive", SRV),
                         psc=13368, tests=("TEST06",), result_field=TOKENS,
                         acc=("ROUGE1", 38.7792 * 0.99, "ROUGE2", 15.9075 * 0.99, "ROUGEL", 24.4957 * 0.99,
                              "ROUGELSUM", 35.793 * 0.99, "GEN_LEN", 8167644 * 0.9),
                         up=("GEN_LEN", 8167644 * 1.1)),
    "llama3.1-8b-edge": entry("llama3.1-8b-edge", "llama3_1_8b", "llama3_1-8b-edge", edge=(SS, OFF),
                              both=(SS, OFF), size=5000, psc=5000, result_field=TOKENS_EDGE,
                              acc=("ROUGE1", 39.06 * 0.99, "ROUGE2", 16.1147 * 0.99, "ROUGEL", 24.6375 * 0.99,
                                   "ROUGELSUM", 36.124 * 0.99, "GEN_LEN", 3051113 * 0.9),
                              up=("GEN_LEN", 3051113 * 1.1)),
}

# DeepSeek-R1 (v5.1 on): required Server + Offline in the datacenter (plus SingleStream in datacenter,edge); from
# v6.0 Offline is required and one of Interactive or Server optional (v6.py edits it).
DEEPSEEK_R1 = entry("deepseek-r1", "deepseek_r1", "deepseek-r1", dc=(SRV, OFF), both=(SS, SRV, OFF), size=4388,
                    psc=4388, tests=("TEST06",), result_field=TOKENS,
                    acc=("exact_match", 0.99 * 81.3582, "TOKENS_PER_SAMPLE", 0.9 * 3886.2274),
                    up=("TOKENS_PER_SAMPLE", 1.1 * 3886.2274))

# Whisper (v5.1 on): Offline in every category; LibriSpeech dev-clean + dev-other repacked, 1,633 samples; accuracy
# (1 - WER) x 100 >= 99% of 97.9329; results in tokens/s; TEST01 (compliance/TEST01/whisper/audit.config: 4096).
WHISPER = entry("whisper", "whisper", "whisper", edge=(OFF,), dc=(OFF,), both=(OFF,), size=1633, psc=1633,
                tests=("TEST01",), t01=4096, result_field={OFF: "result_tokens_per_second"},
                acc=("ACCURACY", (100.0 - 2.0671) * 0.99))

_V51 = {
    **edit(_V50, "resnet", datacenter_scenarios=()),
    "deepseek-r1": DEEPSEEK_R1,
    "whisper": WHISPER,
    "rgat": RGAT,
    "llama3.1-405b": LLAMA31_405B,
    **{n: _V50[n] for n in ("retinanet", "bert-99", "bert-99.9", "dlrm-v2-99", "dlrm-v2-99.9",
                            "3d-unet-99", "3d-unet-99.9")},
    **LLAMA31_8B,
    **llama2_70b(),
    "stable-diffusion-xl": sdxl(("2747", "2235", "2165", "1515", "1538", "1367", "2419", "4629", "3657", "4532"),
                                dc=(SRV, OFF)),
    "mixtral-8x7b": _V50["mixtral-8x7b"],
}

V5_1 = Round(version="v5.1", loadgen_versions=("5.0.22", "6.0.4"), seeds=SEEDS_V51,
             audit_accuracy_log_rng_seed=AUDIT_ACCURACY_LOG_RNG_SEED, min_duration_ms=MIN_DURATION_MS,
             benchmarks=_V51, src_dir="code", results_hold_compliance=False)
