"""Runs triton-moe cases under Triton's interpreter on the CPU (tests only).

Started by tests/test_triton_moe.py in a fresh process with TRITON_INTERPRET=1 in its
environment: triton.jit reads it when a function is decorated and the interpreter reads it again
at each launch, so it must be set before triton is imported and stay set; a child process keeps
the interpreted kernels out of the test process, where GPU tests use the compiled ones.

stdin: a JSON list of cases; stdout: a JSON list of results, one per case, in order.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch

from workbench.data import reference
from workbench.data.shapes import Shape
from workbench.kernels.ops import make_bank, make_inputs
from workbench.kernels.triton_moe import Launch, TritonMoePeer


def run_case(case: dict) -> dict:
    shape = Shape(**case["shape"])
    kernel = case["kernel"]
    bank = make_bank(shape, kernel, "b3", seed=case["seed"], device="cpu")
    inp = make_inputs(shape, kernel, seed=case["seed"] + 1, device="cpu")
    ids = inp["ids"].clone()
    for slot, bad in case.get("bad_ids", {}).items():
        ids[int(slot)] = bad
    cfg = Launch(**case["config"], source="given")
    peer = TritonMoePeer(kernel, shape, bank, config=cfg, kernels=KERNELS)
    act = inp["x"] if kernel == "w13" else inp["inter"]
    out = inp["out"]  # NaN-poisoned by make_inputs
    split = peer.scratch is not None and cfg.SPLIT
    if split:
        peer.scratch.fill_(float("nan"))  # a partial row left unwritten shows
    peer(act, bank, ids, out, rw=inp["rw"])
    got = out.numpy().astype(np.float64)
    valid = [j for j, e in enumerate(ids.tolist()) if 0 <= e < shape.experts]
    w = bank.dequantized([ids.tolist()[j] for j in valid])
    if kernel == "w13":
        want = np.zeros_like(got)  # an invalid slot's row is zeros
        want[valid] = reference.w13_reference(act[0].numpy(), w).inter_exact
    else:
        rw = inp["rw"].numpy()[valid]
        want = reference.w2_reference(act.numpy()[valid], w, rw).y[None]
    worst = reference.worst_element(got, want)
    return {
        "scratch_nan": int(peer.scratch.isnan().sum()) if split else 0,
        # the split form's per-slot partial rows that are all zeros (an invalid id's row)
        "zero_scratch_rows": [j for j in range(shape.top_k) if split and not peer.scratch[j].any()],
        "rel_l2": reference.rel_l2(got, want),
        "nan": int(np.isnan(got).sum()),
        "worst": [list(worst.index), worst.got, worst.want],
        "zero_rows": [j for j in range(got.shape[0]) if kernel == "w13" and not got[j].any()],
        "want_norm": float(np.linalg.norm(want)),
    }


if __name__ == "__main__":
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("run with TRITON_INTERPRET=1 (tests/test_triton_moe.py does)")
    from workbench.kernels import triton_moe_kernels as KERNELS

    torch.set_num_threads(1)  # shared 2-core machine
    print(json.dumps([run_case(c) for c in json.load(sys.stdin)]))
