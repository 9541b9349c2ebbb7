"""The run machinery: one LoadGen run from request to metadata.json.

``runner`` (parent: settings, user.conf, the child process, the record), ``child`` (the LoadGen
process), ``sut`` (the batching SUT and its processors), ``monitor`` (the watchdog), ``fast_sizing``
(``--fast`` sample counts), ``ray_executor`` (workers as Ray actors) and ``timeline`` (per-sample
timestamps). Nothing here names a benchmark or a backend: it asks their objects.
"""
