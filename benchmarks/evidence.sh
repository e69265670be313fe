#!/usr/bin/env bash
# The H200 evidence the README cites, as it was run (on the GPU machine, from the repository root):
#   bash benchmarks/evidence.sh STEP [STEP...]
# STEP: build | gputests | default:FIRST-LAST (fresh default `workbench ab` processes, slugs
# default-rFIRST..) | aa:FIRST-LAST (A/A runs, b3-scalar vs itself) | cal:KERNEL:SPIN:TRIALS
# (calibration trials of one injected spin on the hot set). Sessions go to $SESSIONS (sessions),
# a log line per step with its wall time to stdout. Needs no `pip install`: PYTHONPATH=.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-.}
S=${SESSIONS:-sessions}
wb() { python3 -m workbench "$@"; }
timed() {  # run "$@", print its wall time and exit code
  local t0=$SECONDS
  "$@"
  local rc=$?
  echo "== $* : rc $rc, $((SECONDS - t0)) s wall"
}
for step in "$@"; do
  case "$step" in
    build) timed wb build ;;
    gputests) timed python3 -m pytest -q -p no:cacheprovider -m gpu tests/ ;;
    default:*)
      r=${step#default:}
      for i in $(seq "${r%-*}" "${r#*-}"); do
        timed wb ab --slug "default-r$i" --sessions-dir "$S" --no-plots
      done ;;
    aa:*)
      r=${step#aa:}
      for i in $(seq "${r%-*}" "${r#*-}"); do
        timed wb ab --a b3-scalar --b b3-scalar --no-reference --slug "aa-r$i" \
          --sessions-dir "$S" --no-plots
      done ;;
    cal:*)
      IFS=: read -r _ k spin trials <<< "$step"
      timed wb calibrate --kernel "$k" --set hot --spins "0,$spin" --trials "$trials" \
        --slug "calibrate-$k-trials" --sessions-dir "$S" --no-plots ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
