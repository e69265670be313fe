"""The Build & run tab: the variant matrix across the pane; below it the run's progress beside
the run form."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll

from workbench.tui.backend import RunConfig
from workbench.tui.widgets.run_form import RunForm
from workbench.tui.widgets.run_progress import RunProgress
from workbench.tui.widgets.variant_matrix import VariantMatrix


class RunPane(Vertical):
    def __init__(self, config: RunConfig | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.config = config  # the form's first values (None: the defaults)

    def compose(self) -> ComposeResult:
        # the matrix spans the pane: its eight columns need ~70 cells
        yield VariantMatrix(id="variants")
        with Horizontal(id="run-lower"):
            yield RunProgress(id="progress")
            with VerticalScroll(id="form-scroll"):
                yield RunForm(self.config, id="form")
