// AWQ metadata readers and the int4 dequantize-dot shared by the W13 and W2 kernels.
// Torch-free and NVRTC-clean (only cuda_fp16.h), so it also compiles for sm_70 through NVRTC 12.
//
// Compile-time selection (one build per combination, as an engineer reverting a commit would compare):
//   WB_LAYOUT_B4 | WB_LAYOUT_B3      4-byte {scale, bias} or 3-byte {scale_lo, scale_hi, zero} records
//   WB_READER_SCALAR | WB_READER_COOP  byte-by-byte reads, or one 96-byte tile per warp + shuffles
// Layouts: docs/ARCHITECTURE.md and DESIGN §3. The cooperative index arithmetic is held to the NumPy
// model in workbench/coop_model.py.
#pragma once
#include <cuda_fp16.h>

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

#ifdef WB_LAYOUT_B3
constexpr int kRecordBytes = 3;
#else
constexpr int kRecordBytes = 4;
#endif
constexpr int kGroup = 32;        // AWQ group size: one record per 32 weights of a column
constexpr int kTileCols = 32;     // one record tile = 32 consecutive columns = one warp, lane = column
constexpr unsigned kFullMask = 0xffffffffu;

struct Meta {
  __half2 scale;  // scale broadcast to both halves, for __hfma2
  __half2 bias;
};

// bias = fp16(fp16(-zero) * scale): one rounding, identical for both layouts (DESIGN §3).
__device__ __forceinline__ Meta make_meta(unsigned short scale_bits, unsigned zero) {
  const __half s = __ushort_as_half(scale_bits);
  const __half b = __hmul(__int2half_rn(-static_cast<int>(zero)), s);
  return Meta{__half2half2(s), __half2half2(b)};
}

// Reads the record of column `lane` from a tile of 32 records starting at `tile` (4-byte aligned).
// Must be called by all 32 lanes of the warp with the same `tile` (the cooperative reader shuffles).
__device__ __forceinline__ Meta read_meta(const unsigned char* __restrict__ tile, int lane) {
#if defined(WB_LAYOUT_B4)
  const unsigned rec = __ldg(reinterpret_cast<const unsigned*>(tile) + lane);
  Meta m;
  m.scale = __half2half2(__ushort_as_half(static_cast<unsigned short>(rec & 0xffffu)));
  m.bias = __half2half2(__ushort_as_half(static_cast<unsigned short>(rec >> 16)));
  return m;
#elif defined(WB_READER_SCALAR)
  const unsigned char* p = tile + 3 * lane;
  const unsigned lo = __ldg(p), hi = __ldg(p + 1), zero = __ldg(p + 2);
  return make_meta(static_cast<unsigned short>(lo | (hi << 8)), zero);
#else
  // Cooperative: lanes 0..23 load the tile's 24 aligned words; lane i's record is bytes 3i..3i+2,
  // i.e. word w0 = 3i/4 at byte offset o = 3i%4, spilling into word w0+1 when o > 1.
  const unsigned word = lane < 24 ? __ldg(reinterpret_cast<const unsigned*>(tile) + lane) : 0u;
  const int w0 = (3 * lane) >> 2;
  const unsigned lo = __shfl_sync(kFullMask, word, w0);
  // Lane 31 asks lane 24 (holds no tile word): harmless, its record (o = 1) uses lo's bytes only.
  const unsigned hi = __shfl_sync(kFullMask, word, w0 + 1);
  const unsigned rec = __funnelshift_r(lo, hi, 8 * ((3 * lane) & 3)) & 0xffffffu;
  return make_meta(static_cast<unsigned short>(rec & 0xffffu), rec >> 16);
#endif
}

