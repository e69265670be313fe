"""Screened results kept across runs, so a second `workbench tune` over the same space resumes
(docs/DESIGN.md §11.3).

One JSON file per screened candidate under the cache folder's ``tune/`` (workbench/core/paths.py:
the user's cache folder, or ``$WORKBENCH_CACHE``), named by a hash of its
key: the build names of the candidate and of the default it was screened against (each a hash of
every kernel source, the flags with the parameters, the arch and nvcc's version), the
shape, the GPU's name and the screening protocol. Any change to those gives another key, so a
stale entry is never found; an entry whose stored key differs from the one asked for (a
collision, a hand-edited file) or that does not parse is ignored. Files are written whole
(temporary file, then rename), so an interrupted run leaves complete entries only.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

SCHEMA = "workbench.tune-screen/1"


def cache_dir() -> Path:
    from workbench.core.paths import cache_dir as root

    return root() / "tune"


def screen_key(
    candidate_build: str,
    default_build: str,
    shape: dict[str, Any],
    gpu_name: str,
    protocol: dict[str, Any],
) -> dict[str, Any]:
    """What a screened result depends on (everything that would change its numbers)."""
    return {
        "candidate_build": candidate_build,
        "default_build": default_build,
        "shape": shape,
        "gpu": gpu_name,
        "protocol": protocol,
    }


def _path(key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
    return cache_dir() / f"{digest}.json"


def load(key: dict[str, Any]) -> dict[str, Any] | None:
    """The cached screening result for ``key``, or None (missing, stale or unreadable)."""
    try:
        entry = json.loads(_path(key).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("schema") != SCHEMA or entry.get("key") != key:
        return None
    result = entry.get("result")
    return result if isinstance(result, dict) else None


def store(key: dict[str, Any], result: dict[str, Any]) -> Path:
    path = _path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".screen.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"schema": SCHEMA, "key": key, "result": result}, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
