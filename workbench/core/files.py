"""File modes: what the workbench writes is readable like any file the user makes.

``tempfile.mkstemp`` (the atomic writes of session.json) and the safetensors writer create
files with mode 0600, which hides a session or a checkpoint from the rest of a team sharing a
folder. ``share(path)`` gives a written file the mode the user's umask gives new files (0644
under the usual 022). ``write_whole(path, write)`` writes a file whole or not at all, and
turns a folder that cannot be written into one line naming the path.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from workbench.core.errors import BadArgument


def default_mode() -> int:
    """0666 less the process's umask (read without changing it where /proc says it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: read it by setting it, and put it back at once
    os.umask(mask)
    return 0o666 & ~mask


def share(path: str | os.PathLike | int) -> None:
    """Give a file (a path, or an open file descriptor) the umask's mode for new files."""
    if isinstance(path, int):
        os.fchmod(path, default_mode())
    else:
        os.chmod(path, default_mode())


def write_whole(path: Path, write: Callable[[Path], object], option: str = "") -> Path:
    """``write(tmp)`` into a hidden temporary file beside ``path``, then renamed onto it: an
    interrupted or failed write leaves neither half a file nor the temporary one. An OSError (a
    read-only folder, a full disk) becomes a BadArgument naming ``path`` (and ``option``)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        what = f"{option} {str(path)!r}" if option else repr(str(path))
        raise BadArgument(f"{what}: cannot write it ({e.strerror or e})") from None
    finally:
        # a read-only file system refuses even that; nothing was written there then
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return path
