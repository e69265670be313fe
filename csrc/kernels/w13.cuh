// W13: gate and up projections of every routed expert in one launch, fused with SwiGLU (docs/DESIGN.md §1):
//   inter[j, c] = fp16( silu(sum_k w1[k, c] x[k]) * (sum_k w3[k, c] x[k]) ),  expert e = ids[j].
// Torch-free. Grid (N/32 blocks of 16 output columns, top_k): one CTA = 16 output columns c of one routed expert
// over the whole K, so no split-K combine and no exchange between CTAs: its warps' lanes 0..15
// hold gate columns c and lanes 16..31 the up columns N/2 + c (half a 32-column gate tile beside
// the same half of the up tile; the fragment packing keeps a tile's halves in lanes 0..15 and
// 16..31). Warp w takes groups w, w + warps, ... (kUnroll of them per round, every load of a round
// issued before the first is used) with tensor-core products (awq_meta.cuh, dot_group) against x
// in shared memory; warp 0 adds the warps' sums in warp order, and lane i < 16 takes the up sum
// from lane i + 16 to write silu(gate) * up.
// A build with WB_W13_SPLITS = S > 1 spreads each CTA's warps over up to S CTAs (grid z) and adds
// their sums in the same warp order (split_sum.cuh): the same bits, more CTAs in flight.
#pragma once
#include "awq_meta.cuh"

#ifndef WB_W13_SPLITS
#define WB_W13_SPLITS 1
#endif
#if WB_W13_SPLITS > 1
#include "split_sum.cuh"
#endif

