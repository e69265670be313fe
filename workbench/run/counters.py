"""Hardware counters after a complete run (`RunSettings.counters`, `workbench ab --counters`):
Nsight Compute profiles one launch of A and one of B per w13/w2 main comparison, in processes of
its own, into the session's counters.json (docs/KERNELS.md "Hardware counters"). The CLI and the
TUI's run entry both call `record`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def record(cfg: Any, session_path: Path, ncu_path: str, say: Callable[[str], Any]) -> list[str]:
    """Profile ``cfg``'s A and B (the runner's RunConfig, arms as given in ``cfg.extra``) into
    ``session_path``; return the lines to show: the notes, the tables A beside B and the file.
    ``say`` gets ncu's progress. Raises ncu.CountersUnavailable (exit 3) or ncu.CountersFailed."""
    from workbench.analysis.counters import text_lines
    from workbench.measure import counters
    from workbench.store import counters as stored

    items, notes = counters.plan(cfg.comparisons, cfg.extra["a"], cfg.extra["b"])
    lines = [f"counters: {note}" for note in notes]
    if not items:
        return [*lines, "counters: no w13/w2 comparison of kernel arms to profile"]
    if cfg.checkpoint is not None:
        lines.append("counters: synthetic banks of the run's shape, not the checkpoint's")
    doc = counters.collect(session_path, cfg.shape, cfg.seed, items, ncu_path, say=say)
    path = stored.save(session_path, doc)
    return [*lines, *text_lines(stored.load(session_path)), f"counters: {path}"]
