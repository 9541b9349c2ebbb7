"""The round tables (code.common.rounds.v5 / .v6) against the official MLPerf Inference submission checker.

The comparison needs a checkout (work tree) of mlcommons/inference named by ``MLPERF_INFERENCE_DIR``,
ideally at the commit ``code.common.rounds.v6.CHECKER_COMMIT``; without it those tests are skipped.
The checker's constants module is imported from that checkout, never copied. The table-shape tests
at the top run everywhere.
"""
from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import pytest

from code.common.rounds import ROUNDS, Round

from tests.conftest import official_root

PACKAGES = {"resnet50", "retinanet", "unet3d", "bert", "dlrm_v2", "gptj", "llama2_70b", "mixtral_8x7b", "sdxl",
            "llama3_1_8b", "deepseek_r1", "llama3_1_405b", "gpt_oss_120b", "qwen3_vl", "whisper", "yolo", "dlrm_v3", "wan", "rgat"}

# Checker submission name -> harness package, for every name the harness runs in some round.
PACKAGE_OF = {
    "resnet": "resnet50", "retinanet": "retinanet", "bert-99": "bert", "bert-99.9": "bert",
    "dlrm-v2-99": "dlrm_v2", "dlrm-v2-99.9": "dlrm_v2", "3d-unet-99": "unet3d", "3d-unet-99.9": "unet3d",
    "gptj-99": "gptj", "gptj-99.9": "gptj", "llama2-70b-99": "llama2_70b", "llama2-70b-99.9": "llama2_70b",
    "llama2-70b-interactive-99": "llama2_70b", "llama2-70b-interactive-99.9": "llama2_70b",
    "mixtral-8x7b": "mixtral_8x7b", "stable-diffusion-xl": "sdxl",
    "llama3.1-8b": "llama3_1_8b", "llama3.1-8b-edge": "llama3_1_8b", "deepseek-r1": "deepseek_r1",
    "llama3.1-405b": "llama3_1_405b", "gpt-oss-120b": "gpt_oss_120b", "qwen3-vl-235b-a22b": "qwen3_vl", "whisper": "whisper", "yolo-95": "yolo", "yolo-99": "yolo",
    "dlrm-v3": "dlrm_v3", "wan-2.2-t2v-a14b": "wan", "rgat": "rgat",
}

# -99.9 entries the checker lists without their -99 twin (v6.1 dropped llama2-70b-99 only).
UNPAIRED_999 = {("v6.1", "llama2-70b-99.9")}

# Order in which the checker's ComplianceCheck.get_test_list appends the audits.
COMPLIANCE_ORDER = ("TEST01", "TEST04", "TEST06", "TEST07", "TEST09", "TEST08")
TEST01_DIR = {"gptj": "gpt-j"}   # compliance/TEST01/<dir> where it differs from the LoadGen model name

ROUND_IDS = list(ROUNDS)


# ------------------------------------------------------------------------------ without a checkout

@pytest.mark.parametrize("version", ROUND_IDS)
def test_round_shape(version):
    rnd = ROUNDS[version]
    assert rnd.version == version
    assert set(rnd.seeds) == {"qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed"}
    for name, rb in rnd.benchmarks.items():
        assert rb.name == name
        assert rb.benchmark in PACKAGES, f"{version} {name}: {rb.benchmark} is not a harness package"
        assert PACKAGE_OF.get(name) == rb.benchmark, f"{version} {name}: package {rb.benchmark}"
        assert rb.accuracy_variant in ("", "99", "99.9", "95")
        assert rb.accuracy_variant == (name.rsplit("-", 1)[1] if name.endswith(("-99", "-99.9", "-95")) else "")
        assert rb.scenarios, f"{version} {name} is in no category"
        for scen in (rb.edge_scenarios, rb.datacenter_scenarios, rb.both_scenarios):
            assert len(set(scen)) == len(scen)
            assert set(scen) <= {"SingleStream", "MultiStream", "Offline", "Server", "Interactive"}
        assert rb.dataset_size > 0 and rb.performance_sample_count > 0
        assert rb.accuracy_metrics and tuple(rb.accuracy_min) == rb.accuracy_metrics
        # an upper limit is on a target's metric, or on the output length alone (gpt-oss-120b's TOKENS_PER_SAMPLE)
        assert set(rb.accuracy_max) <= set(rb.accuracy_metrics) | {"TOKENS_PER_SAMPLE"}
        assert set(rb.accuracy_delta_perc) <= set(rb.accuracy_metrics)
        if "TEST01" in rb.compliance_tests:
            assert rb.test01_sampling_target > 0
        assert set(rb.test04_extra) <= set(rb.scenarios)
    names = [rb.name for rb in rnd.benchmarks.values()]
    assert len(names) == len(set(names))
    unpaired = {(version, n) for n, rb in rnd.benchmarks.items()
                if rb.accuracy_variant == "99.9" and n[:-len("99.9")] + "99" not in rnd.benchmarks}
    assert unpaired == {u for u in UNPAIRED_999 if u[0] == version}