namespace wb {

// Spec parameters (workbench/kernels/specs.py BUILTIN_PARAMS): a build may set them with -D; the
// defaults here must equal the spec's (a CPU test holds them together).
#ifndef WB_W13_UNROLL
#define WB_W13_UNROLL 5
#endif
#ifndef WB_W13_MAX_WARPS
#define WB_W13_MAX_WARPS 16
#endif
constexpr int kUnroll = WB_W13_UNROLL;       // groups whose loads a warp issues before it computes: bytes in flight
constexpr int kMaxWarps = WB_W13_MAX_WARPS;  // the launcher picks ceil(groups / kUnroll) warps, at most this many
#if WB_W13_SPLITS > 1
constexpr int kSplits = WB_W13_SPLITS;       // CTAs a tile's warps spread over, at most
__device__ float w13_partials[kPartialFloats];  // [tile][W][32] warp sums of the split CTAs
__device__ unsigned w13_arrivals[kSplitTiles];  // per tile: split CTAs done with this call
#endif

struct W13Params {
  const __half* x;                 // [K] activations
  const uint4* weights;            // [E][K/32][N] int4 in fragment order, 16 bytes per (group, lane)
  const unsigned char* meta;       // [E][K/32][N * kRecordBytes] records
  const int* ids;                  // [top_k] routed experts
  __half* inter;                   // [top_k][N/2] output
  int K, N, experts;
  long long spin_cycles;           // calibration builds only
};

__global__ void __launch_bounds__(kMaxWarps * 32, 1) w13_kernel(const W13Params p) {
  extern __shared__ uint4 xs[];  // x (K halves, as in memory), then one group of zeros
  __shared__ float red[kMaxWarps][kTileCols];
  kernel_prologue();
  const int h = blockIdx.x, j = blockIdx.y;  // output columns 16h .. 16h + 15 of routed slot j
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int G = p.K / kGroup, half_n = p.N / 2, n16 = p.K / 8;
#if WB_W13_SPLITS > 1
  // Virtual warp vw of the tile's W (the one-CTA launch's warps: its groups, its sums); a warp
  // with vw >= W starts past the last group and has no work.
  const int W = static_cast<int>(min(max((G + kUnroll - 1) / kUnroll, 1), kMaxWarps));
  const int vw = static_cast<int>(blockIdx.z) * warps + warp, first = vw < W ? vw : G;
#else
  const int W = warps, first = warp;
#endif
  calibration_spin(p.spin_cycles);

  // Three kinds of loads, issued so that none waits for another it does not need: x (copied to
  // shared memory), the routed id, then the weights and records that depend on the id. An
  // out-of-range id (documented policy: contributes nothing) reads expert 0 and is zeroed below,
  // so every load stays in bounds and no branch separates the id from the loads.
  const uint4* x16 = reinterpret_cast<const uint4*>(p.x);
#if WB_W13_SPLITS > 1
  SplitStaging stage{G, W, static_cast<int>(blockIdx.z) * warps, 0, {}};  // this CTA's groups of x
#else
  Staging stage;
#endif
  stage.begin(x16, n16);
  const int id = __ldg(p.ids + j);
  const bool valid = id >= 0 && id < p.experts;
  const size_t e = valid ? static_cast<size_t>(id) : 0;
  // Lane i < 16: gate column 16h + i, the fragment lane 16(h & 1) + i of gate tile h / 2; lane
  // i >= 16: the same lane of up tile N/64 + h / 2 (up column N/2 + 16h + i - 16).
  const int gate_col = (h >> 1) * kTileCols + 16 * (h & 1), up_col = p.N / 2 + gate_col;
  const size_t bank = e * G * p.N;
  const uint4* wp = p.weights + bank + (lane < 16 ? gate_col : up_col) + (lane & 15);
  const unsigned char* mlo = p.meta + (bank + gate_col) * kRecordBytes;
  const unsigned char* mhi = p.meta + (bank + up_col) * kRecordBytes;
  uint4 w[kUnroll];
  unsigned m[kUnroll];
  // Issues the loads of groups g0, g0 + W, ... (kUnroll of them; past the end they repeat the
  // last group, so every lane always runs the reader's shuffles, and the sums skip them).
  auto load = [&](int g0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t g = static_cast<size_t>(min(g0 + u * W, G - 1));
      w[u] = __ldg(wp + g * p.N);
      m[u] = read_meta2(mlo + g * p.N * kRecordBytes, mhi + g * p.N * kRecordBytes, lane);
    }
  };
  load(first);
  stage.finish(xs, x16, n16);
  if (threadIdx.x < 4) xs[n16 + threadIdx.x] = make_uint4(0u, 0u, 0u, 0u);  // group G: zeros
  __syncthreads();
  const uint4* xl = xs + x_word(lane);  // this lane's 16 bytes of group g: xl[4 * g]
  Acc acc = acc_zero();
  for (int g0 = first; g0 < G; g0 += W * kUnroll) {
    // A slot past the last group multiplies the last group's weights by group G's zeros: adds
    // exactly 0, without a branch around the tensor-core work.
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      dot_group(w[u], quad_meta(m[u], lane), as_xfrag(xl[4 * min(g0 + u * W, G)]), acc);
    if (g0 + W * kUnroll < G) load(g0 + W * kUnroll);
  }
  finish_acc(acc);
#if WB_W13_SPLITS > 1
  float sum;  // one CTA per tile where the workspace is too small (split_count): no combine
  const size_t tile = static_cast<size_t>(j) * gridDim.x + h;
  if (gridDim.z == 1)
    sum = cta_column_sum(red, acc_of_lane(acc, lane), warp, lane);
  else if (!split_column_sum(w13_partials + tile * W * kTileCols, w13_arrivals + tile, red, gridDim.z, W,
                                        vw, acc_of_lane(acc, lane), warp, lane, sum))
    return;
#else
  const float sum = cta_column_sum(red, acc_of_lane(acc, lane), warp, lane);
#endif
  const float up = __shfl_down_sync(kFullMask, sum, 16);  // warp 0: lane i < 16 gets up column i
  if (warp != 0 || lane >= 16) return;
  const float g = valid ? sum : 0.f, u = valid ? up : 0.f;
  p.inter[static_cast<size_t>(j) * half_n + 16 * h + lane] = __float2half_rn(g / (1.f + expf(-g)) * u);
}

#if !defined(__CUDACC_RTC__)
inline LaunchShape w13_launch_shape(int K, int N, int top_k) {
  const int G = K / kGroup;
#if WB_W13_SPLITS > 1
  const unsigned warps = warps_for(G, kUnroll, kMaxWarps);
  const unsigned s = split_count(kSplits, warps, static_cast<long long>(N / 32) * top_k);
  return {dim3(static_cast<unsigned>(N / 32), static_cast<unsigned>(top_k), s), dim3(32 * ((warps + s - 1) / s)),
          static_cast<size_t>((K / 8 + 4) * 16)};  // x and one group of zeros
#else
  return {dim3(static_cast<unsigned>(N / 32), static_cast<unsigned>(top_k)), dim3(32 * warps_for(G, kUnroll, kMaxWarps)),
          static_cast<size_t>((K / 8 + 4) * 16)};  // x and one group of zeros
#endif
}
#endif

}  // namespace wb
