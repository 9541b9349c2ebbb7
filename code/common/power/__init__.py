"""Power: informative power on every run, NVIDIA-style power settings, and submittable power.

- ``sources`` / ``sampler``: GPU power through NVML and CPU package power through RAPL (powercap), sampled in a
  thread while LoadGen's StartTest runs (code.common.harness.child) and summed over LoadGen's own power window
  (``power_begin``..``power_end`` of its detail log) into the run's metadata.json ``power``. Informative only.
- ``limits``: ``power_limit`` / ``gpu_clock_lock`` / ``memory_clock_lock`` (config keys) applied through NVML
  before a run and restored after it, even on Ctrl-C or SIGTERM.
- ``ptd``: the client side of the MLCommons power-dev protocol (mlcommons/power-dev, ptd_client_server, protocol
  v3), a ranging and a testing run with the logs laid out as the submission checker reads them; ``standin``: a
  local server speaking that protocol that replays a recorded trace (tests; never a measurement).
- ``result``: a power run in the run records (metadata.json ``power_run``), staging and export; ``attach`` ties
  a result of power-dev's own client to its harness runs.
- ``nameplate``: ``systems/<system>_power.yaml`` (v6.1's nameplate power), its stub and its checks;
  ``preflight``: what make check_submission says of a power result.
"""
