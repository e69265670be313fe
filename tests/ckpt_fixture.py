"""A small AWQ checkpoint written by the tests themselves (tests only).

Independent of workbench/data/checkpoint_write.py: the packing here restates AutoAWQ's own loop
(``WQLinear_GEMM.from_linear``: nibble i of word c holds column 8c + [0,2,4,6,1,3,5,7][i]), so a
bug shared by our writer and our reader cannot pass the round trip unseen. Returns the unpacked
originals: ``orig[(layer, expert, proj)] = (q [K, N], zeros [K/G, N], scales [K/G, N])``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

AUTOAWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
PROJS = ("gate_proj", "up_proj", "down_proj")


def autoawq_pack(w: np.ndarray) -> torch.Tensor:
    """uint8 [R, N] (0..15) -> int32 [R, N/8], AutoAWQ's nibble order."""
    w = w.astype(np.uint32)
    out = np.zeros((w.shape[0], w.shape[1] // 8), dtype=np.uint32)
    for i, col in enumerate(AUTOAWQ_ORDER):
        out |= w[:, col::8] << np.uint32(4 * i)
    return torch.from_numpy(out.view(np.int32))


def config(hidden, inter, experts, top_k, layers, group, **quant) -> dict:
    q = {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True}
    q.update({"version": "gemm", **quant})
    return {
        "hidden_size": hidden,
        "moe_intermediate_size": inter,
        "num_experts": experts,
        "num_experts_per_tok": top_k,
        "num_hidden_layers": layers,
        "quantization_config": q,
    }


def make_tensors(hidden, inter, experts, layers, group, seed, moe_layers=None):
    """(tensors by key, originals) of random AWQ experts for the given MoE layers."""
    rng = np.random.default_rng(seed)
    tensors, orig = {}, {}
    for layer in moe_layers if moe_layers is not None else range(layers):
        for e in range(experts):
            for p in PROJS:
                k, n = (inter, hidden) if p == "down_proj" else (hidden, inter)
                q = rng.integers(0, 16, (k, n), dtype=np.uint8)
                z = rng.integers(0, 16, (k // group, n), dtype=np.uint8)
                s = np.exp(rng.uniform(np.log(1e-3), np.log(1e-2), (k // group, n)))
                s = s.astype(np.float16)
                orig[(layer, e, p)] = (
                    torch.from_numpy(q),
                    torch.from_numpy(z),
                    torch.from_numpy(s),
                )
                prefix = f"model.layers.{layer}.mlp.experts.{e}.{p}"
                tensors[f"{prefix}.qweight"] = autoawq_pack(q)
                tensors[f"{prefix}.qzeros"] = autoawq_pack(z)
                tensors[f"{prefix}.scales"] = torch.from_numpy(s.copy())
    return tensors, orig


def write(folder: Path, tensors: dict, cfg: dict, shards: int = 1) -> Path:
    """config.json + model.safetensors (shards=1) or shards split by layer + the index."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    if shards == 1:
        save_file(tensors, str(folder / "model.safetensors"))
        return folder
    layer_of = lambda k: int(k.split(".")[2])  # noqa: E731
    layers = sorted({layer_of(k) for k in tensors})
    weight_map = {}
    for i in range(shards):
        mine = layers[i::shards]
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: v for k, v in tensors.items() if layer_of(k) in mine}
        save_file(part, str(folder / name))
        weight_map.update(dict.fromkeys(part, name))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return folder


def checkpoint(folder: Path, hidden=64, inter=128, experts=8, top_k=2, layers=3, group=32,
               seed=0, shards=1):  # fmt: skip
    """Write one and return (folder, originals)."""
    tensors, orig = make_tensors(hidden, inter, experts, layers, group, seed)
    write(folder, tensors, config(hidden, inter, experts, top_k, layers, group), shards)
    return folder, orig


def expected(orig, layer, expert, kernel, tp, rank, group):
    """(q, scales, zeros) of one expert at one rank in groups of 32, from the originals."""
    rep = group // 32

    def regrouped(p):
        q, z, s = orig[(layer, expert, p)]
        return q, s.repeat_interleave(rep, 0), z.repeat_interleave(rep, 0)

    if kernel == "w13":
        parts = [regrouped(p) for p in ("gate_proj", "up_proj")]
        w = parts[0][0].shape[1] // tp
        cols = slice(rank * w, (rank + 1) * w)
        return tuple(torch.cat([a[i][:, cols] for a in parts], dim=1) for i in range(3))
    q, s, z = regrouped("down_proj")
    rows = q.shape[0] // tp
    r, g = slice(rank * rows, (rank + 1) * rows), slice(rank * rows // 32, (rank + 1) * rows // 32)
    return q[r], s[g], z[g]
