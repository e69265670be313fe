// W13: gate and up projections of every routed expert in one launch, fused with SwiGLU (docs/DESIGN.md §1):
//   inter[j, c] = fp16( silu(sum_k w1[k, c] x[k]) * (sum_k w3[k, c] x[k]) ),  expert e = ids[j].
// Torch-free. Grid (N/32 column tiles, top_k): one CTA = one 32-column tile (a gate tile for
// t < N/64, else an up tile) of one routed expert over the whole K, so no split-K combine. Warp w
// takes groups w, w + warps, ... (kUnroll of them per round, every load of a round issued before
// the first is used) with tensor-core products (awq_meta.cuh, dot_group) against x in shared
// memory; warp 0 adds the warps' sums in warp order. The gate and the up CTA of a column meet through one 64-bit exchange per
// column in `slots`: whichever arrives second holds both sums and writes silu(gate) * up.
#pragma once
#include "awq_meta.cuh"

namespace wb {

// Spec parameters (workbench/specs.py BUILTIN_PARAMS): a build may set them with -D; the
// defaults here must equal the spec's (a CPU test holds them together).
#ifndef WB_W13_UNROLL
#define WB_W13_UNROLL 5
#endif
#ifndef WB_W13_MAX_WARPS
#define WB_W13_MAX_WARPS 16
#endif
constexpr int kUnroll = WB_W13_UNROLL;       // groups whose loads a warp issues before it computes: bytes in flight
constexpr int kMaxWarps = WB_W13_MAX_WARPS;  // the launcher picks ceil(groups / kUnroll) warps, at most this many

struct W13Params {
  const __half* x;                 // [K] activations
  const uint4* weights;            // [E][K/32][N] int4 in fragment order, 16 bytes per (group, lane)
  const unsigned char* meta;       // [E][K/32][N * kRecordBytes] records
  const int* ids;                  // [top_k] routed experts
  __half* inter;                   // [top_k][N/2] output
  unsigned long long* slots;       // [top_k][N/2] gate/up exchange, zero before and after every launch
  int K, N, experts;
  long long spin_cycles;           // calibration builds only
};

__global__ void __launch_bounds__(kMaxWarps * 32) w13_kernel(const W13Params p) {
  extern __shared__ uint4 xs[];  // x (K halves, as in memory), then one group of zeros
  __shared__ float red[kMaxWarps][kTileCols];
  kernel_prologue();
  const int t = blockIdx.x, j = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int G = p.K / kGroup, half_n = p.N / 2, n16 = p.K / 8;
  calibration_spin(p.spin_cycles);

  // Three kinds of loads, issued so that none waits for another it does not need: x (copied to
  // shared memory), the routed id, then the weights and records that depend on the id. An
  // out-of-range id (documented policy: contributes nothing) reads expert 0 and is zeroed below,
  // so every load stays in bounds and no branch separates the id from the loads.
  const uint4* x16 = reinterpret_cast<const uint4*>(p.x);
  Staging stage;
  stage.begin(x16, n16);
  const int id = __ldg(p.ids + j);
  const bool valid = id >= 0 && id < p.experts;
  const size_t e = valid ? static_cast<size_t>(id) : 0;
  const uint4* wp = p.weights + e * G * p.N + t * kTileCols + lane;
  const unsigned char* mp = p.meta + (e * G * p.N + t * kTileCols) * kRecordBytes;
  uint4 w[kUnroll];
  unsigned m[kUnroll];
  // Issues the loads of groups g0, g0 + warps, ... (kUnroll of them; past the end they repeat the
  // last group, so every lane always runs the reader's shuffles, and the sums skip them).
  auto load = [&](int g0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t g = static_cast<size_t>(min(g0 + u * warps, G - 1));
      w[u] = __ldg(wp + g * p.N);
      m[u] = read_meta(mp + g * p.N * kRecordBytes, lane);
    }
  };
  load(warp);
  stage.finish(xs, x16, n16);
  if (threadIdx.x < 4) xs[n16 + threadIdx.x] = make_uint4(0u, 0u, 0u, 0u);  // group G: zeros
  __syncthreads();
  const uint4* xl = xs + (lane & 3);  // this lane's 16 bytes of group g: xl[4 * g]
  Acc acc = acc_zero();
  for (int g0 = warp; g0 < G; g0 += warps * kUnroll) {
    // A slot past the last group multiplies the last group's weights by group G's zeros: adds
    // exactly 0, without a branch around the tensor-core work.
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      dot_group(w[u], quad_meta(m[u], lane), as_xfrag(xl[4 * min(g0 + u * warps, G)]), acc);
    if (g0 + warps * kUnroll < G) load(g0 + warps * kUnroll);
  }
  finish_acc(acc);
  const float sum = cta_column_sum(red, acc_of_lane(acc, lane), warp, lane);
  if (warp != 0) return;

  // Gate tile t pairs with up tile t + N/64: one 64-bit exchange per column carries this CTA's
  // sum with a "present" flag; the CTA that finds its partner's sum finishes the column and
  // clears the slot for the next launch (no other CTA touches it until then).
  const bool up = t >= p.N / 64;
  const int c = (up ? t - p.N / 64 : t) * kTileCols + lane;
  unsigned long long* slot = p.slots + static_cast<size_t>(j) * half_n + c;
  const float mine = valid ? sum : 0.f;
  const unsigned long long other = atomicExch(slot, (1ull << 32) | __float_as_uint(mine));
  if ((other >> 32) == 0) return;
  *slot = 0ull;
  const float theirs = __uint_as_float(static_cast<unsigned>(other));
  const float g = up ? theirs : mine, u = up ? mine : theirs;
  p.inter[static_cast<size_t>(j) * half_n + c] = __float2half_rn(g / (1.f + expf(-g)) * u);
}

}  // namespace wb
