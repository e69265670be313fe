"""NumPy model of the metadata readers of one warp: the spec the CUDA readers are held to.

A test helper: tests/test_coop_model.py checks it against scalar byte reads, and the kernels'
own readers (``read_meta2`` of csrc/kernels/awq_meta.cuh for b4-scalar, b3-scalar and b3-coop,
run unmodified on the host by tests/warp_host.cpp, 32 threads for a warp) against it.

A tile is 32 consecutive records of one group (one per lane, lane = column). In the b3 layout
it is 96 bytes, 4-byte aligned (its start is a multiple of 4 because N % 32 == 0).

* **scalar b3**: lane i reads bytes ``3i, 3i+1, 3i+2`` one at a time.
* **cooperative b3**: lanes 0..23 each load one aligned little-endian u32 word ``i`` of the tile
  (24 words = 96 bytes; lanes 24..31 load nothing). The tile may come as two halves of 16
  records (48 bytes each, both 4-byte aligned: W13 pairs half a gate tile with half an up tile):
  lanes 0..11 then load the first half's words, lanes 12..23 the second's, and everything below
  holds unchanged, because 48 is a multiple of 4 and no record straddles the halves. Lane i's record starts at byte ``3i``, in
  word ``w0 = 3i // 4`` at byte offset ``o = 3i % 4``; it takes ``lo = shfl(word, w0)`` and
  ``hi = shfl(word, w0 + 1)`` and ``record = funnelshift_r(lo, hi, 8*o) & 0xFFFFFF``. When
  ``o <= 1`` the record lies inside ``lo`` and ``hi`` is shifted out entirely, which is why lane 31
  (record at byte 93, o = 1) may shuffle from lane 24 that holds no tile word.
* **b4**: lane i loads the aligned u32 word i of a 128-byte tile: ``scale | bias << 16``.

Addresses are byte offsets into a flat metadata buffer (uint8 NumPy array).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from workbench.core.errors import BadArgument
from workbench.data.layouts import record_bytes

WARP = 32
B3 = 3
TILE_BYTES_B3 = WARP * B3  # 96
TILE_WORDS_B3 = TILE_BYTES_B3 // 4  # 24 lanes load, 8 idle
TILE_BYTES_B4 = WARP * 4


class CoopIndex(NamedTuple):
    """Index arithmetic of one lane in the cooperative reader."""

    w0: int  # source lane of `lo` (the word holding the record's first byte)
    w1: int  # source lane of `hi`
    shift: int  # funnel-shift amount in bits: 8 * (3*lane % 4)
    hi_used: bool  # whether any bit of `hi` reaches the 24-bit record (shift > 8)


def coop_indices(lane: int) -> CoopIndex:
    """``(w0, w1, shift, hi_used)`` of ``lane`` (0..31), as the CUDA reader must compute them."""
    if isinstance(lane, bool) or not isinstance(lane, int) or not 0 <= lane < WARP:
        raise BadArgument(f"lane={lane!r} must be an integer in 0..{WARP - 1}")
    byte = B3 * lane
    w0, o = byte // 4, byte % 4
    # record bits are lo[8o:32] then hi[0:8o-8]: hi contributes only when 8o > 8
    return CoopIndex(w0, w0 + 1, 8 * o, 8 * o > 8)


def coop_table() -> str:
    """The per-lane table: record byte, words, shift, and which words the record really uses."""
    lines = ["lane  byte  w0  w1  shift  hi_used  words_used"]
    for lane in range(WARP):
        c = coop_indices(lane)
        used = sorted(words_used(lane))
        lines.append(
            f"{lane:>4}  {B3 * lane:>4}  {c.w0:>2}  {c.w1:>2}  {c.shift:>5}  {c.hi_used!s:>7}  {used}"
        )
    return "\n".join(lines)


def words_used(lane: int) -> set[int]:
    """Tile words (loaded by lanes of the same index) that hold bytes of ``lane``'s record."""
    first = B3 * lane
    return {first // 4, (first + B3 - 1) // 4}


def shfl(values: np.ndarray, src: int) -> int:
    """``__shfl_sync(full, v, src)``: the value of lane ``src`` (modulo the warp width, as CUDA)."""
    return int(values[src % WARP])


def funnelshift_r(lo: int, hi: int, shift: int) -> int:
    """``__funnelshift_r``: low 32 bits of ``((hi << 32) | lo) >> (shift & 31)``."""
    return ((((hi & 0xFFFFFFFF) << 32) | (lo & 0xFFFFFFFF)) >> (shift & 31)) & 0xFFFFFFFF


def _check_tile(buf: np.ndarray, offset: int, nbytes: int) -> None:
    if not isinstance(buf, np.ndarray) or buf.dtype != np.uint8 or buf.ndim != 1:
        raise BadArgument("buf must be a 1-D NumPy uint8 array")
    if offset % 4:
        raise BadArgument(f"tile offset={offset} is not 4-byte aligned")
    if offset < 0 or offset + nbytes > buf.size:
        raise BadArgument(f"tile offset={offset} + {nbytes} bytes exceeds buffer of {buf.size}")


def load_word(buf: np.ndarray, addr: int) -> int:
    """An aligned little-endian u32 load."""
    return int.from_bytes(bytes(buf[addr : addr + 4]), "little")


class WarpRead(NamedTuple):
    records: np.ndarray  # uint32 [32]: 24-bit b3 records or 32-bit b4 records, per lane
    loads: list[tuple[int, int, int]]  # (lane, first byte address, bytes) of every memory load


def coop_read_b3(
    buf: np.ndarray, offset: int, garbage: np.ndarray | None = None, seed: int = 0
) -> WarpRead:
    """The cooperative reader on the tile at ``offset``; lanes 24..31 hold ``garbage`` (uint32
    [8], random from ``seed`` if not given) in place of a word, which the result must ignore."""
    _check_tile(buf, offset, TILE_BYTES_B3)
    if garbage is None:
        garbage = np.random.default_rng(seed).integers(0, 1 << 32, WARP - TILE_WORDS_B3)
    words = np.zeros(WARP, dtype=np.uint64)
    loads = []
    for lane in range(WARP):
        if lane < TILE_WORDS_B3:
            words[lane] = load_word(buf, offset + 4 * lane)
            loads.append((lane, offset + 4 * lane, 4))
        else:
            words[lane] = int(garbage[lane - TILE_WORDS_B3])
    records = np.zeros(WARP, dtype=np.uint32)
    for lane in range(WARP):
        c = coop_indices(lane)
        lo, hi = shfl(words, c.w0), shfl(words, c.w1)
        records[lane] = funnelshift_r(lo, hi, c.shift) & 0xFFFFFF
    return WarpRead(records, loads)


def scalar_read_b3(buf: np.ndarray, offset: int) -> WarpRead:
    """The scalar reader: lane i loads bytes 3i, 3i+1, 3i+2 of the tile one at a time."""
    _check_tile(buf, offset, TILE_BYTES_B3)
    records = np.zeros(WARP, dtype=np.uint32)
    loads = []
    for lane in range(WARP):
        base = offset + B3 * lane
        b = [int(buf[base + i]) for i in range(B3)]
        loads += [(lane, base + i, 1) for i in range(B3)]
        records[lane] = b[0] | (b[1] << 8) | (b[2] << 16)
    return WarpRead(records, loads)


def read_b4(buf: np.ndarray, offset: int) -> WarpRead:
    """The b4 reader: lane i loads the aligned word i of a 128-byte tile."""
    _check_tile(buf, offset, TILE_BYTES_B4)
    records = np.array([load_word(buf, offset + 4 * i) for i in range(WARP)], dtype=np.uint32)
    return WarpRead(records, [(i, offset + 4 * i, 4) for i in range(WARP)])


def split_b3(records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """24-bit b3 records -> (scale bits uint16, zero uint8), as the reader hands them on."""
    r = np.asarray(records, dtype=np.uint32)
    return (r & 0xFFFF).astype(np.uint16), (r >> 16).astype(np.uint8)


def split_b4(records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """32-bit b4 records -> (scale bits uint16, bias bits uint16)."""
    r = np.asarray(records, dtype=np.uint32)
    return (r & 0xFFFF).astype(np.uint16), (r >> 16).astype(np.uint16)


def tile_offset(group: int, tile: int, n: int, layout: str) -> int:
    """Byte offset of tile ``tile`` (columns 32*tile..32*tile+31) of ``group`` in one expert's
    metadata ``[K/32, n*R]``; a multiple of 4 whenever n % 32 == 0."""
    r = record_bytes(layout)  # the layout registry; an unknown layout raises BadArgument
    if n % WARP:
        raise BadArgument(f"n={n} is not a multiple of {WARP}: tiles would not be aligned")
    return group * n * r + tile * WARP * r


def make_meta(records_b3: np.ndarray) -> np.ndarray:
    """24-bit b3 records -> the word the readers hand on: ``scale | bias << 16`` with
    ``bias = fp16(fp16(-zero) * scale)``, one rounding (awq_meta.cuh ``make_meta``)."""
    scale, zero = split_b3(records_b3)
    bias = (-zero.astype(np.int32)).astype(np.float16) * scale.view(np.float16)
    return scale.astype(np.uint32) | (bias.view(np.uint16).astype(np.uint32) << 16)
