#!/usr/bin/env bash
# Builds benchmarks/lab/lab from source trees: each NAME=DIR (a folder holding kernels/w13.cuh and
# kernels/w2.cuh, like csrc/) is compiled for b4-scalar, b3-scalar and b3-coop of both ops;
# NAME=DIR@-DMACRO=V,-DOTHER=W adds compile-time parameters (a spec's params, e.g. WB_W13_UNROLL).
#   bash benchmarks/lab/build.sh OUT_BINARY ref=/tmp/ref_csrc new=csrc u3=csrc@-DWB_W13_UNROLL=3 [...]
# Needs nvcc only (no torch, no GPU); ARCH defaults to sm_90.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
shift
arch=${ARCH:-sm_90}
objs=$(mktemp -d)
flags=(-O3 -std=c++17 -arch="$arch" -lineinfo -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__
       -D__CUDA_NO_HALF2_OPERATORS__ -I"$here")
pids=()
for tree in "$@"; do
  name=${tree%%=*}
  spec=${tree#*=}
  defs=()
  if [[ $spec == *@* ]]; then IFS=, read -r -a defs <<< "${spec#*@}"; spec=${spec%%@*}; fi
  dir=$(cd "$spec" && pwd)
  for op in W13 W2; do
    for v in "B4 SCALAR" "B3 SCALAR" "B3 COOP"; do
      set -- $v
      ns="lab_${name//[^A-Za-z0-9]/_}_${op}_$1_$2"
      nvcc "${flags[@]}" "${defs[@]}" -I"$dir" -DLAB_TREE="\"$name\"" -DLAB_NS="$ns" -DLAB_$op -DWB_LAYOUT_$1 -DWB_READER_$2 \
        -c "$here/variant.cu" -o "$objs/$ns.o" &
      pids+=($!)
    done
  done
done
for p in "${pids[@]}"; do wait "$p"; done
nvcc "${flags[@]}" "$here/lab.cu" "$objs"/*.o -o "$out"
rm -rf "$objs"
