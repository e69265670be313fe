"""One session's analysis, recomputed from its journal (docs/DESIGN.md §7, §8).

``analyse(session)`` is the analysis model every reader of a session shares: the report, the
plots, `sessions show`, `workbench ab`'s tables, the TUI. ``ComparisonResult`` is the one record
of a measured comparison: the runner and the tuner get theirs from ``comparison_result`` on the
records the engine journaled, the same builder the session's analysis uses. Nothing here trusts the ``summary`` the runner stored: every
number comes from the ``sample`` records through ``workbench.core.stats`` (pair ratios, block-level
intervals, verdicts) and the reader rule of ``workbench.analysis.recommend``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from workbench.analysis.calibration import calibration_summary, spin_of
from workbench.analysis.method_check import MethodCheck, method_checks
from workbench.analysis.recommend import Recommendation, not_counted, recommendations
from workbench.core import sequential, stats
from workbench.core.block_diagnostic import BlockDiagnostic, diagnose, rests_text
from workbench.store.session import Session

# Roles whose samples describe a variant's speed; calibration arms carry injected extra work.
TIMING_ROLES = ("main", "reference", "confirm", "aa")


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else math.nan


def finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


# the geometry a comparison record carries (workbench.measure.plan.Geometry.to_record)
GEOMETRY_KEYS = (
    "working_set_bytes", "working_set_per_replay_bytes", "l2_bytes", "working_set_l2_ratio",
    "graphs", "banks", "set_label", "residency", "working_set_largest_bytes",
)  # fmt: skip


def gate_summary(gates: list[dict[str, Any]]) -> dict[str, Any]:
    """One gate record for a comparison's result: the first failing block's, else the last
    block's, with the number of blocks gated."""
    if not gates:
        return {"ok": False, "kind": "not run", "blocks": 0}
    bad = [g for g in gates if not g["ok"]]
    return {**(bad[0] if bad else gates[-1]), "blocks": len(gates), "failed_blocks": len(bad)}


@dataclass
class ComparisonResult:
    """One comparison, from its journaled records: its pair ratios, verdict and per-arm samples
    (the one comparison model: docs/DESIGN.md §7.7)."""

    cmp: dict[str, Any]
    ratios: stats.PairRatios
    verdict: stats.Verdict
    a_samples_ms: list[float]  # sample medians (ms per replay) of A in complete pairs, pair order
    b_samples_ms: list[float]
    samples: int
    flagged: int  # samples flagged by the monitor, kept or excluded
    excluded: int
    gates: list[dict[str, Any]] = field(default_factory=list)
    sm_mhz: float | None = None  # median of the samples' highest SM clock (NVML), if recorded
    # can the blocks be trusted as exchangeable, and does the verdict rest on one (§7.8)?
    diagnostic: BlockDiagnostic | None = None

    id = property(lambda self: self.cmp["id"])
    kernel = property(lambda self: self.cmp["kernel"])
    set = property(lambda self: self.cmp["set"])
    role = property(lambda self: self.cmp["role"])
    calls = property(lambda self: int(self.cmp["calls"]))

    @property
    def a_ms(self) -> float:
        """Median ms per replay of arm A over the complete pairs (NaN without any)."""
        return _median(self.a_samples_ms)

    @property
    def b_ms(self) -> float:
        return _median(self.b_samples_ms)

    @property
    def gate(self) -> bool | None:
        """Numerics gate: every gate record ok; None when there is none."""
        return None if not self.gates else all(bool(g["ok"]) for g in self.gates)

    @property
    def spin(self) -> int:
        return spin_of(self.cmp)

    def us_per_call(self, ms: float) -> float:
        return ms * 1000.0 / self.calls if self.cmp.get("calls") else math.nan

    @property
    def a_us_per_call(self) -> float | None:
        """µs per call of arm A (None without pairs or without a call count)."""
        return finite_or_none(self.us_per_call(self.a_ms))

    @property
    def b_us_per_call(self) -> float | None:
        return finite_or_none(self.us_per_call(self.b_ms))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: the per-comparison summary the session stores and the calibration reads
        (non-finite times become None)."""
        c = self.cmp
        return {
            **{k: c.get(k) for k in ("id", "kernel", "set", "role", "a", "b")},
            "spin": self.spin,
            "a_ms": finite_or_none(self.a_ms),
            "b_ms": finite_or_none(self.b_ms),
            "a_us_per_call": self.a_us_per_call,
            "b_us_per_call": self.b_us_per_call,
            "verdict": self.verdict.to_dict(),
            "pairs": self.verdict.n,
            "blocks": self.verdict.blocks,
            "flagged": self.flagged,
            "excluded": self.excluded,
            "sm_mhz": self.sm_mhz,
            "gate": gate_summary(self.gates) if self.gates else None,
            "block_diagnostic": None if self.diagnostic is None else self.diagnostic.to_dict(),
            **{k: c.get(k) for k in ("calls", "replays", "workers", *GEOMETRY_KEYS) if k in c},
            "ratios": self.ratios.values,
        }

    @property
    def rests_on(self) -> list[int]:
        """Blocks without which the verdict changes (empty without a diagnostic)."""
        return [] if self.diagnostic is None else self.diagnostic.rests_on

    @property
    def verdict_words(self) -> str:
        """The verdict as every renderer prints it: its words, and "(rests on block N)" where
        leaving out one block changes it."""
        w = self.verdict.words
        return w + (f" ({rests_text(self.rests_on)})" if self.rests_on else "")


def rated_mhz(session: Session) -> float | None:
    """The GPU's rated SM clock (torch's clock_rate, in the environment): the runner converts
    cycles to µs with it where NVML gave no clock, and so does the analysis."""
    clocks = session.gpu.get("clocks")
    khz = clocks.get("torch_clock_rate_khz") if isinstance(clocks, dict) else None
    return khz / 1000.0 if isinstance(khz, (int, float)) and khz > 0 else None


def session_m(session: Session, m: float | None = None) -> float:
    """The minimum effect: the explicit ``m``, else the session's config["m"], else 1 %."""
    return float(m if m is not None else session.config.get("m", stats.DEFAULT_M))


