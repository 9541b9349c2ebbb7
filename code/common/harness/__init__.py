"""The run machinery: one LoadGen run from request to metadata.json.

``runner`` (parent: settings, user.conf, the child process, the record), ``child`` (the LoadGen
process), ``sut`` (the batching SUT and its processors), ``monitor`` (the watchdog), ``fast_sizing``
(``--fast`` sample counts), ``ray_executor`` (workers as Ray actors), ``timeline`` (per-sample
timestamps), ``zygote`` (the test suite's fork server for harness children) and ``deathsig`` (children that die with
their parent). Nothing here names a benchmark or a backend: it asks their objects.
"""
