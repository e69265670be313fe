"""Fuzz of every session command over corrupted copies of committed sessions (issue 15).

tests/session_fuzz.py makes each case (300+: type swaps, nulls, lists, NaN/inf/1e308/0/negative
values, truncated lines, missing files, foreign JSON, unknown schema, wrong kinds of ids, empty
journals, ...). Every case goes through the public CLI (`workbench.cli.main`, in-process, so an
uncaught exception fails the test with its traceback) with `sessions show`, `show --json`,
`report`, `plot`, `sessions compare` and `sessions pool`; `sessions list` and the TUI browser
(through Pilot) run over a folder holding all of them beside the good sessions. Asserted:

* no traceback and an exit code in the documented set {0, 2} (commands/sessions.py docstring);
* a rejected case exits 2 with ONE line that names the file and the bad field;
* a tolerated case exits 0 and prints no non-finite or out-of-range number (no "nan", "inf",
  "5.8e-309"): in JSON, every computed number is finite and ratios and times are in range;
* `list`, `pool` and the TUI skip a bad session with a one-line warning and keep every good one.

`plot` runs on every case. Rejected cases exit at load, before any figure, in every command.
Figures are drawn, as SVG (about 1.9 s a case), for the untouched base and every tolerated case except
those listed in session_fuzz.SAME_FIGURES, whose figure input equals that of a drawn case: they
change only fields no figure reads or records the loader sets aside, or the loader drops one NVML
reading, or two spellings of "nothing" (no readings, no records) meet.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from session_fuzz import BASE, CASES, SAME_FIGURES, Case
from session_fuzz_mutations import REPO, make_base

from workbench.cli import main
from workbench.store.session_schema import MS_RANGE

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

EXIT_CODES = {0, 2}  # documented in workbench/commands/sessions.py
GOOD = (BASE, "good-default-2", "good-calibrate")
REAL = sorted(p.name for p in (REPO / "sessions").iterdir() if (p / "session.json").is_file())


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """One folder with every case, three good trimmed bases and the committed sessions."""
    root = tmp_path_factory.mktemp("fuzz") / "sessions"
    bases = {k: make_base(k, root.parent / f"base-{k}") for k in ("default", "calibrate")}
    for name, kind in zip(GOOD, ("default", "default", "calibrate"), strict=True):
        shutil.copytree(bases[kind], root / name)
    for name in REAL:
        shutil.copytree(REPO / "sessions" / name, root / name)
    for case in CASES:
        d = root / case.name
        shutil.copytree(bases[case.base], d)
        case.mutate(d)
        assert _content(d) != _content(bases[case.base]), f"{case.name} changed nothing"
    return root


def _content(d: Path) -> dict[str, bytes | None]:
    return {p.name: p.read_bytes() if p.is_file() else None for p in sorted(d.iterdir())}


def cli(*argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit code, stdout, stderr). Exceptions propagate (tracebacks)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as e:  # argparse
            rc = e.code if isinstance(e.code, int) else 1
    o, e = out.getvalue(), err.getvalue()
    assert "Traceback" not in o + e
    assert rc in EXIT_CODES, (argv, rc, e)
    return rc, o, e


# ------------------------------------------------------------------------------ number checks

_WORD = re.compile(r"\b(nan|inf|infinity)\b", re.IGNORECASE)
_EXP = re.compile(r"\d[eE]([+-]?\d+)")
_HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
RATIO_KEYS = {"median", "ci_low", "ci_high", "ratios", "low", "high", "medians"}
MS_KEYS = {"a_ms", "b_ms"}


def bad_text_numbers(text: str, names: tuple[str, ...] = ()) -> list[str]:
    """Lines showing a non-finite or absurd number. Warning lines are skipped: they quote the
    bad value of the input on purpose (e.g. the NVML reading that was dropped). ``names``
    (session folders such as "sample-ms-nan") are blanked first."""
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, "<session>")
    # commit ids and source digests are hex, not numbers: "0d3e615" is no exponent of 615
    text = _HEX.sub("<hex>", text)
    out = []
    for line in text.splitlines():
        if re.search(r"warning|skipped", line, re.IGNORECASE):
            continue
        if _WORD.search(line) or any(abs(int(x)) >= 16 for x in _EXP.findall(line)):
            out.append(line)
    return out


def bad_json_numbers(obj: Any, key: str = "", where: str = "") -> list[str]:
    """Non-finite or out-of-range numbers in computed JSON ("meta" and "warnings" echo input)."""
    if isinstance(obj, dict):
        return [
            x
            for k, v in obj.items()
            if k not in ("meta", "warnings")
            for x in bad_json_numbers(v, k, f"{where}.{k}")
        ]
    if isinstance(obj, list):
        return [x for i, v in enumerate(obj) for x in bad_json_numbers(v, key, f"{where}[{i}]")]
    if isinstance(obj, bool) or not isinstance(obj, (int, float)):
        return []
    ok = math.isfinite(obj) and abs(obj) < 1e16 and (obj == 0 or abs(obj) > 1e-300)
    if key in RATIO_KEYS:
        ok = ok and 1e-6 <= obj <= 1e6
    if key in MS_KEYS:
        ok = ok and MS_RANGE[0] <= obj <= MS_RANGE[1]
    return [] if ok else [f"{where} = {obj!r}"]


def strict_json(text: str) -> Any:
    def no_constant(name: str) -> None:
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=no_constant)


def assert_rejected(case: Case, rc: int, err: str) -> None:
    file, field = case.expect
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, (case.name, rc, err)
    assert file in lines[0] and field in lines[0], (case.name, lines[0])


# -------------------------------------------------------------------------------- per case


def _files(path: str) -> Any:
    """The session's recorded kernel source hashes (what pooling compares)."""
    meta = json.loads((Path(path) / "session.json").read_text())
    return (meta.get("provenance") or {}).get("files") or {}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_command_on_a_corrupted_session(root: Path, tmp_path: Path, case: Case) -> None:
    path = str(root / case.name)
    good, good2 = str(root / GOOD[0]), str(root / GOOD[1])
    runs = {
        "show": cli("sessions", "show", path),
        "show --json": cli("sessions", "show", "--json", path),
        "report": cli("report", path, "--no-plots"),
        "compare": cli("sessions", "compare", path, good),
        "compare --json": cli("sessions", "compare", "--json", good, path),
    }
    if case.expect is not None:
        for rc, _, err in runs.values():
            assert_rejected(case, rc, err)
        rc, out, err = cli("plot", path, "--out", str(tmp_path / "plots"), "--format", "png")
        assert_rejected(case, rc, err)
        assert not (tmp_path / "plots").exists()  # nothing drawn from a bad session
    else:
        for name, (rc, out, err) in runs.items():
            assert rc == 0, (case.name, name, err)
            if name.endswith("--json"):
                assert bad_json_numbers(strict_json(out)) == [], (case.name, name)
            else:
                assert bad_text_numbers(out + err, (case.name,)) == [], (case.name, name)
    # pool: a bad replicate is skipped with one warning line; the good ones are still pooled
    rc, out, err = cli("sessions", "pool", path, good, good2)
    if case.expect is None and _files(path) != _files(good):
        # a readable session of other (or unrecorded) kernel sources: refused as export refuses
        # it (analysis.pool.check_poolable), in one line
        assert rc == 2 and len(err.splitlines()) == 1, (case.name, err)
        assert "different kernel sources" in err, (case.name, err)
        return
    assert rc == 0, (case.name, err)
    assert bad_text_numbers(out, (case.name,)) == []
    assert f"{GOOD[0]}" in out and f"{GOOD[1]}" in out
    skipped = [ln for ln in err.splitlines() if "skipped" in ln]
    if case.expect is not None:
        assert len(skipped) == 1 and case.expect[1] in skipped[0], (case.name, err)
        assert case.name not in out
    else:
        assert skipped == [] and case.name in out


