// Split-K builds (WB_W13_SPLITS / WB_W2_SPLITS > 1): the warps of one tile spread over several
// CTAs, so more CTAs are in flight than there are tiles, with a combine that keeps the bits of the
// one-CTA structure. A one-CTA launch has W warps; warp w sums its own work items and
// cta_column_sum adds the W sums in warp order. A split launch gives virtual warp vw = s * wpc + w
// to warp w of split s (wpc warps per CTA): the same items per warp, so the same W sums. Each CTA
// writes its warps' sums to a workspace; the CTA that arrives last at the tile's counter adds all W
// in order vw = 0 .. W-1, exactly the one-CTA order, so the result does not depend on which split
// finishes last, on timing, or on the reader. Included only by split builds: a default build's
// device code does not change (benchmarks/device_code.py).
//
// The workspace is static device memory of the build's library (no allocation per call, so calls
// stay graph-capturable and the op contract keeps its arguments). Calls of one build must be
// ordered (one stream, or graphs replayed in order): two calls in flight at once on different
// streams would share a tile's counter. A launch whose tiles do not fit falls back to one CTA per
// tile (split_count), which gives the same bits.
#pragma once
#include "awq_meta.cuh"

namespace wb {

constexpr int kPartialFloats = 1 << 20;  // workspace: 4 MiB of per-warp column sums, tiles * W * 32
constexpr int kSplitTiles = 1 << 14;     // counters: one per tile (W13: N/32 * top_k, W2: N/32)

#if !defined(__CUDACC_RTC__)
// CTAs per tile for `warps` warps per tile and at most `splits` CTAs: every CTA keeps at least one
// warp (the count is recomputed from the warps per CTA), and 1 where the tiles' sums do not fit.
inline unsigned split_count(int splits, unsigned warps, long long tiles) {
  if (splits <= 1 || tiles > kSplitTiles || tiles * warps * kTileCols > kPartialFloats) return 1;
  const unsigned s = splits < static_cast<int>(warps) ? static_cast<unsigned>(splits) : warps;
  const unsigned per_cta = (warps + s - 1) / s;
  return (warps + per_cta - 1) / per_cta;
}
#endif

// The word slot i of a split CTA copies (slots dealt out over its threads in order): 4g + word,
// -1 for none, -2 past its last (slots ascend). Slot i is word i % 4 of warp (i / 4) % warps's
// group in round i / (4 * warps). Host and device: the compile tier checks it on the host.
__host__ __device__ inline int split_x_word(int i, int warps, int G, int W, int vw0) {
  const int per_round = 4 * warps, k = i / per_round, r = i - k * per_round;
  const int vw = vw0 + (r >> 2), g = vw + k * W;
  if (vw0 + k * W >= G) return -2;
  return vw < W && g < G ? 4 * g + (r & 3) : -1;
}

// W13's copy of x for one split CTA: only the groups its virtual warps read (vw0 .. vw0 + warps - 1
// of W: groups vw + k * W), each to its place in the one-CTA copy, so the products read xs[4g + word]
// as before; no warp of this CTA reads the others. Same two steps as Staging (begin() loads this
// thread's first word before the weight loads, finish() stores it and copies the rest). At the
// preset, S = 2 or 4, every word is the first of its thread: one step, where a copy of all of x by
// 256 or 128 threads would take two or three.
struct SplitStaging {
  int G, W, vw0, at;
  uint4 first;
  __device__ __forceinline__ int word_of(int i) const {
    return split_x_word(i, static_cast<int>(blockDim.x >> 5), G, W, vw0);
  }
  __device__ __forceinline__ void begin(const uint4* __restrict__ src, int) {
    at = word_of(static_cast<int>(threadIdx.x));
    if (at >= 0) first = __ldg(src + at);
  }
  __device__ __forceinline__ void finish(uint4* __restrict__ dst, const uint4* __restrict__ src, int) {
    if (at >= 0) dst[at] = first;
    if (at == -2) return;
    for (int i = threadIdx.x + blockDim.x;; i += blockDim.x) {
      const int a = word_of(i);
      if (a == -2) break;
      if (a >= 0) dst[a] = __ldg(src + a);
    }
  }
};

// A CTA counts itself in at its tile, after a CTA barrier: thread 0's atomic add with
// acquire-release semantics at GPU scope. The barrier orders every thread's sums before the
// release; the CTA that arrives last acquires them, and its barrier after the add orders all of its
// threads' reads after them: one fence per CTA, not one per thread (a split-K semaphore's pattern).
// Returns the count before this CTA. Below sm_70 (no .acq_rel): fences around a relaxed add.
__device__ __forceinline__ unsigned arrive(unsigned* count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  unsigned old;
  asm volatile("atom.acq_rel.gpu.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(count) : "memory");
  return old;
#else
  __threadfence();
  const unsigned old = atomicAdd(count, 1u);
  __threadfence();
  return old;
#endif
}

// Inlined, ptxas 12 spills 4 bytes of W2 for sm_70 at its 64 registers; called, nothing spills.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 750
#define WB_SPLIT_SUM_INLINE __noinline__
#else
#define WB_SPLIT_SUM_INLINE __forceinline__
#endif

// The tile's column sums over its W virtual warps. Every thread of every split CTA calls it with
// its warp's sum `mine` (a warp with vw >= W has no work and writes nothing); `part` is the tile's
// W * 32 floats of workspace, `count` its counter (0 between calls), `red` the CTA's
// cta_column_sum buffer (W rows). Returns true only in the CTA that arrived last; its warp 0 then
// has in `out` the sum of column `lane`, added in the order of cta_column_sum. The other CTAs
// return false and must write nothing.
__device__ WB_SPLIT_SUM_INLINE bool split_column_sum(float* __restrict__ part, unsigned* count, float (*red)[kTileCols],
                                                 int splits, int W, int vw, float mine, int warp, int lane,
                                                 float& out) {
  __shared__ unsigned last;
  if (vw < W) __stcg(part + vw * kTileCols + lane, mine);
  __syncthreads();  // every warp's sum is written before thread 0 counts the CTA in
  if (threadIdx.x == 0) last = arrive(count) == static_cast<unsigned>(splits - 1);
  __syncthreads();
  if (!last) return false;
  // All threads copy the W * 32 sums to shared memory (one L2 round trip, few registers: W2 runs
  // at 64 a thread on sm_70), then warp 0 adds them in warp order.
  for (int i = threadIdx.x; i < W * kTileCols; i += blockDim.x) red[i / kTileCols][i % kTileCols] = __ldcg(part + i);
  __syncthreads();
  out = 0.f;
  if (warp == 0) {
    for (int w = 0; w < W; ++w) out += red[w][lane];
    if (lane == 0) *count = 0u;  // the next call finds the tile at 0: it starts after this grid ends
  }
  return true;
}

}  // namespace wb
