"""Import of AWQ checkpoint tensors (docs/DESIGN.md §3) and their tensor-parallel slicing.

The common checkpoint form (AutoAWQ's GEMM format, also read by vLLM and SGLang), per linear
layer with ``K`` inputs and ``N`` outputs and group size ``G``:
``qweight`` int32 ``[K, N/8]``, ``qzeros`` int32 ``[K/G, N/8]``, ``scales`` fp16 ``[K/G, N]``,
and the weight is ``(q - zero) * scale``.

Nibble order inside each int32 (looked up, not guessed): AutoAWQ packs with
``order_map = [0, 2, 4, 6, 1, 3, 5, 7]`` and ``qweight[:, c] |= w[:, 8c + order_map[i]] << 4i``
(AutoAWQ ``awq/modules/linear/gemm.py``, ``WQLinear_GEMM.from_linear``; the same order is used for
``qzeros``). Its unpacker and vLLM's ``awq_triton.py`` undo it with
``AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]`` (AutoAWQ ``awq/utils/packing_utils.py``): column
``8c + j`` sits at nibble ``AWQ_REVERSE_ORDER[j]``. That happens to be the kernels' own nibble
order (layouts.NIBBLE_OF_ELEMENT), along N here instead of along K.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from workbench.errors import BadArgument
from workbench.layouts import GROUP, as_array, to_tensor

if TYPE_CHECKING:
    import torch

AWQ_PACK_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # nibble i holds column 8c + AWQ_PACK_ORDER[i]
AWQ_NIBBLE_OF_COLUMN = tuple(AWQ_PACK_ORDER.index(j) for j in range(8))  # (0, 4, 1, 5, 2, 6, 3, 7)
PROJECTIONS = {"w13": ("gate_proj", "up_proj"), "w2": ("down_proj",)}


class QuantMatrix(NamedTuple):
    """One quantized matrix: q torch.uint8 ``[K, N]`` (0..15); zeros torch.uint8 and scales
    torch.float16, both ``[K/G, N]``."""

    q: torch.Tensor
    zeros: torch.Tensor
    scales: torch.Tensor


_SHIFTS = np.array([4 * p for p in AWQ_NIBBLE_OF_COLUMN], dtype=np.uint32)


def _unpack_cols(packed: np.ndarray) -> np.ndarray:
    """int32 ``[R, N/8]`` in AWQ order -> uint8 ``[R, N]``."""
    nib = (packed.view(np.uint32)[..., None] >> _SHIFTS) & 0xF
    return nib.reshape(packed.shape[0], -1).astype(np.uint8)


def _pack_cols(vals: np.ndarray) -> np.ndarray:
    """uint8 ``[R, N]`` (0..15) -> int32 ``[R, N/8]`` in AWQ order."""
    blocks = vals.reshape(vals.shape[0], -1, 8).astype(np.uint32)
    return np.bitwise_or.reduce(blocks << _SHIFTS, axis=-1).astype(np.uint32).view(np.int32)


def awq_unpack(
    qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, group: int = GROUP
) -> QuantMatrix:
    """Unpack one AWQ linear: qweight int32 ``[K, N/8]``, qzeros int32 ``[K/G, N/8]``,
    scales fp16 ``[K/G, N]`` -> QuantMatrix(q ``[K, N]``, zeros ``[K/G, N]``, scales ``[K/G, N]``)."""
    qw = as_array("qweight", qweight, "int32")
    qz = as_array("qzeros", qzeros, "int32")
    sc = as_array("scales", scales, "float16")
    for name, a in (("qweight", qw), ("qzeros", qz), ("scales", sc)):
        if a.ndim != 2:
            raise BadArgument(f"{name} must be 2-D, got shape {a.shape}")
    if isinstance(group, bool) or not isinstance(group, int) or group <= 0:
        raise BadArgument(f"group={group!r} must be a positive integer")
    k, n = qw.shape[0], qw.shape[1] * 8
    if k % group:
        raise BadArgument(f"qweight K={k} is not a multiple of group={group}")
    if qz.shape != (k // group, n // 8):
        raise BadArgument(
            f"qzeros shape {qz.shape} != (K/G, N/8) = {(k // group, n // 8)} for qweight {qw.shape}"
        )
    if sc.shape != (k // group, n):
        raise BadArgument(f"scales shape {sc.shape} != (K/G, N) = {(k // group, n)}")
    return QuantMatrix(
        to_tensor(_unpack_cols(qw)), to_tensor(_unpack_cols(qz)), to_tensor(sc.copy())
    )


def awq_pack(
    q: torch.Tensor, zeros: torch.Tensor, scales: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The inverse of awq_unpack: q uint8 ``[K, N]``, zeros uint8 ``[K/G, N]`` (both 0..15),
    scales fp16 ``[K/G, N]`` -> (qweight int32 ``[K, N/8]``, qzeros int32 ``[K/G, N/8]``, scales)."""
    qn = as_array("q", q, "uint8")
    zn = as_array("zeros", zeros, "uint8")
    sc = as_array("scales", scales, "float16")
    if qn.ndim != 2 or qn.shape[1] % 8:
        raise BadArgument(f"q must be [K, N] with N % 8 == 0, got shape {qn.shape}")
    if zn.shape != sc.shape or zn.ndim != 2 or zn.shape[1] != qn.shape[1]:
        raise BadArgument(
            f"zeros {zn.shape} and scales {sc.shape} must both be [K/G, {qn.shape[1]}]"
        )
    for name, a in (("q", qn), ("zeros", zn)):
        if a.size and int(a.max()) > 15:
            raise BadArgument(f"{name} must hold int4 values 0..15, got {int(a.max())}")
    return to_tensor(_pack_cols(qn)), to_tensor(_pack_cols(zn)), to_tensor(sc.copy())


