#!/usr/bin/env bash
# The H200 evidence the README cites, as it was run (on the GPU machine, from the repository root):
#   bash benchmarks/evidence.sh STEP [STEP...]
# STEP: build | gputests (benchmarks/gpu_tier.py: the tier, one log line) | user-default (`workbench ab` with its plots, timed) | pack (compress
# the sessions for committing) | default:FIRST-LAST (fresh default `workbench ab` processes, slugs
# default-rFIRST..) | aa:FIRST-LAST (A/A runs, b3-scalar vs itself) | overlap:FIRST-LAST,
# aa-overlap:FIRST-LAST (the same with --overlap, slugs overlap-r.., aa-overlap-r..) | cal:KERNEL:SPIN:TRIALS
# (calibration trials of one injected spin on the hot set) | calibrate (the default ladder, both
# kernels) | bench (bench_kernels.py with the floor probe and the triton-moe peer, JSON to
# $LOGS/bench.json) | sanitize (memcheck and racecheck on a shape whose warps loop over several
# rounds) | user (the examples/ spec against b3-scalar) | checkpoint (a random 4-layer checkpoint,
# then ab on it) | tune:KERNEL (the sweeps the README cites) | volta (the sm_70 kernels through
# the driver's PTX JIT, benchmarks/volta_jit.py: the PTX in $VOLTA_PTX, default build/volta_ptx,
# written beforehand on a CPU machine with --write-ptx) | splits (benchmarks/bench_splits.py: the
# split-K builds checked bit for bit against the one-CTA builds and float64, then timed beside
# them, JSON to $LOGS/splits.json) | splits-sanitize (its checks under memcheck and racecheck).
# Sessions go to $SESSIONS
# (sessions), logs of the steps that write files to $LOGS (.), a log line per step with its wall
# time to stdout. Needs no `pip install`: PYTHONPATH=.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-.}
S=${SESSIONS:-sessions}
L=${LOGS:-.}
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
    gputests) timed python3 benchmarks/gpu_tier.py --workers "${GPU_TIER_WORKERS:-6}" --log "$L/gpu_tier.jsonl" ;;  # its line appended to $LOGS/gpu_tier.jsonl
    default:*)
      r=${step#default:}
      for i in $(seq "${r%-*}" "${r#*-}"); do
        timed wb ab --slug "default-r$i" --sessions-dir "$S" --no-plots
      done ;;
    user-default)  # what a user types, plots included (the run-time goal: docs/investigations/2026-12-03-worker-processes.md)
      timed wb ab --slug default-plots --sessions-dir "$S" --plots-dir "$L/plots" ;;
    pack) timed wb sessions pack --root "$S" "$S"/*/ ;;
    aa:*)
      r=${step#aa:}
      for i in $(seq "${r%-*}" "${r#*-}"); do
        timed wb ab --a b3-scalar --b b3-scalar --no-reference --slug "aa-r$i" \
          --sessions-dir "$S" --no-plots
      done ;;
    overlap:*)  # default runs with --overlap (issue 44: kept only if its A/A shows no effect)
      r=${step#overlap:}
      for i in $(seq "${r%-*}" "${r#*-}"); do
        timed wb ab --overlap --slug "overlap-r$i" --sessions-dir "$S" --no-plots
      done ;;
    aa-overlap:*)
      r=${step#aa-overlap:}
      for i in $(seq "${r%-*}" "${r#*-}"); do
        timed wb ab --a b3-scalar --b b3-scalar --no-reference --overlap --slug "aa-overlap-r$i" \
          --sessions-dir "$S" --no-plots
      done ;;
    cal:*)
      IFS=: read -r _ k spin trials <<< "$step"
      timed wb calibrate --kernel "$k" --set hot --spins "0,$spin" --trials "$trials" \
        --slug "calibrate-$k-trials" --sessions-dir "$S" --no-plots ;;
    calibrate) timed wb calibrate --kernel w13,w2 --slug calibrate --sessions-dir "$S" ;;
    bench)
      timed python3 benchmarks/bench_kernels.py --replays 100 --arms b4-scalar,b3-scalar,b3-coop,triton-moe \
        --out "$L/bench.json" ;;
    splits) timed python3 benchmarks/bench_splits.py --out "$L/splits.json" ;;
    splits-sanitize)
      for tool in memcheck racecheck; do
        timed compute-sanitizer --tool "$tool" python3 benchmarks/bench_splits.py --check-only --repeat 2
      done ;;
    sanitize)
      for tool in memcheck racecheck; do
        timed compute-sanitizer --tool "$tool" python3 -m workbench check --hidden 4096 --inter 2048 \
          --experts 8 --top-k 4 --tp 1 --layers 2 --banks 1 --no-args
      done ;;
    user)
      timed wb ab --kernel w13 --a b3-scalar --b examples/w13_unroll4/variant.toml --no-reference \
        --no-confirm --slug user-variant --sessions-dir "$S" ;;
    checkpoint)
      timed wb checkpoint make /tmp/ck --preset qwen3.8-flash-next --layers 4 --experts 64 --seed 1 --shards 2
      timed wb ab --checkpoint /tmp/ck --no-reference --no-confirm --slug checkpoint --sessions-dir "$S" ;;
    tune:w13)
      timed wb tune --kernel w13 --param unroll=3,4,5,6,8 --param max_warps=16,32 --top 2 \
        --floor-file benchmarks/results/h200_floor.txt --slug tune-w13 --sessions-dir "$S" ;;
    tune:w2)
      timed wb tune --kernel w2 --param unroll=1,2,3,4 --param max_warps=16,32 --top 2 \
        --floor-file benchmarks/results/h200_floor.txt --slug tune-w2 --sessions-dir "$S" ;;
    volta) timed python3 benchmarks/volta_jit.py --ptx-dir "${VOLTA_PTX:-build/volta_ptx}" --seeds 3 ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
