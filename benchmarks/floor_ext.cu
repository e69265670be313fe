// The floor probe's kernel launcher for the torch extension (floor_ext_binding.cpp holds the torch
// side, compiled by the host compiler): bench_kernels.py captures it in CUDA Graphs beside the
// kernels, in the same process and on the same buffers' allocator, so "kernel / floor" is a
// side-by-side ratio (issue: the floor probe re-run in the bench's process). No torch header here:
// nvcc compiles only the kernels and this function.
#include "floor_ext.h"
#include "floor_kernel.cuh"

namespace floor_ext {

int math_threads() { return floor_probe::kMathThreads; }
int math2_threads() { return floor_probe::kMath2Threads; }

cudaError_t launch(const void* src, const int* ids, unsigned* out, long long n16, int grid, int block,
                   bool pdl, long long math16, Kind kind, cudaStream_t stream) {
  floor_probe::Args a{};
  a.src = static_cast<const uint4*>(src);
  a.ids = ids;
  a.out = out;
  a.n16 = n16;
  a.chain = 1;  // addresses depend on an id load, as in the kernels
  a.cluster = 1;
  a.math16 = math16;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(static_cast<unsigned>(block));
  cfg.stream = stream;
  cudaLaunchAttribute attr;
  if (pdl) {
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  void (*kernel)(const floor_probe::Args) = floor_probe::probe;
  if (math16 > 0)
    kernel = kind == kU8     ? floor_probe::probe_math
             : kind == kU4x2 ? floor_probe::probe_math4
             : kind == kU2x2 ? floor_probe::probe_math2
                             : floor_probe::probe_arith;
  cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, a);
  return err == cudaSuccess ? cudaGetLastError() : err;
}

}  // namespace floor_ext
