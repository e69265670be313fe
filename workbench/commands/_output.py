"""The commands' one output layer: what every command writes goes through the streams prepared
here, so that no output a shell can hand a command ends in a traceback (docs/DESIGN.md §9).

* a closed stdout (``workbench … >&-``): the command stops before it does anything, with one line
  and exit 2 (an output that cannot be written), as ``cat`` refuses to run into nowhere;
* a closed stderr (``2>&-``): messages go to /dev/null, the command runs;
* a stream whose encoding cannot hold a character the tables use (``PYTHONIOENCODING=ascii``, a
  latin-1 terminal): the character is written in ASCII (``µs`` as ``us``, ``§`` as ``S``), never an
  UnicodeEncodeError;
* a reader that leaves (``| head``): cli.py ends the command quietly with exit 141;
* ``-o -``: stdout, as for every Unix tool (``output_target``).

Rich consoles come from ``console`` alone, so that every table and message meets the same streams.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import sys
import unicodedata
from pathlib import Path

from workbench.core.errors import BadArgument

try:
    import fcntl
except ImportError:  # not POSIX: a descriptor that is open is taken as writable
    fcntl = None

# what a character the commands print becomes where the stream's encoding cannot hold it
ASCII_FOR = {
    "µ": "u", "§": "S", "→": "->", "←": "<-", "–": "-", "—": "-", "×": "x", "±": "+/-",
    "≤": "<=", "≥": ">=", "≈": "~", "…": "...", "·": ".", "°": "deg", "‘": "'", "’": "'",
    "“": '"', "”": '"', "✓": "ok", "✗": "x", "█": "#", "▏": "|", "│": "|", "─": "-",
}  # fmt: skip
ERRORS = "workbench-ascii"  # the codecs error handler's name


def _to_ascii(e: UnicodeError) -> tuple[str, int]:
    """Codec error handler: each character the stream cannot encode as its ASCII stand-in (a
    table above, else its decomposition's base letter, else "?")."""
    if not isinstance(e, UnicodeEncodeError):
        raise e
    out = []
    for ch in e.object[e.start : e.end]:
        alt = ASCII_FOR.get(ch)
        if alt is None:
            base = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
            alt = base or "?"
        out.append(alt)
    return "".join(out), e.end


codecs.register_error(ERRORS, _to_ascii)

STDOUT_CLOSED = (
    "stdout is closed (>&-): there is nowhere to write the output; redirect it to a file or to "
    "/dev/null instead"
)


class StdoutClosed(BadArgument):
    """stdout was closed when the command started (exit 2: an output that cannot be written)."""

    def __init__(self) -> None:
        super().__init__(STDOUT_CLOSED)


class _Closed(io.TextIOBase):
    """Stands in for a closed stdout: the first write says so (StdoutClosed), once."""

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        raise StdoutClosed()

    def isatty(self) -> bool:
        return False


def _devnull_on(fd: int) -> None:
    """Point ``fd`` at /dev/null, so that no file opened later takes its number (a closed fd 1
    would become the first file the command opens, and its output would go there)."""
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


def _fd_writable(fd: int) -> bool:
    """Whether ``fd`` is open for writing. A closed descriptor may be open for reading instead
    by the time Python starts: a launcher script (pyenv's shim is one) that the shell ran with
    ``2>&-`` opens itself on the lowest free number, and Python inherits it as its stderr."""
    try:
        if fcntl is None:
            os.fstat(fd)
            return True
        mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
    except OSError:
        return False
    return mode in (os.O_WRONLY, os.O_RDWR)


def _ascii_safe(stream) -> None:
    """Write what the stream's encoding cannot hold in ASCII instead of raising."""
    enc = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
    if enc in ("utf-8", "utf8") or not hasattr(stream, "reconfigure"):
        return
    # a stream that cannot be reconfigured keeps its own handler
    with contextlib.suppress(ValueError, OSError):
        stream.reconfigure(errors=ERRORS)


def stdout_closed() -> bool:
    return isinstance(sys.stdout, _Closed)


def prepare_streams() -> None:
    """Make stdout and stderr safe to write for the rest of the process (module docstring)."""
    if sys.stderr is None or not _fd_writable(2):
        _devnull_on(2)
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (the process's)
    if sys.stdout is None or not _fd_writable(1):
        _devnull_on(1)
        sys.stdout = _Closed()
    for stream in (sys.stdout, sys.stderr):
        _ascii_safe(stream)


def check_stdout() -> None:
    """The pre-flight of stdout: StdoutClosed before the command does anything."""
    if stdout_closed():
        raise StdoutClosed()


def output_target(path: str | None) -> Path | None:
    """``-o``'s value: None for stdout (no option, or ``-``), else the path."""
    if path is None or path == "-":
        return None
    return Path(path)


def not_stdout(path: str | None, option: str, what: str) -> None:
    """BadArgument when ``-`` (stdout) is given where a folder or a binary file is written."""
    if path == "-":
        raise BadArgument(f"{option} - (stdout) takes one text; {what}: name a folder or a file")


def console(stderr: bool = True, pipe_width: int = 180, width: int | None = None):
    """A rich Console on stderr (messages, progress) or stdout (results).

    ``width`` where given (a fitting command's, workbench/commands/_fit.py); else on a
    terminal, the terminal's width. Redirected to a file or a pipe, rich would assume 80 columns
    and squeeze a table; ``pipe_width`` (180) fits the messages, and a table is laid out at its
    own width there (``_tables.results_lines``). soft_wrap keeps messages (paths, errors) as
    whole lines."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if width is None:
        width = None if stream.isatty() else pipe_width
    return Console(file=stream, highlight=False, soft_wrap=True, width=width)
