"""Import of AWQ checkpoint tensors (docs/DESIGN.md §3.5) and their tensor-parallel slicing; the
checkpoint as a whole (config.json, which tensors) is workbench/data/checkpoint.py (§3.8).

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

from workbench.core.errors import BadArgument
from workbench.data.layouts import GROUP, as_array, to_tensor

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


# safetensors dtype names -> torch dtype names (the ones an AWQ linear may hold)
_ST_DTYPES = {"I32": "int32", "F16": "float16", "BF16": "bfloat16", "F32": "float32",
              "I64": "int64", "U8": "uint8", "I8": "int8", "I16": "int16", "F64": "float64"}  # fmt: skip
INDEX_FILE = "model.safetensors.index.json"  # a sharded checkpoint's key -> shard map
SINGLE_FILE = "model.safetensors"


class TensorSource:
    """Tensors by name from a dict, one ``.safetensors`` file, or a folder.

    A folder with ``model.safetensors.index.json`` (a sharded checkpoint) is read through the
    index's ``weight_map``; otherwise every ``*.safetensors`` in it is read. Files are opened once
    (the header is parsed then, so a corrupt file fails here) and tensors are read lazily, sliced
    where asked: a tensor-parallel rank reads only its own part of each matrix.
    """

    def __init__(self, source: str | os.PathLike | Mapping[str, torch.Tensor]) -> None:
        self.name = "the given dict"
        self.tensors: Mapping[str, torch.Tensor] | None = None
        self.files: dict[str, Path] = {}  # key -> file
        self._handles: dict[Path, object] = {}
        self.index: Path | None = None  # a sharded checkpoint's index file
        if isinstance(source, Mapping):
            self.tensors = source
            return
        path = Path(source)
        self.name = str(path)
        if path.is_dir() and (path / INDEX_FILE).is_file():
            self._read_index(path)
        else:
            files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
            if not files or not files[0].is_file():
                raise BadArgument(f"checkpoint={str(path)!r}: no such .safetensors file or folder")
            for f in files:
                for key in self._open(f).keys():  # noqa: SIM118 (safe_open is not a dict)
                    self.files[key] = f

    def _read_index(self, folder: Path) -> None:
        import json

        index = self.index = folder / INDEX_FILE
        try:
            weight_map = json.loads(index.read_text()).get("weight_map")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError) as e:
            raise BadArgument(f"{index}: not a readable index ({type(e).__name__}: {e})") from None
        if not isinstance(weight_map, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
        ):
            raise BadArgument(f"{index}: 'weight_map' must map tensor names to shard files")
        for key, shard in weight_map.items():
            f = folder / shard
            if f not in self._handles:
                if Path(shard).name != shard or not f.is_file():
                    raise BadArgument(f"{index}: shard {shard!r} (of {key!r}) is not a file here")
                self._open(f)
            self.files[key] = f

    def _open(self, f: Path):
        from safetensors import safe_open

        try:
            self._handles[f] = safe_open(str(f), framework="pt")
        except ImportError:  # framework="pt" needs torch: the light install says which extra
            raise  # cli.py turns a GPU stack module's ImportError into MissingGPUStack (exit 3)
        except Exception as e:  # SafetensorError, OSError: a corrupt or unreadable file
            raise BadArgument(f"{f}: not a readable .safetensors file ({e})") from None
        return self._handles[f]

    def _handle(self, f: Path):
        """The open file ``f``, opened again in a process this source was sent to."""
        return self._handles[f] if f in self._handles else self._open(f)

    def __getstate__(self) -> dict:
        # a worker process gets the file names, not the open files (which do not pickle)
        return {**self.__dict__, "_handles": {}}

    def names(self) -> list[str]:
        return list(self.tensors if self.tensors is not None else self.files)

    def where(self, key: str) -> str:
        """The file that holds ``key`` (for error messages)."""
        return str(self.files[key]) if key in self.files else self.name

    def _check(self, key: str) -> None:
        have = self.tensors if self.tensors is not None else self.files
        if key not in have:
            raise BadArgument(f"missing tensor {key!r} in {self.name}{self._looked_in()}")

    def _looked_in(self) -> str:
        if self.tensors is not None:
            return ""
        if self.index is not None:
            return f" ({self.index.name} lists no such key)"
        names = sorted({f.name for f in self.files.values()})
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        return f" (not in {', '.join(names[:3])}{more})"

    def spec(self, key: str) -> tuple[tuple[int, ...], str]:
        """(shape, torch dtype name) of ``key`` without reading it."""
        self._check(key)
        if self.tensors is not None:
            t = self.tensors[key]
            return tuple(t.shape), str(t.dtype).removeprefix("torch.")
        try:
            s = self._handle(self.files[key]).get_slice(key)
        except Exception as e:  # listed in the index but not in the shard
            raise BadArgument(
                f"tensor {key!r} cannot be read from {self.where(key)}: {e}"
            ) from None
        return tuple(s.get_shape()), _ST_DTYPES.get(s.get_dtype(), s.get_dtype())

    def read(self, key: str, rows: slice = slice(None), cols: slice = slice(None)) -> torch.Tensor:
        """``key[rows, cols]`` (a 2-D tensor) as a CPU tensor."""
        self._check(key)
        if self.tensors is not None:
            return self.tensors[key][rows, cols]
        try:
            return self._handle(self.files[key]).get_slice(key)[rows, cols]
        except Exception as e:  # a shard cut short after its header, an I/O error
            raise BadArgument(
                f"tensor {key!r} cannot be read from {self.where(key)}: {e}"
            ) from None


def open_source(
    source: str | os.PathLike | Mapping[str, torch.Tensor] | TensorSource,
) -> TensorSource:
    return source if isinstance(source, TensorSource) else TensorSource(source)


def linear_spec(src: TensorSource, prefix: str, k: int | None = None, n: int | None = None) -> int:
    """Check one AWQ linear's three tensors by their headers (dtype, 2-D, consistent shapes and,
    when given, ``[K, N]``); return its group size. Errors name the tensor and its file."""
    specs = {part: src.spec(f"{prefix}.{part}") for part in ("qweight", "qzeros", "scales")}
    want = {"qweight": "int32", "qzeros": "int32", "scales": "float16"}
    for part, (shape, dtype) in specs.items():
        key = f"{prefix}.{part}"
        if dtype != want[part] or len(shape) != 2:
            raise BadArgument(
                f"tensor {key!r} in {src.where(key)} is {dtype} {list(shape)}; "
                f"an AWQ {part} is a 2-D {want[part]}"
            )
    (kq, n8), gz = specs["qweight"][0], specs["qzeros"][0][0]
    kk, nn = (kq if k is None else k), (n8 * 8 if n is None else n)
    if gz <= 0 or kk % gz:
        key = f"{prefix}.qzeros"
        raise BadArgument(
            f"tensor {key!r} in {src.where(key)} has {gz} rows: K={kk} is not a whole "
            "number of groups"
        )
    expect = {"qweight": (kk, nn // 8), "qzeros": (gz, nn // 8), "scales": (gz, nn)}
    for part, shape in expect.items():
        key = f"{prefix}.{part}"
        if specs[part][0] != shape:
            raise BadArgument(
                f"tensor {key!r} in {src.where(key)} has shape {list(specs[part][0])}; "
                f"expected {list(shape)} for K={kk}, N={nn}, group {kk // gz}"
            )
    return kk // gz


def _read_linear(src: TensorSource, prefix: str, rows: slice, cols: slice) -> QuantMatrix:
    """Rows ``rows`` (whole groups of 32) and columns ``cols`` of one linear, in groups of 32.

    Only the part asked for is read: the column range (on 8-column word boundaries) is cut from
    the packed words, and a row range reads the checkpoint's groups that cover it and keeps the
    32-row sub-groups inside it (regroup's rule: each sub-group repeats its parent's record).
    """
    import torch

    group = linear_spec(src, prefix)
    if group % GROUP:
        raise BadArgument(f"{prefix}: checkpoint group size {group} is not a multiple of {GROUP}")
    k, n = src.spec(f"{prefix}.scales")[0][0] * group, src.spec(f"{prefix}.scales")[0][1]
    r0, r1, _ = rows.indices(k)
    c0, c1, _ = cols.indices(n)
    if c0 % 8 or c1 % 8:
        raise BadArgument(f"{prefix}: columns {c0}..{c1} do not fall on 8-column AWQ words")
    pc = slice(c0 // 8, c1 // 8)
    g0, g1 = r0 // group, -(-r1 // group)
    qw = src.read(f"{prefix}.qweight", slice(r0, r1), pc)
    qz = src.read(f"{prefix}.qzeros", slice(g0, g1), pc)
    sc = src.read(f"{prefix}.scales", slice(g0, g1), slice(c0, c1))
    q = torch.from_numpy(_unpack_cols(qw.contiguous().numpy()))
    zeros = torch.from_numpy(_unpack_cols(qz.contiguous().numpy()))
    rep, skip = group // GROUP, (r0 - g0 * group) // GROUP
    keep = slice(skip, skip + (r1 - r0) // GROUP)
    zeros, scales = (t.repeat_interleave(rep, 0)[keep] for t in (zeros, sc))
    m = QuantMatrix(q, zeros, scales)
    return QuantMatrix(*(t.contiguous() for t in m))


def load_awq_expert(
    source: str | os.PathLike | Mapping[str, torch.Tensor] | TensorSource,
    prefix: str,
    kernel: str,
    tp: int,
    rank: int,
) -> QuantMatrix:
    """One expert's matrix for one tensor-parallel rank, in groups of 32.

    source: a ``.safetensors`` file, a folder of them (sharded or not), a dict of tensors, or an
    open TensorSource (reuse one for many experts). prefix: the expert's key prefix, e.g.
    ``"model.layers.0.mlp.experts.7"``; tensors are read from
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

    src = open_source(source)
    prefix = prefix.rstrip(".")
    if kernel == "w13":
        gate, up = (f"{prefix}.{p}" for p in PROJECTIONS["w13"])
        linear_spec(src, gate)
        linear_spec(src, up)
        (kg, ng), (ku, nu) = (src.spec(f"{p}.qweight")[0] for p in (gate, up))
        if (kg, ng) != (ku, nu):
            raise BadArgument(f"gate_proj qweight {[kg, ng]} != up_proj qweight {[ku, nu]}")
        inter = ng * 8
        if inter % tp:
            raise BadArgument(f"{prefix}: inter={inter} (gate_proj N) is not divisible by tp={tp}")
        w = inter // tp
        cols = slice(rank * w, (rank + 1) * w)
        halves = zip(*(_read_linear(src, p, slice(None), cols) for p in (gate, up)), strict=True)
        return QuantMatrix(*(torch.cat([a, b], dim=1) for a, b in halves))
    down = f"{prefix}.down_proj"
    linear_spec(src, down)
    inter = src.spec(f"{down}.qweight")[0][0]
    if inter % tp or (inter // tp) % GROUP:
        raise BadArgument(
            f"{prefix}: down_proj K={inter} does not split into tp={tp} slices of whole "
            f"{GROUP}-row groups"
        )
    rows = inter // tp
    return _read_linear(src, down, slice(rank * rows, (rank + 1) * rows), slice(None))
