"""The engine of a tune run (imports torch): the engine of `workbench ab` with the tune gate.

Every comparison of a tune (``space.TuneComparison``) is gated by the candidate's own promise
(docs/DESIGN.md §11.1), whatever the engine's default gate would infer from the arms' names:
bit-identity with the default where the parameters keep the default's summation order (and
between the two readers at one set of parameters), else a bound on the relative L2 of the
candidate's outputs against the default's. A failure raises NumericsError, which excludes the
candidate. Other comparisons keep the engine's gate (§5.6).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from workbench.core.errors import NumericsError
from workbench.measure.abba import ProtocolConfig
from workbench.measure.engine import Engine
from workbench.measure.graphs import GraphArm, first_difference, loose_difference
from workbench.measure.plan import ComparisonSpec
from workbench.tune.space import TuneComparison


class TuneEngine(Engine):
    def use_protocol(self, protocol: ProtocolConfig) -> None:
        """Screening and confirmation run under different protocols on the same banks."""
        self.cfg = dataclasses.replace(self.cfg, protocol=protocol)

    def gate(
        self, c: ComparisonSpec, arm_a: GraphArm, arm_b: GraphArm, block: int | None = None,
        *more: Any, **kw: Any,
    ) -> dict[str, Any]:  # fmt: skip
        if not isinstance(c, TuneComparison):
            return super().gate(c, arm_a, arm_b, block, *more, **kw)
        arm_a.run_once()
        arm_b.run_once()
        if c.tolerance is None:
            diff = first_difference(arm_a, arm_b)
            rec = {"cmp": c.id, "block": block, "ok": diff is None, "gated": True,
                   "kind": "bit-identical (same summation order as A)",
                   "outputs": sum(len(o) for o in arm_a.outputs), "first_difference": diff}  # fmt: skip
            why = None
            if diff is not None:
                what = "was not written (still NaN)" if diff["unwritten"] else "differs"
                why = (f"not bit-identical: graph {diff['graph']} {diff['output']}{diff['index']} "
                       f"{what}: A={diff['a']!r}, B={diff['b']!r}; {diff['differing']} of "
                       f"{diff['elements']} elements differ")  # fmt: skip
        else:
            d = loose_difference(arm_a, arm_b)
            ok = bool(d["rel_l2"] <= c.tolerance)  # NaN (an unwritten output) fails too
            rec = {"cmp": c.id, "block": block, "ok": ok, "gated": True,
                   "kind": f"rel_l2 vs A <= {c.tolerance:g} (parameters reorder the FP32 sums)",
                   **d}  # fmt: skip
            why = None if ok else (
                f"relative L2 {d['rel_l2']:.3g} against A, beyond {c.tolerance:g} "
                f"(worst element {d['max_abs_diff']:.3g})"
            )  # fmt: skip
        self.sink.record("gate", **rec)
        self.sink.emit("gate", rec)
        if why is not None:
            raise NumericsError(f"{c.id}: {c.b.name} (B) against {c.a.name} (A): {why}. "
                                "Nothing was timed.")  # fmt: skip
        return rec
