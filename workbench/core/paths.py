"""Where the workbench keeps what it makes outside the current folder: the cache.

One cache folder for builds (``build/``) and tune's screened results (``tune/``): the user's cache
folder as platformdirs finds it (``$XDG_CACHE_HOME/workbench``, by default ``~/.cache/workbench``
on Linux), or ``$WORKBENCH_CACHE`` where set. Sessions and plots are not cached: they go under the
current folder (``sessions/``, ``plots/``), where the user runs the command.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "WORKBENCH_CACHE"


def cache_dir() -> Path:
    """The cache folder ($WORKBENCH_CACHE, else the user's cache folder for "workbench")."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_path

    return user_cache_path("workbench", appauthor=False)
