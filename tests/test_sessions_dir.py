"""One name for the sessions folder (issue 57): `--sessions-dir` in every command that reads or
writes sessions, the names each command knew it by (`--root`, the TUI's `--sessions`) kept as
aliases; outside a checkout `sessions list` says where it looked and how to point it elsewhere."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from workbench.cli import build_parser, main, parse

REPO = Path(__file__).resolve().parent.parent
ONE = "20261205T161449Z_aa-r1"


@pytest.fixture
def root(tmp_path) -> Path:
    """A sessions folder of one committed session, away from the checkout's sessions/."""
    import shutil

    folder = tmp_path / "elsewhere"
    shutil.copytree(REPO / "sessions" / ONE, folder / ONE)
    return folder


def _help(*command: str) -> str:
    p = build_parser()
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub = action.choices[command[0]]
            if len(command) > 1:
                sub = next(
                    a for a in sub._actions if isinstance(a, argparse._SubParsersAction)
                ).choices[command[1]]
            return " ".join(sub.format_help().split())
    raise AssertionError(command)


@pytest.mark.parametrize(
    "command",
    [
        ("sessions", "list"),
        ("sessions", "show"),
        ("sessions", "compare"),
        ("sessions", "pool"),
        ("sessions", "pack"),
        ("report",),
        ("plot",),
        ("export",),
        ("tui",),
        ("ab",),
        ("calibrate",),
        ("tune",),
    ],  # fmt: skip
)
def test_every_command_names_the_folder_sessions_dir(command):
    assert "--sessions-dir" in _help(*command), command


@pytest.mark.parametrize(
    ("argv", "dest"),
    [
        (["sessions", "list", "{new}", "X"], "root"),
        (["sessions", "list", "--root", "X"], "root"),
        (["report", "S", "{new}", "X"], "root"),
        (["plot", "S", "--root", "X"], "root"),
        (["export", "S", "{new}", "X"], "root"),
        (["tui", "{new}", "X"], "sessions"),
        (["tui", "--sessions", "X"], "sessions"),
        (["ab", "{new}", "X"], "sessions_dir"),
    ],
)
def test_the_old_names_are_aliases(argv, dest):
    ns = parse(build_parser(), [a.replace("{new}", "--sessions-dir") for a in argv])
    assert getattr(ns, dest) == "X"


def test_sessions_dir_points_list_show_report_and_export_elsewhere(root, capsys, tmp_path):
    assert main(["sessions", "list", "--sessions-dir", str(root)]) == 0
    assert ONE in capsys.readouterr().out
    assert main(["sessions", "show", "aa-r1", "--sessions-dir", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == str(root / ONE)
    assert main(["report", "latest", "--sessions-dir", str(root), "--no-plots"]) == 0
    assert f"`{ONE}`" in capsys.readouterr().out


def test_outside_a_checkout_list_says_where_it_looked(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["sessions", "list"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == (
        f"no sessions under {tmp_path.resolve() / 'sessions'} (no such folder; the default, "
        "./sessions of the current folder): --sessions-dir DIR lists another folder"
    )
    assert main(["sessions", "list", "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["sessions"] == [] and js["missing"] and js["root"].endswith("sessions")
    # a folder given that is not there is bad input, one line, exit 2
    assert main(["sessions", "list", "--sessions-dir", "nowhere"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "workbench sessions: --sessions-dir 'nowhere' does not exist"
    # a name looked up where there is no sessions folder says so
    assert main(["sessions", "show", "aa-r1"]) == 2
    assert "which does not exist: --sessions-dir DIR looks elsewhere" in capsys.readouterr().err


def test_an_empty_folder_says_where_it_looked(tmp_path, capsys):
    assert main(["sessions", "list", "--sessions-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.strip()
    assert out == f"no sessions under {tmp_path.resolve()}: --sessions-dir DIR lists another folder"
