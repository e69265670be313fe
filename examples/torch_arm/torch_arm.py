"""A Python arm (docs/DESIGN.md §4.8): the MoE decode op in plain torch.

``make_arm(call)`` runs once per call of every graph, before capture; it returns the launcher the
engine captures. The launcher reads the routed ids on the device (``bank.dequantize`` gathers and
dequantizes them there), so it never synchronizes and is CUDA-Graph capturable; its temporaries
come from the graph's memory pool.
"""

import torch
import torch.nn.functional as F


def make_arm(call):
    bank, out, inp = call.bank, call.out, call.inputs
    if call.kernel == "w13":
        x, ids = inp["x"], inp["ids"]

        def launch():
            w = bank.dequantize(ids).float()  # [top_k, K, N]
            h = torch.einsum("k,jkn->jn", x[0].float(), w)
            gate, up = h.chunk(2, dim=-1)  # gate columns first, up columns N/2 further
            out.copy_((F.silu(gate) * up).half())

        return launch
    inter, ids, rw = inp["inter"], inp["ids"], inp["rw"]

    def launch():
        w = bank.dequantize(ids).float()  # [top_k, K, N]
        h = torch.einsum("jk,jkn->jn", inter.float(), w)
        out.copy_((h * rw[:, None]).sum(0, keepdim=True).half())

    return launch
