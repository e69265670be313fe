"""Data layouts of docs/DESIGN.md §3, the contract between Python and the CUDA kernels.

* Metadata records, one per (group of 32 along K, column), ordered ``[K/32][N]``:
  ``b4`` = little-endian u32 ``scale_bits | bias_bits << 16``; ``b3`` = bytes
  ``[scale_lo, scale_hi, zero]``. Both decode to the same ``(scale, bias)`` pair with
  ``bias = fp16(fp16(-zero) * scale)``, rounded once.
* Dequantized weight ``w = fp16(q * scale + bias)``, rounded once (the kernel's ``__hfma2``).
* Kernel int4 packing: int32 ``[K/32, N, 4]`` in tensor-core fragment order (``pack_int4``):
  entry (g, 32T + 4qd + t) word c holds column 32T + 4qd + c at ``k = 32g + 8t + e``, element e
  at nibble ``(e // 2) + 4 * (e % 2)`` (docs/ARCHITECTURE.md).

Torch tensors (CPU) in and out; the arithmetic is NumPy. Every function accepts optional leading
dimensions (e.g. experts ``[E, ...]``) in front of the documented 2-D shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from workbench.core.errors import BadArgument

if TYPE_CHECKING:
    import torch

GROUP = 32
TILE = 32  # columns per metadata tile and per packed weight tile (one warp)
READERS = {"scalar": "WB_READER_SCALAR", "coop": "WB_READER_COOP"}  # reader -> its -D macro
# Nibble that holds element e (0..7) of a packed 32-bit word: pairs (2p, 2p+1) sit at nibbles
# (p, p+4), so the kernel's one mask 0x000F000F after a shift by 4p yields a half2 of the pair.
NIBBLE_OF_ELEMENT = tuple((e // 2) + 4 * (e % 2) for e in range(8))


# ---------------------------------------------------------------- validation helpers


def as_array(name: str, t: object, dtype: str, min_dims: int = 2) -> np.ndarray:
    """``t`` as a NumPy array after checking it is a torch tensor of ``dtype`` with enough dims."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise BadArgument(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    want = getattr(torch, dtype)
    if t.dtype != want:
        raise BadArgument(f"{name} must be torch.{dtype}, got {t.dtype}")
    if t.dim() < min_dims:
        raise BadArgument(f"{name} must have at least {min_dims} dims, got shape {tuple(t.shape)}")
    return t.detach().cpu().numpy()


def to_tensor(a: np.ndarray) -> torch.Tensor:
    """A CPU torch tensor sharing (a contiguous copy of) ``a``."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(a))


def _check_layout(layout: object) -> int:
    return layout_info(layout).record_bytes


def _check_q(q: np.ndarray) -> None:
    if q.size and int(q.max()) > 15:
        bad = tuple(int(i) for i in np.unravel_index(int(np.argmax(q > 15)), q.shape))
        raise BadArgument(f"q must hold int4 values 0..15, got {int(q[bad])} at index {bad}")


def _check_k(name: str, k: int) -> None:
    if k % GROUP:
        raise BadArgument(f"{name}: K={k} is not a multiple of the group size {GROUP}")


def _check_meta_pair(scales: np.ndarray, zeros: np.ndarray) -> None:
    if scales.shape != zeros.shape:
        raise BadArgument(
            f"zeros shape {zeros.shape} does not match scales shape {scales.shape} ([..., K/32, N])"
        )
    finite = np.isfinite(scales)
    if not finite.all():
        bad = tuple(int(i) for i in np.unravel_index(int(np.argmin(finite)), scales.shape))
        raise BadArgument(f"scales must be finite, got {scales[bad]} at index {bad}")


# ---------------------------------------------------------------- metadata records


def bias_of(scales: np.ndarray, zeros: np.ndarray) -> np.ndarray:
    """``bias = fp16(fp16(-zero) * scale)`` as the kernels compute it; NumPy fp16 in and out.

    ``fp16(-zero)`` is the integer ``-zero`` converted to FP16 (the kernel's
    ``__int2half_rn(-(int)zero)``), exact for 0..255, and +0.0 (not -0.0) for zero 0. The product
    of two FP16 values has at most 22 significant bits, so it is exact in float64 and the one
    conversion to float16 (round to nearest even, overflow to inf) is the kernel's one rounding.
    """
    neg_zero = (-zeros.astype(np.int32)).astype(np.float64)  # integer negation: 0 stays +0.0
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf, as in the kernel
        return (neg_zero * scales.astype(np.float64)).astype(np.float16)


def encode_metadata(scales: torch.Tensor, zeros: torch.Tensor, layout: str) -> torch.Tensor:
    """Records of ``layout`` ("b4" or "b3") for one or more experts.

    scales: torch.float16 ``[..., K/32, N]`` (finite); zeros: torch.uint8 ``[..., K/32, N]``.
    Returns torch.uint8 ``[..., K/32, N*4]`` (b4) or ``[..., K/32, N*3]`` (b3).
    """
    lay = layout_info(layout)
    s = as_array("scales", scales, "float16")
    z = as_array("zeros", zeros, "uint8")
    _check_meta_pair(s, z)
    out = lay.encode(s, z)  # [..., G, N, R]
    return to_tensor(out.reshape(*s.shape[:-1], s.shape[-1] * lay.record_bytes))


def _encode_b4(s: np.ndarray, z: np.ndarray) -> np.ndarray:
    bias_bits = bias_of(s, z).view(np.uint16)
    words = s.view(np.uint16).astype("<u4") | (bias_bits.astype("<u4") << 16)
    return words.view(np.uint8).reshape(*s.shape, 4)  # little-endian u32: low byte first


def _decode_b4(rec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scales = (rec[..., 0] | (rec[..., 1] << 8)).astype(np.uint16).view(np.float16)
    return scales, (rec[..., 2] | (rec[..., 3] << 8)).astype(np.uint16).view(np.float16)


def _encode_b3(s: np.ndarray, z: np.ndarray) -> np.ndarray:
    bits = s.view(np.uint16)
    return np.stack([(bits & 0xFF).astype(np.uint8), (bits >> 8).astype(np.uint8), z], axis=-1)


def _decode_b3(rec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scales = (rec[..., 0] | (rec[..., 1] << 8)).astype(np.uint16).view(np.float16)
    return scales, bias_of(scales, rec[..., 2].astype(np.uint8))


def decode_metadata(meta: torch.Tensor, layout: str, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The inverse of encode_metadata, including bias reconstruction for b3.

    meta: torch.uint8 ``[..., K/32, n*R]``. Returns ``(scales, biases)``, torch.float16
    ``[..., K/32, n]`` each: what the kernel's reader hands to the dequantizer.
    """
    r = _check_layout(layout)
    m = as_array("meta", meta, "uint8")
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise BadArgument(f"n={n!r} must be a positive integer")
    if m.shape[-1] != n * r:
        raise BadArgument(
            f"meta last dim {m.shape[-1]} != n*{r} = {n * r} for layout {layout} and n={n}"
        )
    rec = m.reshape(*m.shape[:-1], n, r).astype(np.uint32)
    scales, biases = layout_info(layout).decode(rec)
    return to_tensor(scales), to_tensor(biases)