DRAWN = [BASE] + [c.name for c in CASES if c.expect is None and c.name not in SAME_FIGURES]


def test_every_tolerated_case_is_drawn_or_has_a_drawn_twin() -> None:
    tolerated = {c.name for c in CASES if c.expect is None}
    assert set(SAME_FIGURES) <= tolerated
    assert set(SAME_FIGURES.values()) <= set(DRAWN)
    assert tolerated <= set(DRAWN) | set(SAME_FIGURES)


def _drawn(svg: Path) -> bool:
    """A whole SVG with something drawn on it: paths, or the text of a figure that says it has
    nothing to show (a samples figure of a comparison without samples is 4.5 kB)."""
    import xml.etree.ElementTree as ET

    tags = {el.tag.rsplit("}", 1)[-1] for el in ET.parse(svg).iter()}
    return svg.stat().st_size > 2_000 and bool(tags & {"path", "use", "text"})


@pytest.mark.slow
@pytest.mark.parametrize("name", DRAWN)
def test_plot_draws_a_tolerated_session(root: Path, tmp_path: Path, name: str) -> None:
    # SVG: every artist is drawn as for a PNG, without the rasterizing (1.9 s a case against
    # 2.4 s); tests/test_plots.py writes the PNGs of the synthetic sessions
    rc, out, err = cli("plot", str(root / name), "--out", str(tmp_path), "--format", "svg")
    assert rc == 0, err
    written = [Path(p) for p in out.split()]
    assert len(written) >= 4 and all(_drawn(p) for p in written), written
    assert bad_text_numbers(out + err, (name,)) == []


