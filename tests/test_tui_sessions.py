"""The TUI's sessions, end to end with App.run_test() + Pilot against a backend replaying a session:
open, export and compare sessions, a corrupt session; and the engine adapter on a CPU machine
(listing, opening, build status, the analysis of a journal, replaying committed sessions).

CPU only. The replay double (tests/tui_backend_double.py) uses the real session writer, loader
and statistics; only probing, builds, runs and NVML are replayed.
"""

from __future__ import annotations

import threading

import pytest
from fixtures_sessions import representative_sessions

pytest.importorskip("textual")

from textual.widgets import TabbedContent  # noqa: E402
from tui_backend_double import (  # noqa: E402
    SIZE,
    SYNTHETIC_NAME,
    ReplayBackend,
    drive,
    make_app,
    settle,
    shown,
    status_text,
)

from workbench.core.errors import NoGPUError, SessionError  # noqa: E402
from workbench.store.session import load_session  # noqa: E402
from workbench.tui.analysis import view_from_session  # noqa: E402
from workbench.tui.backend import RunConfig  # noqa: E402
from workbench.tui.engine import EngineBackend  # noqa: E402
from workbench.tui.screens.compare import CompareScreen  # noqa: E402
from workbench.tui.widgets.results_view import ResultsView  # noqa: E402
from workbench.tui.widgets.session_browser import SessionBrowser  # noqa: E402
from workbench.tui.widgets.shift_cards import ShiftCards  # noqa: E402

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

# -------------------------------------------------------------------------------- sessions


def gate_export(backend: ReplayBackend) -> threading.Event:
    """Make ``backend``'s export wait until the returned event is set (60 s at most)."""
    gate = threading.Event()
    real_export = backend.export

    def gated_export(path):
        gate.wait(timeout=60)
        return real_export(path)

    backend.export = gated_export
    return gate


@drive
async def test_open_export_and_compare_sessions(roots):
    source, sessions, plots = roots
    app, backend = make_app(roots)
    # The export waits for this gate, so "still running while the UI answers" does not depend on
    # how fast matplotlib is on the machine (a fast one finished before the check).
    gate = gate_export(backend)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")  # a second session to compare with
        await settle(pilot)
        await pilot.press("3")
        browser = app.query_one(SessionBrowser)
        browser.focus()
        await pilot.pause()
        names = [i.name for i in browser.infos.values()]
        assert names[-1] == SYNTHETIC_NAME and len(names) == 2
        await pilot.press("down", "enter")  # open the synthetic one
        await settle(pilot)
        view = app.query_one(ResultsView).view
        assert view.info.path == source
        assert {r.kernel: r.choice for r in view.recommendations if r.kernel != "step"} == {
            "w13": "b3-coop",
            "w2": "b3-scalar",
        }
        await pilot.press("e")
        # the export (matplotlib, seconds) runs in a worker: the UI keeps answering meanwhile
        await pilot.press("1")
        assert app.query_one(TabbedContent).active == "run"
        assert any(w.group == "export" and not w.is_finished for w in app.workers)
        gate.set()
        await settle(pilot)
        report = plots / f"{SYNTHETIC_NAME}_report.md"
        text = report.read_text()
        assert "w2/rotating" in text and "**SLOWER**" in text
        pngs = sorted(plots.glob(f"{SYNTHETIC_NAME}_*.png"))
        assert len(pngs) >= 4 and all(p.stat().st_size > 10_000 for p in pngs)
        assert f"Exported {2 * len(pngs)} plots" in status_text(app)
        await pilot.press("3")
        browser.focus()
        await pilot.press("m", "up", "x")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        table = app.screen.view.table
        assert "w13/hot" in [table.cell(row, "comparison") for row in table.rows]
        assert "B-A" in table.header("shift")
        assert "w13/hot" in shown(app.screen.query_one(ShiftCards))
        await pilot.press("escape")


@drive
async def test_ctrl_c_during_an_export_waits_for_it_on_screen_then_exits_130(roots):
    """Ctrl-C while the export is written: the app used to restore the terminal and leave it
    blank until the export's thread ended (issue 33). Now the screen stays up, says what it
    waits for, and the app exits once the export is written."""
    source, _, plots = roots
    app, backend = make_app(roots)
    gate = gate_export(backend)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session(source)
        await settle(pilot)
        await pilot.press("e", "ctrl+c")
        await pilot.pause()
        assert app.is_running and "Quitting once the export is written" in status_text(app)
        gate.set()
        await settle(pilot)
        assert not app.is_running
    assert app.return_code == 130
    assert (plots / f"{SYNTHETIC_NAME}_report.md").is_file()


@drive
async def test_corrupt_session_shows_an_error_not_a_crash(roots):
    source, sessions, _ = roots
    bad = sessions / "20261129T130000Z_truncated"
    bad.mkdir()
    (bad / "session.json").write_text('{"schema": "workbench.session/1", "status": "comp')
    (bad / "journal.jsonl").write_text("")
    app, _ = make_app(roots)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        browser = app.query_one(SessionBrowser)
        infos = {i.name: i for i in browser.infos.values()}
        assert infos[bad.name].status == "unreadable"
        assert "truncated or not JSON" in infos[bad.name].error
        await pilot.press("3")
        browser.focus()
        row = list(browser.infos).index(str(bad))
        browser.move_cursor(row=row)
        await pilot.press("enter")
        await settle(pilot)
        assert app.is_running
        assert "Cannot open" in status_text(app) and "truncated" in status_text(app)
        assert app.query_one(ResultsView).view is None
        # the app still works: the good session opens
        browser.move_cursor(row=list(browser.infos).index(str(source)))
        await pilot.press("enter")
        await settle(pilot)
        assert app.query_one(ResultsView).view.info.path == source


