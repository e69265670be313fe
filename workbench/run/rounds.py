"""The order of work of a command as data (docs/DESIGN.md §5.10): ``Round`` says what a round
measures, planned from the analysis of the session so far, and what the runner concludes from
it; ``AB_ROUNDS`` is `workbench ab`'s and `workbench calibrate`'s (the plan, the recommendation,
its step confirmation); a tune's rounds are workbench.tune.tuner's. workbench.run.runner walks them;
the functions here take that Runner as ``r`` (typed Any: the runner imports this module).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.measure.plan import ComparisonSpec
    from workbench.run.pool import Outcome


def _nothing(r: Any, an: Any, outcomes: tuple[Outcome, ...]) -> None:
    return None


@dataclass(frozen=True)
class Round:
    """One round of a command's order of work: its name (``pool.ROUND_GROUP``), the comparisons
    it measures, planned from the analysis of the session so far (None before the first
    round; none planned: the round is passed over), what a failed gate does there ("stop" the
    run, or "exclude" its group), and what the runner concludes from it (``done``: the analysis
    after it and the round's outcomes); ``split``: see the field."""

    name: str
    plan: Callable[[Any, Any], list[ComparisonSpec]]
    numerics: str = "stop"
    done: Callable[[Any, Any, tuple[Outcome, ...]], None] = _nothing
    split: bool = False  # share the groups out, each measured by one worker (a tune's screen)
    # with `ab --settle`: looked at again, as many workers more a look, while a label of its
    # main comparisons is undecided (Runner.settle, workbench.core.sequential)
    settles: bool = False


def _plan_main(r: Any, an: Any) -> list[ComparisonSpec]:
    return list(r.cfg.comparisons)


def _recommend(r: Any, an: Any, outcomes: tuple[Outcome, ...]) -> None:
    """The recommendation from the main round (the analysis model's rule), said."""
    if not r.go_on():
        return
    r.recommendations = an.recommendations
    for rec in an.recommendations.values():
        r.emit("recommendation", rec)


def _plan_confirm(r: Any, an: Any) -> list[ComparisonSpec]:
    return r.confirmation_plan(an.results)


# `workbench ab` and `workbench calibrate`: the plan, the recommendation, its step confirmation
AB_ROUNDS = (
    Round("main", _plan_main, done=_recommend, settles=True),
    Round("confirm", _plan_confirm),
)
