"""What a measuring engine writes into, and all it knows of whoever listens (docs/DESIGN.md §8).

The engine (workbench.measure.engine) holds a ``Sink`` and nothing else of the run: it journals
records, says notes and events, reports progress, hands back each finished comparison, and
polls ``cancel``. Inside a worker (workbench.run.worker_proc, in its own process or inline in
the run's) the sink sends every record to the runner, which owns the order of work and the one
merged journal; a tune's screening engine writes the tune's session through its runner.
Torch-free.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.analysis.model import ComparisonResult, comparison_result


def _ignore(*args: Any) -> None:
    return None


@dataclass
class Sink:
    """``record(type, **fields)`` journals one record and returns it; ``emit(kind, data)`` tells
    listeners (progress lines, the TUI); ``progress(p)`` gets abba.Progress after every sample;
    ``results`` collects each finished comparison as the analysis model's ``ComparisonResult``,
    built from the records the engine journaled (the builder a session's analysis uses)."""

    record: Callable[..., dict[str, Any]]
    emit: Callable[[str, Any], None] = _ignore
    progress: Callable[[Any], None] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    results: list[ComparisonResult] = field(default_factory=list)

    def note(self, text: str) -> None:
        self.record("note", text=text)
        self.emit("note", text)

    def result(
        self,
        cmp: dict[str, Any],
        samples: list[dict[str, Any]],
        gates: list[dict[str, Any]],
        m: float,
    ) -> ComparisonResult:
        """A finished comparison: its ``comparison`` record, samples and gates as journaled,
        judged with minimum effect ``m``."""
        res = comparison_result(cmp, samples, gates, m)
        self.results.append(res)
        self.emit("result", res)
        return res
