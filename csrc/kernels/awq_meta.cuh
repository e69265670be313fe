// AWQ metadata readers and the int4 dequantize-dot shared by the W13 and W2 kernels.
// Torch-free and NVRTC-clean (only cuda_fp16.h), so it also compiles for sm_70 through NVRTC 12.
//
// Compile-time selection (one build per combination, as an engineer reverting a commit would compare):
//   WB_LAYOUT_B4 | WB_LAYOUT_B3      4-byte {scale, bias} or 3-byte {scale_lo, scale_hi, zero} records
//   WB_READER_SCALAR | WB_READER_COOP  byte-by-byte reads, or one 96-byte tile per warp + shuffles
// Layouts: docs/ARCHITECTURE.md and docs/DESIGN.md §3. The cooperative index arithmetic is held to the NumPy
// model in tests/coop_model.py; the tensor-core fragment mapping to tests/fragment_model.py
// (sm_75+) and, on sm_70, to tests/volta_model.py (mma_sm70.h).
#pragma once
#include <cuda_fp16.h>

#include "layout.h"
#include "mma_sm70.h"

#if defined(WB_LAYOUT_B4) == defined(WB_LAYOUT_B3)
#error "define exactly one of WB_LAYOUT_B4, WB_LAYOUT_B3"
#endif
#if defined(WB_READER_SCALAR) == defined(WB_READER_COOP)
#error "define exactly one of WB_READER_SCALAR, WB_READER_COOP"
#endif
#if defined(WB_LAYOUT_B4) && defined(WB_READER_COOP)
#error "b4-coop is not a variant: 4-byte records are already one aligned word per lane"
#endif

