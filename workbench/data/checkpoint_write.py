"""Write a test checkpoint: random AWQ experts in AutoAWQ packing, the form real ones have
(docs/DESIGN.md §3.8). For device runs of `workbench ab --checkpoint` without downloading a
model, and for tests. The weights are random (q and zeros uniform 0..15, scales log-uniform in
synthetic.SCALE_RANGE); config.json says so under "workbench_test_checkpoint".

Layout: ``config.json`` plus ``model.safetensors`` (one shard), or
``model-0000i-of-0000n.safetensors`` and ``model.safetensors.index.json`` (n shards, whole layers
per shard). Only the expert tensors are written: nothing else of a model is read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from workbench.core.errors import BadArgument
from workbench.core.files import share
from workbench.data.checkpoint import CONFIG_FILE, EXPERT_KEY
from workbench.data.shapes import GROUP
from workbench.data.synthetic import SCALE_RANGE

MAX_WRITE_BYTES = 16 << 30  # a test checkpoint beyond this is a typo (the default preset is 58 GiB)
_PROJ_INDEX = {"gate_proj": 0, "up_proj": 1, "down_proj": 2}  # random stream per projection


def checkpoint_bytes(hidden: int, inter: int, experts: int, layers: int, group: int) -> int:
    """Bytes of the expert tensors: per linear K*N/2 (qweight) + (K/G)*N*2.5 (qzeros, scales)."""
    per_linear = hidden * inter // 2 + (hidden // group) * inter * 5 // 2
    down = inter * hidden // 2 + (inter // group) * hidden * 5 // 2
    return layers * experts * (2 * per_linear + down)


def _expert_linears(rng: np.random.Generator, experts: int, k: int, n: int, group: int):
    """AutoAWQ tensors (qweight, qzeros, scales) of ``experts`` random linears ``[K, N]``."""
    import torch

    from workbench.data.awq import awq_pack

    q = rng.integers(0, 16, (experts, k, n), dtype=np.uint8)
    zeros = rng.integers(0, 16, (experts, k // group, n), dtype=np.uint8)
    lo, hi = np.log(SCALE_RANGE[0]), np.log(SCALE_RANGE[1])
    scales = np.exp(rng.uniform(lo, hi, (experts, k // group, n))).astype(np.float16)
    for e in range(experts):
        yield awq_pack(*(torch.from_numpy(a[e]) for a in (q, zeros, scales)))


def _layer_tensors(cfg: dict[str, Any], layer: int, seed: int) -> dict[str, Any]:
    """Every expert tensor of one layer; each projection draws from its own seeded stream."""
    h, i, e = cfg["hidden_size"], cfg["moe_intermediate_size"], cfg["num_experts"]
    g = cfg["quantization_config"]["group_size"]
    out: dict[str, Any] = {}
    for proj, (k, n) in {"gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}.items():
        rng = np.random.default_rng([seed, layer, _PROJ_INDEX[proj]])
        for expert, tensors in enumerate(_expert_linears(rng, e, k, n, g)):
            for part, t in zip(("qweight", "qzeros", "scales"), tensors, strict=True):
                out[EXPERT_KEY.format(layer=layer, expert=expert, proj=proj, part=part)] = t
    return out


def write_checkpoint(
    folder: str | Path,
    hidden: int,
    inter: int,
    experts: int,
    top_k: int,
    layers: int,
    group: int = 128,
    seed: int = 0,
    shards: int = 1,
    origin: str = "custom",
) -> list[Path]:
    """Write a random AWQ checkpoint into ``folder`` (new or empty); returns the files written."""
    from safetensors.torch import save_file

    for name, v in {"hidden": hidden, "inter": inter, "experts": experts, "top_k": top_k,
                    "layers": layers, "group": group, "shards": shards}.items():  # fmt: skip
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise BadArgument(f"{name}={v!r} must be a positive integer")
    if group % GROUP or hidden % group or inter % group:
        raise BadArgument(
            f"group={group} must be a multiple of {GROUP} dividing hidden={hidden} and inter={inter}"
        )
    if inter % 8 or hidden % 8:
        raise BadArgument(f"hidden={hidden} and inter={inter} must be multiples of 8 (AWQ words)")
    if shards > layers:
        raise BadArgument(f"--shards {shards} exceeds --layers {layers} (whole layers per shard)")
    size = checkpoint_bytes(hidden, inter, experts, layers, group)
    if size > MAX_WRITE_BYTES:
        raise BadArgument(
            f"the checkpoint would take {size / 2**30:.1f} GiB (limit {MAX_WRITE_BYTES >> 30} "
            "GiB): give fewer --layers or --experts"
        )
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise BadArgument(
            f"DIR {str(folder)!r} is a file, not a folder: give a new or empty folder"
        )
    if folder.exists() and any(folder.iterdir()):
        raise BadArgument(
            f"DIR {str(folder)!r} is a folder that is not empty: give a new or empty one"
        )
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "hidden_size": hidden,
        "moe_intermediate_size": inter,
        "num_experts": experts,
        "num_experts_per_tok": top_k,
        "num_hidden_layers": layers,
        "torch_dtype": "float16",
        "quantization_config": {
            "quant_method": "awq",
            "bits": 4,
            "group_size": group,
            "zero_point": True,
            "version": "gemm",
        },
        "workbench_test_checkpoint": {"seed": seed, "from": origin, "weights": "random"},
    }
    written = [folder / CONFIG_FILE]
    (folder / CONFIG_FILE).write_text(json.dumps(cfg, indent=2) + "\n")
    bounds = np.linspace(0, layers, shards + 1).round().astype(int)
    weight_map: dict[str, str] = {}
    total = 0
    for s in range(shards):
        name = (
            "model.safetensors" if shards == 1 else f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        )
        tensors: dict[str, Any] = {}
        for layer in range(bounds[s], bounds[s + 1]):
            tensors.update(_layer_tensors(cfg, layer, seed))
        save_file(tensors, str(folder / name), metadata={"format": "pt"})
        share(folder / name)  # safetensors writes 0600; a checkpoint is to be shared
        weight_map.update(dict.fromkeys(tensors, name))
        total += sum(t.numel() * t.element_size() for t in tensors.values())
        written.append(folder / name)
    if shards > 1:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=1) + "\n")
        written.append(folder / "model.safetensors.index.json")
    return written
