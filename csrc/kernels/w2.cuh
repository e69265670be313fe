// W2: down projection of every routed expert plus the router-weighted sum, in one launch (DESIGN §1):
//   y[n] = fp16( sum_j rw[j] * sum_k w2_e[k, n] inter[j, k] ),  expert e = ids[j].
// Torch-free. Grid (T = N/32 column tiles, splits); the (expert slot, group) units of a tile are
// split across CTAs and, inside a CTA, across warps; lane = column; splits combine in order.
#pragma once
#include "awq_meta.cuh"

namespace wb {

constexpr int kWarps = 4;   // warps per CTA; more parallelism comes from splitting units across CTAs
constexpr int kUnroll = 4;  // units whose loads a warp issues before it computes: bytes in flight
constexpr int kMaxTopK = 64;  // routed slots staged in shared memory (the launcher checks top_k)

struct W2Params {
  const __half* inter;             // [top_k][K] SwiGLU outputs
  const uint4* weights;            // [E][K/32][N] int4, 16 bytes per (group, column)
  const unsigned char* meta;       // [E][K/32][N * kRecordBytes] records
  const int* ids;                  // [top_k] routed experts
  const float* rw;                 // [top_k] router weights
  __half* y;                       // [N] output
  float* ws;                       // [T][splits][32] split partials
  unsigned* counters;              // [T], zero before and after every launch
  int K, N, experts, top_k, splits;
  long long spin_cycles;           // calibration builds only
};

__global__ void __launch_bounds__(kWarps * 32) w2_kernel(const W2Params p) {
  extern __shared__ float xs[];    // this split's units of inter, as float (units are contiguous)
  __shared__ float red[kWarps][32];
  __shared__ float row[32];
  const int t = blockIdx.x, s = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int G = p.K / kGroup, units = p.top_k * G;
  const int ubeg = (s * units) / p.splits, uend = ((s + 1) * units) / p.splits;
  calibration_spin(p.spin_cycles);

  // unit u = (slot j = u / G, group g = u % G) covers inter[j*K + g*32 .. +32]: contiguous in u.
  // The routed ids and the activations load together, before any weight address depends on them.
  __shared__ int ids[kMaxTopK];
  __shared__ float rws[kMaxTopK];
  if (threadIdx.x < p.top_k) {
    ids[threadIdx.x] = __ldg(p.ids + threadIdx.x);
    rws[threadIdx.x] = __ldg(p.rw + threadIdx.x);
  }
  stage_activations(xs, p.inter + ubeg * kGroup, (uend - ubeg) * kGroup);
  __syncthreads();

  const int col = t * kTileCols + lane;
  float acc = 0.f;
  for (int u0 = ubeg + warp; u0 < uend; u0 += kWarps * kUnroll) {
    uint4 w[kUnroll];
    Meta m[kUnroll];
    bool ok[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int u = u0 + k * kWarps;
      const int e = u < uend ? ids[u / G] : -1;
      ok[k] = e >= 0 && e < p.experts;  // documented policy: out-of-range ids are skipped
      if (ok[k]) {  // warp-uniform
        const size_t gr = static_cast<size_t>(e) * G + u % G;
        w[k] = __ldg(p.weights + gr * p.N + col);
        m[k] = read_meta(p.meta + (gr * p.N + t * kTileCols) * kRecordBytes, lane);
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int u = u0 + k * kWarps;
      if (ok[k]) acc = fmaf(rws[u / G], dot32(w[k], m[k], xs + (u - ubeg) * kGroup), acc);
    }
  }
  red[warp][lane] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += red[w][threadIdx.x];
    row[threadIdx.x] = v;
  }
  __syncthreads();
  if (!splitk_last<32>(p.ws + static_cast<size_t>(t) * p.splits * 32, p.counters + t, s, p.splits, row))
    return;
  if (threadIdx.x < 32) p.y[col] = __float2half_rn(row[lane]);
}

}  // namespace wb
