"""Tiny benchmarks through staging, truncation, export and the official submission checker:
BERT and Llama3.1-8B in v6.1's layout, Mixtral-8x7B (its last round) in v6.0's, 3D-UNet and DLRM-v2 (its last round) in v5.1's (compliance/ and measurements/
beside results/, code/; a datacenter-only and an edge benchmark together: system_type datacenter,edge).

The tiny variant runs every scenario v6.1 requires (SingleStream, Offline) in both modes plus TEST01,
through the real CLI; the tree is staged, truncated,
exported and checked (about three minutes here). Only what a short tiny CPU run cannot avoid may be reported: run length and
sample counts (a tiny run is short and covers a few hundred samples of 43), and the system
description fields a person fills in. The module runs where the official checker can (MLPERF_INFERENCE_DIR names a checkout of mlcommons/inference).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.conftest import NO_OFFICIAL, metadata_under, offline_samples, official_root, run_main, server_rate

ROUND = "v6.1"          # this module's tree; test_submission_official_v60/_v51 run the same tests on theirs
pytestmark = pytest.mark.skipif(not os.environ.get("MLPERF_INFERENCE_DIR"),
                                reason=f"{NO_OFFICIAL} (the official checker runs from that checkout)")

# RetinaNet is not here: it needs v6.0's four scenarios, and its tiny Server run at 6-10 QPS was INVALID
# (p99 102-119 ms over the 100 ms bound) on this shared CPU; export writes only the v6 layouts
# 3D-UNet runs in v5.1's tree only (v6.1's layout and its edge system are BERT's)
RUNS = {"v6.1": {"bert": "SingleStream,Offline", "llama3.1-8b": "Offline,Server"},
        "v6.0": {"mixtral-8x7b": "Offline,Server"},
        "v5.1": {"3d-unet": "SingleStream,Offline", "dlrm-v2": "Offline,Server"}}
# Server at a rate well inside each bound on a shared 2-core CPU (tiny DLRM-v2: ~250 queries/s raw, 60 ms; its
# TEST01 run at 50 QPS beside a second worker fell short of early stopping, too many queries over 60 ms;
# the tiny LLMs: under a third of their Offline samples/s, 54-72 beside a second test worker; at 10 QPS their
# TTFT p99 was 38-67 ms of 400 and TPOT p99 15-51 ms of 100, and 16 QPS gave Mixtral 37 and 23 ms)
SERVER_QPS = {"3d-unet": 6, "dlrm-v2": 30, "mixtral-8x7b": 16, "llama3.1-8b": 20}
# ... and never above this share of what the same tree's Offline run measured on this machine (samples/s): machines of
# this kind differ several-fold in speed, so a fixed rate alone made a slow one's Server runs INVALID (once the tiny
# Mixtral at 16 QPS: TTFT p99 555 ms over its 400 ms bound). VALID beside a second worker here: Mixtral 16 QPS of 31.3
# Offline samples/s, Llama3.1-8B 20 of 48.9, DLRM-v2 30 of 122.5 (2026-12-05)
SERVER_SHARE = {"dlrm-v2": 0.2, "mixtral-8x7b": 0.4, "llama3.1-8b": 0.4, "3d-unet": 0.3}


def server_qps(bench: str, build: Path) -> float:
    """The Server rate of ``bench``: SERVER_QPS, capped at SERVER_SHARE of the latest Offline performance run's
    samples/s in ``build`` (the tree runs Offline first)."""
    key = re.sub(r"\W|_", "", bench)           # "llama3.1-8b" and the harness's "llama3_1_8b" alike
    offline = [m for m in metadata_under(build / "logs") if re.sub(r"\W|_", "", m.get("benchmark", "")) == key
               and m.get("scenario") == "Offline" and m.get("test_mode") == "PerformanceOnly"
               and not m.get("audit_test") and m.get("valid")]
    if not offline:
        return SERVER_QPS[bench]
    return server_rate(offline[-1], SERVER_SHARE[bench], SERVER_QPS[bench])
# one ORT thread: two intra-op threads wait on each other whenever the other worker holds a core (with a busy
# 2-thread process beside it the tiny DLRM-v2 Server p99 was 58 ms with two threads, 25-46 ms with one)
SERVER_EXTRA = {"dlrm-v2": ("--cpu_threads=1",)}
FIXTURES = {"3d-unet": "tiny_unet3d", "dlrm-v2": "tiny_dlrm", "bert": "tiny_bert", "mixtral-8x7b": "tiny_mixtral",
            "llama3.1-8b": "tiny_llama31"}
NAMES = {"3d-unet": "3d-unet-99", "dlrm-v2": "dlrm-v2-99", "bert": "bert-99", "mixtral-8x7b": "mixtral-8x7b",
         "llama3.1-8b": "llama3.1-8b"}
AUDIT = {"mixtral-8x7b": "TEST06", "llama3.1-8b": "TEST06"}     # the LLMs' audit; TEST01 for the others
# the tiny LLMs cannot meet the real model's accuracy targets (their judge is plain model.generate on the
# same weights, see tests/test_llm_moe_llama31_harness.py); the checker's lines for those metrics
TINY_LLM_ACCURACY = r"(mixtral-8x7b|llama3\.1-8b).*(accuracy|Accuracy)"
# per scenario: the fewest queries whose early-stopping estimate LoadGen accepts (SingleStream p90 needs
# ~64, MultiStream p99 662, Server p99 ~460 at a rate well inside the 100 ms bound); Offline sized by sample count
SHORT = {"SingleStream": ("--min_duration=1000", "--min_query_count=64"),
         "MultiStream": ("--min_duration=1000", "--min_query_count=662"),
         "Server": ("--min_duration=1000", "--min_query_count=460"),  # p99 early stopping; + SERVER_QPS
         "Offline": offline_samples(64)}
# 3D-UNet's volumes cost ~50 CPU-ms each: its Offline query holds the fewest samples the round allows it (43, the
# checker's minimum; 48 after equal-issue mode pads to whole permutations of the 6 tiny cases), not 64 (padded to 66)
SHORT_OF = {"3d-unet": {"Offline": offline_samples(43)}}
# what a tiny CPU run cannot avoid, as our pre-flight and the official checker word it
UNAVOIDABLE = (r"min_duration", r"min_query_count", r"samples?_per_query", r"accuracy run covered \d+ samples",
               r"model_variant=tiny", r"performance_sample_count", r"Test duration", r"TO FILL",
               r"min duration", r"sample count", r"accuracy_sample_count", r"Test duration less than",
               r"does not cover all dataset",
               # LoadGen's Offline query must hold the round's minimum (bert 10,833, dlrm-v2 24,576 samples)
               r"Offline query has \d+ samples, needs >=", r"minimum samples per query not met",
               # the checker's per-folder summaries of the findings above
               r"Some (performance|accuracy|compliance) checks? Checks failed for", r"ERROR\] NoResults ")


def bounded_runs(common: tuple, short: tuple, env: dict, audit: str, qps: float | None, tries: int = 3):
    """The performance run and the audit of one scenario: (what the performance run printed, the audit's process).

    A Server run's tail is this shared CPU's: beside the other test worker a few queries of 460 can wait out a
    60 ms bound (tiny DLRM-v2 at 30 QPS: p99 14 ms alone, 25-58 ms beside a busy 2-thread process; once the tiny
    Mixtral's TTFT/TPOT bounds three times in a row while the other worker calibrated SDXL), and LoadGen's p99
    early stopping forgives none at that count. The tree must hold VALID runs (the audit is verified against the
    performance run, and the checker reads the audit's own), so a Server run gets the CPU first (``latency``)
    and one LoadGen called INVALID is run again at 60% of its rate (``qps``: a Server run's), an audit that failed
    (exit 4) or was INVALID again at the rate of the last performance run, up to ``tries`` times each; staging picks
    the latest VALID run. (Three Mixtral runs at 16 QPS in a row missed TTFT early stopping once, 2026-12-06.)"""
    server = qps is not None
    rate = (f"--server_target_qps={qps}",) if server else ()
    for _ in range(tries):
        out = run_main("--action=run_harness", *common, *rate, *short, env=env, check=True,
                       latency="strict" if server else False).stdout
        if not server or not re.search(r"\bINVALID\b", out):
            break
        qps = round(0.6 * qps, 2)
        rate = (f"--server_target_qps={qps}",)
    for _ in range(tries):
        r = run_main("--action=run_audit_harness", f"--audit_test={audit}", *common, *rate, *short, env=env,
                     latency="strict" if server else False)
        if not server or (r.returncode != 4 and _latest_audit_valid(env, audit)):
            break
    return out, r


def _latest_audit_valid(env: dict, audit: str) -> bool:
    """Whether the audit run just made was VALID: a TEST01 run can pass its verification and still be INVALID
    (tiny DLRM-v2 Server, short of early stopping beside the other worker), which the checker then reports.
    An audit judged on its own log alone (SELF_CONTAINED: TEST06) is not asked: its audit.config's 100 queries
    never meet a p99's early stopping, so its Server run is INVALID every time (it was run three times for nothing)."""
    from code.common.compliance.audit import SELF_CONTAINED

    if audit in SELF_CONTAINED:
        return True
    metas = sorted((Path(env["MLPERF_BUILD_DIR"]) / "compliance_logs" / audit).rglob("metadata.json"),
                   key=lambda p: p.stat().st_mtime)
    return not metas or bool(json.loads(metas[-1].read_text()).get("valid"))


@pytest.fixture(scope="module")
def tree(request, tmp_path_factory) -> dict:
    """The tiny runs of the module's ROUND, staged, truncated and exported (one round per module, so that
    pytest-xdist runs the three trees on either worker)."""
    ROUND = request.module.ROUND
    for bench in RUNS[ROUND]:
        tiny_env = request.getfixturevalue(FIXTURES[bench])      # all share one harness_env
    base = tmp_path_factory.mktemp(f"official_submission_{ROUND}")
    env = dict(tiny_env, MLPERF_BUILD_DIR=str(base / "build"), MLPERF_STAGING_ROOT=str(base / "stage"))
    timed_out = []                 # scenarios whose TEST01 timed comparison (±10%) failed on this shared CPU
    stdout = {}                    # (benchmark, scenario): what the performance run printed
    for bench, scens in RUNS[ROUND].items():
        for scen in scens.split(","):
            common = (f"--benchmarks={bench}", "--model_variant=tiny", f"--round={ROUND}", f"--scenarios={scen}",
                      *(SERVER_EXTRA.get(bench, ()) if scen == "Server" else ()))
            qps = server_qps(bench, base / "build") if scen == "Server" else None
            run_main("--action=run_harness", *common, *([f"--server_target_qps={qps}"] if qps else []),
                     "--test_mode=AccuracyOnly", env=env, check=True)
            stdout[bench, scen], r = bounded_runs(common, SHORT_OF.get(bench, {}).get(scen, SHORT[scen]), env,
                                                  AUDIT.get(bench, "TEST01"), qps)
            assert r.returncode in (0, 4), r.stdout + r.stderr   # 4: a timed comparison on a shared CPU
            if r.returncode == 4:
                timed_out.append((bench, scen))
    for action in ("update_results", "truncate_results", "export_submission"):
        r = run_main(f"--action={action}", *([f"--round={ROUND}"] if action != "truncate_results" else []), env=env)
        assert r.returncode == 0, (action, r.stdout, r.stderr)
    return {"env": env, "submission": base / "build" / "submission", "stage": base / "stage", "round": ROUND,
            "timed_out": timed_out, "stdout": stdout}


def _avoidable(lines: list[str], tree: dict) -> list[str]:
    """The lines a tiny short run could have avoided. A TEST01 performance comparison that failed
    (the audit exited 4, see assert_audit_passed) is a timing on a shared CPU, named by both checkers."""
    timed = [rf"/{bench}[^/]*/{scen}/TEST01.*(performance check did not pass|performance check in .* failed)|"
             rf"Compliance test performance check in .*/{bench}[^/]*/{scen}/TEST01 failed"
             for bench, scen in tree["timed_out"]]
    return [ln for ln in lines if not any(re.search(p, ln) for p in (*UNAVOIDABLE, *timed, TINY_LLM_ACCURACY))]


def test_submission_official_staged_layout(tree):
    sys_dirs = list((tree["stage"] / "results").iterdir())      # one system name per backend (_ORT, _HF)
    assert len(sys_dirs) == len({"HF" if b in AUDIT else "ORT" for b in RUNS[tree["round"]]})
    names = NAMES
    assert sorted(p.name for d in sys_dirs for p in d.iterdir()) == sorted(names[b] for b in RUNS[tree["round"]])
    res = next(d for d in sys_dirs if d.name.endswith("_ORT")) if any(b not in AUDIT for b in RUNS[tree["round"]]) \
        else sys_dirs[0]
    for bench, scens in RUNS[tree["round"]].items():
        for scen in scens.split(","):
            d = next(s / names[bench] for s in sys_dirs if (s / names[bench]).is_dir()) / scen
            assert (d / "performance" / "run_1" / "mlperf_log_detail.txt").is_file()
            assert (d / "accuracy" / "accuracy.txt").is_file()
    if "3d-unet" in RUNS[tree["round"]]:
        acc = (res / "3d-unet-99" / "Offline" / "accuracy" / "accuracy.txt").read_text()
        assert re.search(r"Accuracy:\s*mean\s*=\s*[\d.]+", acc)
    for llm in ("mixtral-8x7b", "llama3.1-8b"):
        if llm in RUNS[tree["round"]]:
            hf = next(d for d in sys_dirs if d.name.endswith("_HF"))
            assert (hf / llm / "Offline" / "accuracy" / "accuracy.txt").read_text().startswith("{'rouge1': ")
            for scen in ("Offline", "Server"):
                [v] = list(tree["stage"].rglob(f"{llm}/{scen}/TEST06/verify_accuracy.txt"))
                assert v.read_text().endswith("TEST06 verification complete\n"), v.read_text()
    if "dlrm-v2" in RUNS[tree["round"]]:
        assert re.search(r"AUC=[\d.]+%", (res / "dlrm-v2-99" / "Offline" / "accuracy" / "accuracy.txt").read_text())
    if "bert" in RUNS[tree["round"]]:
        assert re.match(r"^{[\"\']exact_match[\"\']\:\s*[\d\.]+,\s*[\"\']f1[\"\']\:\s*([\d\.]+)}",
                        (res / "bert-99" / "Offline" / "accuracy" / "accuracy.txt").read_text())
    if tree["round"] == "v5.1":
        sysj = json.loads(next((tree["stage"] / "systems").glob("*.json")).read_text())
        assert sysj["system_type"] == "datacenter,edge"


def test_submission_official_preflight_reports_only_unavoidable(tree):
    from code.common.submission import check

    errs = [ln for ln in check.check(tree["submission"], version=tree["round"]).lines() if ln.startswith("ERROR")]
    assert errs, "a tiny short run must not pass as a submission"
    assert _avoidable(errs, tree) == [], errs


def test_submission_official_checker_reports_only_unavoidable(tree):
    from code.common.submission import check

    rc, lines = check.run_official_checker(tree["submission"], "OpenHarness", tree["round"], official_root())
    errors = [ln for ln in lines if "ERROR" in ln and "SUMMARY" not in ln]
    print("\n".join(lines))
    assert not [ln for ln in lines if "Traceback" in ln], lines
    assert any("Test duration less than 600s" in ln for ln in errors), errors      # it did check the runs
    assert not [ln for ln in errors if "accuracy" in ln.lower() and re.search(r"F1|AUC|DICE", ln)], errors  # read, met
    assert _avoidable(errors, tree) == [], errors
    (Path(tree["submission"]).parent / "official_checker.json").write_text(json.dumps({"rc": rc, "lines": lines}))


def test_submission_llm_runs_valid_with_ttft_tpot_and_test06(tree):
    """The LLM runs of the tree asserted as runs (the only Server runs of the tiny Mixtral and Llama3.1-8B in the
    suite, at a third of their Offline rate or less): VALID, TTFT and TPOT p99 under the bounds of the configs'
    tiny block, the LoadGen model name and token metric, and TEST06's four verdict lines (Offline has no first
    token to check)."""
    llms = [b for b in RUNS[tree["round"]] if b in AUDIT]
    if not llms:
        pytest.skip(f"no LLM in {tree['round']}'s tree")
    build = Path(tree["env"]["MLPERF_BUILD_DIR"])
    runs = [m for m in metadata_under(build / "logs") if m["test_mode"] == "PerformanceOnly"]
    for bench in llms:
        model = {"mixtral-8x7b": "mixtral-8x7b", "llama3.1-8b": "llama3_1-8b"}[bench]
        # the latest: a Server run LoadGen called INVALID on this shared CPU was run again (bounded_runs)
        m = max((m for m in runs if m["scenario"] == "Server" and m["loadgen_model"] == model),
                key=lambda m: (m["started"], m["log_dir"]))
        t = m["tokens"]
        assert m["valid"], m["invalid_reasons"]
        assert t["result_field"] == "result_completed_tokens_per_second"
        assert t["ttft_p99_ns"] < t["ttft_limit_ns"] == 400_000_000 and t["tpot_p99_ns"] < t["tpot_limit_ns"] == 100_000_000
        assert "TTFT p99" in tree["stdout"][bench, "Server"]
        print(f"tiny {bench} Server at {m['metric_value']:.2f} QPS: TTFT p99 {t['ttft_p99_ns'] / 1e6:.1f} ms, "
              f"TPOT p99 {t['tpot_p99_ns'] / 1e6:.2f} ms, {t['tokens_per_second']:.0f} tokens/s")
        for scen, first in (("Offline", "Skipped"), ("Server", "True")):
            [v] = list((build / "compliance_logs" / "TEST06").rglob(f"{bench.replace('.', '_').replace('-', '_')}*/"
                                                                     f"{scen}/verify_accuracy.txt"))
            assert v.read_text().splitlines() == [f"First token check pass: {first}", "EOS check pass: True",
                                                  "Sample length check pass: True", "TEST06 verification complete"]