namespace wb {

constexpr int kGroup = 32;        // AWQ group size: one record per 32 weights of a column
constexpr int kTileCols = 32;     // one record tile = 32 consecutive columns = one warp, lane = column (W13: read_meta2)
constexpr unsigned kFullMask = 0xffffffffu;

#if !defined(__CUDACC_RTC__)
// One call's launch (host side): the launchers in csrc/ launch it after their argument checks, and
// benchmarks/lab/ times the same shape without torch.
struct LaunchShape {
  dim3 grid, block;
  size_t smem;  // dynamic shared memory, bytes
};

// Warps per CTA: one per `per_warp` work items, between 1 and `max_warps`.
inline unsigned warps_for(long long items, int per_warp, int max_warps) {
  const long long w = (items + per_warp - 1) / per_warp;
  return static_cast<unsigned>(w < 1 ? 1 : (w > max_warps ? max_warps : w));
}
#endif

// A decoded record as one word, the 4-byte record's format: scale bits | bias bits << 16.
// bias = fp16(fp16(-zero) * scale): one rounding, identical for both layouts (docs/DESIGN.md §3).
__device__ __forceinline__ unsigned make_meta(unsigned short scale_bits, unsigned zero) {
  const __half s = __ushort_as_half(scale_bits);
  const __half b = __hmul(__int2half_rn(-static_cast<int>(zero)), s);
  return static_cast<unsigned>(scale_bits) | (static_cast<unsigned>(__half_as_ushort(b)) << 16);
}

// Reads the record of column `lane` from a tile of 32 records given as two halves of 16: lanes
// 0..15 take theirs from `lo`, lanes 16..31 from `hi` (each 4-byte aligned). W2 reads one whole
// tile (hi = lo + 16 records, read_meta below); W13 pairs half a gate tile with half an up tile.
// Must be called by all 32 lanes of the warp with the same halves (the cooperative reader shuffles).
__device__ __forceinline__ unsigned read_meta2(const unsigned char* __restrict__ lo, const unsigned char* __restrict__ hi,
                                               int lane) {
#if defined(WB_LAYOUT_B4)
  return __ldg(reinterpret_cast<const unsigned*>(lane < 16 ? lo : hi) + (lane & 15));
#elif defined(WB_READER_SCALAR)
  const unsigned char* p = (lane < 16 ? lo : hi) + 3 * (lane & 15);
  const unsigned lo8 = __ldg(p), hi8 = __ldg(p + 1), zero = __ldg(p + 2);
  return make_meta(static_cast<unsigned short>(lo8 | (hi8 << 8)), zero);
#else
  // Cooperative: lanes 0..23 load the tile's 24 aligned words (lanes 0..11 the 12 words of `lo`,
  // 12..23 those of `hi`); lane i's record is bytes 3i..3i+2 of the 96, i.e. word w0 = 3i/4 at
  // byte offset o = 3i%4, spilling into word w0+1 when o > 1 (never across the halves: 48 % 4 == 0).
  const unsigned* words = reinterpret_cast<const unsigned*>(lane < 12 ? lo : hi);
  const unsigned word = lane < 24 ? __ldg(words + (lane < 12 ? lane : lane - 12)) : 0u;
  const int w0 = (3 * lane) >> 2;
  const unsigned lo32 = __shfl_sync(kFullMask, word, w0);
  // Lane 31 asks lane 24 (holds no tile word): harmless, its record (o = 1) uses lo32's bytes only.
  const unsigned hi32 = __shfl_sync(kFullMask, word, w0 + 1);
  const unsigned rec = __funnelshift_r(lo32, hi32, 8 * ((3 * lane) & 3)) & 0xffffffu;
  return make_meta(static_cast<unsigned short>(rec & 0xffffu), rec >> 16);
#endif
}

// Reads the record of column `lane` from one whole tile of 32 records starting at `tile`.
__device__ __forceinline__ unsigned read_meta(const unsigned char* __restrict__ tile, int lane) {
  return read_meta2(tile, tile + 16 * kRecordBytes, lane);
}

// ---------------------------------------------------------------------------------------------
// Tensor-core dot product (docs/ARCHITECTURE.md, "fragment packing"; docs/DESIGN.md §4.3). One warp
// covers one tile of 32 columns for one group of 32 k. Lane L = 4*qd + t holds, in word c of its
// 16-byte load, the 8 weights of column 4*qd + c at k = 8t + 2p + e (pair p = 0..3). One path per
// architecture, chosen at compile time; every path ends with lane L holding the sum of column L:
//   sm_80+  (WB_DOT_M16N8K16) two m16n8k16 products per k-half, A = weights (row = column), B =
//           activations replicated over the 8 n: the quad's lanes are summed by the tensor cores
//           (tests/fragment_model.py);
//   sm_75   (WB_DOT_M16N8K8) the same products, each split into two m16n8k8 (k 0..7, then 8..15);
//   sm_70   (WB_DOT_M8N8K4) eight m8n8k4 products per quadpair (mma_sm70.h): A = a lane's own
//           weights of one column, B = activations or zeros, so each product adds 4-k sums of
//           single lanes; the quad's lanes are added at the end (tests/volta_model.py);
//   WB_DOT_FMA, or below sm_70 (no tensor cores): FP32 FMAs per lane, the quad added at the end.
#if defined(__CUDA_ARCH__) && !defined(WB_DOT_FMA) && __CUDA_ARCH__ >= 800
#define WB_DOT_M16N8K16 1
#elif defined(__CUDA_ARCH__) && !defined(WB_DOT_FMA) && __CUDA_ARCH__ >= 750
#define WB_DOT_M16N8K8 1
#elif defined(__CUDA_ARCH__) && !defined(WB_DOT_FMA) && __CUDA_ARCH__ >= 700
#define WB_DOT_M8N8K4 1
#endif

#if defined(WB_DOT_M8N8K4)
struct Acc {  // d[set][slot]: the m8n8k4 accumulators of sets 0 (columns 0, 2) and 1 (columns 1, 3)
  float d[2][8];
};
__device__ __forceinline__ Acc acc_zero() {
  Acc a;
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int v = 0; v < 8; ++v) a.d[s][v] = 0.f;
  return a;
}
#else
struct Acc {  // d[mb]: the m16n8k16 accumulator of m-block mb; d[mb][0] = column 2mb, d[mb][2] = 2mb+1
  float d[2][4];
};
__device__ __forceinline__ Acc acc_zero() { return Acc{{{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}}}; }
#endif

// The four records of lane L's quad: record of column 4*qd + cc comes from lane 4*qd + cc.
struct QuadMeta {
  unsigned r[4];
};

