"""The command palette's provider: the workbench's main actions, searchable by name."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

# (palette text, help, app action). The same actions the key bindings run.
ACTIONS: tuple[tuple[str, str, str], ...] = (
    ("Build all variants", "Compile every variant (cache hits are instant)", "build"),
    ("Run A/B", "Time A against B with the form's configuration", "run"),
    ("Cancel", "Cancel the build or run in progress; measured samples are kept", "cancel"),
    ("Show compiler log", "The highlighted variant's compiler output", "compiler_log"),
    ("Open session", "Open the highlighted saved session in the Results tab", "open_session"),
    ("Compare sessions", "Compare the marked session with the highlighted one", "compare"),
    ("Export plots and report", "Write the open session's plots and Markdown report", "export"),
    ("Hardware counters", "The open session's Nsight Compute counters, A beside B", "counters"),
    ("Rescan sessions", "Reload the list of saved sessions", "rescan"),
    ("Go to Build & run", "Variant matrix, run form and progress", "tab('run')"),
    ("Go to Results", "Results table and recommendation", "tab('results')"),
    ("Go to Sessions", "Saved sessions", "tab('sessions')"),
    ("Help", "What each panel shows and every key", "help"),
)


class WorkbenchCommands(Provider):
    """Offers ACTIONS; each runs the app action of the same name (disabled ones are skipped)."""

    def _enabled(self, action: str) -> bool:
        name = action.split("(")[0]
        return self.app.check_action(name, ()) is True

    async def discover(self) -> Hits:
        for text, help_text, action in ACTIONS:
            if self._enabled(action):
                yield DiscoveryHit(text, partial(self.app.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, action in ACTIONS:
            score = matcher.match(text)
            if score > 0 and self._enabled(action):
                yield Hit(
                    score,
                    matcher.highlight(text),
                    partial(self.app.run_action, action),
                    text=text,
                    help=help_text,
                )
