// W13 in slots: the contract's warps of csrc/kernels/w13.cuh, kSlots of them per warp, on narrower CTAs.
//   inter[j, c] = fp16( silu(sum_k w1[k, c] x[k]) * (sum_k w3[k, c] x[k]) ),  expert e = ids[j].
// The contract (docs/DESIGN.md §3) fixes each column's sum as W partial sums (contract warp w adds
// groups w, w + W, ... in that order through its tensor-core accumulator) added in warp order. A
// warp of the one-tile kernel holds 16 gate + 16 up columns of one contract warp. Here a warp's
// eight quads are split into kSlots slots of 8 / kSlots quads: slot s holds 16 / kSlots gate and as
// many up columns of contract warp kSlots * warp + s. The m16n8k16 product's B column n comes from
// quad n, so each slot's rows meet its own group's activations in the columns n of its own quads,
// and lane t = s * 4 / kSlots of each quad of slot s reads its quad's four sums there (the other
// lanes' columns mix slots and are never read). Every accumulator sees the same products in the
// same order as in the one-tile kernel: the same bits. A CTA holds 16 / kSlots gate columns, so the
// grid has kSlots times as many CTAs, of ceil(W / kSlots) warps.
#pragma once
#include "awq_meta_at.cuh"

namespace wb {

#ifndef WB_W13_UNROLL
#define WB_W13_UNROLL 5
#endif
#ifndef WB_W13_MAX_WARPS
#define WB_W13_MAX_WARPS 16
#endif
#ifndef WB_W13_SLOTS
#define WB_W13_SLOTS 4
#endif
#ifndef WB_W13_MIN_CTAS
#define WB_W13_MIN_CTAS 1
#endif
constexpr int kUnroll = WB_W13_UNROLL;       // groups whose loads a slot issues before it computes
constexpr int kMaxWarps = WB_W13_MAX_WARPS;  // the contract's warps: ceil(groups / kUnroll), at most this many
constexpr int kSlots = WB_W13_SLOTS;         // contract warps per warp: 1, 2 or 4
static_assert(kSlots == 1 || kSlots == 2 || kSlots == 4, "WB_W13_SLOTS must be 1, 2 or 4");
constexpr int kQuadsPerSlot = 8 / kSlots;
constexpr int kHalfCols = 16 / kSlots;          // gate (and up) columns of one CTA
constexpr int kWarpSlots = (kMaxWarps + kSlots - 1) / kSlots * kSlots;

struct W13Params {
  const __half* x;                 // [K] activations
  const uint4* weights;            // [E][K/32][N] int4 in fragment order, 16 bytes per (group, lane)
  const unsigned char* meta;       // [E][K/32][N * kRecordBytes] records
  const int* ids;                  // [top_k] routed experts
  __half* inter;                   // [top_k][N/2] output
  int K, N, experts;
  long long spin_cycles;           // calibration builds only
};

__global__ void __launch_bounds__(kWarpSlots / kSlots * 32, WB_W13_MIN_CTAS) w13_kernel(const W13Params p) {
  extern __shared__ uint4 xs[];  // x (K halves, as in memory), then one group of zeros
  __shared__ float red[kWarpSlots][2 * kHalfCols];
  kernel_prologue();
  const int h = blockIdx.x, j = blockIdx.y;  // gate columns kHalfCols * h ... of routed slot j
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int G = p.K / kGroup, half_n = p.N / 2, n16 = p.K / 8;
  const int W = min(max((G + kUnroll - 1) / kUnroll, 1), kMaxWarps);  // the contract's warps
  const int rounds = (G + W - 1) / W;  // groups of contract warp 0, the most any has
  calibration_spin(p.spin_cycles);

  const uint4* x16 = reinterpret_cast<const uint4*>(p.x);
#if !defined(WB_W13_XGLOBAL)
  Staging stage;
  stage.begin(x16, n16);
#endif
  const int id = __ldg(p.ids + j);
  const bool valid = id >= 0 && id < p.experts;
  const size_t e = valid ? static_cast<size_t>(id) : 0;
  const size_t bank = e * G * p.N;
  // This lane's position: quad qd of slot `slot`; the slot's first half of quads holds gate columns,
  // the second half the same up columns. Column `col` is the one whose record this lane reads and
  // whose 16-byte weight word (k chunk t of the quad's four columns) it loads.
  const int qd = lane >> 2, t = lane & 3, slot = qd / kQuadsPerSlot, qs = qd % kQuadsPerSlot;
  const bool up = qs >= kQuadsPerSlot / 2;
  const int local = (up ? kHalfCols : 0) + 4 * (qs % (kQuadsPerSlot / 2));  // the quad's first column in the CTA
  const int col = (up ? half_n - kHalfCols : 0) + h * kHalfCols + local + t;
  const int cw = kSlots * warp + slot;  // this lane's contract warp
  // Group of this lane's i-th product: G (zeros) past the last group or for a slot past the W-th.
  auto group = [&](int i) { return cw < W ? min(cw + i * W, G) : G; };
  // The cooperative reader: lane i < 24 loads word i of the warp's 96 bytes of records, run r =
  // i / (12 / kSlots) (slot r / 2, gate or up by r % 2) of 16 / kSlots records.
  const int run = lane / (12 / kSlots), rword = lane % (12 / kSlots);
  const int rcw = kSlots * warp + (run >> 1) % kSlots;
  const int rcol = ((run & 1) ? half_n : 0) + h * kHalfCols;
  const uint4* wp = p.weights + bank + col;
  const unsigned char* mown = p.meta + (bank + col) * kRecordBytes;
  const unsigned char* mrun = p.meta + (bank + rcol) * kRecordBytes + 4 * rword;
  uint4 w[kUnroll];
  unsigned m[kUnroll];
#if defined(WB_W13_XGLOBAL)
  // x straight from global memory with the weights (no staging, no barrier before the products).
  uint4 xv[kUnroll];
  const uint4* xg = x16 + x_word(lane);
#endif
  // Round r's loads: group cw + (r * kUnroll + u) * W of each slot; past the last group they repeat
  // it (every lane runs the reader's shuffles) and the products meet zeros.
  auto load = [&](int r) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = r * kUnroll + u;
      const size_t g = static_cast<size_t>(min(group(i), G - 1));
      const size_t rg = static_cast<size_t>(min(rcw + i * W, G - 1));
      w[u] = __ldg(wp + g * p.N);
#if defined(WB_W13_XGLOBAL)
      xv[u] = group(i) < G ? __ldg(xg + 4 * g) : make_uint4(0u, 0u, 0u, 0u);
#endif
      m[u] = read_meta_at(mown + g * p.N * kRecordBytes,
                          reinterpret_cast<const unsigned*>(mrun + rg * p.N * kRecordBytes), lane);
    }
  };
  load(0);