__device__ __forceinline__ QuadMeta quad_meta(unsigned rec, int lane) {
  QuadMeta q;
#pragma unroll
  for (int cc = 0; cc < 4; ++cc) q.r[cc] = __shfl_sync(kFullMask, rec, (lane & ~3) | cc);
  return q;
}

// The activation pairs a lane feeds to B: pair p = x[8w + 2p], x[8w + 2p + 1] of word w of the
// group (16 contiguous bytes), as half2 words. On sm_75+ w = t, the lane's own k (fragment packing
// puts the weights of k = 8t + 2p + e in the matching slots): activations need no reordering. On
// sm_70 w = sm70::x_word(lane), the k of the quad lane whose weights its B column meets. Either way
// a lane reads one 16-byte word per group (W13 from its copy of x in shared memory, W2 from inter
// in global memory).
struct XFrag {
  unsigned p[4];
};

__device__ __forceinline__ XFrag as_xfrag(const uint4 v) { return XFrag{{v.x, v.y, v.z, v.w}}; }

// Which 16-byte word of a group's activations lane `lane` loads.
__device__ __forceinline__ int x_word(int lane) {
#if defined(WB_DOT_M8N8K4)
  return sm70::x_word(lane);
#else
  return lane & 3;
#endif
}

// Copies n16 16-byte words of activations to shared memory in two steps, so a kernel can issue
// its weight loads in between: begin() loads this thread's first word into a register, finish()
// stores it and copies the rest (only when n16 > blockDim.x). The caller then syncs the CTA.
struct Staging {
  uint4 first;
  __device__ __forceinline__ void begin(const uint4* __restrict__ src, int n16) {
    if (static_cast<int>(threadIdx.x) < n16) first = __ldg(src + threadIdx.x);
  }
  __device__ __forceinline__ void finish(uint4* __restrict__ dst, const uint4* __restrict__ src, int n16) {
    if (static_cast<int>(threadIdx.x) < n16) dst[threadIdx.x] = first;
    for (int i = threadIdx.x + blockDim.x; i < n16; i += blockDim.x) dst[i] = __ldg(src + i);
  }
};

// Dequantizes word `w` (8 weights of one column) with its record: pair p -> half2 register
// fp16(q * scale + bias), one rounding. q is exact: (0x6400 | q) is 1024 + q as fp16, and
// (0x6400 | q << 4) is 1024 + 16q, so q = that / 16 - 64 (exact) saves a shift per pair.
// (a & kMask) | 0x64006400 as one LOP3 (the compiler emits two: an AND, then an OR).
template <unsigned kMask>
__device__ __forceinline__ unsigned and_or(unsigned a) {
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(d) : "r"(a), "n"(kMask), "n"(0x64006400u));
  return d;
}

__device__ __forceinline__ void dequant_word(unsigned w, unsigned rec, unsigned (&h)[4]) {
  const __half2 r = *reinterpret_cast<const __half2*>(&rec);
  const __half2 s = __low2half2(r), b = __high2half2(r);  // operand selectors, no extra instructions
  const __half2 magic = __half2half2(__ushort_as_half(0x6400));      // 1024
  const __half2 sixteenth = __half2half2(__ushort_as_half(0x2c00));  // 1/16
  const __half2 neg64 = __half2half2(__ushort_as_half(0xd400));      // -64
  const unsigned w8 = w >> 8;
  const unsigned b0 = and_or<0x000f000fu>(w), b1 = and_or<0x00f000f0u>(w);
  const unsigned b2 = and_or<0x000f000fu>(w8), b3 = and_or<0x00f000f0u>(w8);
  __half2 q[4];
  q[0] = __hsub2(*reinterpret_cast<const __half2*>(&b0), magic);
  q[1] = __hfma2(*reinterpret_cast<const __half2*>(&b1), sixteenth, neg64);
  q[2] = __hsub2(*reinterpret_cast<const __half2*>(&b2), magic);
  q[3] = __hfma2(*reinterpret_cast<const __half2*>(&b3), sixteenth, neg64);
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const __half2 v = __hfma2(q[p], s, b);
    h[p] = *reinterpret_cast<const unsigned*>(&v);
  }
}

