"""What one measured comparison is, between the engine that measures it and the runner that
keeps it (torch-free): the result record and the verdict of its journaled samples. Its own module
so that engine and runner import it, not each other (docs/DESIGN.md §8)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workbench.core import stats
from workbench.core.block_diagnostic import BlockDiagnostic, diagnose
from workbench.measure.abba import Outcome
from workbench.measure.plan import ComparisonSpec, Geometry


def comparison_summary(
    cmp: Mapping[str, Any],
    *,
    spin: int,
    a_ms: float | None,
    b_ms: float | None,
    calls: int | None,
    verdict: stats.Verdict,
    pairs: int,
    flagged: int,
    excluded: int,
    sm_mhz: float | None,
    gate: Any,
    diagnostic: BlockDiagnostic | None,
) -> dict[str, Any]:
    """The per-comparison summary keys that the runner stores (``CmpResult.summary``) and the
    analysis recomputes from the journal (``analysis.model.ComparisonResult.to_dict``): one
    builder for both, so the calibration and every reader of a summary read one shape.
    Non-finite times become None, and so do the µs per call without a call count."""

    def fin(x: float | None) -> float | None:
        return None if x is None or not math.isfinite(x) else float(x)

    def us(ms: float | None) -> float | None:
        return None if ms is None or not calls else ms * 1000 / calls

    a_ms, b_ms = fin(a_ms), fin(b_ms)
    return {
        **{k: cmp.get(k) for k in ("id", "kernel", "set", "role", "a", "b")},
        "spin": spin,
        "a_ms": a_ms,
        "b_ms": b_ms,
        "a_us_per_call": us(a_ms),
        "b_us_per_call": us(b_ms),
        "verdict": verdict.to_dict(),
        "pairs": pairs,
        "blocks": verdict.blocks,
        "flagged": flagged,
        "excluded": excluded,
        "sm_mhz": sm_mhz,
        "gate": gate,
        "block_diagnostic": None if diagnostic is None else diagnostic.to_dict(),
    }


def gate_summary(gates: list[dict[str, Any]]) -> dict[str, Any]:
    """One gate record for a comparison's result: the first failing block's, else the last
    block's, with the number of blocks gated (the engine's result and the analysis's)."""
    if not gates:
        return {"ok": False, "kind": "not run", "blocks": 0}
    bad = [g for g in gates if not g["ok"]]
    return {**(bad[0] if bad else gates[-1]), "blocks": len(gates), "failed_blocks": len(bad)}


@dataclass
class CmpResult:
    spec: ComparisonSpec
    geom: Geometry
    outcome: Outcome
    verdict: stats.Verdict
    gate: dict[str, Any]

    @property
    def cmp(self) -> dict[str, Any]:
        """The comparison as the journal records it (what workbench.analysis.recommend reads)."""
        s = self.spec
        return {"id": s.id, "kernel": s.kernel, "set": s.set, "role": s.role,
                "a": s.a.name, "b": s.b.name}  # fmt: skip

    def summary(self, calls: int) -> dict[str, Any]:
        o = self.outcome
        clocks = [s["sm_mhz_max"] for s in o.samples if s.get("sm_mhz_max")]
        return {
            **comparison_summary(
                self.cmp,
                spin=self.spec.b.spin - self.spec.a.spin,
                a_ms=o.median_ms("A"),
                b_ms=o.median_ms("B"),
                calls=calls,
                verdict=self.verdict,
                pairs=o.complete,
                flagged=o.flagged,
                excluded=o.excluded,
                sm_mhz=statistics.median(clocks) if clocks else None,
                gate=self.gate,
                diagnostic=diagnose(stats.pair_ratios(o.samples), self.verdict.m, self.verdict.conf)
                if self.verdict.n
                else None,
            ),
            "remeasured": o.remeasured,
            "lost_pairs": o.lost_pairs,
            "stop": o.stop,
            "elapsed_s": o.elapsed_s,
            **self.geom.to_record(),
        }


def verdict_of(outcome: Outcome, m: float) -> stats.Verdict:
    """stats' verdict on the comparison's journaled samples (the same path the report takes)."""
    return stats.compare(stats.pair_ratios(outcome.samples), m)
