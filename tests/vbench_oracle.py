"""What the tests that run vbench==0.1.5's own code as the oracle share (test_wan_tag2text.py,
test_wan_vbench_official.py): a stand-in for decord, VBench's mp4 reader, which cannot be installed next to this
environment's pins."""
from __future__ import annotations

import types

import numpy as np


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
