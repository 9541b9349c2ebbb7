"""A child process that ends when the process that started it dies (the runner's harness child, the test suite's
zygote)."""
from __future__ import annotations

import os
import signal


def death_signal_hook():
    """preexec_fn for the child: SIGTERM when the parent dies (Linux prctl PR_SET_PDEATHSIG).

    libc is looked up here, in the parent: between fork and exec the child may only make the call
    (other threads may hold locks). A parent that died before the call is caught by the ppid check."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: the parent's handlers still stop the child
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(1, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)
    return hook
