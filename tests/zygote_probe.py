"""Run by tests/test_zygote.py in a child the zygote forks: prints what the child sees."""
import os
import random
import signal
import sys
import time

import numpy as np

args = sys.argv[1:]
if "--raise" in args:
    raise RuntimeError("probe")
for a in args:
    if a.startswith("--sleep="):
        time.sleep(float(a.split("=", 1)[1]))
print(f"argv={args!r}")
print(f"cwd={os.getcwd()}")
print(f"value={os.environ.get('PROBE_VALUE')}")
print(f"zygote={os.environ.get('MLPERF_ZYGOTE')}")
print(f"nice={os.getpriority(os.PRIO_PROCESS, 0)}")
print(f"random={random.random()}")
print(f"np_random={np.random.random()}")
print(f"sigpipe={signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN}")
print("to stderr", file=sys.stderr)
rc = [int(a.split("=", 1)[1]) for a in args if a.startswith("--rc=")]
sys.exit(rc[0] if rc else 0)
