"""Submission pipeline: stage (make update_results), truncate, export, pre-flight check.

Modules are runnable: ``python -m code.common.submission.stage|truncate|export|check``.
Nothing here imports heavy libraries at import time.
"""