# ------------------------------------------------------------------------ over all sessions


def test_list_shows_every_good_session_beside_the_bad(root: Path) -> None:
    rc, out, err = cli("sessions", "list", "--root", str(root), "--json")
    assert rc == 0
    js = strict_json(out)
    listed = {Path(s["path"]).name: s for s in js["sessions"]}
    skipped = {Path(s["path"]).name: s["error"] for s in js["skipped"]}
    for name in (*GOOD, *REAL):
        assert name in listed and listed[name]["status"] == "complete"
    for case in CASES:
        if case.expect is None:
            assert case.name in listed, case.name
        elif (root / case.name / "session.json").exists():
            assert case.expect[1] in skipped[case.name], (case.name, skipped[case.name])
        else:  # no session.json: not a session at all, neither listed nor skipped
            assert case.name not in listed and case.name not in skipped
    rc, out, err = cli("sessions", "list", "--root", str(root))
    assert rc == 0 and bad_text_numbers(out, tuple(c.name for c in CASES)) == []
    warned = [ln for ln in err.splitlines() if ln.startswith("skipped ")]
    assert len(warned) == len(skipped)  # one line per bad folder
    assert all(name in out for name in (*GOOD, *REAL))


def test_tui_browser_shows_every_good_session_beside_the_bad(root: Path, tmp_path: Path) -> None:
    pytest.importorskip("textual")
    from tui_backend_double import ReplayBackend, screen_lines

    from workbench.tui.app import WorkbenchApp
    from workbench.tui.widgets.results_view import ResultsView
    from workbench.tui.widgets.session_browser import SessionBrowser

    backend = ReplayBackend(root / GOOD[0], root, tmp_path / "plots", gpu=False, nvml=False)
    app = WorkbenchApp(backend, monitor_interval=None)

    async def settle(pilot) -> None:
        for _ in range(4):
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()

    async def drive() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot)
            rows = {i.name: i for i in app.query_one(SessionBrowser).infos.values()}
            for name in (*GOOD, *REAL):
                assert rows[name].status == "complete", name
            for case in CASES:
                if case.expect is None:
                    assert rows[case.name].status != "unreadable", case.name
                elif (root / case.name / "session.json").exists():
                    assert rows[case.name].status == "unreadable", case.name
                    assert case.expect[1] in rows[case.name].error, case.name
            status = str(app.query_one("#status").content)
            assert "unreadable session folder(s) skipped" in status
            # every tolerated case opens in the results view
            for case in (c for c in CASES if c.expect is None):
                app.open_session(root / case.name)
                await settle(pilot)
                view = app.query_one(ResultsView).view
                assert view is not None and view.info.name == case.name, case.name
                shown = "\n".join(screen_lines(app))
                assert "w13" in shown or not view.rows, case.name  # the results are on screen
                assert bad_text_numbers(shown, (case.name,)) == [], case.name
            assert app.is_running

    asyncio.run(drive())
