"""The TUI without a GPU, a compiler or NVML (browse mode), and its NVML panel, end to end with
App.run_test() + Pilot against a backend replaying a session.

CPU only. The replay double (tests/tui_backend_double.py) uses the real session writer, loader
and statistics; only probing, builds, runs and NVML are replayed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from textual.widgets import Sparkline, Static, TabbedContent  # noqa: E402
from tui_backend_double import (  # noqa: E402
    SIZE,
    SYNTHETIC_NAME,
    drive,
    make_app,
    session_dirs,
    settle,
    shown,
    status_text,
)

from workbench.store.session import load_session  # noqa: E402
from workbench.tui.widgets.nvml_panel import NvmlPanel, short_reason  # noqa: E402
from workbench.tui.widgets.results_view import ResultsView  # noqa: E402
from workbench.tui.widgets.variant_matrix import VariantMatrix  # noqa: E402

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

# ------------------------------------------------------------------- browse mode and NVML


@drive
async def test_without_gpu_opens_in_browse_mode(roots):
    _, sessions, _ = roots
    app, backend = make_app(roots, gpu=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        banner = shown(app.query_one("#mode-banner", Static))
        assert "Browse mode" in banner and "no CUDA device" in banner and "builds (b)" in banner
        assert app.query_one(TabbedContent).active == "sessions"
        assert app.query_one("#run-button").disabled
        # r says why it cannot run instead of doing nothing
        await pilot.press("r")
        await settle(pilot)
        assert app.busy == "" and session_dirs(sessions) == []
        assert "Cannot run in browse mode: no CUDA device" in status_text(app)
        # b builds: compiling and the ptxas report need no GPU
        await pilot.press("b")
        await settle(pilot)
        assert len(backend.built) == 6 and "Build finished" in status_text(app)
        rows = app.query_one(VariantMatrix).rows_by_name.values()
        assert {r.state for r in rows} == {"built"}
        await pilot.press("o")  # browsing still works
        await settle(pilot)
        assert app.query_one(ResultsView).view.info.name == SYNTHETIC_NAME


@drive
async def test_without_a_compiler_b_says_why_it_cannot_build(roots):
    app, backend = make_app(roots, gpu=False, compiler=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "builds: no CUDA toolkit found" in shown(app.query_one("#mode-banner", Static))
        await pilot.press("b")
        await settle(pilot)
        assert app.busy == "" and backend.built == []
        assert "Cannot build: no CUDA toolkit found" in status_text(app)


@drive
async def test_nvml_unavailable_is_one_short_line(roots):
    app, _ = make_app(roots, nvml=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        panel = app.query_one(NvmlPanel)
        assert panel.available is False
        line = panel.query_one("#nvml-line", Static)
        assert shown(line).strip() == "NVML unavailable: library not found"
        assert "NVMLError_LibraryNotFound" in str(line.tooltip)  # the full reason, on hover
        assert not panel.query_one("#nvml-live").display
        # one line across the bottom of the body, not a fifth of the width
        assert (panel.region.width, panel.region.height) == (SIZE[0], 1)
        assert app.query_one(TabbedContent).region.width == SIZE[0]


@pytest.mark.parametrize(
    "reason, short",
    [
        (
            "NVML unavailable: NVMLError_LibraryNotFound: NVML Shared Library Not Found",
            "library not found",
        ),
        ("NVML unavailable: NVMLError_DriverNotLoaded: Driver Not Loaded", "driver not loaded"),
        ("NVML unavailable: NVMLError_NoPermission", "no permission"),
        (
            "NVML unavailable: pynvml (nvidia-ml-py) is not importable (No module named 'pynvml')",
            "pynvml (nvidia-ml-py) is not importable",
        ),
        (
            "workbench.measure.monitor unavailable: ImportError: boom",
            "workbench.measure.monitor unavailable",
        ),
        ("NVML unavailable: monitor stopped", "monitor stopped"),
    ],
)
def test_nvml_reasons_are_shortened_for_one_line(reason, short):
    assert short_reason(reason) == short


@drive
async def test_narrow_terminal_folds_the_gpu_panel_and_keeps_the_matrix_whole(roots):
    app, _ = make_app(roots)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.refresh_monitor()
        await settle(pilot)
        panel = app.query_one(NvmlPanel)
        assert (panel.region.width, panel.region.height) == (80, 1)
        line = shown(panel.query_one("#nvml-line", Static))
        assert "NVIDIA H200 (replay)" in line and "GiB" in line and "MHz" in line
        matrix = app.query_one(VariantMatrix)
        # every column of the matrix is in view: nothing cut ("ke/w1" in issue 15)
        assert matrix.virtual_size.width <= matrix.region.width
        assert matrix.region.height == 7  # header and six variants


@drive
async def test_nvml_panel_follows_readings(roots):
    source = roots[0]
    readings = load_session(source).nvml
    app, _ = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for _ in range(4):
            app.refresh_monitor()
            await settle(pilot, 2)
        panel = app.query_one(NvmlPanel)
        assert list(panel.query_one("#spark-sm-mhz", Sparkline).data) == [
            float(r["sm_mhz"]) for r in readings[:5]
        ]
        last = readings[4]
        clocks = shown(panel.query_one("#nvml-clocks", Static))
        assert f"SM {last['sm_mhz']} MHz" in clocks and f"{last['temp_c']} °C" in clocks
