// W2 in slots: the contract's warps of csrc/kernels/w2.cuh, kSlots of them per warp, on narrower CTAs.
//   y[n] = fp16( sum_j rw[j] * sum_k w2_e[k, n] inter[j, k] ),  expert e = ids[j].
// The contract fixes each column's sum as W partial sums (contract warp w adds units kUnroll * w ..
// + kUnroll - 1, then the same run kUnroll * W further on, ..., each unit's tensor-core sum weighted
// by its router weight) added in warp order. Here a warp's eight quads are split into kSlots slots
// of 8 / kSlots quads: slot s holds 32 / kSlots columns of contract warp kSlots * warp + s, and the
// m16n8k16 product's B column n (from quad n) carries each slot's own unit to its own rows; lane
// t = s * 4 / kSlots of each quad of slot s reads its quad's four sums (see the W13 slot kernel).
// A CTA holds 32 / kSlots columns: kSlots times as many CTAs, of ceil(W / kSlots) warps.
#pragma once
#include "awq_meta_at.cuh"

namespace wb {

#ifndef WB_W2_UNROLL
#define WB_W2_UNROLL 2
#endif
#ifndef WB_W2_MAX_WARPS
#define WB_W2_MAX_WARPS 32
#endif
#ifndef WB_W2_SLOTS
#define WB_W2_SLOTS 4
#endif
#ifndef WB_W2_MIN_CTAS
#define WB_W2_MIN_CTAS 1
#endif
constexpr int kUnroll = WB_W2_UNROLL;       // units whose loads a slot issues before it computes
constexpr int kMaxWarps = WB_W2_MAX_WARPS;  // the contract's warps: ceil(units / kUnroll), at most this many
constexpr int kSlots = WB_W2_SLOTS;         // contract warps per warp: 1, 2 or 4
static_assert(kSlots == 1 || kSlots == 2 || kSlots == 4, "WB_W2_SLOTS must be 1, 2 or 4");
constexpr int kQuadsPerSlot = 8 / kSlots;
constexpr int kCtaCols = 32 / kSlots;  // output columns of one CTA
constexpr int kWarpSlots = (kMaxWarps + kSlots - 1) / kSlots * kSlots;

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

__global__ void __launch_bounds__(kWarpSlots / kSlots * 32, WB_W2_MIN_CTAS) w2_kernel(const W2Params p) {
  __shared__ float red[kWarpSlots][kCtaCols];
  kernel_prologue();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int G = p.K / kGroup, units = p.top_k * G;
  const int W = min(max((units + kUnroll - 1) / kUnroll, 1), kMaxWarps);  // the contract's warps
  const int rounds = (units + W * kUnroll - 1) / (W * kUnroll);          // of contract warp 0, the most
  calibration_spin(p.spin_cycles);

  const int qd = lane >> 2, t = lane & 3, slot = qd / kQuadsPerSlot, qs = qd % kQuadsPerSlot;
  const int local = 4 * qs;  // the quad's first column in the CTA
  const int col = blockIdx.x * kCtaCols + local + t;
  const int cw = kSlots * warp + slot;  // this lane's contract warp
  // The cooperative reader: lane i < 24 loads word i of the warp's 96 bytes of records, run r =
  // i / (24 / kSlots) (slot r) of 32 / kSlots records.
  const int rslot = (lane / (24 / kSlots)) % kSlots, rword = lane % (24 / kSlots);
  const int rcw = kSlots * warp + rslot;
  const uint4* x16 = reinterpret_cast<const uint4*>(p.inter) + x_word(lane);
  const uint4* wp = p.weights + col;
  const unsigned char* mown = p.meta + static_cast<size_t>(col) * kRecordBytes;
  const unsigned char* mrun = p.meta + static_cast<size_t>(blockIdx.x) * kCtaCols * kRecordBytes + 4 * rword;
  uint4 w[kUnroll], xv[kUnroll];
  unsigned m[kUnroll];
  float r[kUnroll];
  // Unit of contract warp c's k-th product in round rd: `units` (none) past the last or for c >= W.
  auto unit = [&](int c, int rd, int k) { return c < W ? min(c * kUnroll + rd * W * kUnroll + k, units) : units; };
  // Row of the weights and records of unit u: expert ids[j] (0 if out of range or none), group g.
  auto row = [&](int u, bool& ok, int& jc) {
    const bool in = u < units;
    jc = in ? u / G : p.top_k - 1;
    const int gc = in ? u - jc * G : G - 1;
    const int id = __ldg(p.ids + jc);
    ok = in && id >= 0 && id < p.experts;
    return static_cast<size_t>(ok ? id : 0) * G + gc;
  };
  // Round rd's loads. A unit past the last, or whose routed id is out of range (skipped), reads the
  // last unit's or expert 0's weights and multiplies them by zeros: every load stays in bounds, every
  // lane runs the reader's shuffles, and no branch surrounds the tensor-core work.
  auto load = [&](int rd) {
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      bool ok, rok;
      int jc, rjc;
      const int u = unit(cw, rd, k);
      const size_t gr = row(u, ok, jc);
      const size_t rgr = kSlots == 1 ? gr : row(unit(rcw, rd, k), rok, rjc);  // one slot: its own
      r[k] = ok ? __ldg(p.rw + jc) : 0.f;
      xv[k] = ok ? __ldg(x16 + 4 * u) : make_uint4(0u, 0u, 0u, 0u);
      w[k] = __ldg(wp + gr * p.N);
      m[k] = read_meta_at(mown + gr * p.N * kRecordBytes,
                          reinterpret_cast<const unsigned*>(mrun + rgr * p.N * kRecordBytes), lane);
    }
  };
  load(0);
  Acc acc = acc_zero();
  for (int rd = 0; rd < rounds; ++rd) {
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      Acc part = acc_zero();
      dot_group(w[k], quad_meta(m[k], lane), as_xfrag(xv[k]), part);
      acc_add_scaled(acc, r[k], part);
    }
    if (rd + 1 < rounds) load(rd + 1);
  }
  finish_acc(acc);
  if (t == slot * kQuadsPerSlot / 2 && cw < W) {
    red[cw][local + 0] = acc.d[0][0];
    red[cw][local + 1] = acc.d[0][2];
    red[cw][local + 2] = acc.d[1][0];
    red[cw][local + 3] = acc.d[1][2];
  }
  __syncthreads();
  if (threadIdx.x >= kCtaCols) return;
  float v = 0.f;  // contract warps in order, as cta_column_sum
  for (int c = 0; c < W; ++c) v += red[c][threadIdx.x];
  p.y[blockIdx.x * kCtaCols + threadIdx.x] = __float2half_rn(v);
}

#if !defined(__CUDACC_RTC__)
inline LaunchShape w2_launch_shape(int K, int N, int top_k) {
  const int G = K / kGroup;
  const unsigned W = warps_for(static_cast<long long>(top_k) * G, kUnroll, kMaxWarps);
  return {dim3(static_cast<unsigned>(N / kCtaCols)), dim3(32 * ((W + kSlots - 1) / kSlots)), 0};
}
#endif

}  // namespace wb
