"""Defects a newcomer hit in the TUI (issue 25, "TUI"), each pinned by a Pilot test, most at
80x24, the smallest terminal the workbench supports."""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from textual.widgets._footer import FooterKey  # noqa: E402
from tui_backend_double import drive, make_app, settle  # noqa: E402

from workbench.tui.backend import RatioPoint  # noqa: E402
from workbench.tui.engine import EngineBackend  # noqa: E402
from workbench.tui.screens.help import HELP  # noqa: E402
from workbench.tui.widgets.evidence import EvidencePanel  # noqa: E402
from workbench.tui.widgets.ratio_chart import RatioChart  # noqa: E402
from workbench.tui.widgets.results_table import ResultsTable  # noqa: E402
from workbench.tui.widgets.session_browser import SessionBrowser  # noqa: E402
from workbench.tui.widgets.variant_matrix import VariantMatrix  # noqa: E402

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

SMALL = (80, 24)


@drive
async def test_footer_shows_help_and_quit_at_80x24(roots):
    app, _ = make_app(roots)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        keys = {k.key: k for k in app.screen.query(FooterKey)}
        for key in ("question_mark", "q"):
            assert key in keys, sorted(keys)
            region = keys[key].region
            assert region.width > 0 and region.right <= SMALL[0], (key, region)


@drive
async def test_sessions_table_keeps_sources_and_recommendation_at_80x24(roots):
    app, _ = make_app(roots)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        table = app.query_one(SessionBrowser)
        x = 0
        starts = {}
        for col in table.ordered_columns:
            starts[col.key.value] = x
            x += col.get_render_width(table)
        visible = table.region.width
        assert starts["sources"] + 8 <= visible  # the digest, and STALE after it
        assert starts["recommendation"] + 16 <= visible, (starts, visible)


@drive
async def test_pagedown_and_end_reach_the_evidence_from_the_table(roots):
    """The recommendation is in view above the table; its evidence and the rule are at the end
    of the scrolling column below it, which the paging keys reach from the table."""
    app, _ = make_app(roots)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        app.open_session(roots[0])
        await settle(pilot)
        column = app.query_one("#results-scroll")
        table = app.query_one(ResultsTable)
        table.focus()
        await settle(pilot)
        assert column.max_scroll_y > 0  # the evidence is below the fold at 80x24
        start = column.scroll_y
        await pilot.press("pagedown")
        await settle(pilot)
        assert column.scroll_y > start
        await pilot.press("end")
        await settle(pilot)
        assert column.scroll_y == column.max_scroll_y
        evidence = app.query_one(EvidencePanel)
        assert evidence.region.height > 0 and evidence.region.y < app.screen.region.bottom
        assert app.focused is table  # the keys worked without leaving the table
        await pilot.press("home")
        await settle(pilot)
        assert column.scroll_y == 0


def test_help_names_every_key_the_app_binds():
    from workbench.tui.app import WorkbenchApp

    for b in WorkbenchApp.BINDINGS:
        key = b.key.split(",")[0]
        if key in ("ctrl+c", "question_mark", "f1", "1", "2", "3"):
            continue  # in the table as `q`, `ctrl+c`; `f1` `?`; `1` `2` `3`
        assert f"`{key}`" in HELP, key
    assert "| `t` |" in HELP
    assert "`pagedown`" in HELP and "`end`" in HELP and "`tab`" in HELP


def _labels(chart: RatioChart, width: int) -> list[str]:
    lines = [t.plain for t in chart.render_lines_text(width)]
    return [ln.split(" ")[0] for ln in lines[1 : 1 + len(chart.points)]]


def test_chart_labels_of_two_references_stay_distinct():
    chart = RatioChart()
    chart.points = [
        RatioPoint("w13/rotating (main)", 0.92, 0.91, 0.93, 0.01, "FASTER", method="blocks"),
        RatioPoint("w13/rotating/tinygemm (reference)", 0.04, 0.03, 0.05, 0.01, "FASTER"),
        RatioPoint("w13/rotating/triton-moe (reference)", 0.6, 0.59, 0.61, 0.01, "FASTER"),
    ]
    for width in (60, 80, 100):
        labels = _labels(chart, width)
        assert len(set(labels)) == 3, (width, labels)
        assert "tinygemm" in labels[1] or "tinyg" in labels[1], labels
        assert "triton-moe" in labels[2] or "moe" in labels[2], labels