def test_round_endpoints_models_are_round_benchmarks():
    for rnd in ROUNDS.values():
        assert set(rnd.endpoints_models) <= set(rnd.benchmarks), rnd.version
    assert {r.version for r in ROUNDS.values() if r.endpoints_models} == {"v6.1"}


def test_round_membership():
    v61 = {rb.benchmark for rb in ROUNDS["v6.1"].benchmarks.values()}
    assert not v61 & {"retinanet", "gptj", "dlrm_v2", "mixtral_8x7b"}
    v50 = {rb.benchmark for rb in ROUNDS["v5.0"].benchmarks.values()}
    assert v50 >= {"resnet50", "retinanet", "unet3d", "bert", "dlrm_v2", "gptj", "llama2_70b", "mixtral_8x7b", "sdxl"}
    assert [r.src_dir for r in ROUNDS.values()] == ["code", "code", "src", "src"]
    assert [r.results_hold_compliance for r in ROUNDS.values()] == [False, False, True, True]
    assert [r.version for r in ROUNDS.values() if r.carried_by("6.0.17")] == ["v6.1"]
    assert [r.version for r in ROUNDS.values() if r.carried_by("6.0.10")] == ["v6.0"]
    assert [r.version for r in ROUNDS.values() if r.carried_by("6.0.4")] == ["v5.1"]
    assert [r.version for r in ROUNDS.values() if r.carried_by("5.0.3")] == ["v5.0"]


# --------------------------------------------------------------------------------- with a checkout

def _checkout() -> Path:
    official_root("tools", "submission")            # skips with the reason without a checkout
    return official_root()


@pytest.fixture(scope="module")
def inference() -> Path:
    return _checkout()


