"""Memory arithmetic of one shape (docs/DESIGN.md §2, §3): int4 weights and AWQ metadata per rank.

Metadata holds one record per (group of 32 weights along K, column): 4 bytes in the b4 layout
(scale + precomputed bias), 3 bytes in the b3 layout (scale + zero). The difference, one byte
per record, is memory a serving engine can hand to the KV cache. Plain integer arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.core.errors import BadArgument
from workbench.core.vocab import KERNELS
from workbench.data.layouts import RECORD_BYTES, record_bytes
from workbench.data.shapes import Shape

MIB = 1 << 20


@dataclass(frozen=True)
class Footprint:
    """Bytes of int4 weights and the number of metadata records, for some set of expert matrices;
    a layout's metadata bytes come from the layout registry (workbench/data/layouts.py)."""

    weights: int
    records: int

    def meta(self, layout: str) -> int:
        return self.records * record_bytes(layout)  # an unknown layout raises, never guessed

    @property
    def meta_b4(self) -> int:
        return self.meta("b4")

    @property
    def meta_b3(self) -> int:
        return self.meta("b3")

    @property
    def saving(self) -> int:
        """What the b3 layout saves against b4 (the comparison this workbench was opened for)."""
        return self.meta_b4 - self.meta_b3

    def total(self, layout: str) -> int:
        return self.weights + self.meta(layout)

    def scaled(self, factor: int) -> Footprint:
        return Footprint(self.weights * factor, self.records * factor)

    def __add__(self, other: Footprint) -> Footprint:
        return Footprint(self.weights + other.weights, self.records + other.records)

    def to_dict(self) -> dict[str, int]:
        d = {"weights": self.weights}
        d.update({f"meta_{lay}": self.meta(lay) for lay in RECORD_BYTES})
        d["saving"] = self.saving
        d.update({f"total_{lay}": self.total(lay) for lay in RECORD_BYTES})
        return d


def expert_footprint(k: int, n: int, group: int = 32) -> Footprint:
    """Bytes of one expert's ``[K, N]`` int4 matrix (two weights per byte) and its records."""
    return Footprint(k * n // 2, (k // group) * n)


@dataclass(frozen=True)
class Capacity:
    """The capacity report of one shape: per kernel per expert, then per layer and per rank."""

    shape: Shape
    per_kernel: dict[str, Footprint]  # one expert matrix of each kernel, on one rank
    kv_bytes_per_token: int | None = None
    per_expert: Footprint = field(init=False)
    per_layer: Footprint = field(init=False)
    per_rank: Footprint = field(init=False)

    def __post_init__(self) -> None:
        per_expert = Footprint(0, 0)
        for kernel in KERNELS:
            per_expert = per_expert + self.per_kernel[kernel]
        # frozen dataclass: derived fields are set once, here
        object.__setattr__(self, "per_expert", per_expert)
        object.__setattr__(self, "per_layer", per_expert.scaled(self.shape.experts))
        object.__setattr__(self, "per_rank", self.per_layer.scaled(self.shape.layers))

    @property
    def kv_tokens(self) -> int | None:
        """Whole KV-cache tokens the per-rank saving pays for, if a per-token size was given."""
        if self.kv_bytes_per_token is None:
            return None
        return self.per_rank.saving // self.kv_bytes_per_token

    def to_dict(self) -> dict:
        s = self.shape
        return {
            "shape": s.to_dict(),
            "dims": {k: dict(zip(("K", "N"), s.dims(k), strict=True)) for k in KERNELS},
            "per_expert_by_kernel": {k: v.to_dict() for k, v in self.per_kernel.items()},
            "per_expert": self.per_expert.to_dict(),
            "per_layer": self.per_layer.to_dict(),
            "per_rank": self.per_rank.to_dict(),
            "saving_bytes_per_rank": self.per_rank.saving,
            "saving_mib_per_rank": self.per_rank.saving / MIB,
            "saving_fraction_of_metadata": self.per_rank.saving / self.per_rank.meta_b4,
            "saving_fraction_of_total_b4": self.per_rank.saving / self.per_rank.total("b4"),
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_tokens": self.kv_tokens,
        }


def capacity(shape: Shape, kv_bytes_per_token: int | None = None) -> Capacity:
    """Capacity report of a validated ``shape``; ``kv_bytes_per_token`` must be positive."""
    shape.validate()
    if kv_bytes_per_token is not None and (
        isinstance(kv_bytes_per_token, bool)
        or not isinstance(kv_bytes_per_token, int)
        or kv_bytes_per_token <= 0
    ):
        raise BadArgument(f"kv_bytes_per_token={kv_bytes_per_token!r} must be a positive integer")
    per_kernel = {k: expert_footprint(*shape.dims(k), group=shape.group) for k in KERNELS}
    return Capacity(shape, per_kernel, kv_bytes_per_token)
