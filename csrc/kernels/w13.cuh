// W13: gate and up projections of every routed expert in one launch, fused with SwiGLU (DESIGN §1):
//   inter[j, c] = fp16( silu(sum_k w1[k, c] x[k]) * (sum_k w3[k, c] x[k]) ),  expert e = ids[j].
// Torch-free. Grid (T = N/64 column tiles, top_k, splits); one CTA = 32 gate + 32 up columns of one
// expert over one K slice. Warps alternate gate / up tiles and share the slice's groups; a warp
// covers one 32-column tile per group with tensor-core products (awq_meta.cuh, dot_group). The
// splits of a tile combine in split order (combine_splits: a cluster on sm_90).
#pragma once
#include "awq_meta.cuh"

namespace wb {

constexpr int kWarps = 8;   // warps per CTA: even warps gate, odd warps up
constexpr int kUnroll = 4;  // groups whose loads a warp issues before it computes: bytes in flight

struct W13Params {
  const __half* x;                 // [K] activations
  const uint4* weights;            // [E][K/32][N] int4 in fragment order, 16 bytes per (group, lane)
  const unsigned char* meta;       // [E][K/32][N * kRecordBytes] records
  const int* ids;                  // [top_k] routed experts
  __half* inter;                   // [top_k][N/2] output
  float* ws;                       // [top_k][T][splits][64] split-K partials (pre-sm_90 only)
  unsigned* counters;              // [top_k][T], zero before and after every launch (pre-sm_90)
  int K, N, experts, splits;
  long long spin_cycles;           // calibration builds only
};

__global__ void __launch_bounds__(kWarps * 32, 3) w13_kernel(const W13Params p) {
  extern __shared__ uint4 xs[];    // this split's groups of x in fragment order (load_xfrag)
  __shared__ float red[kWarps][kTileCols];
  __shared__ float row[2 * kTileCols];  // gate sums, then up sums
  kernel_prologue();
  const int t = blockIdx.x, j = blockIdx.y, s = blockIdx.z, T = gridDim.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int G = p.K / kGroup, half_n = p.N / 2;
  const int gbeg = (s * G) / p.splits, gend = ((s + 1) * G) / p.splits;
  calibration_spin(p.spin_cycles);

  // The routed id and this split's activations are independent loads: issue both before
  // waiting on either, so the dependent weight loads start one memory round trip earlier.
  const int e = __ldg(p.ids + j);
  stage_activations(xs, p.x + gbeg * kGroup, gend - gbeg);
  if (e < 0 || e >= p.experts) {  // documented policy: an out-of-range id contributes nothing
    if (s == 0 && warp == 0) p.inter[j * half_n + t * kTileCols + lane] = __float2half_rn(0.f);
    return;  // the same for every CTA of the cluster (same j): no barrier is left waiting
  }

  // This warp's tile: gate columns t*32.. (even warps) or up columns N/2 + t*32.. (odd warps).
  const int col0 = (warp & 1) * half_n + t * kTileCols;
  const uint4* wp = p.weights + static_cast<size_t>(e) * G * p.N + col0 + lane;
  const unsigned char* mp = p.meta + (static_cast<size_t>(e) * G * p.N + col0) * kRecordBytes;
  constexpr int kStride = kWarps / 2;  // groups of one tile are shared by kWarps/2 warps
  Acc acc = acc_zero();
  uint4 w[kUnroll];
  unsigned m[kUnroll];
  // Issues the loads of groups g0, g0 + kStride, ... (kUnroll of them) before any is used.
  auto load = [&](int g0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int g = g0 + u * kStride;
      if (g < gend) {  // warp-uniform, so the cooperative reader's shuffles see all lanes
        w[u] = __ldg(wp + static_cast<size_t>(g) * p.N);
        m[u] = read_meta(mp + static_cast<size_t>(g) * p.N * kRecordBytes, lane);
      }
    }
  };
  const int first = gbeg + (warp >> 1);
  load(first);
  __syncthreads();  // the staged activations; this warp's first weight loads are in flight
  for (int g0 = first; g0 < gend; g0 += kStride * kUnroll) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int g = g0 + u * kStride;
      if (g < gend) dot_group(w[u], quad_meta(m[u], lane), load_xfrag(xs, g - gbeg, lane), acc);
    }
    if (g0 + kStride * kUnroll < gend) load(g0 + kStride * kUnroll);
  }
  finish_acc(acc);
  red[warp][lane] = acc_of_lane(acc, lane);
  __syncthreads();
  if (threadIdx.x < 2 * kTileCols) {  // gate column c from the even warps, up from the odd ones
    const int half = threadIdx.x / kTileCols, c = threadIdx.x % kTileCols;
    float v = 0.f;
#pragma unroll
    for (int w2 = half; w2 < kWarps; w2 += 2) v += red[w2][c];
    row[threadIdx.x] = v;
  }
  __syncthreads();
  const size_t rid = static_cast<size_t>(j) * T + t;
  if (!combine_splits<2 * kTileCols>(p.ws + rid * p.splits * 2 * kTileCols, p.counters + rid, s, p.splits, row))
    return;
  if (threadIdx.x < kTileCols) {
    const float g = row[lane], u = row[kTileCols + lane];
    p.inter[j * half_n + t * kTileCols + lane] = __float2half_rn(g / (1.f + expf(-g)) * u);
  }
}

}  // namespace wb
