"""The built-in arms, the one table of them (docs/DESIGN.md §4.1, §4.7): each arm's layout,
reader, role, label and colour. The spec registry, the variant table, the plan's reference arms,
the run settings, the report's words and the plots' colours read it; `tests/test_one_home.py`
fails on a second list of arm names.

A user's arm (a spec file) is not here: it names its own layout and reader.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Arm:
    name: str
    layout: str  # the metadata layout it reads (a peer: the one it converts its weights from)
    reader: str | None  # how a warp reads the records; None: a peer, not our kernel
    role: str  # "baseline" (4-byte records), "reader" (the 3-byte readers), "peer"
    label: str = ""  # what the report says beside its name
    color: str | None = None  # its colour in the plots (None: one of the palette's)
    reference: bool = False  # may be timed beside the main comparisons (`ab --reference`)
    by_default: bool = False  # ... and is, unless --reference says otherwise


# b4-coop does not exist: 4-byte records are already one aligned word per lane. tinygemm
# (torch's int4 path, ~25x our kernels' time) costs a quarter of a run and its verdict never
# changes: it is a reference only when `--reference` names it.
TABLE = (
    Arm("b4-scalar", "b4", "scalar", "baseline", "4-byte baseline", "#7f7f7f",
        reference=True, by_default=True),
    Arm("b3-scalar", "b3", "scalar", "reader", color="#1f77b4"),
    Arm("b3-coop", "b3", "coop", "reader", color="#ff7f0e"),
    Arm("tinygemm", "b3", None, "peer", "peer: torch int4 tinygemm, bf16", reference=True),
    Arm("triton-moe", "b3", None, "peer", "peer: fused W4A16 MoE Triton kernel, fp16",
        reference=True, by_default=True),
)  # fmt: skip
BY_NAME = {a.name: a for a in TABLE}

KERNEL_ARMS = tuple(a.name for a in TABLE if a.role != "peer")  # built from our CUDA sources
PEER_ARMS = tuple(a.name for a in TABLE if a.role == "peer")  # Python arms, timed beside ours
REFERENCE_ARMS = tuple(a.name for a in TABLE if a.reference)
DEFAULT_REFERENCES = tuple(a.name for a in TABLE if a.by_default)
(BASELINE,) = (a.name for a in TABLE if a.role == "baseline")
LABELS = {a.name: a.label for a in TABLE if a.label}
COLORS = {a.name: a.color for a in TABLE if a.color}


def offered(first: tuple[str, ...]) -> tuple[str, ...]:
    """Every arm, ``first`` (the defaults of A and B) leading: the order a form offers them."""
    return (*first, *(a.name for a in TABLE if a.name not in first))
