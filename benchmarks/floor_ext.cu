// The floor probe's library: its kernels (floor_kernel.cuh) and a C launcher, compiled by nvcc
// alone and loaded through ctypes by floor_inproc.py, as workbench's own variants are (no torch
// header: the build takes seconds). bench_kernels.py captures the launch in CUDA Graphs beside the
// kernels, in the same process and on the same buffers' allocator, so "kernel / floor" is a
// side-by-side ratio. floor_inproc.py checks every argument before it calls wb_floor_launch.
#include <cuda_runtime_api.h>

#include "floor_kernel.cuh"

// the structures of the arithmetic mode (floor_kernel.cuh), as floor_inproc.KINDS numbers them
enum FloorKind : int { kU8 = 0, kU4x2 = 1, kU2x2 = 2, kArith = 3 };

extern "C" {

// the largest block of kind u8 with math16 > 0; ... of kinds u4x2, u2x2 and arith
int wb_floor_math_threads() { return floor_probe::kMathThreads; }
int wb_floor_math2_threads() { return floor_probe::kMath2Threads; }

const char* wb_floor_error_string(int err) { return cudaGetErrorString(static_cast<cudaError_t>(err)); }

// Launches the probe on `stream` (a cudaStream_t); returns the launch's cudaError_t.
int wb_floor_launch(const void* src, const int* ids, unsigned* out, long long n16, int grid, int block, int pdl,
                    long long math16, int kind, void* stream) {
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
  cfg.stream = static_cast<cudaStream_t>(stream);
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
  return static_cast<int>(err == cudaSuccess ? cudaGetLastError() : err);
}

}  // extern "C"