#if defined(WB_DOT_M16N8K16)
// d += A * B for one m16n8k16 product with FP16 inputs and FP32 accumulation (sm_80+).
__device__ __forceinline__ void mma16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#elif defined(WB_DOT_M16N8K8)
// The same product on sm_75, which has no m16n8k16: its k 0..7 (a0, a1, b0), then k 8..15 (a2, a3,
// b1), each an m16n8k8 with the m16n8k16's fragment rows and columns (PTX ISA), FP32 in between.
__device__ __forceinline__ void mma16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a2), "r"(a3), "r"(b1));
}
#elif defined(WB_DOT_M8N8K4)
// d += A * B for one m8n8k4 product per quadpair, FP16 inputs, FP32 accumulation (sm_70): A row =
// this thread's (a0, a1) = 4 k of one row, B column = its (b0, b1) = the same 4 k slots.
__device__ __forceinline__ void mma884(float (&d)[8], unsigned a0, unsigned a1, unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9}, {%10,%11}, "
      "{%0,%1,%2,%3,%4,%5,%6,%7};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a0), "r"(a1), "r"(b0), "r"(b1));
}

// d[v] for a slot v known only at run time, without indexing registers (which would go to local
// memory): a chain of selects the compiler folds to the slots v can take.
__device__ __forceinline__ float pick_slot(const float (&d)[8], int v) {
  float r = d[0];
#pragma unroll
  for (int i = 1; i < 8; ++i) r = v == i ? d[i] : r;
  return r;
}
#endif

// acc += the sums over one group of the quad's 4 columns, in a fixed order per architecture:
// sm_75+: four m16n8k16 products (m-block mb = columns cc = 2mb, 2mb+1; k-half kh = pairs 2kh,
// 2kh+1). sm_70: the eight m8n8k4 products of mma_sm70.h in order i = 0..7 (set 0: columns 0, 2
// of k-half 0, then of k-half 1; then set 1 with columns 1, 3). Otherwise the lane's own 8 k per column in FP32; finish_acc adds the
// quad's lanes.
__device__ __forceinline__ void dot_group(const uint4 w, const QuadMeta& m, const XFrag& x, Acc& acc) {
  const unsigned words[4] = {w.x, w.y, w.z, w.w};
  unsigned h[4][4];
#if defined(WB_DOT_M8N8K4)
  // Each column is dequantized just before its first product: set 1's weights are not yet live
  // while set 0 runs (W2 runs at 64 registers a thread).
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < sm70::kMmas; ++i) {
    const int c = sm70::mma_col(i), s = sm70::mma_half(i);
    if (s == 0) dequant_word(words[c], m.r[c], h[c]);
    const bool on = sm70::b_active(lane, c);
    mma884(acc.d[sm70::mma_set(i)], h[c][2 * s], h[c][2 * s + 1], on ? x.p[2 * s] : 0u, on ? x.p[2 * s + 1] : 0u);
  }
#else
#pragma unroll
  for (int cc = 0; cc < 4; ++cc) dequant_word(words[cc], m.r[cc], h[cc]);
#endif
#if defined(WB_DOT_M16N8K16) || defined(WB_DOT_M16N8K8)
#pragma unroll
  for (int mb = 0; mb < 2; ++mb)
#pragma unroll
    for (int kh = 0; kh < 2; ++kh)
      mma16816(acc.d[mb], h[2 * mb][2 * kh], h[2 * mb + 1][2 * kh], h[2 * mb][2 * kh + 1],
               h[2 * mb + 1][2 * kh + 1], x.p[2 * kh], x.p[2 * kh + 1]);
#elif !defined(WB_DOT_M8N8K4)
#pragma unroll
  for (int cc = 0; cc < 4; ++cc) {
    float s = 0.f;
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 wf = __half22float2(*reinterpret_cast<const __half2*>(&h[cc][p]));
      const float2 xf = __half22float2(*reinterpret_cast<const __half2*>(&x.p[p]));
      s = fmaf(wf.x, xf.x, s);
      s = fmaf(wf.y, xf.y, s);
    }
    acc.d[cc >> 1][2 * (cc & 1)] += s;
  }