#if !defined(WB_W13_XGLOBAL)
  stage.finish(xs, x16, n16);
  if (threadIdx.x < 4) xs[n16 + threadIdx.x] = make_uint4(0u, 0u, 0u, 0u);  // group G: zeros
  __syncthreads();
  const uint4* xl = xs + x_word(lane);
#endif
  Acc acc = acc_zero();
  const int groups_r = (rounds + kUnroll - 1) / kUnroll;
  for (int r = 0; r < groups_r; ++r) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#if defined(WB_W13_XGLOBAL)
      dot_group(w[u], quad_meta(m[u], lane), as_xfrag(xv[u]), acc);
#else
      dot_group(w[u], quad_meta(m[u], lane), as_xfrag(xl[4 * group(r * kUnroll + u)]), acc);
#endif
    if (r + 1 < groups_r) load(r + 1);
  }
  finish_acc(acc);
  // Lane t = slot * kQuadsPerSlot / 2 of each quad holds its four columns' sums (B column n = 2t
  // lies in the slot's own quads): rows qd and qd + 8 of both m-blocks.
  if (t == slot * kQuadsPerSlot / 2 && cw < W) {
    red[cw][local + 0] = acc.d[0][0];
    red[cw][local + 1] = acc.d[0][2];
    red[cw][local + 2] = acc.d[1][0];
    red[cw][local + 3] = acc.d[1][2];
  }
  __syncthreads();
  if (threadIdx.x >= kHalfCols) return;
  float gs = 0.f, us = 0.f;  // contract warps in order, as cta_column_sum
  for (int v = 0; v < W; ++v) {
    gs += red[v][threadIdx.x];
    us += red[v][kHalfCols + threadIdx.x];
  }
  const float g = valid ? gs : 0.f, u = valid ? us : 0.f;
  p.inter[static_cast<size_t>(j) * half_n + kHalfCols * h + threadIdx.x] = __float2half_rn(g / (1.f + expf(-g)) * u);
}

#if !defined(__CUDACC_RTC__)
inline LaunchShape w13_launch_shape(int K, int N, int top_k) {
  const int G = K / kGroup;
  const unsigned W = warps_for(G, kUnroll, kMaxWarps);
  return {dim3(static_cast<unsigned>(N / 2 / kHalfCols), static_cast<unsigned>(top_k)),
#if defined(WB_W13_XGLOBAL)
          dim3(32 * ((W + kSlots - 1) / kSlots)), 0};
#else
          dim3(32 * ((W + kSlots - 1) / kSlots)), static_cast<size_t>((K / 8 + 4) * 16)};
#endif
}
#endif

}  // namespace wb
