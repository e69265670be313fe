// Lab-only record reader of the slot trees: csrc's awq_meta.cuh plus read_meta_at. Kept here, not
// in csrc/, so that the product's sources (and their hash) stay those of HEAD until a slot
// structure wins and is promoted.
#pragma once
#include "../../../../../csrc/kernels/awq_meta.cuh"

namespace wb {

// Reads the record of fragment position `lane` where a warp's 32 records are not one tile but runs
// of consecutive records (a slot kernel's halves or quarters of tiles, each run 4-byte aligned and
// a multiple of 4 records long, laid end to end in lane order): `own` is this lane's record; for
// the cooperative reader, `word` is the aligned word lane `lane` < 24 loads, word `lane` of the 96
// bytes the runs make. The scalar and b4 readers read `own` only; the cooperative reader shuffles
// exactly as read_meta2 (a record never spans two runs: a run's bytes are a multiple of 12).
// Must be called by all 32 lanes of the warp.
__device__ __forceinline__ unsigned read_meta_at(const unsigned char* __restrict__ own,
                                                 const unsigned* __restrict__ word, int lane) {
#if defined(WB_LAYOUT_B4)
  (void)word;
  (void)lane;
  return __ldg(reinterpret_cast<const unsigned*>(own));
#elif defined(WB_READER_SCALAR)
  (void)word;
  (void)lane;
  const unsigned lo8 = __ldg(own), hi8 = __ldg(own + 1), zero = __ldg(own + 2);
  return make_meta(static_cast<unsigned short>(lo8 | (hi8 << 8)), zero);
#else
  (void)own;
  const unsigned w = lane < 24 ? __ldg(word) : 0u;
  const int w0 = (3 * lane) >> 2;
  const unsigned lo32 = __shfl_sync(kFullMask, w, w0);
  const unsigned hi32 = __shfl_sync(kFullMask, w, w0 + 1);
  const unsigned rec = __funnelshift_r(lo32, hi32, 8 * ((3 * lane) & 3)) & 0xffffffu;
  return make_meta(static_cast<unsigned short>(rec & 0xffffu), rec >> 16);
#endif
}

}  // namespace wb
