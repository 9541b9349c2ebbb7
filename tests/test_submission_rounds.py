"""The round table matches the installed LoadGen: seeds, model names, Offline/Server settings."""
import pytest

from code.common.compliance import audit_config as ac
from code.common.errors import HarnessError
from code.common import rounds
from code.common.submission import mlperf_conf


def test_submission_round_matches_installed_loadgen():
    rnd = rounds.current()
    assert rnd.version == "v6.1"
    conf = mlperf_conf.parse(mlperf_conf.text())
    for key, value in rnd.seeds.items():
        assert int(mlperf_conf.lookup(conf, "resnet50", "Offline", key)) == value
    for mlperf_name, rb in rnd.benchmarks.items():
        if rb.benchmark not in ("resnet50", "sdxl"):
            continue
        psc = mlperf_conf.lookup(conf, rb.loadgen_model, "Offline", "performance_sample_count_override")
        assert int(psc) == rb.performance_sample_count, mlperf_name
        assert int(mlperf_conf.lookup(conf, rb.loadgen_model, "SingleStream", "min_duration")) == rnd.min_duration_ms


def test_submission_round_names_v61():
    rnd = rounds.V6_1
    assert rnd.entry("resnet50").name == "resnet"
    assert rnd.entry("sdxl").name == "stable-diffusion-xl"
    assert rnd.entry("resnet50").required_scenarios("edge") == ("SingleStream", "MultiStream", "Offline")
    assert rnd.entry("resnet50").required_scenarios("datacenter") is None
    assert rnd.entry("sdxl").required_scenarios("edge") == ("SingleStream", "Offline")
    with pytest.raises(HarnessError, match="not part of MLPerf Inference v6.1"):
        rounds.entry("retinanet", version="v6.1")
    try:
        rounds.entry("retinanet", version="v6.1")
    except HarnessError as e:
        assert "--round=v6.0" in e.fix            # the newest round that still has it
    assert rounds.entry("retinanet", version="v5.0").name == "retinanet"


def test_accuracy_variants_pick_the_submission_name():
    assert rounds.entry("bert", version="v6.1").name == "bert-99"
    assert rounds.entry("bert", "99.9", version="v6.1").name == "bert-99.9"
    assert rounds.entry("bert", "99.9", version="v6.1").delta_perc("F1") == 0.1
    assert rounds.entry("sdxl", "99.9").name == "stable-diffusion-xl"     # no split: the target is ignored
    assert rounds.has_variants("bert") and not rounds.has_variants("sdxl")


def test_submission_mlperf_conf_extract_rejects_other_text():
    blob = b"xx\0# The format of this config file is 'key = value'.\n*.*.mode = 2\n\0yy"
    with pytest.raises(HarnessError):
        mlperf_conf.extract(blob)


def test_compliance_audit_config_texts():
    rnd = rounds.V6_1
    t1 = ac.audit_config("TEST01", rnd, rnd.entry("resnet50"), "Offline")
    assert "*.*.mode = 2" in t1 and "*.*.accuracy_log_rng_seed = 720381539243781796" in t1
    assert "resnet50.Offline.accuracy_log_sampling_target = 4096" in t1
    t1s = ac.audit_config("TEST01", rnd, rnd.entry("sdxl"), "SingleStream")
    assert "stable-diffusion-xl.SingleStream.accuracy_log_sampling_target = 128" in t1s
    t4 = ac.audit_config("TEST04", rnd, rnd.entry("sdxl"), "Offline")
    for line in ("*.Offline.performance_issue_unique = 0", "*.Offline.performance_issue_same = 1",
                 "*.Offline.performance_issue_same_index = 3", "stable-diffusion-xl.Offline.min_query_count = 500"):
        assert line in t4
    assert "min_query_count" not in ac.audit_config("TEST04", rnd, rnd.entry("resnet50"), "Offline")
    # extras replace the wildcard line for the same key (LoadGen re-applies "*." keys at StartTest)
    t1x = ac.audit_config("TEST01", rnd, rnd.entry("resnet50"), "Offline", {"accuracy_log_sampling_target": 64})
    assert "*.*.accuracy_log_sampling_target" not in t1x and "*.Offline.accuracy_log_sampling_target = 64" in t1x
    with pytest.raises(HarnessError, match="not applicable"):
        ac.audit_config("TEST06", rnd, rnd.entry("resnet50"), "Offline")


def test_system_type_fits_the_staged_scenarios():
    from code.common.submission.sysdesc import system_type_for

    v51, v50 = rounds.current("v5.1"), rounds.current("v5.0")
    unet, dlrm, resnet = v51.benchmarks["3d-unet-99"], v51.benchmarks["dlrm-v2-99"], v50.benchmarks["resnet"]
    assert system_type_for([unet], {"3d-unet-99": {"SingleStream", "Offline"}}) == "edge"
    assert system_type_for([dlrm], {"dlrm-v2-99": {"Offline", "Server"}}) == "datacenter"
    # an edge-only scenario of one benchmark beside a datacenter-only benchmark: both categories
    assert system_type_for([unet, dlrm], {"3d-unet-99": {"SingleStream", "Offline"},
                                          "dlrm-v2-99": {"Offline", "Server"}}) == "datacenter,edge"
    assert system_type_for([resnet], {"resnet": {"Offline", "Server"}}) == "datacenter"
    assert system_type_for([resnet], {"resnet": {"SingleStream", "MultiStream", "Offline", "Server"}}) \
        == "datacenter,edge"
