#!/usr/bin/env bash
# The README's test command, timed as CI runs it: from a fresh clone of COMMIT (default HEAD), in
# the current Python environment, with CI=true (the compile tier must run).
#   bash benchmarks/suite_time.sh [COMMIT] [OUT_FILE] [-- PYTEST_ARGS...]
# Appends one line to OUT_FILE (default benchmarks/results/test_suite.log): the date, the commit,
# the number of CPU cores, the wall seconds and pytest's summary line; the whole output goes to
# OUT_FILE.last (the failures, the durations). PYTEST_ARGS are added to
# the README's command (e.g. `-- -m "not slow"` times the fast lane). Like CI, the command installs
# the clone (editable) into the current environment; the checkout this script lives in is installed
# back (editable, no dependencies) before the clone is removed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=${1:-HEAD}
out=${2:-$repo/benchmarks/results/test_suite.log}
shift $(($# < 2 ? $# : 2))
[[ ${1:-} == "--" ]] && shift
work=$(mktemp -d)
restore() {
  (cd "$repo" && python3 -m pip install -q --no-deps -e . > /dev/null 2>&1) || true
  rm -rf "$work"
}
trap restore EXIT
git clone -q "$repo" "$work/clone"
git -C "$work/clone" checkout -q "$commit"
sha=$(git -C "$work/clone" rev-parse --short HEAD)
# the README's test command: its second ```bash block
cmd=$(awk '/^```bash$/{n++; next} /^```$/{next} n==2{print; exit}' "$work/clone/README.md")
cd "$work/clone"
start=$(date +%s.%N)
set +e
CI=true bash -c "$cmd $*" > "$out.last" 2>&1
rc=$?
set -e
end=$(date +%s.%N)
summary=$(grep -E "^=+ .*(passed|failed).* in " "$out.last" | tail -1 | tr -d '=' | xargs)
wall=$(python3 -c "print(f'{$end - $start:.0f}')")
echo "$(date -u +%F) $sha cores=$(nproc) wall=${wall}s rc=$rc args='$*' | $summary" | tee -a "$out"
