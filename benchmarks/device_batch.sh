#!/usr/bin/env bash
# One call on the GPU machine of the evidence the README cites, from the repository root:
#   OUT=DIR bash benchmarks/device_batch.sh LIMIT_S STEP...
# Runs benchmarks/evidence.sh's STEPs (sessions under /tmp/s) for at most LIMIT_S seconds, then
# packs the sessions (workbench sessions pack), prints where each worker's time went
# (benchmarks/worker_phases.py) and leaves in $OUT: log.txt, phases.txt, gpu.txt and s.tgz (the
# sessions, to unpack into sessions/). Whatever the steps finished is kept if the limit cuts them.
set -u
limit=$1
shift
export SESSIONS=/tmp/s LOGS="$OUT" PYTHONUNBUFFERED=1
mkdir -p "$SESSIONS"
nvidia-smi -L > "$OUT/gpu.txt" 2>&1
timeout "$limit" bash benchmarks/evidence.sh "$@" > "$OUT/log.txt" 2>&1
echo "== steps ended: rc $?" >> "$OUT/log.txt"
bash benchmarks/evidence.sh pack >> "$OUT/log.txt" 2>&1
python3 benchmarks/worker_phases.py "$SESSIONS"/*/ > "$OUT/phases.txt" 2>&1
tar czf "$OUT/s.tgz" -C /tmp s
rm -rf "$OUT/plots"
grep "^== " "$OUT/log.txt"
