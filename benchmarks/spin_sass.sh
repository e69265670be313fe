#!/usr/bin/env bash
# SASS of the W2 and W13 kernels with and without the calibration spin (-DWB_CALIBRATION), for
# sm_90, on a machine without a GPU (docs/DESIGN.md §5.8): the kernels' .cuh files are torch-free,
# so a one-line translation unit per kernel compiles them with the flags the workbench's builds
# use (workbench/kernels/build.py BASE_CUDA_FLAGS, the variant's -D flags).
# Usage: benchmarks/spin_sass.sh [OUT_DIR]   (default benchmarks/results/spin_sass)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-benchmarks/results/spin_sass}
mkdir -p "$out"
# cuobjdump: the toolkit's, else the copy the triton wheel ships (set CUOBJDUMP to choose)
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || python3 -c \
  "import pathlib, triton; print(pathlib.Path(triton.__file__).parent / 'backends/nvidia/bin/cuobjdump')")}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for kernel in w2 w13; do
  upper=$(echo "$kernel" | tr a-z A-Z)
  case $kernel in
    w2) params="-DWB_W2_UNROLL=2 -DWB_W2_MAX_WARPS=32" ;;
    w13) params="" ;;
  esac
  echo "#include \"kernels/$kernel.cuh\"" > "$tmp/$kernel.cu"
  for calib in plain calib; do
    flags="-DWB_KERNEL_$upper -DWB_LAYOUT_B3 -DWB_READER_SCALAR $params"
    [ "$calib" = calib ] && flags="$flags -DWB_CALIBRATION"
    # shellcheck disable=SC2086
    nvcc -cubin -arch=sm_90 -O3 -lineinfo -Xptxas=-v -I csrc $flags \
      -o "$tmp/$kernel-$calib.cubin" "$tmp/$kernel.cu" 2> "$out/$kernel-$calib.ptxas.txt"
    "$cuobjdump" -sass "$tmp/$kernel-$calib.cubin" > "$out/$kernel-$calib.sass"
  done
done
{ nvcc --version | tail -2; "$cuobjdump" --version | tail -1; } > "$out/tools.txt"
echo "SASS in $out"