#endif
}

// acc += r * part, per accumulator that can hold a sum (W2: a unit's sums weighted by its router
// weight). Before finish_acc.
__device__ __forceinline__ void acc_add_scaled(Acc& acc, float r, const Acc& part) {
#if defined(WB_DOT_M8N8K4)
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int v = 0; v < 8; ++v)
      if (sm70::slot_used(v)) acc.d[s][v] = fmaf(r, part.d[s][v], acc.d[s][v]);
#else
#pragma unroll
  for (int mb = 0; mb < 2; ++mb)
#pragma unroll
    for (int i = 0; i < 4; i += 2) acc.d[mb][i] = fmaf(r, part.d[mb][i], acc.d[mb][i]);
#endif
}

// After the last dot_group (or acc_add_scaled): add the quad's lanes where the products did not.
// sm_70: per set, lane L adds its two slots (quad lanes L & 1 and (L & 1) | 2), then lane L ^ 1's
// sum: (P0 + P2) + (P1 + P3), the same bits in both lanes. FMA path: lanes t ^ 1, then t ^ 2.
__device__ __forceinline__ void finish_acc(Acc& acc) {
#if defined(WB_DOT_M8N8K4)
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const float mine = pick_slot(acc.d[s], sm70::slot_lo(lane)) + pick_slot(acc.d[s], sm70::slot_hi(lane));
    acc.d[s][0] = mine + __shfl_xor_sync(kFullMask, mine, sm70::kPairXor);
  }
#elif !defined(WB_DOT_M16N8K16) && !defined(WB_DOT_M16N8K8)
#pragma unroll
  for (int mb = 0; mb < 2; ++mb)
#pragma unroll
    for (int i = 0; i < 4; i += 2) {
      acc.d[mb][i] += __shfl_xor_sync(kFullMask, acc.d[mb][i], 1);
      acc.d[mb][i] += __shfl_xor_sync(kFullMask, acc.d[mb][i], 2);
    }
#else
  (void)acc;
#endif
}

// The sum of column `lane` of the tile, after finish_acc: lane 4*qd + t keeps column 4*qd + t.
__device__ __forceinline__ float acc_of_lane(const Acc& acc, int lane) {
#if defined(WB_DOT_M8N8K4)
  return sm70::kept_set(lane) ? acc.d[1][0] : acc.d[0][0];
#else
  const int t = lane & 3;
  return t == 0 ? acc.d[0][0] : t == 1 ? acc.d[0][2] : t == 2 ? acc.d[1][0] : acc.d[1][2];
#endif
}

// Calibration builds spin a known number of SM cycles per CTA before any work (docs/DESIGN.md §5.8).
__device__ __forceinline__ void calibration_spin(long long cycles) {
#ifdef WB_CALIBRATION
  if (cycles > 0) {
    if (threadIdx.x == 0) {
      const long long t0 = clock64();
      while (clock64() - t0 < cycles) {
      }
    }
    __syncthreads();
  }
#else
  (void)cycles;
#endif
}

// Start of every kernel. On sm_90 the launcher makes each launch a programmatic dependent launch
// (PDL): this grid's CTAs may become resident while the previous kernel in the stream is still
// running, but nothing here reads or writes global memory before that kernel has finished and
// flushed (griddepcontrol.wait), so the overlap is launch latency only, never data. Then this grid
// lets its own successor start launching. Without PDL both instructions return at once; before
// sm_90 there is nothing to do.
__device__ __forceinline__ void kernel_prologue() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The CTA's column sums: `red` holds one partial per warp and column (red[warp][lane]); warp 0
// adds them in warp order (a fixed order: results do not depend on timing). Call from every thread;
// returns the sum of column `lane` in warp 0 (other warps get 0 and must not use it).
__device__ __forceinline__ float cta_column_sum(float (*red)[kTileCols], float mine, int warp, int lane) {
  red[warp][lane] = mine;
  __syncthreads();
  float v = 0.f;
  if (warp == 0)
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) v += red[w][lane];
  return v;
}

}  // namespace wb
