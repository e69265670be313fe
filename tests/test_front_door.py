"""Issue 46, "The front door, again": each reproduction of the issue, pinned. Every output a shell
can hand a command (closed, non-UTF-8, `-o -`), `sessions show` on an 80- and a 140-column
terminal, the sub-command's name in argparse's errors. The bad command lines are in
tests/test_bad_args.py, the light install's in tests/test_light_install.py, doctor's in
tests/test_doctor.py, the TUI's in tests/test_tui_views.py."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest
from fixtures_sessions import REPO

from workbench import cli
from workbench.core.errors import EXIT_BAD_ARGS

DEFAULT = str(REPO / "sessions" / "20261204T040236Z_default-r10")  # a default run, 14 rows
REPLICATE = str(REPO / "sessions" / "20261204T035946Z_default-r8")


class _Terminal(io.TextIOWrapper):
    """A stdout that says it is a terminal (rich then lays out for $COLUMNS columns)."""

    def isatty(self) -> bool:
        return True


def _stdout(monkeypatch, encoding: str = "utf-8", tty: bool = False) -> io.BytesIO:
    raw = io.BytesIO()
    cls = _Terminal if tty else io.TextIOWrapper
    monkeypatch.setattr(sys, "stdout", cls(raw, encoding=encoding, errors="strict"))
    return raw


def _main(argv: list[str]) -> int:
    code = cli.main(argv)
    sys.stdout.flush()
    return code


# ------------------------------------------------------------------------- a closed stdout


def _closed(*argv: str, cwd=REPO) -> subprocess.CompletedProcess:
    # the shell's `>&-`: the command starts with no file descriptor 1
    return subprocess.run(
        [sys.executable, "-m", "workbench", *argv], cwd=cwd, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, timeout=120,
        preexec_fn=lambda: os.close(1),  # noqa: PLW1509 (only the child's descriptor)
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [
        ["capacity"],
        pytest.param(["sessions", "list", "--root", "{root}"], marks=pytest.mark.slow),
        pytest.param(["sessions", "show", DEFAULT], marks=pytest.mark.slow),
        ["--version"],  # argparse writes it to stdout itself
    ],
)
def test_a_closed_stdout_is_one_line_and_exit_2(tmp_path, argv):
    (tmp_path / "root").mkdir()
    p = _closed(*(a.replace("{root}", str(tmp_path / "root")) for a in argv))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == EXIT_BAD_ARGS, p.stderr
    assert len(lines) == 1 and "stdout is closed" in lines[0], p.stderr
    assert lines[0].startswith(f"workbench {argv[0]}: " if argv[0] != "--version" else "workbench:")


def _read_only_stderr() -> None:
    # what `2>&-` through a launcher script gives: fd 2 open, for reading (pyenv's shim)
    os.close(2)
    os.open(os.devnull, os.O_RDONLY)


@pytest.mark.parametrize("child", [lambda: os.close(2), _read_only_stderr], ids=["closed", "read"])
def test_a_closed_stderr_keeps_the_exit_code(child):
    p = subprocess.run(
        [sys.executable, "-m", "workbench", "sessions", "show", "no-such-session"], cwd=REPO,
        capture_output=True, text=True, timeout=120, preexec_fn=child,  # noqa: PLW1509
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )  # fmt: skip
    assert p.returncode == EXIT_BAD_ARGS and "Traceback" not in p.stdout, p


# ------------------------------------------------------------------ a non-UTF-8 terminal


@pytest.mark.parametrize(
    "argv, encoding",
    [
        (["sessions", "show", DEFAULT], "ascii"),
        (["sessions", "compare", DEFAULT, REPLICATE], "ascii"),
        (["report", DEFAULT, "--no-plots"], "ascii"),
        (["report", DEFAULT, "--no-plots"], "latin-1"),
    ],
)
def test_a_stdout_that_cannot_hold_unicode_gets_ascii_stand_ins(monkeypatch, argv, encoding):
    raw = _stdout(monkeypatch, encoding)
    assert _main(argv) == 0
    text = raw.getvalue().decode(encoding)
    assert "w13/hot" in text
    if argv[0] == "sessions" and argv[1] == "show":
        assert "us/call A->B" in text and "docs/DESIGN.md S7.6" in text  # µ, →, § stood in for
        assert "3.81->3.77" in text


def test_the_stand_ins_leave_utf8_alone(monkeypatch):
    raw = _stdout(monkeypatch, "utf-8")
    assert _main(["sessions", "show", DEFAULT]) == 0
    assert "µs/call A→B" in raw.getvalue().decode()


# ------------------------------------------------------------------------------- -o -


def test_report_dash_o_dash_writes_stdout_not_a_file(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", DEFAULT, "--no-plots", "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# ") and "w13/hot" in out and "20261204T040236Z_default-r10" in out
    assert list(tmp_path.iterdir()) == []  # no file named "-"


def test_export_out_dash_writes_stdout(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["export", DEFAULT, "--out", "-"]) == 0
    assert '"schema"' in capsys.readouterr().out and list(tmp_path.iterdir()) == []


# ------------------------------------------- `sessions show` at 80 and 140 columns


@pytest.mark.parametrize("columns", [80, 140])
def test_sessions_show_on_a_narrow_terminal_cuts_no_number(monkeypatch, columns):
    """On a terminal the table fits it (workbench/commands/_fit.py): each comparison's ratio,
    interval and verdict whole on its row, the columns left out named (--wide shows them)."""
    from workbench.analysis import analyse
    from workbench.analysis.table import comparison_table, headers
    from workbench.commands._tables import RESULT_COLUMNS
    from workbench.store.session import load_session

    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("NO_COLOR", "1")
    raw = _stdout(monkeypatch, tty=True)
    assert _main(["sessions", "show", DEFAULT]) == 0
    text = re.sub(r"\x1b\[[0-9;]*m", "", raw.getvalue().decode())
    assert "…" not in text
    an = analyse(load_session(DEFAULT))
    rows = comparison_table(an.results, ("comparison", "ratio", "ci", "verdict_word")).rows
    assert len(rows) == 14
    lines = text.splitlines()
    for row in rows:  # the answer's cells whole on the comparison's own line
        line = next(x for x in lines if x.startswith(row.cells[0] + " "))
        assert all(cell in line for cell in row.cells), (columns, line)
    shown = next(x for x in lines if x.startswith("comparison "))
    left = " ".join(lines[next(i for i, x in enumerate(lines) if x.startswith("(left out")) :][:3])
    for h in headers(RESULT_COLUMNS)[1:-1]:  # every column is shown or named as left out
        assert h in shown or h in left, (columns, h)
    assert "--wide shows every column" in left
    assert max(len(line) for line in lines) <= columns


def test_sessions_show_where_the_table_fits_prints_the_table(monkeypatch):
    monkeypatch.setenv("COLUMNS", "260")
    raw = _stdout(monkeypatch, tty=True)
    assert _main(["sessions", "show", DEFAULT]) == 0
    text = re.sub(r"\x1b\[[0-9;]*m", "", raw.getvalue().decode())
    assert re.search(r"^comparison +role +A +B +pairs", text, re.M), text[:2000]


# ------------------------------------------------ the pre-flight: outputs before the GPU


@pytest.mark.parametrize("command", ["ab", "calibrate", "check", "tune"])
def test_an_unwritable_build_cache_is_refused_before_the_gpu_check(
    monkeypatch, tmp_path, capsys, command
):
    import torch

    from workbench.run import runner

    def boom(*a, **k):
        raise AssertionError("a GPU step was reached before the outputs were checked")

    monkeypatch.setattr(runner, "require_gpu", boom)
    monkeypatch.setattr(torch.cuda, "is_available", boom)
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "a-file" / "sub"))
    argv = [command, "--sessions-dir", str(tmp_path / "s"), "--no-plots"]
    argv += ["--kernel", "w13"] if command == "tune" else []
    code = cli.main(argv if command != "check" else [command])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_BAD_ARGS, err
    assert len(err.splitlines()) == 1 and "the build cache" in err and "WORKBENCH_CACHE" in err
    assert not (tmp_path / "s").exists()


def test_the_tuis_browse_mode_names_the_install_command_without_torch(monkeypatch):
    """The reason the TUI gives for browse mode (its banner, the `r` toast, `tui --run`)."""
    from workbench.core.errors import DIST
    from workbench.tui.engine import EngineBackend

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails as if not installed
    status = EngineBackend("sessions", "plots").gpu_status()
    assert not status.available
    assert (
        status.reason.startswith("torch is not installed: ") and f"'{DIST}[gpu]'" in status.reason
    )
