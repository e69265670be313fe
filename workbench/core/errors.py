"""Exceptions and the exit codes of docs/DESIGN.md §9 (one place, so CLI and TUI agree)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_BAD_ARGS = 2
EXIT_NO_GPU = 3
EXIT_BUILD_FAILED = 4
EXIT_NUMERICS_DIFFER = 5
EXIT_NOT_IMPLEMENTED = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout left (`| head`), as for cat


class WorkbenchError(Exception):
    """An error with a message meant for the user and the exit code of the CLI."""

    exit_code = 1


class BadArgument(WorkbenchError, ValueError):
    """Bad input: the message names the argument and its bad value."""

    exit_code = EXIT_BAD_ARGS


class NoGPUError(WorkbenchError):
    exit_code = EXIT_NO_GPU


class BuildError(WorkbenchError):
    """A variant failed to compile; ``log`` holds the compiler's output."""

    exit_code = EXIT_BUILD_FAILED

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class NumericsError(WorkbenchError):
    exit_code = EXIT_NUMERICS_DIFFER


class SessionError(WorkbenchError):
    """A session folder or file that cannot be loaded (unknown schema, truncated, foreign)."""

    exit_code = EXIT_BAD_ARGS
