#!/usr/bin/env bash
# Timing-only ablations on a GPU machine (benchmarks/ablate_sources.py): builds the b3-scalar
# variant of each ablated copy of csrc/ in parallel, then times it with bench_kernels.py.
#   bash benchmarks/run_ablations.sh [w2|w13|w13,w2] [OUTFILE]
# Outputs are wrong on purpose; only the µs per call mean anything (see benchmarks/results/README.md).
set -u
kernels=${1:-w13,w2}
out=${2:-/dev/stdout}
export PYTHONUNBUFFERED=1
tmp=$(mktemp -d)
python3 benchmarks/ablate_sources.py csrc "$tmp" > /dev/null
names="${ABLATIONS:-E1_null E2_noload E3_nocompute E4_noids E5_loadonly}"
build="from workbench.kernels.build import build_many; from workbench.kernels.variants import parse_arm as p
build_many([p(k, 'b3-scalar') for k in '$kernels'.split(',')], max_jobs=4, load=False)"
for e in $names; do WORKBENCH_CSRC="$tmp/$e" python3 -c "$build" > /dev/null 2>&1 & done
wait
for e in $names; do
  echo "== $e" >> "$out"
  for k in ${kernels//,/ }; do
    WORKBENCH_CSRC="$tmp/$e" python3 benchmarks/bench_kernels.py --replays 50 --arms b3-scalar \
      --kernel "$k" 2>&1 | grep -v floor >> "$out"
  done
done