# ---------------------------------------------------------------- dequantization


def _fma_fp16(q: np.ndarray, scales: np.ndarray, biases: np.ndarray) -> np.ndarray:
    """``fp16(q * scale + bias)`` with one rounding; per-group scales/biases broadcast over K.

    Why float64 is exact: q (0..15, 4 bits) times an FP16 scale has at most 15 significant
    bits, and every FP16 value (subnormals included) is an integer multiple of 2^-24 below
    2^16, so q*scale and q*scale + bias are multiples of 2^-24 below 2^21: at most 45
    significant bits, well inside float64's 53. The only rounding is the final cast to FP16,
    which is what one FP16 FMA does. An infinite bias stays infinite, as in the kernel.
    """
    rep = lambda a: np.repeat(a.astype(np.float64), GROUP, axis=-2)  # noqa: E731
    with np.errstate(over="ignore", invalid="ignore"):
        return (q.astype(np.float64) * rep(scales) + rep(biases)).astype(np.float16)


def _check_dequant_args(q: np.ndarray, scales: np.ndarray, other: np.ndarray, what: str) -> None:
    _check_k("q", q.shape[-2])
    _check_q(q)
    want = (*q.shape[:-2], q.shape[-2] // GROUP, q.shape[-1])
    for name, a in (("scales", scales), (what, other)):
        if a.shape != want:
            raise BadArgument(f"{name} shape {a.shape} != {want} for q shape {q.shape}")


def dequantize(q: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor) -> torch.Tensor:
    """Weights as the kernels see them: ``w = fp16(q * scale + bias)``, one rounding.

    q: torch.uint8 ``[..., K, N]`` with values 0..15 (K % 32 == 0); scales: torch.float16
    ``[..., K/32, N]``; zeros: torch.uint8 ``[..., K/32, N]``. Returns torch.float16 ``[..., K, N]``.
    """
    qn = as_array("q", q, "uint8")
    s = as_array("scales", scales, "float16")
    z = as_array("zeros", zeros, "uint8")
    _check_dequant_args(qn, s, z, "zeros")
    _check_meta_pair(s, z)
    return to_tensor(_fma_fp16(qn, s, bias_of(s, z)))


def dequantize_records(q: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor) -> torch.Tensor:
    """Like dequantize, from decoded ``(scales, biases)`` (torch.float16 ``[..., K/32, N]``)."""
    qn = as_array("q", q, "uint8")
    s = as_array("scales", scales, "float16")
    b = as_array("biases", biases, "float16")
    _check_dequant_args(qn, s, b, "biases")
    return to_tensor(_fma_fp16(qn, s, b))


# ---------------------------------------------------------------- kernel int4 packing


def _check_n(name: str, n: int) -> None:
    if n % TILE:
        raise BadArgument(f"{name}: N={n} is not a multiple of the {TILE}-column tile")


# Packed word (group g, tile T, lane L = 4*qd + t, word c) holds column 32T + 4qd + c at
# k = 32g + 8t + 2p + e (pair p = 0..3, e = 0..1), element 2p + e at NIBBLE_OF_ELEMENT[2p + e]:
# exactly the 8 weights lane L feeds into the m16n8k16 tensor-core fragments for that column,
# 8 consecutive k, so the lane's activations are 16 contiguous bytes too.
# Axes of q reshaped to [..., g, t, p, e, T, qd, c] -> packed order [..., g, T, qd, t, c, p, e].
PACK_AXES = (0, 4, 5, 1, 6, 2, 3)


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """Pack ``q`` (torch.uint8 ``[..., K, N]``, 0..15) into the kernels' int32 ``[..., K/32, N, 4]``.

    Fragment order (docs/ARCHITECTURE.md): entry (g, 32T + L) is lane L's 16-byte load for group g
    of column tile T; its word c holds column 32T + 4(L // 4) + c at k = 32g + 8(L % 4) + 2p + e,
    element 2p + e at nibble NIBBLE_OF_ELEMENT[2p + e]. A warp's 512-byte load is one tile-group.
    """
    qn = as_array("q", q, "uint8")
    k, n = qn.shape[-2:]
    _check_k("q", k)
    _check_n("q", n)
    _check_q(qn)
    lead = qn.shape[:-2]
    nl = len(lead)
    blocks = qn.reshape(*lead, k // GROUP, 4, 4, 2, n // TILE, 8, 4)
    blocks = blocks.transpose(*range(nl), *(nl + a for a in PACK_AXES)).astype(np.uint32)
    blocks = blocks.reshape(*lead, k // GROUP, n // TILE, 8, 4, 4, 8)  # [.., g, T, qd, t, c, el]
    shifts = np.array([4 * p for p in NIBBLE_OF_ELEMENT], dtype=np.uint32)
    words = np.bitwise_or.reduce(blocks << shifts, axis=-1)
    return to_tensor(words.reshape(*lead, k // GROUP, n, 4).astype(np.uint32).view(np.int32))


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """The inverse of pack_int4: int32 ``[..., K/32, N, 4]`` -> torch.uint8 ``[..., K, N]``."""
    p = as_array("packed", packed, "int32", min_dims=3)
    if p.shape[-1] != 4:
        raise BadArgument(
            f"packed last dim must be 4 words, got shape {p.shape} ([..., K/32, N, 4])"
        )
    g, n = p.shape[-3], p.shape[-2]
    _check_n("packed", n)
    lead = p.shape[:-3]
    nl = len(lead)
    shifts = np.array([4 * s for s in NIBBLE_OF_ELEMENT], dtype=np.uint32)
    elems = (p.view(np.uint32)[..., None] >> shifts) & 0xF  # [..., g, n, c, el]
    elems = elems.reshape(*lead, g, n // TILE, 8, 4, 4, 4, 2)  # [.., g, T, qd, t, c, p, e]
    inverse = tuple(PACK_AXES.index(a) for a in range(7))
    elems = elems.transpose(*range(nl), *(nl + a for a in inverse))  # [.., g, t, p, e, T, qd, c]
    return to_tensor(elems.reshape(*lead, g * GROUP, n).astype(np.uint8))


# ---------------------------------------------------------------- the layout registry


@dataclass(frozen=True)
class Layout:
    """One metadata layout: everything the package needs to know about it, in one place
    (docs/DESIGN.md §3.7). Adding a layout = one entry here, its encoder/decoder above, and the
    CUDA reader behind ``define`` (csrc/kernels/awq_meta.cuh)."""

    name: str
    record_bytes: int
    readers: tuple[str, ...]  # readers a kernel may build with for this layout
    define: str  # the -D macro that selects it in csrc/
    encode: Callable[[np.ndarray, np.ndarray], np.ndarray]  # (scales, zeros) -> [..., G, N, R]
    decode: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]  # records -> (scales, biases)
    summary: str


LAYOUTS: dict[str, Layout] = {
    lay.name: lay
    for lay in (
        Layout("b4", 4, ("scalar",), "WB_LAYOUT_B4", _encode_b4, _decode_b4,
               "u32 scale_bits | bias_bits << 16 (bias precomputed)"),
        Layout("b3", 3, ("scalar", "coop"), "WB_LAYOUT_B3", _encode_b3, _decode_b3,
               "bytes [scale_lo, scale_hi, zero] (bias rebuilt in the reader)"),
    )
}  # fmt: skip
RECORD_BYTES = {name: lay.record_bytes for name, lay in LAYOUTS.items()}


def layout_info(layout: object, what: str = "layout") -> Layout:
    """The registry entry of ``layout``; BadArgument names it and the known layouts."""
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise BadArgument(f"{what}={layout!r} is not one of {', '.join(LAYOUTS)}")
    return LAYOUTS[layout]


def record_bytes(layout: object) -> int:
    return layout_info(layout).record_bytes