@pytest.fixture(scope="module")
def checker(inference):
    """The checker's constants module (new layout) or its single-file predecessor (old layout)."""
    for rel in ("tools/submission/submission_checker/constants.py", "tools/submission/submission_checker.py"):
        path = inference / rel
        if path.is_file():
            spec = importlib.util.spec_from_file_location("_mlperf_checker_constants", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    pytest.skip(f"no submission checker under {inference}/tools/submission")


def _config(checker, version: str) -> dict:
    if version not in checker.MODEL_CONFIG:
        pytest.skip(f"the checker in MLPERF_INFERENCE_DIR has no {version}")
    return checker.MODEL_CONFIG[version]


def _pairs(flat) -> dict[str, float]:
    assert not isinstance(flat, dict), f"per-scenario targets do not fit RoundBenchmark: {flat}"
    return dict(zip(flat[::2], flat[1::2]))


def _assert_close(ours: dict, theirs: dict, what: str):
    assert list(ours) == list(theirs), f"{what}: metrics {list(ours)} != checker {list(theirs)}"
    for m, v in theirs.items():
        assert math.isclose(ours[m], v, rel_tol=1e-9), f"{what} {m}: {ours[m]} != checker {v}"


def _conf_values(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


@pytest.mark.parametrize("version", ROUND_IDS)
def test_names_match_checker(checker, version):
    cfg = _config(checker, version)
    want = [m for m in cfg["models"] if m in PACKAGE_OF]
    assert sorted(ROUNDS[version].benchmarks) == sorted(want)


def _mlperf_conf(inference: Path) -> dict[str, str]:
    """mlperf.conf of the official tree (loadgen/ in a checkout of the repository). The shared subset leaves
    loadgen/ out (its top-level mlperf.conf is the repository's link to it), so then the copy LoadGen compiles
    into the installed binding stands in: the same file, built from the same repository."""
    for p in (inference / "loadgen" / "mlperf.conf", inference / "mlperf.conf"):
        if p.is_file() and (values := _conf_values(p)):
            return values
    import mlperf_loadgen
    text = Path(mlperf_loadgen.__file__).read_bytes().decode("latin-1")
    values = dict(re.findall(r"^([\w*.-]+\.[\w*]+\.\w+) = ([^\s#]+)", text, re.M))
    if not values:
        pytest.skip(f"no mlperf.conf under {inference} and none compiled into {mlperf_loadgen.__file__}")
    return values


@pytest.mark.parametrize("version", ROUND_IDS)
def test_entries_match_checker(checker, version):
    cfg = _config(checker, version)
    rnd: Round = ROUNDS[version]
    overwrite = getattr(checker, "RESULT_FIELD_BENCHMARK_OVERWRITE", {}).get(version, {})
    for name, rb in rnd.benchmarks.items():
        where = f"{version} {name}"
        for ours, key in ((rb.edge_scenarios, "required-scenarios-edge"),
                          (rb.datacenter_scenarios, "required-scenarios-datacenter"),
                          (rb.both_scenarios, "required-scenarios-datacenter-edge")):
            assert set(ours) == set(cfg[key].get(name, ())), f"{where} {key}"
        target = cfg["accuracy-target"][name]
        for scen, flat in (target.items() if isinstance(target, dict) else [(None, target)]):
            # per-scenario targets (v6.1 qwen3-vl-235b-a22b): RoundBenchmark.for_scenario
            _assert_close(dict(rb.for_scenario(scen).accuracy_min), _pairs(flat), f"{where} {scen} accuracy-target")
        if rb.latency_constraint_ns:
            assert dict(rb.latency_constraint_ns) == cfg["latency-constraint"][name], f"{where} latency-constraint"
        _assert_close(dict(rb.accuracy_max), _pairs(cfg.get("accuracy-upper-limit", {}).get(name, ())),
                      f"{where} accuracy-upper-limit")
        assert dict(rb.accuracy_delta_perc) == cfg["accuracy-delta-perc"].get(name, {}), f"{where} delta"
        assert rb.dataset_size == cfg["dataset-size"][name], f"{where} dataset-size"
        assert rb.performance_sample_count == cfg["performance-sample-count"][name], f"{where} psc"
        acc_count = cfg.get("accuracy-sample-count", {}).get(name, rb.dataset_size)
        for scen, n in (acc_count.items() if isinstance(acc_count, dict) else [(None, acc_count)]):
            assert n == rb.for_scenario(scen).accuracy_samples, f"{where} {scen}: accuracy-sample-count {n} does not fit"
        tests = tuple(t for t in COMPLIANCE_ORDER if name in cfg.get(f"models_{t}", ()))
        assert rb.compliance_tests == tests, f"{where} compliance"
        assert dict(rb.result_field) == overwrite.get(name, {}), f"{where} result field"


@pytest.mark.parametrize("version", ROUND_IDS)
def test_round_facts_match_checker(checker, inference, version):
    cfg = _config(checker, version)
    rnd = ROUNDS[version]
    assert dict(rnd.seeds) == cfg["seeds"]
    assert rnd.min_duration_ms == checker.TEST_DURATION_MS
    if hasattr(checker, "SRC_PATH"):
        assert checker.SRC_PATH[version].rsplit("/", 1)[1] == rnd.src_dir
    if hasattr(checker, "COMPLIANCE_PATH"):
        assert ("/results/" in checker.COMPLIANCE_PATH[version]) == rnd.results_hold_compliance
    newest = max(checker.MODEL_CONFIG, key=lambda v: tuple(int(x) for x in re.findall(r"\d+", v)))
    if version == newest:   # mlperf.conf of the checkout carries the newest round's seeds
        conf = _mlperf_conf(inference)
        assert {k: int(conf[f"*.*.{k}"]) for k in rnd.seeds} == dict(rnd.seeds)


@pytest.mark.parametrize("version", ROUND_IDS)
def test_extra_accuracy_files_match_checker(checker, inference, version):
    _config(checker, version)
    required = getattr(checker, "REQUIRED_ACC_BENCHMARK", {})
    newest = max(checker.MODEL_CONFIG, key=lambda v: tuple(int(x) for x in re.findall(r"\d+", v)))
    for name, rb in ROUNDS[version].benchmarks.items():
        theirs = required.get(name, {}).get(version)
        if theirs is None and name == "stable-diffusion-xl" and version == newest:
            ids = (inference / "text_to_image" / "tools" / "sample_ids.txt").read_text().split()
            theirs = {"images": ids}   # the checker has no list for its newest round yet
        theirs = {k: tuple(v) for k, v in (theirs or {}).items()}
        assert dict(rb.extra_accuracy_files) == theirs, f"{version} {name}"


@pytest.mark.parametrize("version", ROUND_IDS)
def test_audit_configs_match_checkout(inference, version):
    """TEST01 sampling target / seed and TEST04 extras as compliance/ of the checkout writes them."""
    rnd = ROUNDS[version]
    models = _mlperf_conf(inference)
    t04 = _conf_values(inference / "compliance" / "TEST04" / "audit.config")
    for name, rb in rnd.benchmarks.items():
        assert any(k.startswith(rb.loadgen_model + ".") for k in models), f"{rb.loadgen_model} not in mlperf.conf"
        t01 = inference / "compliance" / "TEST01" / TEST01_DIR.get(rb.loadgen_model, rb.loadgen_model) / "audit.config"
        if t01.is_file():
            conf = _conf_values(t01)
            assert rb.test01_sampling_target == int(conf["*.*.accuracy_log_sampling_target"]), f"{version} {name}"
            assert rnd.audit_accuracy_log_rng_seed == int(conf["*.*.accuracy_log_rng_seed"])
        else:
            assert "TEST01" not in rb.compliance_tests and rb.test01_sampling_target == 0, f"{version} {name}"
        extra: dict[str, dict[str, int]] = {}
        for k, v in t04.items():           # by prefix: a model name may hold dots ("wan-2.2-t2v-a14b")
            if k.startswith(rb.loadgen_model + "."):
                scen, key = k[len(rb.loadgen_model) + 1:].split(".", 1)
                extra.setdefault(scen, {})[key] = int(v)
        want = extra if "TEST04" in rb.compliance_tests else {}
        assert {s: dict(kv) for s, kv in rb.test04_extra.items()} == want, f"{version} {name} TEST04"


@pytest.mark.parametrize("version", ROUND_IDS)
def test_endpoints_models_match_checker(checker, version):
    """Round.endpoints_models: the checker's ENDPOINTS_ALLOWED_MODELS (the harness's benchmarks of it) in the rounds
    its RESULT_FIELD_ENDPOINTS reads endpoints results for, none elsewhere; and the client's audit names."""
    from code.common.submission.endpoints import AUDIT_NAMES

    _config(checker, version)
    if not hasattr(checker, "ENDPOINTS_ALLOWED_MODELS"):
        pytest.skip("the checker in MLPERF_INFERENCE_DIR reads no endpoints results")
    rnd = ROUNDS[version]
    want = set(checker.ENDPOINTS_ALLOWED_MODELS) & set(rnd.benchmarks) if version in checker.RESULT_FIELD_ENDPOINTS \
        else set()
    assert set(rnd.endpoints_models) == want, version
    assert AUDIT_NAMES.items() <= checker.ENDPOINTS_COMPLIANCE_MAPPING.items()


def test_system_fields_match_checker(checker, inference):
    """code.common.submission.sysdesc's field lists and types against the checker's: the required and
    must-be-meaningful fields are its lists; the fields its results table does int() on are whole numbers, and
    those its checks call .lower() on are text (sysdesc.field_problem judges them so)."""
    from code.common.submission import sysdesc

    if not hasattr(checker, "SYSTEM_DESC_REQUIRED_FIELDS"):
        pytest.skip("the checker in MLPERF_INFERENCE_DIR has no SYSTEM_DESC_REQUIRED_FIELDS")
    assert list(sysdesc.REQUIRED_FIELDS) == list(checker.SYSTEM_DESC_REQUIRED_FIELDS)
    assert list(sysdesc.MEANINGFUL_FIELDS) == list(checker.SYSTEM_DESC_MEANINGFUL_RESPONSE_REQUIRED_FIELDS)
    assert set(sysdesc.WHOLE_NUMBER_FIELDS) | set(sysdesc.TEXT_FIELDS) >= set(checker.SYSTEM_DESC_REQUIRED_FIELDS)
    assert not set(sysdesc.WHOLE_NUMBER_FIELDS) & set(sysdesc.TEXT_FIELDS)
    tools = inference / "tools" / "submission" / "submission_checker"
    if not (tools / "results.py").is_file():
        pytest.skip(f"{tools} has no results.py / checks/ (older layout)")
    as_int = set(re.findall(r'int\(\s*row\["(\w+)"\]\)', (tools / "results.py").read_text()))
    assert as_int and as_int <= set(sysdesc.WHOLE_NUMBER_FIELDS), as_int
    lowered = set()
    for p in (tools / "checks").glob("*.py"):
        text = p.read_text()
        lowered |= set(re.findall(r'system_json(?:\.get\(|\[)"(\w+)"[\])]\.lower\(\)', text))
    lowered.add(checker.SYSTEM_DESC_IS_NETWORK_MODE)      # is_network: read through the constant, then .lower()
    assert {"status", "submitter", "division", "system_type"} <= lowered, lowered
    assert lowered <= set(sysdesc.TEXT_FIELDS), lowered
    for k in sysdesc.WHOLE_NUMBER_FIELDS:
        assert sysdesc.field_problem(k, 2) is None and sysdesc.field_problem(k, "2") is None
        assert sysdesc.field_problem(k, "two") and sysdesc.field_problem(k, {})
    for k in sysdesc.TEXT_FIELDS:
        assert sysdesc.field_problem(k, "x") is None and sysdesc.field_problem(k, [1])
