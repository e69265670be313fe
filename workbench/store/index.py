"""A small index of session listings, so that `sessions list` validates only what changed.

Listing 48 sessions means validating some 32,000 journal records (1.5-2 s on a 2-core machine);
their listing facts change only when their files do. The index keeps, per session folder, the
facts ``list_sessions`` shows (or the one-line error that made it skip the folder) with the
size, mtime and inode of its session.json and journal.jsonl. A folder whose files still match
is listed from the index; any other is loaded and validated in full, as without an index.

It lives in the user cache folder, never beside the sessions (they are evidence):
``$WORKBENCH_CACHE/sessions-index.json``, else the platform's user cache folder
(``~/.cache/workbench`` on Linux). ``WORKBENCH_SESSION_INDEX`` names another file, or "off".
The entry also holds a hash of the loader's own source, so editing the validator re-validates
everything. An unreadable or malformed index is ignored (and rewritten); an unwritable one is
not written: the index only ever saves time.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from workbench.core.errors import MissingDependency
from workbench.core.files import share
from workbench.core.paths import cache_dir

INDEX_NAME = "sessions-index.json"
FORMAT = 1
WATCHED = ("session.json", "journal.jsonl")  # what a listing reads (not nvml.jsonl)


def index_path() -> Path | None:
    """Where the index lives (None when turned off)."""
    override = os.environ.get("WORKBENCH_SESSION_INDEX")
    if override:
        return None if override == "off" else Path(override)
    try:
        return cache_dir() / INDEX_NAME
    except MissingDependency:
        return None  # no platformdirs, no cache folder: a listing costs time, never fails


# The modules of this package whose code decides what a listing says: the loader and its schema,
# the provenance checks, the listing facts (SessionInfo, session_info) and this index.
LOADER_MODULES = ("session.py", "session_schema.py", "provenance.py", "listing.py", "index.py")


@lru_cache(maxsize=1)
def loader_hash() -> str:
    """Hash of the modules whose code decides what a listing says (LOADER_MODULES)."""
    here = Path(__file__).parent
    h = hashlib.sha256()
    for name in LOADER_MODULES:
        h.update((here / name).read_bytes())
    return h.hexdigest()[:16]


def signature(folder: Path) -> list[list[int]] | None:
    """(size, mtime_ns, inode) of each watched file; None when one cannot be read."""
    out = []
    from workbench.store.session import stored

    for name in WATCHED:
        try:
            st = os.stat(stored(folder, name))
        except OSError:
            return None
        out.append([st.st_size, st.st_mtime_ns, st.st_ino])
    return out


class SessionIndex:
    """The index as a dict {folder path: entry}; ``get``/``put`` an entry, ``save`` once."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = index_path() if path is None else path
        self.entries: dict[str, dict[str, Any]] = {}
        self.changed = False
        if self.path is None:
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return
        if (
            isinstance(data, dict)
            and data.get("format") == FORMAT
            and data.get("loader") == loader_hash()
            and isinstance(data.get("entries"), dict)
        ):
            self.entries = {
                k: v for k, v in data["entries"].items() if isinstance(v, dict) and "sig" in v
            }

    def get(self, folder: Path, sig: list[list[int]] | None) -> dict[str, Any] | None:
        """The stored entry of ``folder`` when its files still have signature ``sig``."""
        if sig is None:
            return None
        e = self.entries.get(str(folder.resolve()))
        return e if e is not None and e.get("sig") == sig else None

    def put(self, folder: Path, sig: list[list[int]] | None, entry: dict[str, Any]) -> None:
        if sig is None:
            return
        self.entries[str(folder.resolve())] = {"sig": sig, **entry}
        self.changed = True

    def forget_missing(self, root: Path, seen: set[str]) -> None:
        """Drop entries of folders directly under ``root`` that are no longer there, and of
        every folder elsewhere that is gone (a deleted sessions root, a test's temporary
        folder): the index holds what is on disk, not every folder it ever listed."""
        parent = str(root.resolve())
        gone = [
            k
            for k in self.entries
            if (k not in seen if str(Path(k).parent) == parent else not os.path.isdir(k))
        ]
        for k in gone:
            del self.entries[k]
        self.changed |= bool(gone)

    def save(self) -> None:
        if self.path is None or not self.changed:
            return
        data = {"format": FORMAT, "loader": loader_hash(), "entries": self.entries}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".index.", suffix=".tmp", dir=self.path.parent)
        except OSError:
            return  # a read-only cache folder costs time, never a listing
        try:
            share(fd)  # mkstemp makes it 0600; the index is readable like every other file
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f)
            os.replace(tmp, self.path)  # atomic: a concurrent reader sees the old or the new
        except OSError:
            Path(tmp).unlink(missing_ok=True)
