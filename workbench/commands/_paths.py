"""Output paths of the commands, checked up front: a folder where a folder is meant, a file where
a file is meant, and one line naming the option otherwise (never an OSError's traceback)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from workbench.core import defaults
from workbench.core.errors import BadArgument

SESSIONS_DIR = "--sessions-dir"  # the sessions folder's one option name, in every command


def add_sessions_dir(p, what: str, dest: str = "root", old: str = "--root", default=None) -> None:
    """``--sessions-dir DIR`` (``what`` it is for), the option every command names the sessions
    folder by; ``old``, the name this command knew it by, stays as an alias. ``default`` None:
    the command tells a folder it was given from the default (``sessions``) it looked in."""
    p.add_argument(
        SESSIONS_DIR,
        old,
        dest=dest,
        default=default,
        metavar="DIR",
        help=f"{what} (default: {defaults.SESSIONS_DIR}, in the current folder; {old} is its "
        "old name)",
    )


def output_dir(path: str | Path, option: str) -> Path:
    """``path`` as a folder, created if missing; BadArgument when it is a file or unwritable."""
    p = not_a_file(path, option)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadArgument(f"{option} {str(p)!r}: cannot create the folder ({e.strerror})") from None
    return p


def output_file(path: str | Path, option: str, example: str = "report.md") -> Path:
    """``path`` as a file to (over)write; its folder is created. BadArgument when it names a
    folder, or when its folder cannot be made."""
    p = Path(path)
    if p.is_dir() or str(path).endswith(("/", "\\")):
        raise BadArgument(f"{option} {str(p)!r} is a folder: name a file, e.g. {p / example}")
    output_dir(p.parent, option)
    return p


def writable_dir(path: str | Path, option: str) -> Path:
    """A folder that the command will write into later (made then if missing), checked now
    without making it: it must not be a file, nor lie under one, and its nearest existing folder
    must take a new file. BadArgument naming the option otherwise (a pre-flight: before any
    build, GPU check or session load)."""
    p = not_a_file(path, option)
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise BadArgument(f"{option} {str(p)!r}: {str(probe)!r} is a file, not a folder")
    try:
        fd, name = tempfile.mkstemp(dir=probe, prefix=".workbench-probe-")
    except OSError as e:
        where = "" if probe == p else f" (in {str(probe)!r})"
        raise BadArgument(f"{option} {str(p)!r}: cannot write there{where}: {e.strerror}") from None
    os.close(fd)
    os.unlink(name)
    return p


def new_or_empty_dir(path: str | Path, option: str) -> Path:
    """A folder to fill: new, or empty, and writable (``writable_dir``)."""
    p = writable_dir(path, option)
    if p.is_dir() and any(p.iterdir()):
        raise BadArgument(
            f"{option} {str(p)!r} is a folder that is not empty: give a new or empty one"
        )
    return p


def existing_dir(path: str | Path, option: str) -> Path:
    """A folder that must already exist (e.g. where sessions are listed from)."""
    p = Path(path)
    if not p.is_dir():
        what = "is a file, not a folder" if p.exists() else "does not exist"
        raise BadArgument(f"{option} {str(p)!r} {what}")
    return p


def not_a_file(path: str | Path, option: str) -> Path:
    """A folder that may not exist yet (made later), but must not be a file."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise BadArgument(f"{option} {str(p)!r} is a file, not a folder")
    return p


def distinct_sessions(args: Sequence[str], paths: Sequence[Path], why: str) -> None:
    """BadArgument when two SESSION arguments resolve to one session folder (a folder and its
    session.json count as one); ``why`` says why that is refused."""
    seen: dict[Path, str] = {}
    for arg, p in zip(args, paths, strict=True):
        key = (p.parent if p.name == "session.json" else p).resolve()
        if key in seen:
            raise BadArgument(f"SESSION {arg!r} is {seen[key]!r} again: {why}")
        seen[key] = arg
