"""Python API of the kernels: device banks of expert weights and graph-capturable kernel calls.

A bank is one layer's experts for one kernel and metadata layout (docs/ARCHITECTURE.md):
``weights`` int32 ``[E, K/32, N, 4]`` and ``meta`` uint8 ``[E, K/32, N*R]``. Banks are generated on
the device (a few GB for a rotating set would take minutes through NumPy); the packing below is the
torch twin of layouts.pack_int4 / encode_metadata and is held bit-exact to them by tests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from workbench.core.errors import BadArgument
from workbench.data.layouts import PACK_AXES, TILE
from workbench.data.synthetic import (
    SCALE_RANGE,  # realistic ranges, defined once: docs/DESIGN.md §3.4
)
from workbench.kernels.variants import RECORD_BYTES, Variant

if TYPE_CHECKING:
    from workbench.data.shapes import Shape

GROUP = 32
ZERO_MAX = 15  # 4-bit zero points, as synthetic.expert_weights draws them
_EXPERT_CHUNK = 64  # experts generated at a time: bounds the temporary [chunk, K, N] uint8 tensor


@dataclass
class Bank:
    """One layer's experts for one kernel and layout, on a device."""

    kernel: str
    layout: str
    K: int
    N: int
    experts: int
    seed: int
    weights: torch.Tensor  # int32 [E, K/32, N, 4]
    meta: torch.Tensor  # uint8 [E, K/32, N*R]

    @property
    def nbytes(self) -> int:
        return self.weights.numel() * 4 + self.meta.numel()

    def expert_arrays(self, experts: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(q uint8 [n, K, N], scales fp16 [n, K/32, N], biases fp16 [n, K/32, N]) on the CPU, read
        back from the bank through layouts' decoders: what the kernel should see."""
        from workbench.data.layouts import decode_metadata, unpack_int4

        idx = torch.tensor(experts, dtype=torch.long, device=self.weights.device)
        q = unpack_int4(self.weights.index_select(0, idx).cpu())
        scales, biases = decode_metadata(self.meta.index_select(0, idx).cpu(), self.layout, self.N)
        return q, scales, biases

    def dequantized(self, experts: list[int]) -> np.ndarray:
        """fp16 [n, K, N] dequantized weights of the given experts (docs/DESIGN.md §3 rule), on the CPU."""
        from workbench.data.layouts import dequantize_records

        return dequantize_records(*self.expert_arrays(experts)).numpy()

    def dequantize(self, ids: torch.Tensor) -> torch.Tensor:
        """fp16 [n, K, N] weights of the experts ``ids`` (int32 [n], on the bank's device), on
        the device: no host synchronization, so a Python arm may call it inside its launcher
        (CUDA-Graph capturable). Bit-identical to ``dequantized`` (docs/DESIGN.md §3.2:
        ``fp16(q * scale + bias)``, one rounding: exact in float64 before the cast)."""
        idx = ids.long()
        q = unpack_int4_torch(self.weights.index_select(0, idx))
        scales, biases = decode_meta_torch(self.meta.index_select(0, idx), self.layout, self.N)
        n, g, cols = scales.shape

        def rep(a: torch.Tensor) -> torch.Tensor:  # [n, G, N] -> [n, K, N], no host sync
            return a.double().unsqueeze(2).expand(n, g, GROUP, cols).reshape(n, g * GROUP, cols)

        return (q.double() * rep(scales) + rep(biases)).half()


def pack_int4_torch(q: torch.Tensor) -> torch.Tensor:
    """uint8 [..., K, N] (0..15) -> int32 [..., K/32, N, 4]; same bits as layouts.pack_int4.

    Built in bytes: element 2p + e sits at nibble NIBBLE_OF_ELEMENT[2p + e], so with the pair
    p = 2pp + x, byte 2e + pp of a word holds pair x = 0 in its low nibble and x = 1 in its high
    one, and four bytes are one little-endian word. Two passes over ``q``, where widening it to
    int32 and or-ing eight shifted copies moved about ten times the bytes (every synthetic bank
    of every worker process is packed here)."""
    *lead, k, n = q.shape
    nl = len(lead)
    g = k // GROUP
    blocks = q.reshape(*lead, g, 4, 2, 2, 2, n // TILE, 8, 4)  # [.., g, t, pp, x, e, T, qd, c]
    order = (*range(nl), *(nl + a for a in (0, 4, 5, 1, 6, 3, 2)))  # -> [.., g, T, qd, t, c, e, pp]
    lo = blocks.select(nl + 3, 0).permute(order)
    hi = blocks.select(nl + 3, 1).permute(order)
    words = torch.empty(lo.shape, dtype=torch.uint8, device=q.device)
    torch.bitwise_left_shift(hi, 4, out=words)
    words |= lo
    return words.view(*lead, g, n, 4, 4).view(torch.int32).view(*lead, g, n, 4)


def encode_metadata_torch(scales: torch.Tensor, zeros: torch.Tensor, layout: str) -> torch.Tensor:
    """fp16 / uint8 [..., G, N] -> uint8 [..., G, N*R]; same bytes as layouts.encode_metadata."""
    *lead, g, n = scales.shape
    sbits = scales.view(torch.int16).to(torch.int32) & 0xFFFF
    if layout == "b4":
        # bias = fp16(fp16(-zero) * scale): the product of an 8-bit integer and an fp16 is exact in
        # fp32, so torch's fp16 multiply (fp32 then one rounding) is the single rounding of §3.
        bias = (-zeros.to(torch.int32)).to(torch.float16) * scales  # integer -0 is +0, as in CUDA
        bbits = bias.view(torch.int16).to(torch.int32) & 0xFFFF
        rec = sbits | (bbits << 16)
        parts = [(rec >> (8 * i)) & 0xFF for i in range(4)]
    elif layout == "b3":
        parts = [sbits & 0xFF, sbits >> 8, zeros.to(torch.int32)]
    else:
        raise BadArgument(f"layout={layout!r} is not one of b4, b3")
    return torch.stack(parts, dim=-1).to(torch.uint8).reshape(*lead, g, n * len(parts))


def unpack_int4_torch(words: torch.Tensor) -> torch.Tensor:
    """int32 [..., K/32, N, 4] in our fragment order -> uint8 [..., K, N]: the torch twin of
    layouts.unpack_int4, so a bank converts on its own device."""
    *lead, g, n, _ = words.shape
    nl = len(lead)
    # 4 * NIBBLE_OF_ELEMENT, made by a kernel rather than copied from the host: a copy from
    # host memory cannot be captured, and Bank.dequantize runs inside Python arms' launchers
    e = torch.arange(8, dtype=torch.int32, device=words.device)
    shifts = 4 * (e // 2 + 4 * (e % 2))
    el = (words[..., None] >> shifts) & 0xF  # [.., g, n, c, el]
    el = el.reshape(*lead, g, n // TILE, 8, 4, 4, 4, 2)  # [.., g, T, qd, t, c, p, e]
    inverse = tuple(PACK_AXES.index(a) for a in range(7))
    el = el.permute(*range(nl), *(nl + a for a in inverse))  # [.., g, t, p, e, T, qd, c]
    return el.reshape(*lead, g * GROUP, n).to(torch.uint8)


def decode_meta_torch(meta: torch.Tensor, layout: str, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 [..., G, N*R] -> (scales, biases) fp16 [..., G, N]: the torch twin of
    layouts.decode_metadata (b3's bias = fp16(fp16(-zero) * scale), one rounding)."""
    r = RECORD_BYTES[layout]
    rec = meta.reshape(*meta.shape[:-1], n, r).to(torch.int32)
    scales = (rec[..., 0] | rec[..., 1] << 8).to(torch.int16).view(torch.float16)
    if r == 4:
        biases = (rec[..., 2] | rec[..., 3] << 8).to(torch.int16).view(torch.float16)
    else:
        biases = (-rec[..., 2]).to(torch.float16) * scales  # exact product, one fp16 rounding
    return scales, biases


def make_bank(
    shape: Shape, kernel: str, layout: str, seed: int, device: str | torch.device = "cuda"
) -> Bank:
    """A synthetic bank of all ``shape.experts`` experts. The same (shape, kernel, seed) gives the
    same q/scales/zeros whatever the layout, so b4 and b3 banks decode to identical weights."""
    if layout not in RECORD_BYTES:
        raise BadArgument(f"layout={layout!r} is not one of {', '.join(RECORD_BYTES)}")
    K, N = shape.dims(kernel)
    E, G, R = shape.experts, K // GROUP, RECORD_BYTES[layout]
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    weights = torch.empty((E, G, N, 4), dtype=torch.int32, device=device)
    meta = torch.empty((E, G, N * R), dtype=torch.uint8, device=device)
    lo, hi = np.log(SCALE_RANGE[0]), np.log(SCALE_RANGE[1])
    for e0 in range(0, E, _EXPERT_CHUNK):
        e1 = min(E, e0 + _EXPERT_CHUNK)
        q = torch.randint(0, 16, (e1 - e0, K, N), generator=gen, device=device, dtype=torch.uint8)
        u = torch.rand((e1 - e0, G, N), generator=gen, device=device)
        scales = torch.exp(lo + (hi - lo) * u).to(torch.float16)
        zeros = torch.randint(0, ZERO_MAX + 1, (e1 - e0, G, N), generator=gen, device=device)
        weights[e0:e1] = pack_int4_torch(q)
        meta[e0:e1] = encode_metadata_torch(scales, zeros.to(torch.uint8), layout)
    return Bank(kernel, layout, K, N, E, seed, weights, meta)


def derive_bank(bank: Bank, layout: str) -> Bank:
    """The bank ``make_bank`` would make in ``layout`` from ``bank``'s seed, from ``bank`` (a b3
    bank) without drawing again: the same seed gives the same q/scales/zeros in every layout, so
    the packed weights are the same bytes and a b3 record holds a scale's bits and its zero
    exactly. Bit-identical to ``make_bank(shape, bank.kernel, layout, bank.seed)`` (a test), and
    a copy and a re-encoding instead of a generation: a run's b4 banks cost a fraction of their
    b3 banks (issue 44)."""
    if bank.layout != "b3":
        raise BadArgument(f"derive_bank: bank.layout={bank.layout!r}, only a b3 bank derives")
    if layout not in RECORD_BYTES:
        raise BadArgument(f"layout={layout!r} is not one of {', '.join(RECORD_BYTES)}")
    E, G, N = bank.experts, bank.K // GROUP, bank.N
    meta = torch.empty((E, G, N * RECORD_BYTES[layout]), dtype=torch.uint8, device=bank.meta.device)
    for e0 in range(0, E, _EXPERT_CHUNK):  # bounds the int32 temporaries of the encoding
        e1 = min(E, e0 + _EXPERT_CHUNK)
        part = bank.meta[e0:e1]
        scales, _ = decode_meta_torch(part, "b3", N)
        zeros = part.view(e1 - e0, G, N, 3)[..., 2]
        meta[e0:e1] = encode_metadata_torch(scales, zeros, layout)
    return dataclasses.replace(bank, layout=layout, weights=bank.weights.clone(), meta=meta)


def upload_bank(
    kernel: str,
    layout: str,
    weights: torch.Tensor,
    meta: torch.Tensor,
    seed: int,
    device: str | torch.device = "cuda",
) -> Bank:
    """A bank from host tensors (a checkpoint's experts, docs/DESIGN.md §3.7): ``weights`` int32
    ``[E, K/32, N, 4]``, ``meta`` uint8 ``[E, K/32, N*R]``. Always a fresh copy on ``device``, so
    two banks made from one layer are distinct memory."""
    if layout not in RECORD_BYTES:
        raise BadArgument(f"layout={layout!r} is not one of {', '.join(RECORD_BYTES)}")
    E, G, N, _ = weights.shape
    if weights.dtype != torch.int32 or meta.dtype != torch.uint8:
        raise BadArgument(f"bank tensors are {weights.dtype}/{meta.dtype}, not int32/uint8")
    if tuple(meta.shape) != (E, G, N * RECORD_BYTES[layout]):
        raise BadArgument(f"meta shape {tuple(meta.shape)} does not fit weights {(E, G, N, 4)}")
    w = weights.to(device, copy=True)
    m = meta.to(device, copy=True)
    return Bank(kernel, layout, G * GROUP, N, E, seed, w, m)


def relocate_bank(bank: Bank) -> Bank:
    """The same bank in fresh device memory (a copy; the caller drops the old one). Blocks use
    it to place their banks anew (docs/DESIGN.md §5.5): a copy is ~100x faster than generating
    the bank again, and its bytes are identical by construction."""
    return dataclasses.replace(bank, weights=bank.weights.clone(), meta=bank.meta.clone())


def make_inputs(shape: Shape, kernel: str, seed: int, device: str | torch.device = "cuda") -> dict:
    """Fresh synthetic inputs of one call: activations ~N(0,1) fp16 (``x`` [1, K] for w13, ``inter``
    [top_k, K] for w2), distinct routed ``ids`` int32 [top_k], router weights ``rw`` fp32 [top_k]
    (softmax), and an ``out`` buffer poisoned with NaN so an unwritten element cannot pass."""
    K, N = shape.dims(kernel)
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    rows = 1 if kernel == "w13" else shape.top_k
    act = torch.randn((rows, K), generator=gen).to(torch.float16)
    ids = torch.randperm(shape.experts, generator=gen)[: shape.top_k].to(torch.int32)
    rw = torch.softmax(torch.randn(shape.top_k, generator=gen), 0).to(torch.float32)
    out_shape = (shape.top_k, N // 2) if kernel == "w13" else (1, N)
    out = torch.full(out_shape, float("nan"), dtype=torch.float16)
    d = {"x" if kernel == "w13" else "inter": act, "ids": ids, "rw": rw, "out": out}
    return {k: v.to(device) for k, v in d.items()}


class KernelOp:
    """A built variant bound to a shape. ``op(...)`` allocates nothing and needs no scratch (W13 has
    no exchange buffer), so it can be captured in a CUDA Graph. (A split-K build,
    csrc/kernels/split_sum.cuh, keeps its workspace in its library's static device memory.)

    w13: ``op(x fp16 [1,K], bank, ids int32 [top_k], out fp16 [top_k, N/2])``
    w2:  ``op(inter fp16 [top_k,K], bank, ids int32 [top_k], out fp16 [1,N], rw=fp32 [top_k])``
    """

    def __init__(
        self,
        variant: Variant,
        shape: Shape,
        device: str | torch.device = "cuda",  # unused: the op holds no device memory of its own
        spin_cycles: int = 0,
    ) -> None:
        from workbench.kernels.build import build_variant

        self.variant, self.shape, self.kernel = variant, shape, variant.kernel
        self.build = build_variant(variant)
        self.module = self.build.module
        self.spin_cycles = int(spin_cycles)

    def __call__(self, inp, bank: Bank, ids, out, rw=None) -> None:
        if bank.kernel != self.kernel or bank.layout != self.variant.layout:
            raise BadArgument(
                f"bank is {bank.kernel}/{bank.layout} but the op is {self.variant.name}"
            )
        if self.kernel == "w13":
            self.module.forward(inp, bank.weights, bank.meta, ids, out, self.spin_cycles)
        else:
            if rw is None:
                raise BadArgument("w2 needs router weights rw (fp32 [top_k]), got None")
            self.module.forward(
                inp,
                bank.weights,
                bank.meta,
                ids,
                rw,
                out,
                self.spin_cycles,
            )
