"""Command-line entry point. Subcommands live in workbench/commands/<name>.py.

Each command module is light to import (no torch, matplotlib or textual at module level) and
defines HELP, add_arguments(parser) and run(args) -> int. Heavy imports happen inside run().
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import signal
import sys
import threading

from workbench import __version__
from workbench.commands._output import check_stdout, prepare_streams
from workbench.core.errors import (
    EXIT_BAD_ARGS,
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    WorkbenchError,
    missing_package,
)

# name -> module; the order is the order of `workbench --help`.
COMMANDS: dict[str, str] = {
    "ab": "workbench.commands.ab",
    "build": "workbench.commands.build",
    "check": "workbench.commands.check",
    "calibrate": "workbench.commands.calibrate",
    "tune": "workbench.commands.tune",
    "capacity": "workbench.commands.capacity",
    "checkpoint": "workbench.commands.checkpoint",
    "sessions": "workbench.commands.sessions",
    "plot": "workbench.commands.plot",
    "report": "workbench.commands.report",
    "export": "workbench.commands.export",
    "tui": "workbench.commands.tui",
    "doctor": "workbench.commands.doctor",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        # One line, like every other bad-argument error: the usage of `ab` alone is 15 lines,
        # and --help is one command away.
        self.exit(EXIT_BAD_ARGS, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _chosen(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost sub-command's parser that ``ns`` was parsed with (`workbench sessions
    show`'s for `sessions show X --bogus`), so that its errors carry the command's name."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(ns, subs[0].dest, None) if subs else None
        if name not in (subs[0].choices if subs else {}):
            return parser
        parser = subs[0].choices[name]


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, but an unknown argument is reported by the sub-command it was
    given to (`workbench capacity: error: unrecognized arguments: --bogus`), not by the top."""
    ns, extra = parser.parse_known_args(argv)
    if extra:
        _chosen(parser, ns).error(f"unrecognized arguments: {' '.join(extra)}")
    return ns


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="workbench",
        description=(
            "Build, check and A/B-time the scalar and cooperative readers of compact AWQ metadata "
            "in int4 MoE decode kernels. With no command, opens the TUI."
        ),
    )
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, modname in COMMANDS.items():
        mod = importlib.import_module(modname)
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The parser ``main`` parses with, built once per process: building it imports every
    command module and adds some 250 arguments (15 ms), and one process may run many commands
    (the tests, a script over sessions). Parsing leaves it unchanged: its defaults are constants."""
    return build_parser()


def _reader_left() -> int:
    """`workbench ... | head`: the reader has what it wanted. Say nothing, and point stdout at
    /dev/null so that the interpreter's own flush at exit cannot raise again (what the Python
    docs advise for SIGPIPE); exit 141, as a shell reports for cat."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


def _rich_broken_pipe(e: SystemExit) -> bool:
    """Whether rich ended the command: its Console meets a closed stdout with its own quiet
    SystemExit(1) (Console.on_broken_pipe), which would make capacity and doctor exit 1."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_name == "on_broken_pipe"


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM (``timeout``, ``kill``, a batch scheduler's preemption) ends a command as Ctrl-C
    does: a session is kept as interrupted with what it measured, never left "running"."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if in_main else None
    try:
        return _main(argv)
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    command = "workbench"
    prepare_streams()  # a closed or non-UTF-8 stdout or stderr, once for every command
    try:
        parser = _parser()
        args = parse(parser, argv)
        if args.command is None:
            args = parse(parser, ["tui", *(argv or [])])
        command = f"workbench {args.command}"
        check_stdout()  # before the command does anything (workbench.commands._output)
        rc = int(args._run(args) or 0)
        sys.stdout.flush()  # here, so that a reader that left shows up as BrokenPipeError below
        return rc
    except BrokenPipeError:
        return _reader_left()
    except SystemExit as e:
        if _rich_broken_pipe(e):
            return _reader_left()
        raise
    except WorkbenchError as e:
        print(f"{command}: {e}", file=sys.stderr)
        return e.exit_code
    except ImportError as e:
        # a package missing from the install (the GPU stack on the light install, ray, a
        # dependency): one line naming the command that installs it, exit 3
        missing = missing_package(e)
        if missing is None:
            raise
        print(f"{command}: {missing}", file=sys.stderr)
        return missing.exit_code
    except KeyboardInterrupt:
        # whatever was measured or drawn is already on disk (sessions are journals, figures
        # and builds are written whole): say so in one line, no traceback
        print(f"{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
