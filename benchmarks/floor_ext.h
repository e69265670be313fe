// The floor probe's launcher, as the torch binding (floor_ext_binding.cpp) calls it: plain C++
// types only, so the binding is compiled by the host compiler and only the kernel by nvcc.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace floor_ext {

// the structures of the arithmetic mode (floor_kernel.cuh): u8 probe_math, u4x2 probe_math4,
// u2x2 probe_math2, arith probe_arith
enum Kind : int { kU8 = 0, kU4x2 = 1, kU2x2 = 2, kArith = 3 };

int math_threads();   // the largest block of kind u8 with math16 > 0
int math2_threads();  // ... of kinds u4x2, u2x2 and arith

// Launches the probe on `stream`; the caller has checked every argument.
cudaError_t launch(const void* src, const int* ids, unsigned* out, long long n16, int grid, int block,
                   bool pdl, long long math16, Kind kind, cudaStream_t stream);

}  // namespace floor_ext
