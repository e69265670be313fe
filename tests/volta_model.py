"""NumPy model of one warp's tensor-core dot product on sm_70 (``mma.m8n8k4``): the spec that
csrc/kernels/mma_sm70.h and the WB_DOT_M8N8K4 branch of awq_meta.cuh are held to.

The packing and the dequantization are those of sm_80 (``fragment_model``): lane L = 4*qd + t holds
in word c the 8 weights of column 4*qd + c at k = 8t + 0..7, as four half2 pairs. What differs is
the product, which m8n8k4 runs per **quadpair** (QP): lanes 4i..4i+3 and 4i+16..4i+19 (thread
m = L & 3 | 4 * (L >= 16) of QP i = (L >> 2) & 3) compute their own 8x8x4 product.

* **hardware** (PTX ISA, "Matrix Fragments for mma.m8n8k4", ``.row.col`` with FP32 accumulators):
  thread m gives row m of A (its two A registers: k 0..3) and column m of B (k 0..3); accumulator
  slot v of thread m holds D[row][col] with row = (m & 1) + (v & 2) + 4 * (m >> 2) and
  col = (v & 4) + (m & 2) + (v & 1) (``d_position``).
* **the kernel's operands** (``SCHEDULE``): product i = 0..7 adds to accumulator set
  ``i >> 2``, uses k-half s = ``(i >> 1) & 1`` and column c = 0, 2, 0, 2, 1, 3, 1, 3. A = the lane's
  own pairs 2s, 2s+1 of column c (k = 8t + 4s + 0..3). B = pairs 2s, 2s+1 of activation word
  ``x_word(L) = (L & 1) | ((L >> 3) & 2)`` where ``b_active(L, c)`` (quad lane bit 1 equal to c's),
  zeros elsewhere. So D[m][n] is a partial sum of one lane's weights exactly where B's k are A's,
  and the zero columns leave the other column's sums of a set untouched.
* **where the sums land**: in set c & 1, quad lanes 2 * (c >> 1) + {0, 1} hold column c: lane L's
  slot ``L & 1`` has the 4-k sums of quad lane L & 1, slot ``6 | (L & 1)`` those of quad lane
  (L & 1) | 2, each running over the groups and both k-halves (HMMA by HMMA).
* **finish**: per set, lane L adds its two slots, then lane L ^ 1's sum (one shuffle):
  ``(P[0] + P[2]) + (P[1] + P[3])`` in even lanes, the same bits in odd ones (addition commutes);
  lane L keeps set L & 1, which holds column 4*qd + t.

**FP32 order** (``column_order``): for column 4*qd + c, each quad lane r's partial P[r] is a chain
of HMMA steps, one per (group, k-half) in the warp's order, each adding 4 exact products to the
running FP32 sum; then ``(P[0] + P[2]) + (P[1] + P[3])``; then the CTA adds its warps in order (as
on sm_80). How one HMMA step rounds is the hardware's: ``warp_group_sums`` can take it exact
(float64), rounded to nearest FP32, or truncated to FP32 (what published measurements of V100
tensor cores report), which bounds what the docs state (docs/investigations/2026-12-01-volta-path.md).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from fragment_model import dequant_word

from workbench.core.errors import BadArgument

WARP = 32
MMAS = 8  # m8n8k4 products per tile-group
ROUNDINGS = ("exact", "rn32", "rz32")


class Product(NamedTuple):
    """Operands of one m8n8k4 product of a tile-group."""

    set: int  # accumulator set (0: columns 0 and 2, 1: columns 1 and 3)
    half: int  # k-half s: the lane's pairs 2s, 2s+1
    col: int  # column c of the quad


SCHEDULE = tuple(Product(i >> 2, (i >> 1) & 1, ((i & 1) << 1) | (i >> 2)) for i in range(MMAS))


def quadpair(lane: int) -> tuple[int, int]:
    """(QP index, thread m within it) of a lane."""
    return (lane >> 2) & 3, (lane & 3) | (4 if lane >= 16 else 0)


def lane_of(qp: int, m: int) -> int:
    return 4 * qp + (m & 3) + (16 if m >= 4 else 0)


def d_position(m: int, v: int) -> tuple[int, int]:
    """(row, col) of D that thread m of a QP holds in accumulator slot v (PTX ISA, .f32)."""
    return (m & 1) + (v & 2) + 4 * (m >> 2), (v & 4) + (m & 2) + (v & 1)


def x_word(lane: int) -> int:
    """The 16-byte word of a group's activations lane L loads: k = 8 * word + 0..7."""
    return (lane & 1) | ((lane >> 3) & 2)


def b_active(lane: int, col: int) -> bool:
    """Whether lane L feeds activations (else zeros) to B in the products of column c."""
    return ((lane >> 1) & 1) == (col >> 1)


def slots(lane: int) -> tuple[int, int]:
    """Accumulator slots of lane L holding sums: of quad lanes L & 1 and (L & 1) | 2."""
    return lane & 1, 6 | (lane & 1)


def slot_used(v: int) -> bool:
    return any(v in slots(lane) for lane in range(WARP))


def kept_set(lane: int) -> int:
    return lane & 1


PAIR_XOR = 1  # the one shuffle of finish: lanes L and L ^ 1


def derived_slots(lane: int, col: int) -> list[tuple[int, int]]:
    """From the hardware map alone: the (slot, quad lane whose weights) pairs of lane L that hold
    sums of matching k in a product of column ``col`` (with SCHEDULE's operands). Ties the
    kernel's choice of slots to the PTX fragment layout."""
    qp, m = quadpair(lane)
    out = []
    for v in range(8):
        row, n = d_position(m, v)
        a_lane, b_lane = lane_of(qp, row), lane_of(qp, n)
        if b_active(b_lane, col) and x_word(b_lane) == (a_lane & 3):
            out.append((v, a_lane & 3))
    return out


