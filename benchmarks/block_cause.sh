#!/usr/bin/env bash
# Runs still owed on the H200 (issue 23): which of the ways block 0 differed from later blocks
# (docs/investigations/2026-11-30-block-zero.md) made block 0's W13-hot and W2-hot ratios differ, each switched on and
# off with the block protocol's options, and where W2's small-spin speed-up comes from. From the
# repository root on the GPU machine:
#   bash benchmarks/block_cause.sh STEP [STEP...]
# STEP (N: runs, fresh processes, slugs <step>-r1..rN):
#   nowarmup:N     --warmup-blocks 0: block 0 differs, as in 15 of 15 sessions before the
#                  warm-up block and in benchmarks/results/h200_e414c6c
#   new:N          today's defaults (one warm-up block): block 0 should read as blocks 1.. do
#   bare:N         --warmup-blocks 0 --no-reference (no peers at all)
#   hotnowarmup:N, hot:N   --set hot without the warm-up block, and with the defaults
#   spinbase:BASE  W2-hot calibration ladder on base spin BASE (try 0, 256, 1024): does the
#                  small-spin speed-up move with the base (benchmarks/results/spin_sass/README.md)
#   shift          block 0 against the later blocks in every session this script wrote
# The steps of the finished investigation's switches (priming placements, neighbours made
# mid-block, fresh placements: old, prime2, noprime, noneighbours, fresh) need a checkout of
# 1892faa, the last commit that had them.
# Sessions go to $SESSIONS (sessions); a log line per step with its wall time. PYTHONPATH=.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-.}
S=${SESSIONS:-sessions}
OLD=(--warmup-blocks 0)
wb() { python3 -m workbench "$@"; }
timed() {
  local t0=$SECONDS
  "$@"
  local rc=$?
  echo "== $* : rc $rc, $((SECONDS - t0)) s wall"
}
runs() {  # runs NAME N OPTIONS...: N default `ab` processes with OPTIONS
  local name=$1 n=$2
  shift 2
  for i in $(seq 1 "$n"); do
    timed wb ab --slug "block-$name-r$i" --sessions-dir "$S" --no-plots --no-confirm "$@"
  done
}
for step in "$@"; do
  case "$step" in
    nowarmup:*) runs nowarmup "${step#*:}" "${OLD[@]}" ;;
    new:*) runs new "${step#*:}" ;;
    bare:*) runs bare "${step#*:}" "${OLD[@]}" --no-reference ;;
    hotnowarmup:*) runs hotnowarmup "${step#*:}" "${OLD[@]}" --set hot ;;
    hot:*) runs hot "${step#*:}" --set hot ;;
    spinbase:*)
      base=${step#*:}
      timed wb calibrate --kernel w2 --set hot --base-spin "$base" \
        --spins 0,10,20,40,80,160,320 --slug "calibrate-w2-base$base" --sessions-dir "$S" ;;
    shift) python3 benchmarks/block_shift.py "$S"/*_block-* ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
