// The floor probe's kernel (benchmarks/floor_probe.cu explains it), shared by the standalone
// program and the torch extension that bench_kernels.py times in its own process
// (benchmarks/floor_ext.cu), so both measure the same code. Torch-free.
#pragma once
#include <cuda_runtime.h>

namespace floor_probe {

struct Args {
  const uint4* src;   // this call's slice
  const int* ids;     // routed ids (all zero; read so that addresses depend on an L2 load)
  unsigned* out;      // one word per CTA
  long long n16;      // 16-byte elements in the slice
  int chain, cluster;
  // scatter mode (chain == 2): the slice is kChunks "experts" of chunk16 elements each, expert c
  // at src + chunk_off[c] (16-byte elements), as the routed experts of one layer's bank lie
  int chunk16;
  const long long* chunk_off;  // [kChunks] in global memory (a kernel-parameter array indexed at
                               // run time would be copied to local memory by every thread)
};
constexpr int kChunks = 10;

__global__ void probe(const Args a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (a.cluster > 1) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const long long nthreads = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  long long off = 0;
  if (a.chain) off = __ldg(a.ids + (blockIdx.x & 7));
  unsigned acc = 0;
  constexpr int kU = 8;
  for (long long i = tid + off; i < a.n16; i += kU * nthreads) {
    uint4 v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const long long k = i + u * nthreads;
      const uint4* p = a.src + k;
      if (a.chain == 2) {
        const int c = static_cast<int>(k) / a.chunk16;  // slices stay far below 2^31 elements
        p = a.src + __ldg(a.chunk_off + (c < kChunks ? c : kChunks - 1)) + (k - static_cast<long long>(c) * a.chunk16);
      }
      v[u] = k < a.n16 ? __ldg(p) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  __shared__ unsigned red[32];
  for (int o = 16; o; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
  __syncthreads();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (a.cluster > 1) {  // the combine's handshake: release, then the leader acquires
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
  }
#endif
  if (threadIdx.x == 0) {
    unsigned s = 0;
    for (int w = 0; w < (blockDim.x + 31) / 32; ++w) s ^= red[w];
    a.out[blockIdx.x] = s;
  }
}

}  // namespace floor_probe