def _round(v: np.ndarray, rounding: str) -> np.ndarray:
    if rounding == "exact":
        return v
    r = v.astype(np.float32).astype(np.float64)
    if rounding == "rz32":  # toward zero: step back where nearest rounded away from zero
        away = np.abs(r) > np.abs(v)
        r = np.where(away, np.nextafter(r.astype(np.float32), np.float32(0)).astype(np.float64), r)
    return r


_QP_LANES = np.array([[lane_of(qp, m) for m in range(8)] for qp in range(4)])  # [qp, m]
_D_ROW = np.array([[d_position(m, v)[0] for v in range(8)] for m in range(8)])  # [m, v]
_D_COL = np.array([[d_position(m, v)[1] for v in range(8)] for m in range(8)])


def _mma(acc: np.ndarray, a: np.ndarray, b: np.ndarray, rounding: str) -> None:
    """acc [32 lanes, 8 slots] += m8n8k4 per QP of A regs a [32, 4] (k 0..3 of each lane's row)
    and B regs b [32, 4] (k 0..3 of each lane's column); one rounding per slot and product."""
    A, B = a[_QP_LANES], b[_QP_LANES]  # [qp, m or n, k]
    D = np.einsum("qmk,qnk->qmn", A, B)  # D[qp][row][col]
    held = D[:, _D_ROW, _D_COL]  # [qp, m, v]: what thread m holds in slot v
    acc[_QP_LANES] = _round(acc[_QP_LANES] + held, rounding)


def _operands(words: np.ndarray, recs: np.ndarray):
    """Dequantized weights h [32 lanes, 4 columns, 8 k] as fragment_model.dequant_word gives them."""
    h = np.zeros((WARP, 4, 8))
    for lane in range(WARP):
        quad = [int(recs[(lane & ~3) | c]) for c in range(4)]  # quad_meta
        for c in range(4):
            pairs = dequant_word(int(words[lane, c]), quad[c])
            h[lane, c] = np.array(pairs).reshape(8)
    return h


def group_products(acc: np.ndarray, words, recs, xgroup: np.ndarray, rounding="exact") -> None:
    """acc [2 sets, 32 lanes, 8 slots] += the eight products of one tile-group, in SCHEDULE order.

    words: uint32 [32, 4]; recs: uint32 [32] (record of column L); xgroup: fp16 [32] (the group's
    activations; lane L reads word x_word(L), i.e. x[8w .. 8w + 7]).
    """
    h = _operands(np.asarray(words), np.asarray(recs))
    xw = np.asarray(xgroup, dtype=np.float64).reshape(4, 8)
    for p in SCHEDULE:
        ks = slice(4 * p.half, 4 * p.half + 4)
        a = h[:, p.col, ks]
        b = np.array(
            [xw[x_word(lane), ks] if b_active(lane, p.col) else np.zeros(4) for lane in range(WARP)]
        )
        _mma(acc[p.set], a, b, rounding)


def finish(acc: np.ndarray, rounding: str = "exact") -> np.ndarray:
    """acc [2, 32, 8] -> float64 [32]: lane L's result, the sum of column L of the tile."""
    out = np.zeros(WARP)
    for s in range(2):
        mine = np.array(
            [acc[s, lane, slots(lane)[0]] + acc[s, lane, slots(lane)[1]] for lane in range(WARP)]
        )
        mine = _round(mine, rounding)
        total = _round(mine + mine[[lane ^ PAIR_XOR for lane in range(WARP)]], rounding)
        for lane in range(WARP):
            if kept_set(lane) == s:
                out[lane] = total[lane]
    return out


def warp_group_sums(words, recs, xgroup, rounding: str = "exact") -> np.ndarray:
    """Column sums of one tile-group as the sm_70 warp computes them (float64 [32], lane = column)."""
    if rounding not in ROUNDINGS:
        raise BadArgument(f"rounding must be one of {', '.join(ROUNDINGS)}, not {rounding!r}")
    acc = np.zeros((2, WARP, 8))
    group_products(acc, words, recs, xgroup, rounding)
    return finish(acc, rounding)


def warp_sums(words, recs, x, rounding: str = "exact") -> np.ndarray:
    """One warp's sums over several groups (as a W13 warp accumulates its groups w, w + warps, ...):
    words uint32 [G, 32, 4], recs uint32 [G, 32], x fp16 [G * 32] -> float64 [32]."""
    if rounding not in ROUNDINGS:
        raise BadArgument(f"rounding must be one of {', '.join(ROUNDINGS)}, not {rounding!r}")
    acc = np.zeros((2, WARP, 8))
    for g in range(len(words)):
        group_products(acc, words[g], recs[g], x[32 * g : 32 * g + 32], rounding)
    return finish(acc, rounding)


def column_order(lane: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The quad lanes whose partial sums lane L adds for its column, as ((a, b), (c, d)) meaning
    (P[a] + P[b]) + (P[c] + P[d]): its own set's two slots first, then its partner's."""
    partner = lane ^ PAIR_XOR
    own = tuple(sorted({lane & 1, (lane & 1) | 2}))
    other = tuple(sorted({partner & 1, (partner & 1) | 2}))
    return own, other  # type: ignore[return-value]


__all__ = [
    "MMAS",
    "PAIR_XOR",
    "SCHEDULE",
    "b_active",
    "column_order",
    "d_position",
    "derived_slots",
    "kept_set",
    "quadpair",
    "slot_used",
    "slots",
    "warp_group_sums",
    "warp_sums",
    "x_word",
]
