// W2: down projection of every routed expert plus the router-weighted sum, in one launch (docs/DESIGN.md §1):
//   y[n] = fp16( sum_j rw[j] * sum_k w2_e[k, n] inter[j, k] ),  expert e = ids[j].
// Torch-free. Grid (N/32 column tiles): one CTA = one 32-column tile over every (slot j, group g)
// unit u = j * G + g, so no split-K combine. Warp w takes units [kUnroll*w, kUnroll*w + kUnroll),
// then the same run kUnroll*warps further on, ...; every load of a run (weights, records, and the
// unit's 64 bytes of inter, read straight from global memory: no staging, no barrier before the
// first product) is issued before the first is used. A unit's tensor-core sums (awq_meta.cuh,
// dot_group) are weighted by rw[j] in FP32 and added in unit order; warp 0 adds the warps' sums
// in warp order.
// A build with WB_W2_SPLITS = S > 1 spreads each CTA's warps over up to S CTAs (grid y) and adds
// their sums in the same warp order (split_sum.cuh): the same bits, more CTAs in flight.
#pragma once
#include "awq_meta.cuh"

#ifndef WB_W2_SPLITS
#define WB_W2_SPLITS 1
#endif
#if WB_W2_SPLITS > 1
#include "split_sum.cuh"
#endif

namespace wb {

// Spec parameters (workbench/kernels/specs.py BUILTIN_PARAMS): a build may set them with -D; the
// defaults here must equal the spec's (a CPU test holds them together).
#ifndef WB_W2_UNROLL
#define WB_W2_UNROLL 2
#endif
#ifndef WB_W2_MAX_WARPS
#define WB_W2_MAX_WARPS 32
#endif
constexpr int kUnroll = WB_W2_UNROLL;       // units whose loads a warp issues before it computes: bytes in flight
constexpr int kMaxWarps = WB_W2_MAX_WARPS;  // the launcher picks ceil(units / kUnroll) warps, at most this many
#if WB_W2_SPLITS > 1
constexpr int kSplits = WB_W2_SPLITS;       // CTAs a tile's warps spread over, at most
__device__ float w2_partials[kPartialFloats];  // [tile][W][32] warp sums of the split CTAs
__device__ unsigned w2_arrivals[kSplitTiles];  // per tile: split CTAs done with this call
#endif

struct W2Params {
  const __half* inter;             // [top_k][K] SwiGLU outputs
  const uint4* weights;            // [E][K/32][N] int4 in fragment order, 16 bytes per (group, lane)
  const unsigned char* meta;       // [E][K/32][N * kRecordBytes] records
  const int* ids;                  // [top_k] routed experts
  const float* rw;                 // [top_k] router weights
  __half* y;                       // [N] output
  int K, N, experts, top_k;
  long long spin_cycles;           // calibration builds only
};

__global__ void __launch_bounds__(kMaxWarps * 32) w2_kernel(const W2Params p) {
  __shared__ float red[kMaxWarps][kTileCols];
  kernel_prologue();
  const int t = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int G = p.K / kGroup, units = p.top_k * G;
  calibration_spin(p.spin_cycles);
#if WB_W2_SPLITS > 1
  // Virtual warp vw of the tile's W (the one-CTA launch's warps: its units, its sums); a warp with
  // vw >= W starts past the last unit (its loads read zeros for inter) and has no work.
  const int W = static_cast<int>(min(max((units + kUnroll - 1) / kUnroll, 1), kMaxWarps));
  const int vw = static_cast<int>(blockIdx.y) * warps + warp, first = vw < W ? vw * kUnroll : units;
#else
  const int W = warps, first = warp * kUnroll;
#endif

  // A unit u = j * G + g is inter row j, group g: 32 contiguous halves, 16 bytes per lane of a quad
  // (awq_meta.cuh, XFrag): a lane reads 16-byte word 4u + x_word(lane) of inter (word t on sm_75+).
  const uint4* x16 = reinterpret_cast<const uint4*>(p.inter) + x_word(lane);
  const int col = t * kTileCols + lane;
  const uint4* wp = p.weights + col;
  const unsigned char* mp = p.meta + static_cast<size_t>(t) * kTileCols * kRecordBytes;
  uint4 w[kUnroll], xv[kUnroll];
  unsigned m[kUnroll];
  float r[kUnroll];
  // Issues the loads of units u0 .. u0 + kUnroll - 1. A slot past the last unit, or whose routed
  // id is out of range (documented policy: skipped), reads the last unit's or expert 0's weights
  // and multiplies them by zeros instead of inter: every load stays in bounds, every lane runs the
  // reader's shuffles, and no branch surrounds the tensor-core work.
  auto load = [&](int u0) {
    int j = u0 / G, g = u0 - (u0 / G) * G;  // slot and group advance together
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const bool in = u0 + k < units;
      const int jc = in ? j : p.top_k - 1, gc = in ? g : G - 1;
      const int id = __ldg(p.ids + jc);
      const bool ok = in && id >= 0 && id < p.experts;
      r[k] = ok ? __ldg(p.rw + jc) : 0.f;  // a skipped slot adds 0 * 0 even if its rw is not finite
      xv[k] = ok ? __ldg(x16 + 4 * (u0 + k)) : make_uint4(0u, 0u, 0u, 0u);
      const size_t gr = static_cast<size_t>(ok ? id : 0) * G + gc;
      w[k] = __ldg(wp + gr * p.N);
      m[k] = read_meta(mp + gr * p.N * kRecordBytes, lane);
      if (++g == G) {
        g = 0;
        ++j;
      }
    }
  };
  load(first);
  Acc acc = acc_zero();
  for (int u0 = first; u0 < units; u0 += W * kUnroll) {
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {  // one unit's sums, then weighted by its router weight
      Acc part = acc_zero();
      dot_group(w[k], quad_meta(m[k], lane), as_xfrag(xv[k]), part);
      acc_add_scaled(acc, r[k], part);
    }
    if (u0 + W * kUnroll < units) load(u0 + W * kUnroll);
  }
  finish_acc(acc);  // sm_70 and the FMA path: the quad's lanes, once per warp (not per unit)
#if WB_W2_SPLITS > 1
  float sum;  // one CTA per tile where the workspace is too small (split_count): no combine
  if (gridDim.y == 1)
    sum = cta_column_sum(red, acc_of_lane(acc, lane), warp, lane);
  else if (!split_column_sum(w2_partials + static_cast<size_t>(t) * W * kTileCols, w2_arrivals + t, red,
                                        gridDim.y, W, vw, acc_of_lane(acc, lane), warp, lane, sum))
    return;
#else
  const float sum = cta_column_sum(red, acc_of_lane(acc, lane), warp, lane);
#endif
  if (warp == 0) p.y[col] = __float2half_rn(sum);
}

#if !defined(__CUDACC_RTC__)
inline LaunchShape w2_launch_shape(int K, int N, int top_k) {
  const int G = K / kGroup;
#if WB_W2_SPLITS > 1
  const unsigned warps = warps_for(static_cast<long long>(top_k) * G, kUnroll, kMaxWarps);
  const unsigned s = split_count(kSplits, warps, N / 32);
  return {dim3(static_cast<unsigned>(N / 32), s), dim3(32 * ((warps + s - 1) / s)), 0};
#else
  return {dim3(static_cast<unsigned>(N / 32)), dim3(32 * warps_for(static_cast<long long>(top_k) * G, kUnroll, kMaxWarps)),
          0};  // no dynamic shared memory: inter is read from global memory
#endif
}
#endif

}  // namespace wb
