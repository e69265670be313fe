"""The order of work of a command as data (docs/DESIGN.md §5.10): ``Round`` says what a round
measures, planned from the analysis of the session so far, and what the runner concludes from
it; ``AB_ROUNDS`` is `workbench ab`'s and `workbench calibrate`'s (the plan, the recommendation,
its step confirmation). A command hands the runner (workbench.run.runner.Runner) its ``Work``:
its rounds and the hooks the runner calls (``AB_WORK``; a tune's is workbench.tune.tuner.Tune).
Rounds and hooks see the runner only as a ``Host``, the narrow protocol of what they may ask of
it (tests/test_round_host.py drives them through a host that has nothing else).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from workbench.analysis.recommend import Recommendation
    from workbench.measure.plan import ComparisonSpec
    from workbench.run.config import RunConfig
    from workbench.run.messages import Group
    from workbench.run.pool import Outcome, Pool
    from workbench.run.worker_proc import WorkerJob


class Host(Protocol):
    """What a round's functions and a command's hooks may ask of the runner that walks them."""

    cfg: RunConfig  # the run's resolved configuration
    cancel: threading.Event  # the run's Ctrl-C
    recommendations: Mapping[str, Recommendation]  # the run's, as said (``recommend``)

    def go_on(self) -> bool:
        """Not cancelled, no fault that lost this process's GPU, no numerics failure."""
        ...

    def emit(self, kind: str, data: Any) -> None:
        """Tell the run's listeners (progress lines, the TUI)."""
        ...

    def note(self, text: str) -> None:
        """A note of the run: journaled and said."""
        ...

    def record(self, type: str, **fields: Any) -> dict[str, Any] | None:
        """One record into the session (``Work.keep_early``: kept until it opens)."""
        ...

    def errors(self) -> list[str]:
        """What the failed workers said, each naming its worker."""
        ...

    def recommend(self, recs: Mapping[str, Recommendation]) -> None:
        """The run's recommendations, each said ("recommendation")."""
        ...

    def confirmation_plan(self, results: list[Any]) -> list[ComparisonSpec]:
        """The step comparisons of the recommended mix against the all-A baseline."""
        ...

    def session_path(self) -> Path | None:
        """The session's folder, None before a worker opened it."""
        ...


def _nothing(r: Host, an: Any, outcomes: tuple[Outcome, ...]) -> None:
    return None


@dataclass(frozen=True)
class Round:
    """One round of a command's order of work: its name (``pool.ROUND_GROUP``), the comparisons
    it measures, planned from the analysis of the session so far (None before the first
    round; none planned: the round is passed over), what a failed gate does there ("stop" the
    run, or "exclude" its group), and what the runner concludes from it (``done``: the analysis
    after it and the round's outcomes); ``split``: see the field."""

    name: str
    plan: Callable[[Host, Any], list[ComparisonSpec]]
    numerics: str = "stop"
    done: Callable[[Host, Any, tuple[Outcome, ...]], None] = _nothing
    split: bool = False  # share the groups out, each measured by one worker (a tune's screen)
    # with `ab --settle`: looked at again, as many workers more a look, while a label of its
    # main comparisons is undecided (Runner.settle, workbench.core.sequential)
    settles: bool = False


def _plan_main(r: Host, an: Any) -> list[ComparisonSpec]:
    return list(r.cfg.comparisons)


def _recommend(r: Host, an: Any, outcomes: tuple[Outcome, ...]) -> None:
    """The recommendation from the main round (the analysis model's rule), said."""
    if r.go_on():
        r.recommend(an.recommendations)


def _plan_confirm(r: Host, an: Any) -> list[ComparisonSpec]:
    return r.confirmation_plan(an.results)


# `workbench ab` and `workbench calibrate`: the plan, the recommendation, its step confirmation
AB_ROUNDS = (
    Round("main", _plan_main, done=_recommend, settles=True),
    Round("confirm", _plan_confirm),
)


class Work(Protocol):
    """What a command hands the runner: its rounds (data) and the hooks the runner calls at
    their points of a run, each given the runner as a ``Host``."""

    rounds: tuple[Round, ...]
    faults_fail: bool  # a worker's GPU fault fails the run (a tune excludes its candidate)
    worker_setup: Any  # ("module:function", kwargs) first in every worker; None: the runner's
    pool_ahead: bool  # the run's pool starts while the runner builds (else at its first round)
    keep_early: bool  # records made before the session opens are written once it does

    def pool_for(self, name: str) -> Pool | None:
        """Round ``name``'s own pool, or None: the run's."""
        ...

    def pools(self) -> list[Pool]:
        """The pools of its own it started (the runner asks and ends them with its own)."""
        ...

    def tags(self, o: Outcome) -> dict[str, Any]:
        """More fields on each of a worker's records as the runner journals them."""
        ...

    def on_hello(self, host: Host, job: WorkerJob, data: dict[str, Any]) -> None:
        """A worker said hello (after the runner opened the session from it, if it did)."""
        ...

    def on_group(
        self, host: Host, job: WorkerJob, hello: dict[str, Any] | None, group: Group
    ) -> None:
        """A group of a worker's share ended (a tune's candidate screened)."""
        ...

    def on_session(self, host: Host) -> None:
        """The session has just opened (the early records written)."""
        ...

    def summary(self, host: Host) -> dict[str, Any]:
        """More keys of the run's summary."""
        ...


@dataclass(frozen=True)
class AbWork:
    """`workbench ab`'s and `workbench calibrate`'s work: ``AB_ROUNDS``, no hooks."""

    rounds: tuple[Round, ...] = AB_ROUNDS
    faults_fail: bool = True
    worker_setup: Any = None
    pool_ahead: bool = True
    keep_early: bool = False  # a note before the session (while building) is said only

    def pool_for(self, name: str) -> Pool | None:
        return None

    def pools(self) -> list[Pool]:
        return []

    def tags(self, o: Outcome) -> dict[str, Any]:
        return {}

    def on_hello(self, host: Host, job: WorkerJob, data: dict[str, Any]) -> None:
        return None

    def on_group(
        self, host: Host, job: WorkerJob, hello: dict[str, Any] | None, group: Group
    ) -> None:
        return None

    def on_session(self, host: Host) -> None:
        return None

    def summary(self, host: Host) -> dict[str, Any]:
        return {}


AB_WORK = AbWork()
