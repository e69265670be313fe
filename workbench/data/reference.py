"""float64 reference of the two decode kernels (docs/DESIGN.md §3), with the kernels' FP16 rounding points.

Rounding points of the kernels (docs/ARCHITECTURE.md "Numerics"), and what this module does:

1. Weights: ``w = fp16(q * scale + bias)``, one FP16 FMA rounding. The inputs here are those
   dequantized FP16 weights (layouts.dequantize), so this rounding has already happened.
2. Activations ``x`` are FP16 inputs; no rounding.
3. Products ``w * x`` and their sums over K: FP32 in the kernel (fixed order per build, the same
   for every reader and layout). Here float64, exact for the products and far more accurate
   for the sums: this is the reference the kernels are compared against, not a bit-model.
4. W13 epilogue: ``inter = fp16(silu(gate) * up)``, computed in FP32 and rounded once to FP16.
   Here in float64, then rounded once (``inter_fp16``), which is what W2 consumes.
5. W2: ``y[n] = fp16(sum_j rw[j] * sum_k w_j[k, n] * inter[j, k])``, FP32, rounded once at the
   end. Here float64, then rounded once (``y_fp16``).

Out-of-range expert ids are the caller's concern: a routed slot with an invalid id contributes
nothing (W13 writes zeros to its ``inter`` row, W2 skips it), so pass only valid experts' weights.
Inputs may be NumPy arrays or CPU torch tensors (anything ``np.asarray`` accepts); no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from workbench.core.errors import BadArgument


def _arr(name: str, a: object, dtype: type, ndim: int) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype != dtype:
        raise BadArgument(f"{name} must be {np.dtype(dtype).name}, got {arr.dtype}")
    if arr.ndim != ndim:
        raise BadArgument(f"{name} must have {ndim} dims, got shape {arr.shape}")
    return arr


def silu(v: np.ndarray) -> np.ndarray:
    """``v * sigmoid(v)`` in float64; large negative v gives -0.0 instead of an overflow warning."""
    with np.errstate(over="ignore"):
        return v / (1.0 + np.exp(-v))


@dataclass(frozen=True)
class W13Result:
    """gate, up, inter_exact: float64 ``[top_k, N/2]``; inter_fp16: float16 ``[top_k, N/2]``."""

    gate: np.ndarray
    up: np.ndarray
    inter_exact: np.ndarray
    inter_fp16: np.ndarray


@dataclass(frozen=True)
class W2Result:
    """y: float64 ``[N]``; y_fp16: float16 ``[N]`` (the kernel's one rounding)."""

    y: np.ndarray
    y_fp16: np.ndarray


def w13_reference(x: object, w: object) -> W13Result:
    """W13 + SwiGLU for the routed experts.

    x: float16 ``[K]``; w: float16 ``[top_k, K, N]`` dequantized weights of the routed experts,
    gate columns ``[0, N/2)`` and up columns ``[N/2, N)``.
    """
    xa = _arr("x", x, np.float16, 1)
    wa = _arr("w", w, np.float16, 3)
    if wa.shape[1] != xa.shape[0]:
        raise BadArgument(f"w K={wa.shape[1]} does not match x K={xa.shape[0]}")
    if wa.shape[2] % 2:
        raise BadArgument(f"w N={wa.shape[2]} must be even (gate and up halves)")
    acc = np.einsum("jkn,k->jn", wa.astype(np.float64), xa.astype(np.float64))
    half = wa.shape[2] // 2
    gate, up = acc[:, :half], acc[:, half:]
    inter = silu(gate) * up
    with np.errstate(over="ignore"):  # beyond 65504 is inf in FP16, as in the kernel
        inter16 = inter.astype(np.float16)
    return W13Result(gate, up, inter, inter16)


def w2_reference(inter: object, w: object, rw: object) -> W2Result:
    """W2 + router-weighted sum.

    inter: float16 ``[top_k, K]`` (W13's output); w: float16 ``[top_k, K, N]``; rw: float32
    ``[top_k]`` router weights.
    """
    ia = _arr("inter", inter, np.float16, 2)
    wa = _arr("w", w, np.float16, 3)
    ra = _arr("rw", rw, np.float32, 1)
    if wa.shape[:2] != ia.shape:
        raise BadArgument(f"w shape {wa.shape} does not match inter shape {ia.shape} ([top_k, K])")
    if ra.shape[0] != ia.shape[0]:
        raise BadArgument(f"rw length {ra.shape[0]} != top_k={ia.shape[0]}")
    per_expert = np.einsum("jkn,jk->jn", wa.astype(np.float64), ia.astype(np.float64))
    y = ra.astype(np.float64) @ per_expert
    with np.errstate(over="ignore"):
        y16 = y.astype(np.float16)
    return W2Result(y, y16)


def rel_l2(got: object, want: object) -> float:
    """``||got - want|| / ||want||`` in float64 (0 when both are zero; inf if only want is)."""
    g = np.asarray(got, dtype=np.float64)
    r = np.asarray(want, dtype=np.float64)
    if g.shape != r.shape:
        raise BadArgument(f"got shape {g.shape} != want shape {r.shape}")
    num = float(np.linalg.norm((g - r).ravel()))
    den = float(np.linalg.norm(r.ravel()))
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


class Worst(NamedTuple):
    index: tuple[int, ...]
    got: float
    want: float
    abs_err: float


def worst_element(got: object, want: object) -> Worst:
    """The element with the largest ``|got - want|`` (NaN or inf in either counts as infinite)."""
    g = np.asarray(got, dtype=np.float64)
    r = np.asarray(want, dtype=np.float64)
    if g.shape != r.shape or g.size == 0:
        raise BadArgument(
            f"got shape {g.shape} and want shape {r.shape} must match and be non-empty"
        )
    with np.errstate(invalid="ignore"):
        err = np.abs(g - r)
    err = np.where(np.isfinite(err), err, np.inf)
    i = tuple(int(v) for v in np.unravel_index(int(np.argmax(err)), g.shape))
    return Worst(i, float(g[i]), float(r[i]), float(err[i]))
