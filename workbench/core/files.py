"""File modes: what the workbench writes is readable like any file the user makes.

``tempfile.mkstemp`` (the atomic writes of session.json) and the safetensors writer create
files with mode 0600, which hides a session or a checkpoint from the rest of a team sharing a
folder. ``share(path)`` gives a written file the mode the user's umask gives new files (0644
under the usual 022).
"""

from __future__ import annotations

import os
from pathlib import Path


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
