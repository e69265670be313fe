"""NumPy model of one warp's tensor-core dot product: the spec csrc/kernels/awq_meta.cuh is held to.

A test helper. tests/test_fragment_model.py checks it against a plain dot product, and the
kernels' own ``quad_meta`` and ``acc_of_lane`` (run on the host by tests/warp_host.cpp) against
``quad_source`` and ``RESULT_SLOT``. Not tied to the CUDA by a test: the mma operand order and the
dequantize (inline PTX), which the GPU tests' bit-identity against the float64 reference holds.

One warp covers one tile (32 columns) of one group (32 k). Lane L = 4*qd + t:

* **weights**: entry (g, 32T + L) of the packed bank (``layouts.pack_int4``): word c holds column
  4*qd + c of the tile at k = 8t + 2p + e (pair p, element 2p + e at NIBBLE_OF_ELEMENT[2p + e]).
* **records**: the reader hands lane L the record of column L; ``quad_meta`` gives lane L the
  records of its quad's 4 columns (shuffles from lanes 4*qd + c).
* **dequantize**: pair p of word c -> half2 ``fp16(q * scale + bias)``; q comes from the magic
  numbers (``(0x6400 | q)`` is 1024 + q; ``(0x6400 | q << 4) / 16 - 64`` is q), both exact.
* **activations**: used as they lie in memory (``lane_activations``; W13 copies x to shared
  memory unchanged, W2 reads inter from global memory): lane L loads the 16 contiguous bytes
  x[8t .. 8t + 7], i.e. the 4 half2 pairs x[8t + 2p], x[8t + 2p + 1].
* **W13's half tiles**: a W13 warp holds 16 gate columns in lanes 0..15 and the same 16 up
  columns in lanes 16..31: lane L < 16 loads fragment lane 16h + L of a gate tile, lane L >= 16
  fragment lane 16h + L - 16 of the up tile (h = 0 or 1). Quads never straddle the halves, so the
  products above hold unchanged, with "column" meaning the lane's column in that pairing.
* **products**: per m-block mb (columns c = 2mb, 2mb + 1) and k-half kh, one ``mma.m16n8k16``
  with A registers (h[2mb][2kh], h[2mb+1][2kh], h[2mb][2kh+1], h[2mb+1][2kh+1]) and B registers
  (x[2kh], x[2kh+1]): A rows are columns, B is x replicated over the 8 n. The product's k slots
  are a permutation of the group's k (slot 16kh + 8r + 2t + e holds k = 8t + 2(2kh + r) + e), the
  same for A and B, so the sum is the dot product. Fragment layout as in the
  PTX ISA (m16n8k16, .f16): A reg r of lane (g, t) holds row g + 8*(r & 1), k 2t + 8*(r >> 1) + {0,1};
  B reg r holds k 2t + 8r + {0,1} of column n = g; D holds (row g, n 2t, 2t+1) and (row g + 8, ...).
* **result**: lane L keeps column L: d[0][0], d[0][2], d[1][0], d[1][2] for t = 0, 1, 2, 3.

``warp_group_sums`` runs all of it for all 32 lanes in float64 (the tensor cores' FP32 sums are
only approximated); tests compare it with a direct dot product of the dequantized weights.
"""

from __future__ import annotations

import numpy as np

WARP = 32
# lane 4*qd + t keeps the sum of column t of its quad: accumulator d[mb][i] of m-block mb
RESULT_SLOT = ((0, 0), (0, 2), (1, 0), (1, 2))


def quad_source(lane: int, c: int) -> int:
    """The lane whose record is column ``c`` of ``lane``'s quad (``quad_meta``'s shuffle source)."""
    return 4 * (lane // 4) + c


def _half(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint16).view(np.float16)[0])


def dequant_word(w: int, rec: int) -> list[tuple[float, float]]:
    """Pair p of word ``w`` with record ``rec`` (scale | bias << 16) -> (lo, hi) as fp16 values."""
    s, b = _half(rec & 0xFFFF), _half(rec >> 16)
    w8 = w >> 8
    raw = [
        (w & 0x000F000F) | 0x64006400,
        (w & 0x00F000F0) | 0x64006400,
        (w8 & 0x000F000F) | 0x64006400,
        (w8 & 0x00F000F0) | 0x64006400,
    ]
    out = []
    for p, bits in enumerate(raw):
        pair = []
        for half in (bits & 0xFFFF, bits >> 16):
            v = _half(half)
            q = v - 1024.0 if p % 2 == 0 else float(np.float16(v * 0.0625 - 64.0))
            pair.append(float(np.float16(q * s + b)))  # q*s + b is exact in float64: one rounding
        out.append((pair[0], pair[1]))
    return out


def lane_activations(x: np.ndarray) -> np.ndarray:
    """fp16 [groups*32] -> what lane t reads of each group, as fp16 pairs [groups, 4 (t), 4 (p), 2]:
    x[32g + 8t + 2p + e], a plain reshape (the kernels use x as it lies in memory)."""
    return x.reshape(x.size // 32, 4, 4, 2)


def _mma(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """acc [32 lanes, 4] += m16n8k16 of per-lane A regs a [32, 4, 2] and B regs b [32, 2, 2]."""
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    for lane in range(WARP):
        g, t = lane >> 2, lane & 3
        for r in range(4):
            row, k = g + 8 * (r & 1), 2 * t + 8 * (r >> 1)
            A[row, k : k + 2] = a[lane, r]
        for r in range(2):
            B[2 * t + 8 * r : 2 * t + 8 * r + 2, g] = b[lane, r]
    D = A @ B
    for lane in range(WARP):
        g, t = lane >> 2, lane & 3
        acc[lane] += [D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1]]


def warp_group_sums(words: np.ndarray, recs: np.ndarray, xlane: np.ndarray) -> np.ndarray:
    """Column sums of one tile-group as the warp computes them.

    words: uint32 [32 lanes, 4] (the tile-group's packed entries); recs: uint32 [32] (record of
    column L, as the reader hands it to lane L); xlane: [4 (t), 4 (p), 2] of this group.
    Returns float64 [32]: lane L's result, which is the sum of column L of the tile.
    """
    h = np.zeros((WARP, 4, 4, 2))  # lane, word c, pair p, (lo, hi)
    for lane in range(WARP):
        quad = [int(recs[quad_source(lane, c)]) for c in range(4)]  # quad_meta
        for c in range(4):
            h[lane, c] = dequant_word(int(words[lane, c]), quad[c])
    x = np.array([xlane[lane & 3] for lane in range(WARP)], dtype=np.float64)  # [lane, p, 2]
    acc = np.zeros((2, WARP, 4))
    for mb in range(2):
        for kh in range(2):
            a = np.stack(
                [
                    h[:, 2 * mb, 2 * kh],
                    h[:, 2 * mb + 1, 2 * kh],
                    h[:, 2 * mb, 2 * kh + 1],
                    h[:, 2 * mb + 1, 2 * kh + 1],
                ],
                axis=1,
            )
            _mma(acc[mb], a, x[:, 2 * kh : 2 * kh + 2])
    pick = RESULT_SLOT
    return np.array([acc[pick[lane & 3][0], lane, pick[lane & 3][1]] for lane in range(WARP)])


__all__ = ["RESULT_SLOT", "dequant_word", "lane_activations", "quad_source", "warp_group_sums"]
