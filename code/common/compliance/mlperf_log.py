"""Read LoadGen's own logs: mlperf_log_detail.txt (":::MLLOG {json}" lines), the summary, and
mlperf_log_accuracy.json. Read-only helpers; the files are never modified here.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MARKER = ":::MLLOG "

# Keys whose value the checks do arithmetic on: LoadGen writes integers (settings, counts, seeds) and
# numbers (latency percentiles). A hand-edited log with "sixty" there is a one-line error naming the
# file and the key, never a ValueError deep in a check.
INTEGER_KEYS = frozenset((
    "effective_min_duration_ms", "effective_performance_sample_count", "effective_samples_per_query",
    "effective_target_latency_ns", "effective_accuracy_sample_count", "qsl_reported_total_count",
    "effective_max_query_count", "effective_min_query_count", "effective_performance_issue_same_index",
    "effective_accuracy_log_sampling_target", "effective_accuracy_log_rng_seed", "effective_qsl_rng_seed",
    "effective_sample_index_rng_seed", "effective_schedule_rng_seed"))
NUMBER_KEYS = frozenset(("result_first_token_99.00_percentile_latency_ns",
                         "result_time_per_output_token_99.00_percentile_ns"))


def value_problem(key: str, value: Any) -> str | None:
    """Why ``value`` cannot be LoadGen's value of ``key`` (the wrong JSON type), or None."""
    if key in INTEGER_KEYS and (isinstance(value, bool) or not isinstance(value, int)):
        return f"{key} is {value!r}, not an integer"
    if key in NUMBER_KEYS and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return f"{key} is {value!r}, not a number"
    return None


class DetailLog:
    """Parsed mlperf_log_detail.txt. ``log[key]`` is the value of the last message with that key. A value of the
    wrong type for its key (``value_problem``) is a HarnessError naming the file, line and key."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.messages: list[dict[str, Any]] = []
        self.values: dict[str, Any] = {}
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                i = line.find(MARKER)
                if i < 0:
                    continue
                try:
                    msg = json.loads(line[i + len(MARKER):])
                except ValueError:
                    continue
                if not isinstance(msg, dict):
                    continue
                why = value_problem(str(msg.get("key")), msg.get("value"))
                if why:
                    from code.common.errors import HarnessError

                    raise HarnessError(f"{self.path}:{lineno}: {why}",
                                       "LoadGen never writes that: restore the log from the run (rerun it, then "
                                       "make update_results)")
                self.messages.append(msg)
                self.values[msg.get("key")] = msg.get("value")

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def errors(self) -> list[str]:
        """Text of every message LoadGen flagged as an error (``metadata.is_error``)."""
        return [f"{m.get('key')}: {m.get('value')}" for m in self.messages
                if (m.get("metadata") or {}).get("is_error")]

    def warnings(self) -> list[str]:
        return [f"{m.get('key')}: {m.get('value')}" for m in self.messages
                if (m.get("metadata") or {}).get("is_warning")]

    @property
    def scenario(self) -> str:
        return str(self.get("effective_scenario", ""))

    @property
    def valid(self) -> bool:
        return self.get("result_validity") == "VALID"

