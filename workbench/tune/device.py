"""The engine of a tune run (imports torch): the engine of `workbench ab` with one more gate.

A candidate whose parameters reorder the FP32 sums (space.work_split) cannot be bit-identical to
the default, so its gate is a bound on the relative L2 of its outputs against the default's
(``space.TuneComparison.tolerance``); every other comparison keeps the bit-identity gate
(docs/DESIGN.md §5.6, §11.1). Either failure raises NumericsError, which excludes the candidate.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from workbench.abba import ProtocolConfig
from workbench.engine import Engine
from workbench.errors import NumericsError
from workbench.graphs import GraphArm, loose_difference
from workbench.plan import ComparisonSpec


class TuneEngine(Engine):
    def use_protocol(self, protocol: ProtocolConfig) -> None:
        """Screening and confirmation run under different protocols on the same banks."""
        self.cfg = dataclasses.replace(self.cfg, protocol=protocol)

    def gate(
        self, c: ComparisonSpec, arm_a: GraphArm, arm_b: GraphArm, block: int | None = None
    ) -> dict[str, Any]:
        tol = getattr(c, "tolerance", None)
        if tol is None:
            return super().gate(c, arm_a, arm_b, block)
        arm_a.run_once()
        arm_b.run_once()
        d = loose_difference(arm_a, arm_b)
        ok = bool(d["rel_l2"] <= tol)  # NaN (an unwritten output) fails too
        rec = {
            "cmp": c.id, "block": block, "ok": ok, "gated": True,
            "kind": f"rel_l2 vs {c.a.name} <= {tol:g} (parameters reorder the FP32 sums)", **d,
        }  # fmt: skip
        self.r.session.record("gate", **rec)
        self.r.emit("gate", rec)
        if not ok:
            raise NumericsError(
                f"{c.id}: outputs of {c.b.name} differ from {c.a.name} by relative L2 "
                f"{d['rel_l2']:.3g}, beyond {tol:g} (worst element {d['max_abs_diff']:.3g}). "
                "Nothing was timed."
            )
        return rec
