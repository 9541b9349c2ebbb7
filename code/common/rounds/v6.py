"""Rounds v6.0 and v6.1, transcribed from the official submission checker
(``tools/submission/submission_checker/constants.py``) of mlcommons/inference at commit
b66003e10e2db4b8c36a448b0545ec90fcc6e9e9 ("Require only one of server or interactive (#2654)",
2026-08-20). ``v5.py`` (v5.0, v5.1) is read from the same commit; it says which constant each field
comes from. ``tests/test_rounds_official.py`` compares both files with a checkout.

Only the harness's benchmarks are listed (e2e-rag, pointpainting are not). The scenario tuples hold the
required scenarios; the checker's *optional* ones ("one of Interactive or Server" for the datacenter
LLMs since v5.1, ``optional-scenarios-datacenter``) are ``RoundBenchmark.optional_scenarios``.
"""
from __future__ import annotations

from code.common.rounds.model import Round, seeds
from code.common.rounds.v5 import AUDIT_ACCURACY_LOG_RNG_SEED, MIN_DURATION_MS, MS, OFF, SRV, SS, TOKENS, V5_1, edit, entry, sdxl

CHECKER_COMMIT = "b66003e10e2db4b8c36a448b0545ec90fcc6e9e9"

# loadgen/mlperf.conf from f131a0d2 "Update seeds for inference v6.0" (LoadGen 6.0.5 .. 6.0.15)
SEEDS_V60 = seeds(2465351861681999779, 14276810075590677512, 3936089224930324775)
# loadgen/mlperf.conf from b0662794 "Add random seeds for v6.1" (LoadGen 6.0.16 on)
SEEDS_V61 = seeds(2085463073848966840, 2747215439041700203, 16159082839903944936)

_V51 = V5_1.benchmarks

# GPT-OSS-120B (v6.0 on): Offline required, one of Interactive or Server; 6,396 performance samples, a separate
# 4,395-sample accuracy set (accuracy-sample-count); exact_match >= 99% of 83.13, an upper limit on the mean output
# length (1.1 x 9999 tokens); audited by TEST07 (accuracy in performance mode) and TEST09 (output length).
GPT_OSS_120B = entry("gpt-oss-120b", "gpt_oss_120b", "gpt-oss-120b", dc=(OFF,), both=(OFF,),
                     optional_scenarios=("Interactive", SRV), size=6396, psc=6396, accuracy_sample_count=4395,
                     tests=("TEST07", "TEST09"), result_field=TOKENS, acc=("exact_match", 83.13 * 0.99),
                     up=("TOKENS_PER_SAMPLE", 1.1 * 9999),
                     # compliance/TEST07/gpt-oss-120b/audit.config: acc/acc_eval_compliance_gpqa.parquet, 990 samples;
                     # compliance/TEST09/gpt-oss-120b/audit.config: 1,278.2 tokens +/- 10% over the 6,396
                     test07_samples=990, test07_accuracy_threshold=60.698, test09_output_tokens=(1150.38, 1406.02))

# YOLOv11l (v6.0 on): yolo-95 / yolo-99 in the edge and datacenter,edge categories (SingleStream, MultiStream,
# Offline); COCO safe subset of 1,525 images, 64 performance samples; mAP >= 53.4 x 0.95 / x 0.99; TEST01
# (compliance/TEST01/yolo/audit.config: accuracy_log_sampling_target 64).
YOLO = {f"yolo-{v}": entry(f"yolo-{v}", "yolo", "yolo", v, edge=(SS, MS, OFF), both=(SS, MS, OFF), size=1525, psc=64,
                           tests=("TEST01",), t01=64, acc=("mAP", 53.4 * f)) for v, f in (("95", 0.95), ("99", 0.99))}