def session_rule(session: Session) -> str:
    """The rule a session's intervals become verdicts by (stats.RULES): its config's "labels",
    written by every run since that rule; a session before it keeps the estimate rule."""
    return str(session.config.get("labels", stats.LEGACY_RULE))


def comparison_conf(session: Session, cmp: dict[str, Any], conf: float) -> float:
    """The level of ``cmp``'s interval: ``conf``, or in a run that settled its labels over looks
    (`ab --settle`, config "settle") the level of each look's interval for the comparisons of
    its looked round (workbench.core.sequential)."""
    settle = session.config.get("settle")
    if isinstance(settle, dict) and cmp.get("role") in ("main", "reference", "aa"):
        return sequential.look_conf(int(settle["looks"]), conf)
    return conf


def comparison_results(
    session: Session,
    m: float | None = None,
    conf: float = stats.DEFAULT_CONF,
    *,
    detectable: bool = True,
) -> list[ComparisonResult]:
    """Every comparison of ``session`` recomputed, in journal order of first declaration; a
    re-declared id counts once, with its last declaration. ``detectable=False``: the verdicts
    carry no detectable effect (``stats.compare``), for readers that show none (pool)."""
    m = session_m(session, m)
    rule = session_rule(session)
    out, seen = [], set()
    for first in session.comparisons:
        if first["id"] in seen:
            continue
        seen.add(first["id"])
        c = session.comparison(first["id"])
        samples = session.samples_for(c["id"])
        gates = session.gates_for(c["id"])
        level = comparison_conf(session, c, conf)
        out.append(comparison_result(c, samples, gates, m, level, detectable=detectable, rule=rule))
    return out


def comparison_result(
    cmp: dict[str, Any],
    samples: list[dict[str, Any]],
    gates: list[dict[str, Any]],
    m: float,
    conf: float = stats.DEFAULT_CONF,
    *,
    detectable: bool = True,
    rule: str = stats.RULE,
) -> ComparisonResult:
    """One comparison from its records: the ``comparison`` record, its ``sample`` records and
    its ``gate`` records, as journaled. The one builder of a ``ComparisonResult``: a session's
    analysis and a run's finished comparisons (workbench.run.sink) both call it; ``rule``:
    stats.RULES (a run's: the current one)."""
    pr = stats.pair_ratios(samples)
    verdict = stats.compare(pr, m=m, conf=conf, detectable=detectable, rule=rule)
    clocks = [s["sm_mhz_max"] for s in samples if s.get("sm_mhz_max")]
    return ComparisonResult(
        cmp=cmp,
        ratios=pr,
        verdict=verdict,
        a_samples_ms=[x for p in pr for x in p.a_ms],
        b_samples_ms=[x for p in pr for x in p.b_ms],
        samples=len(samples),
        flagged=sum(bool(s.get("flagged")) for s in samples),
        excluded=sum(bool(s.get("excluded")) for s in samples),
        gates=list(gates),
        sm_mhz=statistics.median(clocks) if clocks else None,
        diagnostic=diagnose(pr, m, conf, verdict=verdict) if verdict.n else None,
    )


@dataclass
class Analysis:
    """Everything a report, a plot or a view states about a session, from its journals."""

    session: Session
    m: float
    results: list[ComparisonResult]
    recommendations: dict[str, Recommendation] = field(default_factory=dict)
    conf: float = stats.DEFAULT_CONF

    def by_role(self, *roles: str) -> list[ComparisonResult]:
        return [r for r in self.results if r.role in roles]

    def variant_us(self) -> dict[tuple[str, str, str], list[float]]:
        """µs per call of each (kernel, set, variant): every kept sample in a complete pair."""
        out: dict[tuple[str, str, str], list[float]] = {}
        for r in self.by_role(*TIMING_ROLES):
            for arm, ms in (("a", r.a_samples_ms), ("b", r.b_samples_ms)):
                key = (r.kernel, r.set, str(r.cmp[arm]))
                out.setdefault(key, []).extend(x * 1000.0 / r.calls for x in ms)
        return out

    def not_counted(self) -> list[str]:
        """Main comparisons that yield no reader recommendation, and why."""
        return not_counted(self.results)

    def method_checks(self) -> list[MethodCheck]:
        """The cells timed by a second timing method (docs/DESIGN.md §5.11), each method's
        verdict side by side; none in a session before the method check."""
        return method_checks(self.results)

    def calibration(self) -> dict[str, Any] | None:
        """The calibration resolution (``calibration_summary``) of the calibration comparisons,
        from the journal; None in a session without any."""
        if not self.by_role("calibration"):
            return None
        return calibration_summary(
            [r.to_dict() for r in self.results], self.m, rated_mhz(self.session)
        )


def analyse(session: Session, m: float | None = None, conf: float = stats.DEFAULT_CONF) -> Analysis:
    """Recompute pair ratios, verdicts and recommendations from ``session``'s samples.

    ``m``: minimum effect; default the session's ``config["m"]`` (else stats.DEFAULT_M).
    """
    m = session_m(session, m)
    results = comparison_results(session, m, conf)
    return Analysis(session, m, results, recommendations(results), conf)
