"""A session's hardware counters (`ab --counters`), A beside B: Markdown and its tables."""

from __future__ import annotations

from pathlib import Path

from workbench.core.errors import WorkbenchError
from workbench.tui.screens.tables import TablesScreen


class NoCounters(WorkbenchError):
    """The session was run without ``--counters``."""


class CountersScreen(TablesScreen):
    @classmethod
    def of(cls, path: Path) -> CountersScreen:
        """The screen of the session folder ``path``; `NoCounters` where it has none, the
        loader's `WorkbenchError` where its counters.json is unreadable."""
        from workbench.analysis.counters import markdown_lines
        from workbench.store import counters

        doc = counters.load(path)
        if doc is None:
            raise NoCounters(
                f"{path.name} has no counters: `workbench ab --counters` records them."
            )
        return cls(f"Hardware counters: {path.name}", "\n".join(markdown_lines(doc)))
