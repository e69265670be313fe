"""The product's word for a GPU model: a pool of runs from several boards, the board the unit
(docs/DESIGN.md §7.6; `sessions pool`, `export`).

One run's interval holds for the board it ran on: two H200 boards differ on W13 rotating by four
times a run's half-width. So where a pool's sessions come from two or more boards of one model,
each comparison gets, besides the runs' agreement (``analysis.pool``):
- the model's estimate, the geometric mean of the boards' estimates (each its runs' geometric
  mean), and its interval, a t-interval over the k boards (k - 1 df): it spans run and board
  variance, and holds for the model as far as the boards sample it;
- the model's verdict, the rule of §7.4 on that interval (``stats.unit_verdict``), and the
  recommendation, the rule of §7.5 on those verdicts (``recommend.recommendations``): what
  `export` writes for the model;
- whether the boards agree: the one-way F test of the runs' log estimates by board (a board's runs
  the replicates; it needs a board of two runs), "the boards differ" below ``BOARDS_DIFFER_P``
  (1 %); beside it, where `sessions pool` fits it, the REML board SD with its profile interval
  (``analysis.components``), the size the test cannot give;
- how many runs' own intervals hold the model's estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from workbench.analysis import words
from workbench.analysis.components import Component, Fit
from workbench.analysis.model import ComparisonResult, session_rule
from workbench.analysis.pool import BOARDS_DIFFER_P, Pool, PooledComparison
from workbench.analysis.recommend import Recommendation, recommendations
from workbench.core.decision import device_key
from workbench.core.stats import RULE, Verdict, unit_verdict

ROLES = ("main", "confirm")  # the comparisons a recommendation reads or confirms


@dataclass(frozen=True)
class BoardCheck:
    """Beside a comparison's verdict over boards (its ``ComparisonResult``, the one record of a
    comparison): the boards' estimates, the F test's p (None: no board has two runs), the REML
    board SD where fitted, and how many of the runs' intervals hold the model's estimate."""

    id: str
    boards: tuple[tuple[str, float, int], ...]  # (board, estimate, runs), first-seen order
    p: float | None
    held: int
    runs: int
    board_sd: Component | None = None

    @property
    def differ(self) -> bool | None:
        return None if self.p is None else self.p < BOARDS_DIFFER_P

    def text(self, v: Verdict) -> str:
        """The comparison over boards in a sentence (words.board_level_text), ``v`` its verdict."""
        return words.board_level_text(
            v, len(self.boards), self.runs, self.held, self.p, self.differ
        )

    def to_dict(self, v: Verdict) -> dict[str, Any]:
        sd = self.board_sd
        return {
            "id": self.id, "verdict": v.verdict, "words": v.words, "estimate": v.median,
            "interval": [v.ci_low, v.ci_high], "df": len(self.boards) - 1,
            "boards": [{"board": b, "estimate": e, "runs": n} for b, e, n in self.boards],
            "boards_differ": self.differ, "f_test_p": self.p,
            "board_sd": None if sd is None else {"sd": sd.sd, "low": sd.low, "high": sd.high},
            "runs_holding_estimate": self.held, "runs": self.runs, "text": self.text(v),
        }  # fmt: skip


@dataclass
class Fleet:
    """A pool's word for its GPU model: ``boards`` {board: its sessions' names}; ``results``, the
    main and confirm comparisons each with its verdict over boards (method "boards"), their
    ``checks`` by id, and the recommendation from them."""

    model: str
    boards: dict[str, list[str]]
    results: list[ComparisonResult]
    checks: dict[str, BoardCheck]
    recommendations: list[Recommendation]

    def holds_for(self) -> str:
        return words.holds_for_boards(len(self.boards), self.model)

    def text(self, r: ComparisonResult) -> str:
        return self.checks[r.id].text(r.verdict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "boards": self.boards, "holds_for": self.holds_for(),
            "comparisons": [self.checks[r.id].to_dict(r.verdict) for r in self.results],
            "recommendations": [r.to_dict() for r in self.recommendations],
        }  # fmt: skip


def board_level(
    row: PooledComparison, m: float, conf: float, fit: Fit | None = None, rule: str = RULE
) -> tuple[Verdict, BoardCheck]:
    """``row`` over its boards (two or more: ``row.board_groups()``) at minimum effect ``m``:
    its verdict on the interval over boards, by ``rule`` (the sessions'), and the check beside
    it."""
    v = unit_verdict(row.board_logs(), m, conf, method="boards", pairs=sum(row.pairs), rule=rule)
    spread = row.board_spread()
    estimates = {k: (e, n) for k, e, n in spread[0]} if spread else {}
    boards = tuple(
        (k, estimates.get(k, (v.median, len(idx)))[0], len(idx))
        for k, idx in row.board_groups().items()
    )
    p = None if spread is None or not math.isfinite(spread[1]) else spread[1]  # NaN: no pairs
    held = sum(lo <= v.median <= hi for lo, hi in row.cis)
    sd = None if fit is None else next((c for c in fit.components if c.level == "board"), None)
    return v, BoardCheck(row.id, boards, p, held, len(row.medians), sd)


def models(pool: Pool) -> list[str]:
    """The GPU models of a pool's sessions, keyed as an engine keys them (decision.device_key)."""
    return sorted({device_key(s.gpu_name) if s.gpu_name else "?" for s in pool.sessions})


def fleet(pool: Pool, fits: dict[str, Fit | None] | None = None) -> Fleet | None:
    """The model's word of ``pool``; None where its sessions ran on fewer than two known boards
    or on several GPU models (no one model to speak for). ``fits``: REML fits by comparison id
    (``PooledComparison.components``), for the board SD."""
    if not pool.rows:
        return None
    groups = pool.rows[0].board_groups()
    known = len(models(pool)) == 1 and "?" not in models(pool) and "?" not in groups
    if len(groups) < 2 or not known:
        return None
    rules = {session_rule(s) for s in pool.sessions}
    rule = rules.pop() if len(rules) == 1 else RULE  # old sessions pooled read as they did
    results, checks = [], {}
    for r in pool.rows:
        if r.role not in ROLES:
            continue
        first = pool.first[r.id]
        v, checks[r.id] = board_level(
            r, first.verdict.m, first.verdict.conf, (fits or {}).get(r.id), rule
        )
        results.append(replace(first, verdict=v))
    reasons = {r.id: checks[r.id].text(r.verdict) for r in results}
    names = [s.name for s in pool.sessions]
    boards = {k: [names[i] for i in idx] for k, idx in groups.items()}
    recs = list(recommendations(results, reasons).values())
    return Fleet(models(pool)[0], boards, results, checks, recs)
