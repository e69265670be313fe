"""A real AWQ checkpoint as the source of a run's banks (docs/DESIGN.md §3.8).

``Checkpoint(folder, tp, rank)`` reads ``config.json`` (the shape), finds the expert tensors
(``EXPERT_KEY``) of every MoE layer in ``model.safetensors`` or the shards that
``model.safetensors.index.json`` names, and checks every one of them by its header before any GPU
work: a missing tensor or a wrong shape or dtype is one line naming the key and the file.
``host_experts`` turns one layer into the kernels' format on the CPU (AutoAWQ unpacking, regroup to
32, this rank's tensor-parallel slice, ``layouts.pack_int4``); ``workbench.measure.banks`` copies it to the
device. Light to import: torch and safetensors are imported inside the methods that need them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from workbench.core.errors import BadArgument
from workbench.data.shapes import GROUP, Shape

if TYPE_CHECKING:
    import torch

    from workbench.data.awq import TensorSource

# The tensors read, Qwen-MoE naming (Qwen2-MoE, Qwen3-MoE, Qwen3-Next; also vLLM's and SGLang's):
# proj is gate_proj, up_proj (W13: gate columns then up columns) or down_proj (W2); part is
# qweight, qzeros or scales (AutoAWQ GEMM packing, workbench/data/awq.py).
EXPERT_KEY = "model.layers.{layer}.mlp.experts.{expert}.{proj}.{part}"
EXPERT_PREFIX = "model.layers.{layer}.mlp.experts.{expert}"
_LAYER_RE = re.compile(r"^model\.layers\.(\d+)\.mlp\.experts\.\d+\.(?:gate|up|down)_proj\.")
CONFIG_FILE = "config.json"
# config.json field -> Shape field
CONFIG_FIELDS = {
    "hidden_size": "hidden",
    "moe_intermediate_size": "inter",
    "num_experts": "experts",
    "num_experts_per_tok": "top_k",
    "num_hidden_layers": "layers",
}
HASH_LIMIT = 1 << 30  # files up to 1 GiB are hashed (sha256); larger ones get size + mtime
_PACK_CHUNK = 64  # experts packed at a time: bounds the uint32 temporaries of pack_int4


@dataclass(frozen=True)
class CheckpointConfig:
    """What config.json says: the model's dimensions and the AWQ group size."""

    hidden: int
    inter: int
    experts: int
    top_k: int
    layers: int
    group: int


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def read_config(folder: Path) -> CheckpointConfig:
    """The fields of ``folder/config.json`` that the workbench needs; BadArgument names the field."""
    path = folder / CONFIG_FILE
    if not path.is_file():
        raise BadArgument(f"checkpoint {str(folder)!r}: no {CONFIG_FILE} in it")
    try:
        cfg = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise BadArgument(f"{path}: not readable JSON ({type(e).__name__}: {e})") from None
    if not isinstance(cfg, dict):
        raise BadArgument(f"{path}: must hold a JSON object")
    dims = {}
    for key, field in CONFIG_FIELDS.items():
        if key not in cfg:
            raise BadArgument(f"{path}: no {key!r} (needed: {', '.join(CONFIG_FIELDS)})")
        if not _positive_int(cfg[key]):
            raise BadArgument(f"{path}: {key}={cfg[key]!r} must be a positive integer")
        dims[field] = cfg[key]
    q = cfg.get("quantization_config")
    if not isinstance(q, dict):
        raise BadArgument(f"{path}: no 'quantization_config' object: not an AWQ checkpoint")
    checks = [
        ("quant_method", str(q.get("quant_method", "")).lower() == "awq", "'awq'"),
        ("bits", q.get("bits", q.get("w_bit")) == 4, "4"),
        ("zero_point", q.get("zero_point", True) is True, "true (AWQ with zero points)"),
        ("version", str(q.get("version", "gemm")).lower() == "gemm", "'gemm' (AutoAWQ's packing)"),
    ]
    for key, ok, want in checks:
        if not ok:
            raise BadArgument(f"{path}: quantization_config.{key}={q.get(key)!r}, must be {want}")
    group = q.get("group_size", q.get("q_group_size"))
    if not _positive_int(group) or group % GROUP:
        raise BadArgument(
            f"{path}: quantization_config.group_size={group!r} is not a positive multiple of "
            f"{GROUP}: the kernels' groups of {GROUP} cannot express it"
        )
    for field in ("hidden", "inter"):
        if dims[field] % group:
            raise BadArgument(f"{path}: {field}={dims[field]} is not a multiple of group {group}")
    return CheckpointConfig(**dims, group=group)


class HostExperts(NamedTuple):
    """One layer's experts for one kernel and rank, on the CPU: ``weights`` int32
    ``[E, K/32, N, 4]`` (kernel packing), ``scales`` fp16 and ``zeros`` uint8 ``[E, K/32, N]``."""

    weights: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self)


def _file_record(path: Path) -> dict[str, Any]:
    st = path.stat()
    rec: dict[str, Any] = {"name": path.name, "bytes": st.st_size, "mtime": st.st_mtime}
    if st.st_size <= HASH_LIMIT:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        rec["sha256"] = h.hexdigest()
    return rec


