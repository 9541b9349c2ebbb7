#!/usr/bin/env bash
# The CPU one test module costs, measured on one core kept for it, to compare two trees side by side (issue 25:
# the machine's speed drifts by tens of percent within hours, so compare only pairs run one after the other).
#
# usage: scripts/ab_module_cpu.sh TREE LABEL CORE tests/test_x.py [pytest args...]
#   e.g. git worktree add --detach /tmp/base <commit> && ln -s "$PWD/.venv" /tmp/base/.venv
#        scripts/ab_module_cpu.sh /tmp/base base 1 tests/test_gpu_check.py
#        scripts/ab_module_cpu.sh "$PWD" head 1 tests/test_gpu_check.py
# prints: LABEL rc=.. core<CORE>_busy=<s> s wall=<s> s <pytest's summary line>; the log is build/ab_<LABEL>.log.
# The busy seconds are the core's user+nice+system+irq+softirq ticks from /proc/stat over the run (every process the
# module starts inherits the pin), so nothing else should run on that core meanwhile.
set -u
if [ $# -lt 4 ]; then sed -n 5,8p "$0"; exit 2; fi
tree=$1 label=$2 core=$3; shift 3
here=$(cd "$(dirname "$0")/.." && pwd)
busy() { awk -v c="cpu$core" '$1 == c {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
hz=$(getconf CLK_TCK)
log="$here/build/ab_$label.log"; mkdir -p "$here/build"
base=$(mktemp -d /tmp/ab_module_cpu.XXXXXX)
official="$here/../shared/mlcommons-inference"     # as make test: a value you give wins; else the folder if it is there
if [ -z "${MLPERF_INFERENCE_DIR:-}" ] && [ -d "$official/tools/submission" ]; then export MLPERF_INFERENCE_DIR="$official"; fi
b0=$(busy); t0=$(date +%s)
(cd "$tree" && taskset -c "$core" .venv/bin/python -m pytest -q -p no:cacheprovider --basetemp="$base/t" "$@") > "$log" 2>&1
rc=$?; b1=$(busy); t1=$(date +%s)
rm -rf "$base"
echo "$label rc=$rc core${core}_busy=$(( (b1 - b0) / hz )) s wall=$(( t1 - t0 )) s $(grep -E 'passed|failed' "$log" | tail -1)"
