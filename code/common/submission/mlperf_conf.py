"""The mlperf.conf that LoadGen compiled in, read back from the installed LoadGen library.

LoadGen (since v5.0) embeds mlperf.conf as a NUL-terminated string in its extension module and
loads it itself, so the pip package ships no mlperf.conf file. The submission tree still carries
one per scenario. We read the embedded text from the shared library (the exact bytes that were in
effect for the runs) instead of keeping a copy of the official file in this repository.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from code.common.errors import HarnessError

_START = b"# The format of this config file is 'key = value'."
_MARKER = b"performance_sample_count_override"   # only the real mlperf.conf has these lines


def loadgen_library() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("mlperf_loadgen")
    if spec is None or not spec.origin:
        raise HarnessError("mlperf_loadgen is not importable, so its mlperf.conf cannot be read",
                           "pip install mlcommons-loadgen==6.0.17 (make build)")
    return Path(spec.origin)


def extract(blob: bytes) -> str:
    """The embedded mlperf.conf text in ``blob`` (the extension module's bytes)."""
    pos = 0
    while True:
        i = blob.find(_START, pos)
        if i < 0:
            break
        j = blob.find(b"\0", i)
        text = blob[i:j if j >= 0 else len(blob)]
        if _MARKER in text and b"qsl_rng_seed" in text:
            return text.decode("utf-8")
        pos = i + 1
    raise HarnessError("could not find the compiled-in mlperf.conf inside the LoadGen library",
                       "reinstall mlcommons-loadgen (pip install --force-reinstall mlcommons-loadgen==6.0.17)")


@functools.lru_cache(maxsize=None)
def text(library: str | None = None) -> str:
    """mlperf.conf exactly as compiled into the installed (or the given) LoadGen library."""
    path = Path(library) if library else loadgen_library()
    return extract(path.read_bytes())


def parse(conf_text: str) -> dict[str, str]:
    """``model.scenario.key -> value`` for every assignment line (comments dropped)."""
    out = {}
    for line in conf_text.splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.match(r"^(\S+)\s*=\s*(\S+)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def lookup(conf: dict[str, str], model: str, scenario: str, key: str) -> str | None:
    """LoadGen's precedence: model.scenario, *.scenario, model.*, *.*."""
    for k in (f"{model}.{scenario}.{key}", f"*.{scenario}.{key}", f"{model}.*.{key}", f"*.*.{key}"):
        if k in conf:
            return conf[k]
    return None
