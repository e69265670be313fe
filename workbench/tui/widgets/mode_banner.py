"""The line under the header: the GPU the app found, or browse mode and why no runs (or builds)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from workbench.tui.backend import BuildStatus, GpuStatus


class ModeBanner(Static):
    """One line, or more where the reason runs longer than the terminal is wide: never cut."""

    def __init__(self, **kwargs) -> None:
        super().__init__("Checking for a GPU…", **kwargs)

    def show(self, gpu: GpuStatus, tools: BuildStatus | None) -> None:
        """``tools``: what the build probe said (None: not known)."""
        if gpu.available:
            self.update(Text.assemble(("GPU ", "bold"), gpu.name or "available", "  ", gpu.reason))
            self.set_class(False, "browse")
            return
        can_build = tools is not None and tools.available
        # what works first, then why runs do not: the banner wraps rather than cut it
        self.update(
            Text.assemble(
                ("Browse mode", "bold"),
                ": saved sessions and builds (b). No runs: "
                if can_build
                else ": saved sessions only. No runs: ",
                gpu.reason,
                "" if can_build else f"; no builds: {tools.reason if tools else 'unknown'}",
            )
        )
        self.set_class(True, "browse")
