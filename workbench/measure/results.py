"""What one measured comparison is, between the engine that measures it and the runner that
keeps it (torch-free): the result record and the verdict of its journaled samples. Its own module
so that engine and runner import it, not each other (docs/DESIGN.md §8)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from workbench.core import stats
from workbench.measure.abba import Outcome
from workbench.measure.plan import ComparisonSpec, Geometry


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
        o, v = self.outcome, self.verdict
        a_ms, b_ms = o.median_ms("A"), o.median_ms("B")
        clocks = [s["sm_mhz_max"] for s in o.samples if s.get("sm_mhz_max")]
        return {
            "id": self.spec.id,
            "kernel": self.spec.kernel,
            "set": self.spec.set,
            "role": self.spec.role,
            "a": self.spec.a.name,
            "b": self.spec.b.name,
            "spin": self.spec.b.spin - self.spec.a.spin,
            "a_ms": a_ms,
            "b_ms": b_ms,
            "a_us_per_call": None if a_ms is None else a_ms * 1000 / calls,
            "b_us_per_call": None if b_ms is None else b_ms * 1000 / calls,
            "verdict": v.to_dict(),
            "pairs": o.complete,
            "blocks": v.blocks,
            "flagged": o.flagged,
            "remeasured": o.remeasured,
            "excluded": o.excluded,
            "lost_pairs": o.lost_pairs,
            "stop": o.stop,
            "elapsed_s": o.elapsed_s,
            "sm_mhz": statistics.median(clocks) if clocks else None,
            "gate": self.gate,
            **self.geom.to_record(),
        }


def verdict_of(outcome: Outcome, m: float) -> stats.Verdict:
    """stats' verdict on the comparison's journaled samples (the same path the report takes)."""
    return stats.compare(stats.pair_ratios(outcome.samples), m)
