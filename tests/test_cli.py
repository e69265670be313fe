"""CLI skeleton: every §9 subcommand is listed, and `--help` imports neither torch nor textual."""

import subprocess
import sys

from workbench.cli import COMMANDS

SECTION9 = ["ab", "build", "check", "calibrate", "capacity", "sessions", "plot", "report"]


def test_help_lists_every_subcommand():
    out = subprocess.run(
        [sys.executable, "-m", "workbench", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for name in SECTION9:
        assert name in COMMANDS
        assert f"    {name}" in out, f"{name} missing from --help:\n{out}"


def test_help_imports_no_heavy_modules():
    code = (
        "import sys\n"
        "from workbench.cli import build_parser\n"
        "build_parser().format_help()\n"
        "heavy = [m for m in ('torch', 'textual', 'matplotlib') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"--help imported: {out.stdout.strip()}"


def test_one_process_runs_commands_one_after_another_with_their_own_options(tmp_path, capsys):
    """main parses with one parser per process (cli._parser): a command's options do not
    carry over to the next (an option given once, then left out, is its default again)."""
    import json

    from workbench.cli import _parser, main

    root = tmp_path / "sessions"
    root.mkdir()
    assert main(["sessions", "list", "--root", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sessions"] == []
    assert main(["sessions", "list", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert not out.lstrip().startswith("{")  # text again, not the JSON of the call before
    assert _parser() is _parser()
