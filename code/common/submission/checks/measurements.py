"""measurements.json and the run files beside it (user.conf, README.md, mlperf.conf)."""
from __future__ import annotations

from pathlib import Path

from code.common.submission import sysdesc
from code.common.submission.checks.findings import Findings, read_json, require
from code.common.submission.measurements import TINY_WEIGHTS

MEASUREMENT_FIELDS = ("input_data_types", "retraining", "starting_weights_filename", "weight_data_types",
                      "weight_transformations")
RUN_FILES = ("user.conf", "README.md", "mlperf.conf")


def check_measurements_json(f: Findings, mj: Path) -> None:
    m = read_json(f, mj)
    if m is None:                     # missing, not JSON or not an object: reported in one line
        return
    for k in MEASUREMENT_FIELDS:
        if sysdesc.is_empty(m.get(k)):
            f.error(mj, f"field {k} is missing or empty")
    if m.get("starting_weights_filename") == TINY_WEIGHTS:
        f.error(mj, "model_variant=tiny: the tiny seeded model can never be a submission result")


def check_measurements(f: Findings, d: Path, json_name: str = "measurements.json", run_files=RUN_FILES) -> None:
    """The directory ``d``'s measurements JSON, user.conf, README.md and mlperf.conf (the results scenario
    directory from v6.0; measurements/<system>/<benchmark>/<scenario>/ with <system>_<scenario>.json before).
    An endpoints-client result has no LoadGen settings: README.md only (``run_files``)."""
    check_measurements_json(f, d / json_name)
    for name in run_files:
        if require(f, d / name) and name != "user.conf" and (d / name).stat().st_size == 0:
            f.error(d / name, "empty")
    uc = d / "user.conf"
    if uc.is_file() and uc.stat().st_size == 0:
        f.error(uc, "empty (the checker requires the user.conf the run used)")