class Checkpoint:
    """An AWQ checkpoint folder, opened for one tensor-parallel rank and checked whole."""

    def __init__(self, folder: str | Path, tp: int | None = None, rank: int = 0) -> None:
        from workbench.data.awq import TensorSource

        self.folder = Path(folder)
        if not self.folder.is_dir():
            what = "is not a folder" if self.folder.exists() else "does not exist"
            raise BadArgument(f"checkpoint {str(self.folder)!r} {what}")
        self.config = read_config(self.folder)
        c = self.config
        tp = 4 if tp is None else tp  # the presets' default (workbench.data.shapes)
        name = f"checkpoint:{self.folder.resolve().name}"
        self.shape = Shape(c.hidden, c.inter, c.experts, c.top_k, c.layers, tp, name=name)
        self.shape.validate()
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < tp:
            raise BadArgument(f"--rank {rank!r} must be in 0..{tp - 1} for tp={tp}")
        self.tp, self.rank = tp, rank
        self.source: TensorSource = TensorSource(self.folder)
        found = {int(m.group(1)) for k in self.source.names() if (m := _LAYER_RE.match(k))}
        if not found:
            raise BadArgument(
                f"checkpoint {str(self.folder)!r}: no expert tensors named like {EXPERT_KEY!r}"
            )
        self.layers = tuple(sorted(found))  # the MoE layers it holds
        self._check_tensors()
        self._record: dict[str, Any] | None = None

    def prefix(self, layer: int, expert: int) -> str:
        return EXPERT_PREFIX.format(layer=layer, expert=expert)

    def _check_tensors(self) -> None:
        """Every expert of every MoE layer: present, int32/fp16, shapes of config.json's dims."""
        from workbench.data.awq import linear_spec

        c = self.config
        dims = {"gate_proj": (c.hidden, c.inter), "up_proj": (c.hidden, c.inter)}
        dims["down_proj"] = (c.inter, c.hidden)
        for layer in self.layers:
            for e in range(c.experts):
                for proj, (k, n) in dims.items():
                    prefix = f"{self.prefix(layer, e)}.{proj}"
                    group = linear_spec(self.source, prefix, k, n)
                    if group != c.group:
                        raise BadArgument(
                            f"{prefix}: group size {group} (from its qzeros) differs from "
                            f"config.json's quantization_config.group_size={c.group}"
                        )

    def layer_for(self, bank: int) -> tuple[int, int]:
        """(checkpoint layer, repeat) of bank ``bank``: bank i reads layer i mod L, the
        (i // L)-th time that layer is used."""
        repeat, i = divmod(bank, len(self.layers))
        return self.layers[i], repeat

    def host_experts(self, kernel: str, layer: int) -> HostExperts:
        """Layer ``layer``'s experts for ``kernel`` at this rank, in the kernels' format (CPU)."""
        import torch

        from workbench.data.awq import load_awq_expert
        from workbench.data.layouts import pack_int4

        if layer not in self.layers:
            raise BadArgument(f"layer {layer} is not one of the checkpoint's {list(self.layers)}")
        mats = [
            load_awq_expert(self.source, self.prefix(layer, e), kernel, self.tp, self.rank)
            for e in range(self.config.experts)
        ]
        weights = torch.cat(
            [
                pack_int4(torch.stack([m.q for m in mats[e0 : e0 + _PACK_CHUNK]]))
                for e0 in range(0, len(mats), _PACK_CHUNK)
            ]
        )
        scales = torch.stack([m.scales for m in mats])
        zeros = torch.stack([m.zeros for m in mats])
        return HostExperts(weights, scales, zeros)

    def summary(self) -> dict[str, Any]:
        """The short record for a session's config: where, which rank; ``describe`` has more."""
        return {"path": str(self.folder.resolve()), "tp": self.tp, "rank": self.rank}

    def describe(self) -> dict[str, Any]:
        """What a session records about the checkpoint: where, which files (sha256 up to
        HASH_LIMIT, else size and mtime), what was read and how it was sliced. Computed once."""
        if self._record is not None:
            return self._record
        files = sorted({self.folder / CONFIG_FILE, *self.source.files.values()})
        index = self.folder / "model.safetensors.index.json"
        if index.is_file():
            files.append(index)
        c = self.config
        self._record = {
            "path": str(self.folder.resolve()),
            "files": [_file_record(f) for f in files],
            "key_pattern": EXPERT_KEY,
            "layers": list(self.layers),
            "experts": c.experts,
            "group_size": c.group,
            "tp": self.tp,
            "rank": self.rank,
        }
        return self._record


# ------------------------------------------------------------------ command-line options

SHAPE_OPTIONS = ("preset", "hidden", "inter", "experts", "top_k", "layers")


def add_checkpoint_arguments(p: argparse.ArgumentParser) -> None:
    """``--checkpoint DIR`` and ``--rank`` (for `workbench ab`, `calibrate` and `check`)."""
    g = p.add_argument_group("real weights (docs/DESIGN.md §3.8)")
    g.add_argument(
        "--checkpoint",
        metavar="DIR",
        default=None,
        help="use an AWQ checkpoint's experts (config.json + model.safetensors or "
        "model.safetensors.index.json and shards) instead of synthetic banks; the shape is "
        "read from its config.json (give --tp, not the other shape flags)",
    )
    g.add_argument(
        "--rank",
        type=int,
        default=None,
        help="tensor-parallel rank whose slice of the checkpoint is read (default 0)",
    )


def checkpoint_from_args(args: argparse.Namespace) -> Checkpoint | None:
    """The opened and checked checkpoint of ``--checkpoint``, or None; BadArgument names the
    option or the file. CPU only: reads config.json and the safetensors headers."""
    if getattr(args, "checkpoint", None) is None:
        if getattr(args, "rank", None) is not None:
            raise BadArgument("--rank needs --checkpoint: synthetic banks have no ranks")
        return None
    given = [o for o in SHAPE_OPTIONS if getattr(args, o, None) is not None]
    if given:
        option = "--" + given[0].replace("_", "-")
        raise BadArgument(
            f"{option} cannot be combined with --checkpoint: the shape is read from its "
            f"{CONFIG_FILE} (only --tp may be given)"
        )
    rank = 0 if args.rank is None else args.rank
    return Checkpoint(args.checkpoint, tp=getattr(args, "tp", None), rank=rank)