# ------------------------------------------------------------------ engine adapter on CPU


def test_engine_backend_on_a_cpu_machine(roots):
    source, sessions, plots = roots
    bad = sessions / "20261129T130000Z_foreign"
    bad.mkdir()
    (bad / "session.json").write_text('{"not": "a session"}')
    backend = EngineBackend(sessions, plots)
    status = backend.gpu_status()
    assert status.available is False and status.reason
    assert EngineBackend(sessions, plots, browse_only=True).gpu_status().reason == (
        "started with --browse"
    )
    if backend.monitor_reading() is None:  # no NVML on CI machines: said, not raised
        assert backend.monitor_note().startswith("NVML unavailable")
    listed = {i.name: i for i in backend.sessions()}
    assert listed[SYNTHETIC_NAME].status == "complete"
    assert listed[SYNTHETIC_NAME].gpu == "NVIDIA H200 (synthetic)"
    assert listed[bad.name].status == "unreadable" and "foreign" in listed[bad.name].error
    with pytest.raises(SessionError, match="foreign"):
        backend.open_session(bad)
    # the form's configuration is accepted by the runner, which then says there is no GPU
    with pytest.raises(NoGPUError, match="no usable GPU"):
        backend.run(RunConfig(pairs=6), lambda e: None, lambda: False)


def test_engine_backend_build_status_needs_nvcc_alone(roots, monkeypatch):
    from workbench.kernels import build

    _, sessions, plots = roots
    backend = EngineBackend(sessions, plots, browse_only=True)  # browsing still builds
    monkeypatch.setattr(build, "cuda_home", lambda: "/opt/cuda-test")
    monkeypatch.setattr(build, "target_arch", lambda: "9.0")
    status = backend.build_status()
    assert status.available and "nvcc in /opt/cuda-test, for sm_90" in status.reason
    monkeypatch.setattr(build, "cuda_home", lambda: None)
    status = backend.build_status()
    assert not status.available and "no CUDA toolkit found" in status.reason


def test_analysis_recomputes_verdicts_from_the_journal(roots):
    source = roots[0]
    view = view_from_session(load_session(source))
    rows = {r.id: r for r in view.rows}
    assert {k: r.verdict_words for k, r in rows.items()} == {
        "w13/hot": "FASTER",
        "w13/rotating": "FASTER",
        "w2/hot": "SLOWER",
        "w2/rotating": "SLOWER",
        "step/rotating": "FASTER",
    }
    # true effects written into the synthetic journal: 0.93, 0.92, 1.11, 1.12, 0.96
    for cmp_id, ratio in (("w13/hot", 0.93), ("w2/rotating", 1.12), ("step/rotating", 0.96)):
        v = rows[cmp_id].verdict
        assert v.ci_low < ratio * 1.01 and v.ci_high > ratio * 0.99
        assert abs(rows[cmp_id].b_ms / rows[cmp_id].a_ms - ratio) < 0.01
    assert abs(rows["w13/hot"].a_ms - 0.0912 * 1.002) < 0.001
    assert rows["w13/hot"].a_us_per_call == pytest.approx(rows["w13/hot"].a_ms * 1000 / 48)
    assert rows["w13/hot"].verdict.k_faster == 12 and rows["w2/hot"].verdict.k_faster == 0
    recs = {r.kernel: r for r in view.recommendations}
    assert recs["w13"].choice == "b3-coop" and recs["w2"].choice == "b3-scalar"
    assert len(recs["w13"].evidence) == 2 and recs["w13"].evidence[0].startswith("hot: FASTER")
    assert "slower in none" in view.rule


# one committed session of each kind (fixtures_sessions.representative_sessions): replaying all
# of them spent minutes on dozens of replicates of the same kinds
COMMITTED = [pytest.param(p / "session.json", id=p.name) for p in representative_sessions()] or [
    pytest.param(None, marks=pytest.mark.skip(reason="no session committed under sessions/"))
]


@pytest.mark.parametrize("meta", COMMITTED)
def test_replaying_a_committed_session_reproduces_its_results(meta, tmp_path):
    """Real sessions under sessions/ replayed through the app's run path give their own verdicts."""
    source = meta.parent
    original = view_from_session(load_session(source))
    pairs = max((s["pair"] for s in load_session(source).samples), default=0) + 1
    backend = ReplayBackend(source, tmp_path / "sessions", tmp_path / "plots")
    config = RunConfig(kernels=("w13", "w2", "step"), pairs=max(pairs, 2), blocks=1)
    events = []
    path = backend.run(config, events.append, lambda: False)
    replayed = backend.open_session(path)

    def key(rows):
        return [(r.id, r.verdict.n, r.verdict_words, r.verdict.median, r.verdict.ci_low,
                 r.verdict.ci_high) for r in rows]  # fmt: skip

    assert key(replayed.rows) == key(original.rows)
    assert [r.choice for r in replayed.recommendations] == [
        r.choice for r in original.recommendations
    ]
    assert events and events[-1].step == events[-1].steps
