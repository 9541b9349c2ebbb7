"""Where things live. Every function reads the environment when called, never at import."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def build_dir() -> Path:
    return Path(os.environ.get("MLPERF_BUILD_DIR", REPO_ROOT / "build"))


def scratch_path() -> Path:
    """$MLPERF_SCRATCH_PATH (default build/scratch): holds models/, data/, preprocessed_data/."""
    return Path(os.environ.get("MLPERF_SCRATCH_PATH", build_dir() / "scratch"))


def models_dir(benchmark: str, variant: str = "reference") -> Path:
    base = scratch_path() / "models" / benchmark
    return base / "tiny" if variant == "tiny" else base


def data_dir(benchmark_or_dataset: str, variant: str = "reference") -> Path:
    base = scratch_path() / "data" / benchmark_or_dataset
    return base / "tiny" if variant == "tiny" else base


def preprocessed_dir(benchmark: str, variant: str = "reference") -> Path:
    base = scratch_path() / "preprocessed_data" / benchmark
    return base / "tiny" if variant == "tiny" else base


def engines_dir() -> Path:
    return build_dir() / "engines"


def logs_dir() -> Path:
    return build_dir() / "logs"


def compliance_logs_dir() -> Path:
    return build_dir() / "compliance_logs"


def configs_dir() -> Path:
    return Path(os.environ.get("MLPERF_CONFIGS_DIR", REPO_ROOT / "configs"))


def systems_dir() -> Path:
    return Path(os.environ.get("MLPERF_SYSTEMS_DIR", REPO_ROOT / "systems"))


def data_maps_dir() -> Path:
    return Path(os.environ.get("MLPERF_DATA_MAPS_DIR", REPO_ROOT / "data_maps"))


def given_data_dir(data_dir: str | None, env: str, what: str, holds: str) -> Path | None:
    """A local folder of official files: ``data_dir`` (--data_dir), else $``env``, else None; one that does not exist
    is an error naming what it must hold (``what``: "SDXL data", ``holds``: the files)."""
    from code.common.errors import MissingDataError

    d = data_dir or os.environ.get(env)
    if not d:
        return None
    p = Path(d).expanduser()
    if not p.is_dir():
        raise MissingDataError(f"{what} folder {p} does not exist", f"point --data_dir (or ${env}) at a folder holding "
                               f"{holds}")
    return p
