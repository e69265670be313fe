// The index arithmetic of the sm_70 tensor-core dot (awq_meta.cuh, dot_group under WB_DOT_M8N8K4):
// which m8n8k4 product takes which weights and activations, and where each lane's sums land.
// Plain C++ (no CUDA headers), so a host program can print every value: tests/test_volta_model.py
// compiles this header with the host compiler and holds it to tests/volta_model.py.
//
// The packing (layouts.pack_int4) is the sm_80 one: lane L = 4*qd + t holds in word c the 8 weights
// of column 4*qd + c at k = 8t + 0..7 (pairs p = 0..3). An m8n8k4 (.row.col, FP32 accumulate) runs
// one 8x8x4 product per quadpair (lanes 4i..4i+3 and 4i+16..4i+19): thread m of a quadpair gives
// row m of A (4 k) and column m of B (4 k); thread (m & 1) | (n & 2) | (m & 4) receives D[m][n] in
// slot (n & 1) | (m & 2) | (n & 4) (PTX ISA, "Matrix Fragments for mma.m8n8k4"). Here A = the
// lane's own weights of one column c (pairs 2s, 2s+1: k = 8t + 4s + 0..3) and B = activations:
// lane L feeds k = 8 * x_word(L) + 4s + 0..3 where it is active for c, zeros elsewhere. D[m][n] is a
// partial sum exactly when B's k are A's, and the zeros keep the other sums of a slot untouched.
#pragma once

#if defined(__CUDACC__)
#define WB_HD __host__ __device__ __forceinline__
#else
#define WB_HD inline
#endif

namespace wb {
namespace sm70 {

// Constants as enumerators: no device globals in the PTX (the sm_80+ PTX stays byte for byte as before).
enum : int { kMmas = 8 };  // m8n8k4 products per tile-group: 4 columns x 2 k-halves (4 k each) per lane

// Product i: the accumulator set it adds to (set 0 holds columns 0 and 2, set 1 columns 1 and 3),
// its k-half s (the lane's pairs 2s, 2s+1) and its column c of the quad. Set by set, so that W2's
// per-unit sums of set 0 are done (and their registers free) before set 1 starts: c = 0, 2, 0, 2,
// 1, 3, 1, 3 with s = 0, 0, 1, 1, 0, 0, 1, 1.
WB_HD constexpr int mma_set(int i) { return i >> 2; }
WB_HD constexpr int mma_half(int i) { return (i >> 1) & 1; }
WB_HD constexpr int mma_col(int i) { return ((i & 1) << 1) | (i >> 2); }

// The 16-byte word of a group's activations lane L loads (k = 8 * word + 0..7): thread n of a
// quadpair feeds B column n, and (n & 1) | ((n & 4) >> 1) is the quad lane whose k it must match.
WB_HD constexpr int x_word(int lane) { return (lane & 1) | ((lane >> 3) & 2); }

// Lane L feeds its activations for column c only when its quad lane's bit 1 is c's: the B columns
// with n & 2 == 2 * (c >> 1) land in quad lanes 2 * (c >> 1) + {0, 1}; the other half feeds zeros.
WB_HD constexpr bool b_active(int lane, int col) { return ((lane >> 1) & 1) == (col >> 1); }

// Where lane L's partial sums land in an accumulator set: slot lo holds the 4-k sums of quad lane
// L & 1, slot hi those of quad lane (L & 1) | 2 (both for the set's column held by L's half).
WB_HD constexpr int slot_lo(int lane) { return lane & 1; }
WB_HD constexpr int slot_hi(int lane) { return 6 | (lane & 1); }
// A slot that can hold a partial sum in some lane (the others only ever hold sums of mismatched k).
WB_HD constexpr bool slot_used(int v) { return (v & 6) == 0 || (v & 6) == 6; }
// After lanes L and L ^ 1 add their halves, each holds its set's column; lane L keeps set L & 1
// (column 4*qd + (L & 3): set 0 holds columns 0 and 2, set 1 columns 1 and 3).
enum : int { kPairXor = 1 };
WB_HD constexpr int kept_set(int lane) { return lane & 1; }

}  // namespace sm70
}  // namespace wb
