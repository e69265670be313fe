"""The ``tinygemm`` peer (docs/DESIGN.md §4.5): torch's int4 ``_weight_int4pack_mm`` in bf16, one
call per routed expert, as a Python arm (workbench.kernels.pyarm): ``make_arm`` repacks each
routing's experts once (kept in the arm's state) and returns a launcher over them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from workbench.kernels.ops import GROUP, Bank

if TYPE_CHECKING:
    from workbench.data.shapes import Shape


class TinyGemmPeer:
    """torch's int4 tinygemm (``_weight_int4pack_mm``, bf16, one call per routed expert): the
    "what a user would otherwise use" peer arm. Same call signature as KernelOp, but the routed
    experts are fixed at construction (host ids), as a per-expert loop would be in a real model."""

    def __init__(
        self, kernel: str, shape: Shape, bank: Bank, experts: list[int], inner_k_tiles: int = 8
    ):
        self.kernel, self.shape, self.experts = kernel, shape, list(experts)
        q, scales, biases = bank.expert_arrays(self.experts)
        dev = bank.weights.device
        # tinygemm tiles K by inner_k_tiles * 16: take the largest that divides K (W2's K=160 needs 2)
        inner_k_tiles = next(t for t in (8, 4, 2) if bank.K % (t * 16) == 0)
        self.packed, self.sz = [], []
        for i in range(len(self.experts)):
            # tinygemm dequantizes w = (q - 8) * scale + zero, so zero = bias + 8 * scale.
            q_nk = q[i].t().contiguous().to(dev)  # [N, K] 0..15
            packed_u8 = (q_nk[:, 0::2] << 4 | q_nk[:, 1::2]).to(torch.uint8)
            self.packed.append(torch._convert_weight_to_int4pack(packed_u8, inner_k_tiles))
            s = scales[i].to(torch.float32)
            z = biases[i].to(torch.float32) + 8 * s
            self.sz.append(torch.stack([s, z], dim=-1).to(torch.bfloat16).to(dev).contiguous())

    def relocate(self) -> None:
        """Its repacked experts in fresh memory (a block's placement, docs/DESIGN.md §5.5)."""
        self.packed = [t.clone() for t in self.packed]
        self.sz = [t.clone() for t in self.sz]

    @staticmethod
    def supported() -> bool:
        if not torch.cuda.is_available() or not hasattr(torch, "_weight_int4pack_mm"):
            return False
        return torch.cuda.get_device_capability() >= (8, 0)

    def __call__(self, inp, bank: Bank, ids, out, rw=None) -> None:
        del bank, ids  # experts are fixed at construction
        if self.kernel == "w13":
            x = inp.reshape(1, -1).to(torch.bfloat16)
            for j in range(len(self.experts)):
                h = torch._weight_int4pack_mm(x, self.packed[j], GROUP, self.sz[j])
                gate, up = h.float().chunk(2, dim=-1)
                out[j].copy_((torch.nn.functional.silu(gate) * up).reshape(-1))
        else:
            acc = None
            for j in range(len(self.experts)):
                h = torch._weight_int4pack_mm(
                    inp[j : j + 1].to(torch.bfloat16), self.packed[j], GROUP, self.sz[j]
                )
                term = h.float() * rw[j]
                acc = term if acc is None else acc + term
            out.copy_(acc.reshape(out.shape))


def make_arm(call: Any) -> Callable[[], None]:
    """The Python-arm entry (an ``ArmCall``): one peer per (bank, routing), since tinygemm's
    experts are fixed at construction; the launcher calls it on the call's tensors."""
    key = (call.bank_index, call.experts)
    peer = call.state.get(key)
    if peer is None:
        peer = call.state[key] = TinyGemmPeer(call.kernel, call.shape, call.bank, call.experts)
    inp = call.inputs
    if call.kernel == "w13":
        return functools.partial(peer, inp["x"], call.bank, inp["ids"], call.out)
    return functools.partial(peer, inp["inter"], call.bank, inp["ids"], call.out, rw=inp["rw"])


# looked up at call time, so a test's stand-in for TinyGemmPeer answers
make_arm.supported = lambda: TinyGemmPeer.supported()  # type: ignore[attr-defined]
