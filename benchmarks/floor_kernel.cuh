// The floor probe's kernel (benchmarks/floor_probe.cu explains it), shared by the standalone
// program and the torch extension that bench_kernels.py times in its own process
// (benchmarks/floor_ext.cu), so both measure the same code. Torch-free.
#pragma once
#include <cuda_runtime.h>

// The kernels' dequantize and tensor-core product (dot_group), for the probe's arithmetic mode. The
// probe reads no records, so the layout and reader picked here select nothing it uses.
#define WB_LAYOUT_B3
#define WB_READER_SCALAR
#include "../csrc/kernels/awq_meta.cuh"

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
  // arithmetic mode (probe_math, probe_math4, probe_math2, probe_arith; n16 a multiple of 32):
  // the first math16 elements (a multiple of 32) are weight words, and each goes through the
  // kernels' dequantize and tensor-core products (awq_meta.cuh, dot_group) with a record and
  // activations held in registers: the work the numerics contract requires per weight, and nothing
  // else a kernel does (no record loads or shuffles, no activations from memory, no reduction
  // across warps). probe_arith loads nothing: it makes its words from the index
  long long math16;
};
constexpr int kChunks = 10;

// kU: 16-byte loads per thread per round. kFeed (arithmetic mode only): 0 loads a round and then
// computes on it; 1 issues the next round's loads before computing the current one (register double
// buffering); 2 loads nothing and computes on words made from the index (the arithmetic alone).
template <bool kMath, int kU = 8, int kFeed = 0>
__device__ __forceinline__ void probe_body(const Args& a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (a.cluster > 1) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const long long nthreads = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  long long off = 0;
  if (a.chain) off = __ldg(a.ids + (blockIdx.x & 7));
  if (kMath) off &= ~31LL;  // whole 32-element rows for any id, so the warp stays uniform
  unsigned acc = 0;
  // With arithmetic, the loop and the arithmetic test must be warp-uniform, as the tensor-core
  // products need: the launcher requires n16 and math16 to be multiples of 32, and the id offset
  // is rounded down to one, so all lanes of a warp leave the loop together; the test uses lane 0's
  // index.
  const int lane = threadIdx.x & 31;
  const unsigned rec = 0x1c002c00u ^ (static_cast<unsigned>(lane) << 3);  // scale, bias: fp16 words
  wb::QuadMeta q{{rec, rec ^ 0x10u, rec ^ 0x20u, rec ^ 0x30u}};
  wb::XFrag xf{{0x3c003c00u ^ lane, 0x38003800u ^ lane, 0x34003400u ^ lane, 0x30003000u ^ lane}};
  if (kMath) {  // opaque to the compiler, so they stay in registers instead of being rebuilt per word
#pragma unroll
    for (int c = 0; c < 4; ++c) asm volatile("" : "+r"(q.r[c]), "+r"(xf.p[c]));
  }
  wb::Acc sums = wb::acc_zero();
  auto load = [&](uint4 (&v)[kU], long long i) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const long long k = i + u * nthreads;
      const uint4* p = a.src + k;
      if (a.chain == 2) {
        const int c = static_cast<int>(k) / a.chunk16;  // slices stay far below 2^31 elements
        p = a.src + __ldg(a.chunk_off + (c < kChunks ? c : kChunks - 1)) + (k - static_cast<long long>(c) * a.chunk16);
      }
      if (kFeed == 2) {  // as few instructions as keep the words distinct and loop-variant
        const unsigned kk = static_cast<unsigned>(k);
        v[u] = make_uint4(kk, kk ^ 0x5a5a5a5au, kk ^ 0xa5a5a5a5u, kk ^ 0x0f0f0f0fu);
      } else {
        v[u] = k < a.n16 ? __ldg(p) : make_uint4(0, 0, 0, 0);
      }
    }
  };
  auto use = [&](const uint4 (&v)[kU], long long i) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      if (kMath && i - lane + u * nthreads < a.math16) wb::dot_group(v[u], q, xf, sums);
      // (without loads the sums are the only result: no fold of the words)
      if (kFeed != 2) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
  };
  if (kFeed == 1) {
    uint4 cur[kU], nxt[kU] = {};  // (the last round copies nxt without loading it: defined, unused)
    long long i = tid + off;
    if (i < a.n16) load(cur, i);
    for (; i < a.n16; i += kU * nthreads) {
      if (i + kU * nthreads < a.n16) load(nxt, i + kU * nthreads);
      use(cur, i);
#pragma unroll
      for (int u = 0; u < kU; ++u) cur[u] = nxt[u];
    }
  } else {
    for (long long i = tid + off; i < a.n16; i += kU * nthreads) {
      uint4 v[kU];
      load(v, i);
      use(v, i);
    }
  }
  wb::finish_acc(sums);
#pragma unroll
  for (int mb = 0; mb < 2; ++mb)
#pragma unroll
    for (int r = 0; r < 4; ++r) acc ^= __float_as_uint(sums.d[mb][r]);
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

// The plain probe (its code is the same as before the arithmetic mode existed).
__global__ void probe(const Args a) { probe_body<false>(a); }

// Arithmetic mode: it holds more registers, so it launches blocks of up to kMathThreads (no spills),
// which covers the kernels' own blocks (W13 512 threads, W2 800).
constexpr int kMathThreads = 800;
__global__ void __launch_bounds__(kMathThreads) probe_math(const Args a) { probe_body<true>(a); }

// The same arithmetic in the structures that were fastest for it in `floor_probe sweep`: four or
// two loads per round, in blocks of up to 512 threads held to at most 64 registers, so two CTAs
// share an SM. And the arithmetic alone: the two-load structure with no loads at all (words made
// from the index), what the contract's per-weight work costs on this GPU with nothing to wait for.
constexpr int kMath2Threads = 512;
__global__ void __launch_bounds__(kMath2Threads, 2) probe_math4(const Args a) { probe_body<true, 4, 0>(a); }
__global__ void __launch_bounds__(kMath2Threads, 2) probe_math2(const Args a) { probe_body<true, 2, 0>(a); }
__global__ void __launch_bounds__(kMath2Threads, 2) probe_arith(const Args a) { probe_body<true, 2, 2>(a); }

}  // namespace floor_probe