// The sum over the 32 weights of one (group, column) of float(w[k]) * xs[k] in FP32. `w` holds 4
// words of 8 int4 values (docs/ARCHITECTURE.md packing: elements 2p, 2p+1 at nibbles p, p+4), so
// one mask-and-or yields the half2 (1024 + q_2p, 1024 + q_2p+1). Each word accumulates on its own
// (four short FMA chains instead of one long one), then ((w0 + w1) + (w2 + w3)): a fixed order,
// the same in every variant.
__device__ __forceinline__ float dot32(const uint4 w, const Meta m, const float* __restrict__ xs) {
  const unsigned words[4] = {w.x, w.y, w.z, w.w};
  const float4* x4 = reinterpret_cast<const float4*>(xs);  // 16-byte aligned: 32 floats per group
  const __half2 magic = __half2half2(__ushort_as_half(0x6400));  // 1024.0: q is exact in its mantissa
  float part[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float4 xa = x4[2 * j], xb = x4[2 * j + 1];
    const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
    float acc = 0.f;
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const unsigned bits = ((words[j] >> (4 * p)) & 0x000f000fu) | 0x64006400u;
      const __half2 q = __hsub2(*reinterpret_cast<const __half2*>(&bits), magic);  // exact
      const __half2 wq = __hfma2(q, m.scale, m.bias);  // w = fp16(q*scale + bias), one rounding
      const float2 wf = __half22float2(wq);
      acc = fmaf(wf.x, xv[2 * p], acc);
      acc = fmaf(wf.y, xv[2 * p + 1], acc);
    }
    part[j] = acc;
  }
  return (part[0] + part[1]) + (part[2] + part[3]);
}

// Stages n fp16 activations (n % 8 == 0, src 16-byte aligned) into shared memory as float with
// 16-byte loads issued before any store, so the whole slice arrives in one memory round trip.
__device__ __forceinline__ void stage_activations(float* __restrict__ dst, const __half* __restrict__ src,
                                                  int n) {
  const uint4* s4 = reinterpret_cast<const uint4*>(src);
  for (int i = threadIdx.x; i < n / 8; i += blockDim.x) {
    const uint4 v = __ldg(s4 + i);
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&words[k]));
      dst[8 * i + 2 * k] = f.x;
      dst[8 * i + 2 * k + 1] = f.y;
    }
  }
}

// Calibration builds spin a known number of SM cycles per CTA before any work (DESIGN §5).
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

// One atomic add with acquire-release semantics at GPU scope (PTX ISA 6.0, sm_70+): cheaper than
// the sequentially consistent fences of __threadfence(), and all the ordering split-K needs.
__device__ __forceinline__ unsigned atomic_add_acq_rel_gpu(unsigned* p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

// Split-K combine without atomics on data, so results are deterministic: each CTA writes its
// partial row to `ws`; the last CTA of a row (counted with one atomic) sums the partials in split
// order and resets the counter, so a CUDA-Graph replay starts from zero again. The CTA barrier
// before the release makes every thread's partial visible with it (cumulativity); the barrier
// after the acquire orders every thread's reads after it.
// Returns true in the CTA that must finalize; `row` then holds the split-ordered sum.
constexpr int kMaxSplits = 32;  // split-K partials combined in registers (the launcher checks)

template <int kWidth>
__device__ __forceinline__ bool splitk_last(float* __restrict__ ws, unsigned* __restrict__ counter,
                                            int split, int splits, float* row /* smem, kWidth */) {
  __shared__ bool is_last;
  if (splits == 1) return true;
  for (int c = threadIdx.x; c < kWidth; c += blockDim.x) __stcg(ws + split * kWidth + c, row[c]);
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomic_add_acq_rel_gpu(counter, 1u) == static_cast<unsigned>(splits - 1);
  __syncthreads();
  if (!is_last) return false;
  for (int c = threadIdx.x; c < kWidth; c += blockDim.x) {
    // Issue every partial's load before the first add (a runtime-length loop of loads would pay
    // one L2 round trip per split); the adds then run in split order: deterministic.
    float part[kMaxSplits];
#pragma unroll
    for (int i = 0; i < kMaxSplits; ++i) part[i] = i < splits ? __ldcg(ws + i * kWidth + c) : 0.f;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kMaxSplits; ++i)
      if (i < splits) s += part[i];
    row[c] = s;
  }
  if (threadIdx.x == 0) *counter = 0u;  // the kernel boundary orders this before the next launch
  __syncthreads();
  return true;
}

}  // namespace wb
