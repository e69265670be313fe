"""Defects a newcomer hit in the browsing commands (issue 25, "CLI"), each pinned by a test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_sessions import REPO, write_session

from workbench.cli import main

REAL = REPO / "sessions"
BIG = "20261130T142955Z_calibrate-w13-trials"  # its `show` is far longer than a pipe's buffer


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    write_session(root, seed=3, slug="older")
    write_session(root, seed=4, slug="newer")
    return root


@pytest.mark.parametrize("command", ["report", "plot"])
def test_report_and_plot_take_the_bare_names_sessions_show_takes(
    sessions, tmp_path, capsys, command
):
    name = next(sessions.glob("*_newer")).name
    extra = ["--no-plots"] if command == "report" else ["--out", str(tmp_path / "p")]
    for arg in (name, "newer", name[:15] + "Z_new"):
        rc = main([command, arg, "--root", str(sessions), *extra])
        out, err = capsys.readouterr()
        assert rc == 0, err
        assert name in out
    rc = main([command, "nothing-like-it", "--root", str(sessions), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and "'nothing-like-it' not found" in err and len(err.splitlines()) == 1
    rc = main([command, "_", "--root", str(sessions), *extra])
    assert rc == 2 and "ambiguous" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["sessions", "show", BIG, "--root", str(REAL)],
        ["sessions", "list", "--json", "--root", str(REAL)],
        ["sessions", "show", "--json", BIG, "--root", str(REAL)],
    ],
)
def test_piping_into_head_gives_no_traceback(argv):
    """`| head -1` that has already left: every write to stdout meets a closed pipe."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first byte (deterministic, unlike a real head)
    p = subprocess.run(
        [sys.executable, "-m", "workbench", *argv], stdout=w, stderr=subprocess.PIPE, cwd=REPO
    )
    os.close(w)
    err = p.stderr.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert err == "" and p.returncode == 141


@pytest.mark.parametrize("value", ["0", "0.5", "0.7", "2", "-0.01", "nan", "inf"])
def test_min_effect_has_one_rule_everywhere(sessions, capsys, value):
    """ab, calibrate and tune --min-effect and sessions show/compare/pool --m: (0, 0.5)."""
    name = next(sessions.glob("*_newer")).name
    for argv, option in (
        (["ab", "--min-effect", value], "--min-effect"),
        (["calibrate", "--min-effect", value], "--min-effect"),
        (["sessions", "show", name, "--root", str(sessions), "--m", value], "--m"),
        (["sessions", "compare", name, name, "--root", str(sessions), "--m", value], "--m"),
    ):
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2, (argv, err)
        assert f"{option} {float(value)!r} must be a fraction in (0, 0.5)" in err, (argv, err)
        assert "above" not in err and len(err.splitlines()) == 1


def test_min_effect_inside_the_rule_is_taken(sessions, capsys):
    name = next(sessions.glob("*_newer")).name
    assert main(["sessions", "show", name, "--root", str(sessions), "--m", "0.49"]) == 0
    assert "m = 49 %" in capsys.readouterr().out