# Qwen3-VL-235B-A22B (v6.0 on): results in samples/s; F1_HIERARCHICAL >= 99% of 0.7903 over the 48,289-sample
# catalogue; no audits. End-to-end latency bounds (the checker's latency-constraint; use_token_latencies is off in
# mlperf.conf): Server 12 s, and in v6.1 Interactive 1.5 s over the 8,000-sample subset with a target of its own
# (99% of 0.7878). v6.0 requires Server and Offline; v6.1 Offline plus one of Interactive or Server.
QWEN3_VL_V60 = entry("qwen3-vl-235b-a22b", "qwen3_vl", "qwen3-vl-235b-a22b", dc=(SRV, OFF), both=(OFF,),
                     optional_scenarios=("Interactive", SRV), size=48289, psc=48289,
                     acc=("F1_HIERARCHICAL", 0.7903 * 0.99), latency_constraint_ns={SRV: 12_000_000_000})
QWEN3_VL_V61 = entry("qwen3-vl-235b-a22b", "qwen3_vl", "qwen3-vl-235b-a22b", dc=(OFF,), both=(OFF,),
                     optional_scenarios=("Interactive", SRV), size=48289, psc=48289, accuracy_sample_count=48289,
                     acc=("F1_HIERARCHICAL", 0.7903 * 0.99),
                     latency_constraint_ns={SRV: 12_000_000_000, "Interactive": 1_500_000_000},
                     loadgen_conf={"Interactive": {"sample_concatenate_permutation": 1}},
                     scenario_overrides={"Interactive": {"accuracy_min": {"F1_HIERARCHICAL": 0.7878 * 0.99},
                                                         "accuracy_sample_count": 8000}})

# DLRM-v3 (v6.0 on): the HSTU generative recommender on the synthetic streaming set; datacenter Server and Offline
# (and datacenter,edge Offline + Server); 349,823 samples (dataset-size and performance-sample-count); DLRM_NE,
# DLRM_ACC and DLRM_AUC (the GAUC) >= 99.9% of 0.86687 / 0.69651 / 0.78663; audited by TEST08 (models_TEST08:
# accuracy in performance mode, compliance/TEST08/dlrm-v3). The Server bound is mlperf.conf's 80 ms
# (dlrm-v3.Server.target_latency); the checker's latency-constraint of 60 s is looser and not entered here: the
# runner writes latency_constraint_ns into user.conf as the target, which would loosen LoadGen's 80 ms.
DLRM_V3 = entry("dlrm-v3", "dlrm_v3", "dlrm-v3", dc=(SRV, OFF), both=(OFF, SRV), size=349823, psc=349823,
                tests=("TEST08",), acc=("DLRM_NE", 0.86687 * 0.999, "DLRM_ACC", 0.69651 * 0.999,
                                        "DLRM_AUC", 0.78663 * 0.999))


def wan(videos: tuple[str, ...]):
    """Wan 2.2 T2V-A14B (v6.0 on): datacenter Offline and SingleStream (the checker reports SingleStream in
    seconds); 248 VBench prompts, 50 performance samples; vbench_score >= 99% of 70.48; TEST04
    (compliance/TEST04/audit.config: min_query_count 20 in both; compliance/TEST01/wan-2.2-t2v-a14b/audit.config exists,
    sampling target 50, though models_TEST01 does not list it); the accuracy run keeps videos/<id>.mp4 of
    REQUIRED_ACC_BENCHMARK's ids."""
    return entry("wan-2.2-t2v-a14b", "wan", "wan-2.2-t2v-a14b", dc=(OFF, SS), size=248, psc=50, tests=("TEST04",),
                 t01=50, test04_extra={OFF: {"min_query_count": 20}, SS: {"min_query_count": 20}},
                 acc=("vbench_score", 70.48 * 0.99), extra_accuracy_files={"videos": videos})


