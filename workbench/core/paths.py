"""Where the workbench finds its kernel sources and example, and keeps its cache.

The kernel sources (``csrc/``) and the example spec (``examples/``) are the checkout's folders when
the package runs from a checkout (an editable install, ``PYTHONPATH``); an installed wheel carries
copies of both inside the package (``workbench/_data/``, put there by setup.py's build step), found
through ``importlib.resources``.

One cache folder for builds (``build/``) and tune's screened results (``tune/``): the user's cache
folder as platformdirs finds it (``$XDG_CACHE_HOME/workbench``, by default ``~/.cache/workbench``
on Linux), or ``$WORKBENCH_CACHE`` where set. Sessions and plots are not cached: they go under the
current folder (``sessions/``, ``plots/``), where the user runs the command.
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.core.errors import MissingDependency

CACHE_ENV = "WORKBENCH_CACHE"
CHECKOUT = Path(__file__).resolve().parents[2]  # the checkout's root, when running from one
DATA_FOLDERS = ("csrc", "examples")  # what a wheel carries under workbench/_data/


def data_folder(name: str) -> Path:
    """``csrc`` or ``examples``: the checkout's folder, else the installed package's copy."""
    if name not in DATA_FOLDERS:
        raise ValueError(f"{name!r} is not one of {', '.join(DATA_FOLDERS)}")
    local = CHECKOUT / name
    if (CHECKOUT / "pyproject.toml").is_file() and local.is_dir():
        return local
    from importlib.resources import files

    return Path(str(files("workbench") / "_data" / name))


def cache_dir() -> Path:
    """The cache folder ($WORKBENCH_CACHE, else the user's cache folder for "workbench")."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    try:
        from platformdirs import user_cache_path
    except ImportError:
        raise MissingDependency("platformdirs") from None
    return user_cache_path("workbench", appauthor=False)
