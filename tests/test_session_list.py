"""What `sessions list`, `show`, `report`, `pool` and the TUI browser say about each session:
newest first, commit, kernel-source digest, STALE when csrc/ changed since, recommendation."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.kernels.build import source_hashes
from workbench.store.provenance import source_digest
from workbench.store.session import SessionWriter

RECS = {
    "w13": {"kernel": "w13", "decision": "cooperative", "arm": "b3-coop"},
    "w2": {"kernel": "w2", "decision": "scalar", "arm": "b3-scalar"},
}


def write(root: Path, slug: str, files: dict | None, recs: dict | None = None) -> Path:
    prov = {"version": "0.1.0", "git": {"commit": "abcdef1234567890", "dirty": slug == "stale"}}
    if files is not None:
        prov["files"] = files
    w = SessionWriter(root, slug, {"m": 0.01, "calls": 48}, prov, {"gpu": {"name": "NVIDIA H200"}})
    cmp = dict(kernel="w13", set="hot", role="main", a="b3-scalar", b="b3-coop", calls=48)
    w.record("comparison", id="w13/hot", replays=20, **cmp)
    for p in range(6):
        for slot, arm in enumerate("ABBA" if p % 2 == 0 else "BAAB"):
            ms = (0.5 if arm == "A" else 0.46) * (1 + 0.001 * (p + slot))
            w.record("sample", cmp="w13/hot", pair=p, slot=slot, arm=arm, ms=ms)
    w.finish(summary={"recommendations": recs} if recs else {})
    return w.path


@pytest.fixture
def root(tmp_path: Path) -> dict[str, Path]:
    now = source_hashes()
    paths = {
        "fresh": write(tmp_path, "fresh", now, RECS),
        "stale": write(tmp_path, "stale", {**now, "csrc/w2.cu": "0" * 64}),
        "unhashed": write(tmp_path, "unhashed", None),
    }
    bad = tmp_path / "20200101T000000Z_bad"
    bad.mkdir()
    (bad / "session.json").write_text('{"schema": "workbench.session/1", "status": [1]}')
    return paths


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_list_columns_newest_first(root, capsys):
    rc, out, err = run(capsys, "sessions", "list", "--root", str(root["fresh"].parent))
    assert rc == 0
    rows = [re.split(r"\s{2,}", line) for line in out.splitlines()]
    assert [r[0] for r in rows[1:4]] == [root[k].name for k in ("unhashed", "stale", "fresh")]
    fresh, stale, unhashed = rows[3], rows[2], rows[1]
    digest = source_digest(source_hashes())
    assert fresh[2:] == [
        "complete",
        "NVIDIA H200",
        "abcdef1234",
        digest,
        "w13 cooperative, w2 scalar",
    ]
    assert stale[4] == "abcdef1234+" and stale[5].endswith(" STALE") and digest not in stale[5]
    assert unhashed[5] == "?" and unhashed[6] == "-"
    assert out.splitlines()[-1].startswith("STALE: kernel sources (csrc/) differ")
    assert err.count("\n") == 1 and "skipped 20200101T000000Z_bad" in err and "status" in err


def test_list_json(root, capsys):
    rc, out, _ = run(capsys, "sessions", "list", "--root", str(root["fresh"].parent), "--json")
    js = json.loads(out)
    by = {s["slug"]: s for s in js["sessions"]}
    assert by["fresh"]["stale"] == [] and by["stale"]["stale"] == ["csrc/w2.cu"]
    assert by["unhashed"]["stale"] is None and by["unhashed"]["sources"] is None
    assert by["fresh"]["recommendations"] == {"w13": "cooperative", "w2": "scalar"}
    assert [s["slug"] for s in js["sessions"]] == ["unhashed", "stale", "fresh"]
    assert len(js["skipped"]) == 1


def test_show_and_report_state_staleness_in_one_line(root, capsys):
    rc, out, _ = run(capsys, "sessions", "show", str(root["stale"]))
    line = next(ln for ln in out.splitlines() if ln.startswith("sources"))
    assert line.endswith("STALE: kernel sources differ from the working tree: csrc/w2.cu")
    rc, out, _ = run(capsys, "sessions", "show", str(root["fresh"]))
    assert "kernel sources match the working tree" in out
    rc, out, _ = run(capsys, "sessions", "show", "--json", str(root["stale"]))
    assert json.loads(out)["stale"] == ["csrc/w2.cu"]
    rc, out, _ = run(capsys, "report", str(root["stale"]), "--no-plots")
    assert rc == 0
    assert "**STALE: kernel sources differ from the working tree: csrc/w2.cu**" in out
    rc, out, _ = run(capsys, "report", str(root["unhashed"]), "--no-plots")
    assert "kernel sources unknown: the session recorded no csrc/ hashes." in out


def test_pool_refuses_a_session_with_itself(root, capsys):
    s = str(root["fresh"])
    for other in (s, s + "/session.json", s + "/"):
        rc, out, err = run(capsys, "sessions", "pool", s, other)
        assert rc == 2 and "cannot be its own replicate" in err and len(err.splitlines()) == 1


def test_pool_skips_a_bad_session_with_one_warning(root, capsys, tmp_path):
    bad = root["fresh"].parent / "20200101T000000Z_bad"
    # a replicate of the same sources (pool refuses different ones, as export does)
    twin = shutil.copytree(root["fresh"], tmp_path / "20200102T000000Z_twin")
    rc, out, err = run(capsys, "sessions", "pool", str(root["fresh"]), str(bad), str(twin))
    assert rc == 0 and root["fresh"].name in out and twin.name in out, err
    assert [ln for ln in err.splitlines() if "skipped" in ln] == [
        f"workbench sessions pool: skipped: {bad / 'session.json'}: unknown status [1] "
        "(known: running, complete, interrupted, failed)"
    ]
    rc, out, err = run(capsys, "sessions", "pool", str(root["fresh"]), str(bad))
    assert rc == 2 and "at least 2 loadable sessions, got 1 of 2" in err


@pytest.mark.slow  # 2 s of the fast lane on the 2-core machine
def test_tui_browser_shows_commit_sources_stale_and_recommendation(root, tmp_path):
    pytest.importorskip("textual")
    from tui_backend_double import ReplayBackend

    from workbench.tui.app import WorkbenchApp
    from workbench.tui.widgets.session_browser import SessionBrowser

    sessions = root["fresh"].parent
    backend = ReplayBackend(root["fresh"], sessions, tmp_path / "plots", gpu=False, nvml=False)
    app = WorkbenchApp(backend, monitor_interval=None)

    async def drive() -> None:
        async with app.run_test(size=(200, 40)) as pilot:
            for _ in range(4):
                await pilot.app.workers.wait_for_complete()
                await pilot.pause()
            browser = app.query_one(SessionBrowser)
            keys = list(browser.infos)
            order = [root[k] for k in ("unhashed", "stale", "fresh")]
            assert keys[:3] == [str(p) for p in order]  # newest first, bad folder last
            cells = {k: [str(c) for c in browser.get_row(k)] for k in keys}
            fresh, stale = cells[str(root["fresh"])], cells[str(root["stale"])]
            unhashed = cells[str(root["unhashed"])]
            # mark, session, status, sources, recommendation, when, GPU, commit (issue 25: what
            # decides first, so that 80 columns show it)
            # mark, date, session, recommendation, status, sources, shape, GPU, commit, ...
            # (issue 46: the recommendation whole at 80 columns beside the longest slug)
            assert fresh[2] == "fresh" and fresh[8] == "abcdef1234"
            assert fresh[5] == source_digest(source_hashes())
            assert fresh[3] == "w13 cooperative, w2 scalar"
            assert stale[8] == "abcdef1234+" and stale[5].endswith(" STALE")
            assert unhashed[5] == "?"
            bad = browser.infos[keys[3]]
            assert bad.status == "unreadable" and "unknown status" in bad.error
            assert "1 unreadable session folder(s) skipped" in str(app.query_one("#status").content)
            # the error whole in a notice (issue 46: the status line cut it after the name)
            shown = [str(n.message) for n in app._notifications]
            assert any(bad.error in m and bad.name in m for m in shown), shown
            # an opened stale session says so among its notes
            app.open_session(root["stale"])
            for _ in range(3):
                await pilot.app.workers.wait_for_complete()
                await pilot.pause()
            from workbench.tui.widgets.results_view import ResultsView

            notes = app.query_one(ResultsView).view.notes
            assert notes[0] == "STALE: kernel sources differ from the working tree: csrc/w2.cu"

    asyncio.run(drive())


def test_a_truncated_journal_is_partial_not_complete(tmp_path, capsys):
    """A copy cut short at a line boundary (no half line to warn about) still says 'complete' in
    session.json: the listing and `show` compare the samples with the planned count."""
    import shutil

    from fixtures_sessions import REPO

    name = "20261202T003535Z_default-r1"  # 18 comparisons of 6 blocks x 2 pairs: 864 samples
    root = tmp_path / "sessions"
    shutil.copytree(REPO / "sessions" / name, root / name)
    journal = root / name / "journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    cut = [i for i, ln in enumerate(lines) if '"type": "sample"' in ln][218]
    journal.write_text("".join(lines[:cut]))  # the first 218 samples
    assert main(["sessions", "list", "--root", str(root)]) == 0
    out = capsys.readouterr()
    assert "partial" in out.out and "complete" not in out.out, out.out
    assert main(["sessions", "show", name, "--root", str(root)]) == 0
    out = capsys.readouterr()
    assert f"{name}  (partial)" in out.out, out.out
    assert "218 of the 864 samples" in out.out + out.err
    whole = tmp_path / "whole"
    shutil.copytree(REPO / "sessions" / name, whole / name)
    assert main(["sessions", "list", "--root", str(whole)]) == 0
    assert "complete" in capsys.readouterr().out  # the untouched copy stays complete
