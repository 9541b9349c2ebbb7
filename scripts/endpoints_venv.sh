#!/usr/bin/env bash
# The MLCommons endpoints client (inference-endpoint) in its own Python 3.12 venv, build/endpoints_venv: the
# interop tests (tests/test_llm_endpoints.py) and scripts/bench_llm_client.py use it. `make test` starts this in
# the background; a second caller waits on the lock. Exit 3: no source or no Python 3.12 here (the tests skip).
#   usage: scripts/endpoints_venv.sh [SOURCE]   (default $MLPERF_ENDPOINTS_DIR, else ../shared/mlcommons-endpoints)
set -uo pipefail
cd "$(dirname "$0")/.."
SRC="${1:-${MLPERF_ENDPOINTS_DIR:-../shared/mlcommons-endpoints}}"
VENV=build/endpoints_venv
mkdir -p build
exec 9>build/endpoints_venv.lock
flock 9
[ -f "$VENV/.installed" ] && exit 0
if [ ! -f "$SRC/pyproject.toml" ]; then echo "no MLCommons endpoints source at $SRC (set MLPERF_ENDPOINTS_DIR)"; exit 3; fi
py=""
for c in "${PYTHON312:-}" python3.12 $(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.12*/bin/python3 2>/dev/null); do
  [ -n "$c" ] || continue
  if "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; then py="$c"; break; fi
done
if [ -z "$py" ]; then echo "no Python 3.12 for the endpoints client (set PYTHON312=/path/to/python3.12)"; exit 3; fi
rm -rf "$VENV"
if "$py" -m venv "$VENV" && "$VENV/bin/pip" install -q --disable-pip-version-check "$SRC"; then
  touch "$VENV/.installed"
  echo "endpoints client installed into $VENV ($("$VENV/bin/python" --version))"
else
  rm -rf "$VENV"
  echo "the endpoints client did not install (see the pip output above)"
  exit 1
fi
