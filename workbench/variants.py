"""The variant table: the one place that says which kernel builds exist (docs/DESIGN.md §4).

A variant is (kernel, layout, reader), compiled as a real build with -D flags, plus an optional
calibration build that can spin a known number of SM cycles per CTA (docs/DESIGN.md §5.8).
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.errors import BadArgument

KERNELS = ("w13", "w2")
# b4-coop does not exist: 4-byte records are already one aligned word per lane.
ARMS = ("b4-scalar", "b3-scalar", "b3-coop")
PEER_ARMS = ("tinygemm", "triton-moe")
RECORD_BYTES = {"b4": 4, "b3": 3}


@dataclass(frozen=True)
class Variant:
    kernel: str
    layout: str
    reader: str
    calib: bool = False

    def __post_init__(self) -> None:
        if self.kernel not in KERNELS:
            raise BadArgument(f"unknown kernel {self.kernel!r}; known: {', '.join(KERNELS)}")
        if f"{self.layout}-{self.reader}" not in ARMS:
            raise BadArgument(
                f"unknown variant {self.layout}-{self.reader!s} for {self.kernel}; "
                f"known: {', '.join(ARMS)}"
            )

    @property
    def arm(self) -> str:
        return f"{self.layout}-{self.reader}"

    @property
    def name(self) -> str:
        return f"{self.kernel}:{self.arm}" + ("+calib" if self.calib else "")

    @property
    def record_bytes(self) -> int:
        return RECORD_BYTES[self.layout]

    def defines(self) -> list[str]:
        """The -D flags that select this variant at compile time."""
        flags = [
            f"-DWB_KERNEL_{self.kernel.upper()}",
            f"-DWB_LAYOUT_{self.layout.upper()}",
            f"-DWB_READER_{self.reader.upper()}",
        ]
        if self.calib:
            flags.append("-DWB_CALIBRATION")
        return flags


def parse_arm(kernel: str, arm: str, calib: bool = False) -> Variant:
    """'b3-coop' -> Variant(kernel, 'b3', 'coop'); unknown names raise BadArgument naming them."""
    if arm not in ARMS:
        raise BadArgument(
            f"unknown variant {arm!r} for {kernel}; known: {', '.join(ARMS)}"
            + (" (peers such as tinygemm are timed but not built)" if arm in PEER_ARMS else "")
        )
    layout, reader = arm.split("-")
    return Variant(kernel, layout, reader, calib)


def all_variants(calib: bool = False) -> list[Variant]:
    out = [parse_arm(k, a) for k in KERNELS for a in ARMS]
    if calib:
        out += [parse_arm(k, "b3-scalar", calib=True) for k in KERNELS]
    return out
