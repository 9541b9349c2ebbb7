"""Read LoadGen's own logs: mlperf_log_detail.txt (":::MLLOG {json}" lines), the summary, and
mlperf_log_accuracy.json. Read-only helpers; the files are never modified here.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MARKER = ":::MLLOG "


class DetailLog:
    """Parsed mlperf_log_detail.txt. ``log[key]`` is the value of the last message with that key."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.messages: list[dict[str, Any]] = []
        self.values: dict[str, Any] = {}
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for line in f:
                i = line.find(MARKER)
                if i < 0:
                    continue
                try:
                    msg = json.loads(line[i + len(MARKER):])
                except ValueError:
                    continue
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

