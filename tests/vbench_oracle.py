"""What the tests that run vbench==0.1.5's own code as the oracle share (test_wan_amt.py, test_wan_tag2text.py,
test_wan_vbench_official.py): where `make venv` put it, the vbench package mounted without its __init__ (which
imports every dimension and decord), and a stand-in for decord, VBench's mp4 reader, which cannot be installed next to
this environment's pins."""
from __future__ import annotations

import contextlib
import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import pytest

# `make venv` installs vbench, openai-clip and easydict --no-deps into this folder (the Makefile's ORACLE), not into
# site-packages, where OpenAI's `clip` would shadow the SDXL reference's tools/clip for every other test
ORACLE = Path(sys.prefix) / "oracle"
INSTALL = f"`make venv` installs them --no-deps into {ORACLE}"


def oracle_spec(name: str):
    """``name``'s import spec with the oracle folder on this process's sys.path (after everything else)."""
    if ORACLE.is_dir() and str(ORACLE) not in sys.path:
        sys.path.append(str(ORACLE))
    return importlib.util.find_spec(name)


def vbench_root(marker: str, needs: tuple[str, ...] = ()) -> Path:
    """vbench's package folder in the oracle install, holding ``marker`` (a file only vbench 0.1.5 has); the test is
    skipped, with the reason, when it or one of ``needs`` (other oracle packages) is not installed."""
    spec = oracle_spec("vbench")
    missing = [m for m in needs if oracle_spec(m) is None]
    if spec is None or not spec.submodule_search_locations or missing:
        pytest.skip(f"{' '.join(('vbench==0.1.5', *missing))} not installed ({INSTALL})")
    root = Path(list(spec.submodule_search_locations)[0])
    if not (root / marker).is_file():
        pytest.skip(f"{root} has no {marker} (not vbench==0.1.5)")
    return root


@contextlib.contextmanager
def mounted(root: Path, stand_ins: dict[str, object]):
    """The vbench package at ``root`` without its __init__ in sys.modules, and ``stand_ins`` (module name -> object)
    for imports its CPU path never calls; every module under those top-level names restored on exit."""
    names = {"vbench", *(n.split(".")[0] for n in stand_ins)}
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] in names}
    pkg = types.ModuleType("vbench")
    pkg.__path__ = [str(root)]
    sys.modules["vbench"] = pkg
    sys.modules.update(stand_ins)
    try:
        yield
    finally:
        for k in [k for k in sys.modules if k.split(".")[0] in names]:
            sys.modules.pop(k, None)
        sys.modules.update(saved)


def decord_stand_in(videos: dict[str, np.ndarray], size: tuple[int, int] | None = None) -> types.SimpleNamespace:
    """A ``decord`` module whose VideoReader serves ``videos[path]`` (uint8 [T, H, W, 3]) to VBench's calls (len,
    get_batch(...).asnumpy(), bridge.set_bridge); ``size``: the (width, height) VBench must ask for (the frames are
    already at it), None: none."""

    class VideoReader:
        def __init__(self, path, width=None, height=None, num_threads=1):
            assert (width, height) == (size or (None, None)), (width, height)
            self.v = videos[path]

        def __len__(self):
            return len(self.v)

        def get_batch(self, idx):
            return types.SimpleNamespace(asnumpy=lambda: self.v[list(idx)])

    return types.SimpleNamespace(VideoReader=VideoReader, cpu=None,
                                 bridge=types.SimpleNamespace(set_bridge=lambda _: None))
