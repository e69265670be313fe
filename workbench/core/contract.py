"""The op contracts as the workbench calls them (docs/DESIGN.md §4.1), the one place they are
spelled: for W13 and W2, in a step's launch order, what one call reads (the activation first,
then what ``ops.KernelOp`` takes by keyword), the output it writes, the output's rows and what
divides the op's N for its columns. The engine's calls (workbench.measure.calls), the numerics
gate, the standalone check and the counters' program read it. Plain Python.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workbench.core.vocab import KERNELS


@dataclass(frozen=True)
class OpCalls:
    """What one call of an op reads and writes, as the engine launches it (``ops.KernelOp``'s
    arguments): its inputs by name (the activation first, then those passed by keyword), its
    output's name, the output's rows, and what divides the op's N for the output's columns."""

    reads: tuple[str, ...]
    writes: str
    rows: Callable[[Any], int]
    halve: int


# W13 writes one SwiGLU row per routed expert (its gate and up halves become one), W2 the token's
# one weighted row.
OPS = {
    "w13": OpCalls(("x",), "inter", lambda shape: shape.top_k, 2),
    "w2": OpCalls(("inter", "rw"), "y", lambda shape: 1, 1),
}
assert tuple(OPS) == KERNELS  # every contract of the vocabulary, in its launch order
