"""The method check (docs/DESIGN.md §5.11): a main comparison timed again by another timing
method on the same captured graphs (a comparison of role "method" whose record names it in
"of"), and whether the two methods' intervals agree.

Each method's ratio and interval are its comparison's verdict, by the same statistics as every
comparison's (``analysis.model.comparison_result``); this module only sets them side by side.
Two methods disagree when their intervals do not overlap: a difference the intervals cannot
explain. Sessions before the check have no "method" comparison, and so no check.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from workbench.analysis.words import method_check_text
from workbench.core.stats import Verdict

DEFAULT_TIMING = "events"  # a comparison record without "timing" (measure/graphs.TIMINGS)


@dataclass(frozen=True)
class Reading:
    """One timing method's reading of a cell: its comparison's result (``ComparisonResult``,
    or a pool's row: anything with ``.cmp`` and ``.verdict``) timed by ``timing``."""

    timing: str
    result: Any

    id = property(lambda self: str(self.result.cmp["id"]))
    verdict = property(lambda self: self.result.verdict)

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {"timing": self.timing, "id": self.id, "words": v.words, "median": v.median,
                "ci_low": v.ci_low, "ci_high": v.ci_high}  # fmt: skip


def overlap(a: Verdict, b: Verdict) -> bool:
    """Whether two intervals share a point; an unbounded or missing one overlaps everything
    (it cannot show a disagreement)."""
    bounds = (a.ci_low, a.ci_high, b.ci_low, b.ci_high)
    if not all(isinstance(x, float | int) and math.isfinite(x) for x in bounds):
        return True
    return a.ci_low <= b.ci_high and b.ci_low <= a.ci_high


@dataclass(frozen=True)
class MethodCheck:
    """A cell (kernel, set) read by two or more timing methods, the main comparison first."""

    kernel: str
    set: str
    readings: tuple[Reading, ...]

    @property
    def id(self) -> str:
        """The main comparison's id."""
        return self.readings[0].id

    @property
    def disagree(self) -> bool:
        """Some two methods' intervals do not overlap."""
        rs = self.readings
        return any(not overlap(x.verdict, y.verdict) for i, x in enumerate(rs) for y in rs[i + 1 :])

    @property
    def word_depends(self) -> bool:
        """The methods disagree and read different words: the verdict depends on the timer."""
        return self.disagree and len({r.verdict.label for r in self.readings}) > 1

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "set": self.set, "id": self.id,
                "disagree": self.disagree, "word_depends": self.word_depends,
                "readings": [r.to_dict() for r in self.readings]}  # fmt: skip


def method_checks(results: Iterable[Any]) -> list[MethodCheck]:
    """The cells of ``results`` (anything with ``.cmp`` and ``.verdict``: a session's
    comparisons, a pool's) that a method check timed, in the order of their main comparisons;
    a check or main comparison without a complete pair is left out."""
    results = [r for r in results if r.verdict.n > 0]
    checks: dict[str, list[Any]] = {}
    for r in results:
        if r.cmp.get("role") == "method" and r.cmp.get("of"):
            checks.setdefault(str(r.cmp["of"]), []).append(r)
    out = []
    for main in results:
        cid = main.cmp.get("id")
        if cid not in checks or main.cmp.get("role") == "method":
            continue
        rows = [main, *checks[cid]]
        readings = tuple(Reading(str(r.cmp.get("timing") or DEFAULT_TIMING), r) for r in rows)
        out.append(MethodCheck(str(main.cmp["kernel"]), str(main.cmp["set"]), readings))
    return out


def timer_evidence(results: Iterable[Any], mains: Iterable[Any]) -> list[str]:
    """The recommendation's evidence from the method check: the line of each of ``mains`` (the
    reader comparisons weighed) whose timing methods disagree beyond their intervals."""
    ids = {m.cmp.get("id") for m in mains}
    return [method_check_text(c) for c in method_checks(results) if c.disagree and c.id in ids]
