// W2: down projection of every routed expert plus the router-weighted sum, in one launch (DESIGN §1):
//   y[n] = fp16( sum_j rw[j] * sum_k w2_e[k, n] inter[j, k] ),  expert e = ids[j].
// Torch-free. Grid (T = N/32 column tiles, splits); the (expert slot, group) units of a tile are
// split across CTAs and, inside a CTA, into contiguous runs per warp; a warp covers one unit of
// its tile with tensor-core products (awq_meta.cuh, dot_group). Splits combine in split order.
#pragma once
#include "awq_meta.cuh"

namespace wb {

constexpr int kWarps = 4;     // warps per CTA; more parallelism comes from splitting units across CTAs
constexpr int kUnroll = 4;    // units whose loads a warp issues before it computes: bytes in flight
constexpr int kMaxTopK = 64;  // routed slots staged in shared memory (the launcher checks top_k)

struct W2Params {
  const __half* inter;             // [top_k][K] SwiGLU outputs
  const uint4* weights;            // [E][K/32][N] int4 in fragment order, 16 bytes per (group, lane)
  const unsigned char* meta;       // [E][K/32][N * kRecordBytes] records
  const int* ids;                  // [top_k] routed experts
  const float* rw;                 // [top_k] router weights
  __half* y;                       // [N] output
  float* ws;                       // [T][splits][32] split partials (pre-sm_90 only)
  unsigned* counters;              // [T], zero before and after every launch (pre-sm_90)
  int K, N, experts, top_k, splits;
  long long spin_cycles;           // calibration builds only
};

__global__ void __launch_bounds__(kWarps * 32) w2_kernel(const W2Params p) {
  extern __shared__ uint4 xs[];    // this split's units of inter in fragment order (load_xfrag)
  __shared__ float red[kWarps][kTileCols];
  __shared__ float row[kTileCols];
  __shared__ int ids[kMaxTopK];
  __shared__ float rws[kMaxTopK];
  kernel_prologue();
  const int t = blockIdx.x, s = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int G = p.K / kGroup, units = p.top_k * G;
  const int ubeg = (s * units) / p.splits, uend = ((s + 1) * units) / p.splits;
  calibration_spin(p.spin_cycles);

  // unit u = (slot j = u / G, group g = u % G) covers inter[j*K + g*32 .. +32]: contiguous in u.
  // The routed ids and the activations load together, before any weight address depends on them.
  if (threadIdx.x < p.top_k) {
    ids[threadIdx.x] = __ldg(p.ids + threadIdx.x);
    rws[threadIdx.x] = __ldg(p.rw + threadIdx.x);
  }
  stage_activations(xs, p.inter + ubeg * kGroup, uend - ubeg);
  __syncthreads();

  // This warp's run of units [u0, u1): slot j and group g advance together (one division).
  const int n = uend - ubeg;
  const int u0 = ubeg + (warp * n) / kWarps, u1 = ubeg + ((warp + 1) * n) / kWarps;
  const int col = t * kTileCols + lane;
  const uint4* wp = p.weights + col;
  const unsigned char* mp = p.meta + static_cast<size_t>(t) * kTileCols * kRecordBytes;
  Acc acc = acc_zero();
  int j = u0 / G, g = u0 - (u0 / G) * G;
  for (int ub = u0; ub < u1; ub += kUnroll) {
    uint4 w[kUnroll];
    unsigned m[kUnroll];
    int slot[kUnroll];
    bool ok[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      slot[k] = j;
      const int e = ub + k < u1 ? ids[j] : -1;
      ok[k] = e >= 0 && e < p.experts;  // documented policy: out-of-range ids are skipped
      if (ok[k]) {  // warp-uniform
        const size_t gr = static_cast<size_t>(e) * G + g;
        w[k] = __ldg(wp + gr * p.N);
        m[k] = read_meta(mp + gr * p.N * kRecordBytes, lane);
      }
      if (++g == G) {
        g = 0;
        ++j;
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (ok[k]) {  // one unit's sums, then weighted by its router weight: rw * (sum over 32 k)
        Acc part = acc_zero();
        dot_group(w[k], quad_meta(m[k], lane), load_xfrag(xs, ub + k - ubeg, lane), part);
        finish_acc(part);
        const float r = rws[slot[k]];
#pragma unroll
        for (int mb = 0; mb < 2; ++mb)
#pragma unroll
          for (int i = 0; i < 4; i += 2) acc.d[mb][i] = fmaf(r, part.d[mb][i], acc.d[mb][i]);
      }
    }
  }
  red[warp][lane] = acc_of_lane(acc, lane);
  __syncthreads();
  if (threadIdx.x < kTileCols) {
    float v = 0.f;
#pragma unroll
    for (int w2 = 0; w2 < kWarps; ++w2) v += red[w2][threadIdx.x];
    row[threadIdx.x] = v;
  }
  __syncthreads();
  if (!combine_splits<kTileCols>(p.ws + static_cast<size_t>(t) * p.splits * kTileCols, p.counters + t, s,
                                 p.splits, row))
    return;
  if (threadIdx.x < kTileCols) p.y[col] = __float2half_rn(row[lane]);
}

}  // namespace wb