@pytest.mark.parametrize(
    "method, marker, interval",
    [
        ("blocks", "geometric mean of the block medians", "95 % t-interval over blocks"),
        ("pairs", "median pair ratio", "95 % CI of the median over pairs (distribution-free)"),
    ],
)
def test_chart_legend_names_the_estimate_drawn(method, marker, interval):
    chart = RatioChart()
    chart.points = [RatioPoint("w13/hot", 0.95, 0.94, 0.96, 0.01, "FASTER", method=method)]
    legend = " ".join(t.plain for t in chart.render_lines_text(80)[2:])
    assert f"● {marker}" in legend and f"━ {interval}" in legend, legend
    if method == "blocks":
        assert "● median" not in legend


@drive
async def test_variant_matrix_names_each_variant(roots):
    app, _ = make_app(roots)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        matrix = app.query_one(VariantMatrix)
        assert matrix.ordered_columns[0].label.plain == "variant"
        names = [str(matrix.get_row_at(i)[0]) for i in range(matrix.row_count)]
        assert names == list(matrix.rows_by_name)


def test_engine_lists_calibration_builds_and_user_specs():
    rows = EngineBackend(browse_only=True).variants()
    names = [r.name for r in rows]
    assert any(n.endswith("+calib") for n in names), names
    assert len(set(names)) == len(names)
    from workbench.kernels.variants import all_variants

    assert names == [v.name for v in all_variants(calib=True, user=True)]


@drive
async def test_variant_matrix_with_the_longest_builtin_name_fits_80_columns():
    from textual.app import App

    from workbench.kernels.variants import all_variants
    from workbench.tui.backend import VariantRow

    class One(App):
        def compose(self):
            yield VariantMatrix()

    app = One()
    async with app.run_test(size=SMALL) as pilot:
        matrix = app.query_one(VariantMatrix)
        matrix.set_rows(
            [VariantRow(v.name, v.kernel, v.layout, v.reader) for v in all_variants(calib=True)]
        )
        await pilot.pause()
        assert any(n.endswith("+calib") for n in matrix.rows_by_name)
        assert matrix.virtual_size.width <= SMALL[0], matrix.virtual_size


@drive
async def test_the_run_form_takes_a_spec_file_for_either_arm(roots):
    """A user's kernel spec or Python arm (examples/) can be an arm from the TUI, as with
    `workbench ab --b FILE`: the spec field overrides its side's built-in arm, names a missing
    or non-spec file, and the run is given the file."""
    from pathlib import Path

    from textual.widgets import Input, Static
    from tui_backend_double import session_dirs, shown

    from workbench.store.session import load_session
    from workbench.tui.widgets.run_form import RunForm

    spec = Path(__file__).resolve().parent.parent / "examples" / "torch_arm" / "arm.toml"
    app, _ = make_app(roots)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        form = app.query_one(RunForm)
        assert (form.config().a, form.config().b) == ("b3-scalar", "b3-coop")
        field = app.query_one("#b-spec", Input)
        error = app.query_one("#form-error", Static)
        field.value = "nope.toml"
        await pilot.pause()
        assert "b-spec='nope.toml': no such file" in shown(error)
        field.value = str(spec.with_suffix(".py"))
        await pilot.pause()
        assert "must be a kernel or Python arm spec (.toml)" in shown(error)
        field.value = str(spec)
        await pilot.pause()
        assert shown(error).strip() == ""
        assert (form.config().a, form.config().b) == ("b3-scalar", str(spec))
        app.query_one("#pairs", Input).value = "1"
        app.query_one("#blocks", Input).value = "1"
        await pilot.press("r")
        await settle(pilot)
    (saved,) = session_dirs(roots[1])
    assert load_session(saved).config["b"] == str(spec)


@drive
async def test_a_spec_given_to_the_tui_shows_in_its_field(roots):
    from textual.widgets import Input, Select
    from tui_backend_double import ReplayBackend

    from workbench.tui.app import WorkbenchApp
    from workbench.tui.backend import RunConfig

    spec = "examples/w13_unroll4/variant.toml"
    app = WorkbenchApp(ReplayBackend(*roots), monitor_interval=None, config=RunConfig(b=spec))
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        assert app.query_one("#b", Select).value == "b3-coop"
        assert app.query_one("#b-spec", Input).value == spec
        assert app.query_one("#a-spec", Input).value == ""
