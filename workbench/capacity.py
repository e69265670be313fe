"""Memory arithmetic of one shape (docs/DESIGN.md §2, §3): int4 weights and AWQ metadata per rank.

Metadata holds one record per (group of 32 weights along K, column): 4 bytes in the b4 layout
(scale + precomputed bias), 3 bytes in the b3 layout (scale + zero). The difference, one byte
per record, is memory a serving engine can hand to the KV cache. Plain integer arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.errors import BadArgument
from workbench.shapes import KERNELS, Shape

RECORD_BYTES = {"b4": 4, "b3": 3}
MIB = 1 << 20


@dataclass(frozen=True)
class Footprint:
    """Bytes of int4 weights and of metadata in each layout, for some set of expert matrices."""

    weights: int
    meta_b4: int
    meta_b3: int

    @property
    def saving(self) -> int:
        return self.meta_b4 - self.meta_b3

    def total(self, layout: str) -> int:
        return self.weights + (self.meta_b4 if layout == "b4" else self.meta_b3)

    def scaled(self, factor: int) -> Footprint:
        return Footprint(self.weights * factor, self.meta_b4 * factor, self.meta_b3 * factor)

    def __add__(self, other: Footprint) -> Footprint:
        return Footprint(
            self.weights + other.weights,
            self.meta_b4 + other.meta_b4,
            self.meta_b3 + other.meta_b3,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "weights": self.weights,
            "meta_b4": self.meta_b4,
            "meta_b3": self.meta_b3,
            "saving": self.saving,
            "total_b4": self.total("b4"),
            "total_b3": self.total("b3"),
        }


def expert_footprint(k: int, n: int, group: int = 32) -> Footprint:
    """Bytes of one expert's ``[K, N]`` int4 matrix (two weights per byte) and its metadata."""
    records = (k // group) * n
    return Footprint(k * n // 2, records * RECORD_BYTES["b4"], records * RECORD_BYTES["b3"])


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
        per_expert = Footprint(0, 0, 0)
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