# ---------------------------------------------------------------------------------------------- v6.0
# DLRMv2 leaves (dlrm-v3 replaces it); RetinaNet is only in the datacenter,edge category; SDXL leaves
# the datacenter category. Compliance tests and targets are v5.1's.
_V60 = {
    "resnet": _V51["resnet"],
    **edit(_V51, "retinanet", edge_scenarios=(), datacenter_scenarios=()),
    **{n: _V51[n] for n in ("bert-99", "bert-99.9", "3d-unet-99", "3d-unet-99.9", "llama3.1-8b",
                            "llama3.1-8b-edge", "llama2-70b-99", "llama2-70b-99.9")},
    "stable-diffusion-xl": sdxl(("1311", "2476", "3644", "2188", "4114", "52", "388", "1195", "3427", "2289")),
    "mixtral-8x7b": _V51["mixtral-8x7b"],
    "llama3.1-405b": _V51["llama3.1-405b"],
    **edit(_V51, "deepseek-r1", datacenter_scenarios=(OFF,), both_scenarios=(OFF,),
           optional_scenarios=("Interactive", SRV)),
    "gpt-oss-120b": GPT_OSS_120B,
    "whisper": _V51["whisper"],
    "rgat": _V51["rgat"],
    "qwen3-vl-235b-a22b": QWEN3_VL_V60,
    **YOLO,
    "dlrm-v3": DLRM_V3,
    "wan-2.2-t2v-a14b": wan(("130", "106", "84", "59", "12", "31", "86", "122", "233", "96")),
}

V6_0 = Round(version="v6.0", loadgen_versions=("6.0.5", "6.0.15"), seeds=SEEDS_V60,
             audit_accuracy_log_rng_seed=AUDIT_ACCURACY_LOG_RNG_SEED, min_duration_ms=MIN_DURATION_MS,
             benchmarks=_V60, src_dir="src", results_hold_compliance=True)

# ---------------------------------------------------------------------------------------------- v6.1
# RetinaNet, Mixtral, Llama3.1-405B and llama2-70b-99 leave (llama2-70b-99.9 stays, without a -99 twin).
V6_1 = Round(
    version="v6.1",
    loadgen_versions=("6.0.16", ""),
    seeds=SEEDS_V61,
    audit_accuracy_log_rng_seed=AUDIT_ACCURACY_LOG_RNG_SEED,
    min_duration_ms=MIN_DURATION_MS,
    benchmarks={
        # ResNet50 ("resnet" since v5.0) is an edge-only benchmark since v5.1, as in v6.0.
        "resnet": _V60["resnet"],
        **{n: _V60[n] for n in ("bert-99", "bert-99.9", "3d-unet-99", "3d-unet-99.9", "llama3.1-8b",
                                "llama3.1-8b-edge", "llama2-70b-99.9", "deepseek-r1", "gpt-oss-120b", "whisper", "rgat")},
        # SDXL is edge (SingleStream, Offline) as in v6.0; its accuracy run saves the images of
        # text_to_image/tools/sample_ids.txt of v6.1 (4b790a61 "Add constants for v6.1"); the checker's
        # REQUIRED_ACC_BENCHMARK has no v6.1 list yet.
        **{n: _V60[n] for n in ("yolo-95", "yolo-99")},
        "stable-diffusion-xl": sdxl(("4475", "3627", "1046", "4937", "3867", "1671", "3789", "1206", "4111", "3093")),
        "qwen3-vl-235b-a22b": QWEN3_VL_V61,
        "dlrm-v3": DLRM_V3,
        "wan-2.2-t2v-a14b": wan(("130", "106", "84", "59", "12", "123", "43", "22", "238", "32")),
    },
    # ENDPOINTS_ALLOWED_MODELS, the harness's benchmarks of it (also wan-2.2-t2v-a14b, qwen3-vl-235b-a22b,
    # qwen3.6-27b); RESULT_FIELD_ENDPOINTS reads such results for v6.1 only
    endpoints_models=frozenset({"llama3.1-8b", "llama3.1-8b-edge", "deepseek-r1", "gpt-oss-120b", "qwen3-vl-235b-a22b",
                                "wan-2.2-t2v-a14b"}),
)
