"""Memory LoadGen's query schedule takes per sample: the figure behind code.main.LOADGEN_BYTES_PER_SAMPLE.

Each measurement is one process: a bare Python SUT answering every sample at once (no data), one LoadGen
performance test sized by --min_query_count alone, and the peak resident memory after it minus before it.
Two sizes per scenario; the difference over the difference in samples is the cost of one sample (LoadGen's
schedule plus the sample objects the Python SUT receives). Prints figures; asserts nothing.

usage: python scripts/bench_loadgen_memory.py [--small 100000] [--large 400000]
"""
from __future__ import annotations

import argparse
import subprocess
import sys

ONE = r"""
import os, resource, sys, tempfile
import numpy as np
import mlperf_loadgen as lg
scen, n = sys.argv[1], int(sys.argv[2])
buf = np.zeros(1, np.uint8); ptr = buf.__array_interface__["data"][0]
def issue(samples):
    lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, ptr, 1) for s in samples])
sut = lg.ConstructSUT(issue, lambda: None)
qsl = lg.ConstructQSL(1024, 1024, lambda x: None, lambda x: None)
ts = lg.TestSettings(); ts.scenario = getattr(lg.TestScenario, scen); ts.mode = lg.TestMode.PerformanceOnly
d = tempfile.mkdtemp(); conf = os.path.join(d, "user.conf")
key = {"Offline": "offline_expected_qps = 1", "Server": "target_qps = 1000000",
       "SingleStream": "target_latency = 1"}[scen]
open(conf, "w").write(f"resnet50.{scen}.{key}\nresnet50.{scen}.min_duration = 1\n"
                      f"resnet50.{scen}.min_query_count = {n}\n")
ts.FromConfig(conf, "resnet50", scen)
out = lg.LogOutputSettings(); out.outdir = d; log = lg.LogSettings(); log.log_output = out; log.enable_trace = False
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
lg.StartTestWithLogSettings(sut, qsl, ts, log)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def peak_bytes(scenario: str, n: int) -> int:
    r = subprocess.run([sys.executable, "-c", ONE, scenario, str(n)], capture_output=True, text=True, check=True)
    return int(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", type=int, default=100_000)
    ap.add_argument("--large", type=int, default=400_000)
    a = ap.parse_args()
    for scenario in ("Offline", "Server", "SingleStream"):
        small, large = peak_bytes(scenario, a.small), peak_bytes(scenario, a.large)
        per = (large - small) / (a.large - a.small)
        print(f"{scenario:13s} {a.small:>9,} samples: +{small / 1e6:7.1f} MB   {a.large:>9,}: +{large / 1e6:7.1f} MB   "
              f"{per:6.0f} bytes/sample")
    return 0


if __name__ == "__main__":
    sys.exit(main())
