"""Print the summary table of a harness invocation, read from metadata.json files (never stdout).

usage: python scripts/print_harness_result.py [LOG_DIR]   (default: the latest run_harness logs)
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from code.common.results.records import find_metadata, latest_logs, table  # noqa: E402


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else latest_logs()
    if root is None or not root.exists():
        print("error: no harness logs found\n  fix: make run_harness RUN_ARGS=\"--benchmarks=resnet50 --fast\"",
              file=sys.stderr)
        return 3
    records = find_metadata(root)
    if not records:
        print(f"error: no metadata.json under {root}\n  fix: rerun make run_harness", file=sys.stderr)
        return 3
    print(f"Results from {root}")
    print(table(records))
    return 0 if all(r.get("status") == "ok" for r in records) else 4


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
