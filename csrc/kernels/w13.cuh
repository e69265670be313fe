// W13: gate and up projections of every routed expert in one launch, fused with SwiGLU (DESIGN §1):
//   inter[j, c] = fp16( silu(sum_k w1[k, c] x[k]) * (sum_k w3[k, c] x[k]) ),  expert e = ids[j].
// Torch-free. Grid (T = N/64 column tiles, top_k, splits); one CTA = 32 gate + 32 up columns of one
// expert over one K slice; lane = column, warps split the slice's groups; splits combine in order.
#pragma once
#include "awq_meta.cuh"

namespace wb {

constexpr int kWarps = 4;   // warps per CTA; more parallelism comes from split-K across CTAs
constexpr int kUnroll = 4;  // groups whose loads a warp issues before it computes: bytes in flight

struct W13Params {
  const __half* x;                 // [K] activations
  const uint4* weights;            // [E][K/32][N] int4, 16 bytes per (group, column)
  const unsigned char* meta;       // [E][K/32][N * kRecordBytes] records
  const int* ids;                  // [top_k] routed experts
  __half* inter;                   // [top_k][N/2] output
  float* ws;                       // [top_k][T][splits][64] split-K partials
  unsigned* counters;              // [top_k][T], zero before and after every launch
  int K, N, experts, splits;
  long long spin_cycles;           // calibration builds only
};

__global__ void __launch_bounds__(kWarps * 32) w13_kernel(const W13Params p) {
  extern __shared__ float xs[];    // this split's slice of x, as float
  __shared__ float red[kWarps][64];
  __shared__ float row[64];
  const int t = blockIdx.x, j = blockIdx.y, s = blockIdx.z, T = gridDim.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int G = p.K / kGroup, half_n = p.N / 2;
  const int gbeg = (s * G) / p.splits, gend = ((s + 1) * G) / p.splits;
  calibration_spin(p.spin_cycles);

  // The routed id and this split's activations are independent loads: issue both before
  // waiting on either, so the dependent weight loads start one memory round trip earlier.
  const int e = __ldg(p.ids + j);
  stage_activations(xs, p.x + gbeg * kGroup, (gend - gbeg) * kGroup);
  __syncthreads();
  if (e < 0 || e >= p.experts) {  // documented policy: an out-of-range id contributes nothing
    if (s == 0 && warp == 0) p.inter[j * half_n + t * kTileCols + lane] = __float2half_rn(0.f);
    return;
  }

  const int col_g = t * kTileCols + lane, col_u = half_n + col_g;
  const uint4* wexp = p.weights + static_cast<size_t>(e) * G * p.N;
  const unsigned char* mexp = p.meta + static_cast<size_t>(e) * G * p.N * kRecordBytes;
  float acc_g = 0.f, acc_u = 0.f;
  for (int g0 = gbeg + warp; g0 < gend; g0 += kWarps * kUnroll) {
    uint4 wg[kUnroll], wu[kUnroll];
    Meta mg[kUnroll], mu[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int g = g0 + u * kWarps;
      if (g < gend) {  // warp-uniform, so the cooperative reader's shuffles see all lanes
        wg[u] = __ldg(wexp + static_cast<size_t>(g) * p.N + col_g);
        wu[u] = __ldg(wexp + static_cast<size_t>(g) * p.N + col_u);
        const unsigned char* mrow = mexp + static_cast<size_t>(g) * p.N * kRecordBytes;
        mg[u] = read_meta(mrow + t * kTileCols * kRecordBytes, lane);
        mu[u] = read_meta(mrow + (half_n + t * kTileCols) * kRecordBytes, lane);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int g = g0 + u * kWarps;
      if (g < gend) {
        const float* xg = xs + (g - gbeg) * kGroup;
        acc_g += dot32(wg[u], mg[u], xg);
        acc_u += dot32(wu[u], mu[u], xg);
      }
    }
  }
  red[warp][lane] = acc_g;
  red[warp][32 + lane] = acc_u;
  __syncthreads();
  if (threadIdx.x < 64) {
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += red[w][threadIdx.x];
    row[threadIdx.x] = v;
  }
  __syncthreads();
  const size_t rid = static_cast<size_t>(j) * T + t;
  if (!splitk_last<64>(p.ws + rid * p.splits * 64, p.counters + rid, s, p.splits, row)) return;
  if (threadIdx.x < 32) {
    const float g = row[lane], u = row[32 + lane];
    p.inter[j * half_n + t * kTileCols + lane] = __float2half_rn(g / (1.f + expf(-g)) * u);
  }
}

}  // namespace wb