def regroup(m: QuantMatrix, group: int = GROUP) -> QuantMatrix:
    """Express a coarser-grouped matrix (e.g. AWQ's usual G=128) with groups of ``group``.

    Exact: every sub-group repeats its parent's (scale, zero), so each weight keeps its record.
    """
    k = m.q.shape[0]
    g_old = k // m.scales.shape[0]
    if g_old % group:
        raise BadArgument(f"checkpoint group size {g_old} is not a multiple of {group}")
    rep = g_old // group
    return QuantMatrix(m.q, m.zeros.repeat_interleave(rep, 0), m.scales.repeat_interleave(rep, 0))


class _Source:
    """Tensors by name from a dict, a ``.safetensors`` file, or a folder of them (sharded)."""

    def __init__(self, source: str | os.PathLike | Mapping[str, torch.Tensor]) -> None:
        self.name = "the given dict"
        self.files: dict[str, Path] = {}
        self.tensors: Mapping[str, torch.Tensor] | None = None
        if isinstance(source, Mapping):
            self.tensors = source
            return
        from safetensors import safe_open

        path = Path(source)
        self.name = str(path)
        files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
        if not files or not files[0].exists():
            raise BadArgument(f"checkpoint={str(path)!r}: no such .safetensors file or folder")
        for f in files:
            with safe_open(str(f), framework="pt") as h:
                for key in h.keys():  # noqa: SIM118 (safe_open is not a dict)
                    self.files[key] = f

    def get(self, key: str) -> torch.Tensor:
        if self.tensors is not None:
            if key not in self.tensors:
                raise BadArgument(f"missing tensor {key!r} in {self.name}")
            return self.tensors[key]
        if key not in self.files:
            raise BadArgument(f"missing tensor {key!r} in {self.name}")
        from safetensors import safe_open

        with safe_open(str(self.files[key]), framework="pt") as h:
            return h.get_tensor(key)


def _load_linear(src: _Source, prefix: str) -> QuantMatrix:
    t = {part: src.get(f"{prefix}.{part}") for part in ("qweight", "qzeros", "scales")}
    k, rows = t["qweight"].shape[0], t["qzeros"].shape[0]
    if rows <= 0 or k % rows:
        raise BadArgument(f"{prefix}: qweight K={k} is not a multiple of qzeros rows={rows}")
    return regroup(awq_unpack(t["qweight"], t["qzeros"], t["scales"], group=k // rows))


def load_awq_expert(
    source: str | os.PathLike | Mapping[str, torch.Tensor],
    prefix: str,
    kernel: str,
    tp: int,
    rank: int,
) -> QuantMatrix:
    """One expert's matrix for one tensor-parallel rank, in groups of 32.

    source: a ``.safetensors`` file, a folder of them, or a dict of tensors. prefix: the expert's
    key prefix, e.g. ``"model.layers.0.mlp.experts.7"``; tensors are read from
    ``{prefix}.{gate_proj,up_proj,down_proj}.{qweight,qzeros,scales}``.
    kernel "w13": gate and up are column-parallel: each is split along N and the rank's slices
    are concatenated ``[gate | up]`` -> ``[H, 2I/tp]``. kernel "w2": down is row-parallel: split
    along K (and its groups) -> ``[I/tp, H]``. Returns QuantMatrix with zeros/scales ``[K/32, N]``.
    """
    if kernel not in PROJECTIONS:
        raise BadArgument(f"kernel={kernel!r} is not one of {', '.join(PROJECTIONS)}")
    if isinstance(tp, bool) or not isinstance(tp, int) or tp <= 0:
        raise BadArgument(f"tp={tp!r} must be a positive integer")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < tp:
        raise BadArgument(f"rank={rank!r} must be in 0..{tp - 1} for tp={tp}")
    import torch

    src = _Source(source)
    prefix = prefix.rstrip(".")
    mats = {p: _load_linear(src, f"{prefix}.{p}") for p in PROJECTIONS[kernel]}
    if kernel == "w13":
        gate, up = mats["gate_proj"], mats["up_proj"]
        if gate.q.shape != up.q.shape:
            raise BadArgument(f"gate_proj {tuple(gate.q.shape)} != up_proj {tuple(up.q.shape)}")
        inter = gate.q.shape[1]
        if inter % tp:
            raise BadArgument(f"{prefix}: inter={inter} (gate_proj N) is not divisible by tp={tp}")
        w = inter // tp
        cols = slice(rank * w, (rank + 1) * w)
        halves = zip(gate, up, strict=True)
        return QuantMatrix(*(torch.cat([a[:, cols], b[:, cols]], dim=1) for a, b in halves))
    down = mats["down_proj"]
    inter = down.q.shape[0]
    if inter % tp or (inter // tp) % GROUP:
        raise BadArgument(
            f"{prefix}: down_proj K={inter} does not split into tp={tp} slices of whole "
            f"{GROUP}-row groups"
        )
    rows = inter // tp
    g0, g1 = rank * rows // GROUP, (rank + 1) * rows // GROUP
    return QuantMatrix(
        down.q[rank * rows : (rank + 1) * rows].contiguous(),
        down.zeros[g0:g1].contiguous(),
        down.scales[g0:g1].contiguous(),
    )
