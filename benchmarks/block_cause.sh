#!/usr/bin/env bash
# Runs still owed on the H200 (issue 23): which of the ways block 0 differed from later blocks
# (docs/investigations/2026-11-30-block-zero.md) made block 0's W13-hot and W2-hot ratios differ, each switched on and
# off with the block protocol's options, and where W2's small-spin speed-up comes from. From the
# repository root on the GPU machine:
#   bash benchmarks/block_cause.sh STEP [STEP...]
# STEP (N: runs, fresh processes, slugs <step>-r1..rN):
#   old:N          the protocol of the sessions before §5.5's switches (--prime-placements 0
#                  --no-neighbours-first --warmup-blocks 0): block 0 differs, as in 15 of 15
#                  sessions and in benchmarks/results/h200_e414c6c
#   new:N          today's defaults (one warm-up block, neighbours first, no priming): block 0
#                  should read as blocks 1.. do
#   prime2:N       e414c6c's defaults (--prime-placements 2 --warmup-blocks 0)
#   noprime:N      --prime-placements 0 --warmup-blocks 0 (candidate: first copy of fresh banks)
#   noneighbours:N --no-neighbours-first --warmup-blocks 0 (candidate: peers made mid-block 0)
#   bare:N         old protocol with --no-reference      (no peers at all: neighbours ruled out
#                  if block 0 still differs)
#   warmup:N       old protocol plus --warmup-blocks 1   (candidate: what the group ran before:
#                  the hot set's block 0 is the only one timed before its rotating comparison)
#   hotold:N, hot:N, fresh:N   --set hot with the old protocol, the defaults, and the defaults
#                  plus --fresh-placements (every block's copies in memory not used before: if
#                  the first copies were the cause, every block reads as block 0 did)
#   spinbase:BASE  W2-hot calibration ladder on base spin BASE (try 0, 256, 1024): does the
#                  small-spin speed-up move with the base (benchmarks/results/spin_sass/README.md)
#   shift          block 0 against the later blocks in every session this script wrote
# Sessions go to $SESSIONS (sessions); a log line per step with its wall time. PYTHONPATH=.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-.}
S=${SESSIONS:-sessions}
OLD=(--prime-placements 0 --no-neighbours-first --warmup-blocks 0)
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
    old:*) runs old "${step#*:}" "${OLD[@]}" ;;
    new:*) runs new "${step#*:}" ;;
    prime2:*) runs prime2 "${step#*:}" --prime-placements 2 --warmup-blocks 0 ;;
    noprime:*) runs noprime "${step#*:}" --prime-placements 0 --warmup-blocks 0 ;;
    noneighbours:*) runs noneighbours "${step#*:}" --no-neighbours-first --warmup-blocks 0 ;;
    bare:*) runs bare "${step#*:}" "${OLD[@]}" --no-reference ;;
    warmup:*) runs warmup "${step#*:}" "${OLD[@]}" --warmup-blocks 1 ;;
    hotold:*) runs hotold "${step#*:}" "${OLD[@]}" --set hot ;;
    hot:*) runs hot "${step#*:}" --set hot ;;
    fresh:*) runs fresh "${step#*:}" --set hot --fresh-placements ;;
    spinbase:*)
      base=${step#*:}
      timed wb calibrate --kernel w2 --set hot --base-spin "$base" \
        --spins 0,10,20,40,80,160,320 --slug "calibrate-w2-base$base" --sessions-dir "$S" ;;
    shift) python3 benchmarks/block_shift.py "$S"/*_block-* ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
