"""Listing and finding saved sessions (docs/DESIGN.md §8): the facts a listing shows
(`SessionInfo`), the listing of a sessions folder through the index of validated sessions
(`workbench.store.index`), and the SESSION argument every command takes (`find_session`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.core.errors import BadArgument, SessionError, WorkbenchError
from workbench.store.session import META_FILE, Session, load_session


@dataclass
class SessionInfo:
    """Facts about one session for listings (CLI and TUI).

    ``commit``: short git commit (None when unknown); ``sources``: short digest of the recorded
    csrc/ hashes; ``stale``: the csrc/ files that differ from the working tree where that makes
    the session stale ([] when it is current, None when the session recorded no kernel sources:
    ``provenance.Staleness``); ``same_code``: the files that differ but, by the equivalence
    record, give the session's GPU the same device code (it is current); ``recommendations``:
    {kernel: decision} from the summary the runner stored.
    """

    path: Path
    created: str
    slug: str
    status: str
    gpu: str | None
    comparisons: int
    samples: int
    warnings: list[str] = field(default_factory=list)
    commit: str | None = None
    dirty: bool | None = None
    sources: str | None = None
    stale: list[str] | None = None
    same_code: list[str] = field(default_factory=list)
    arch: str | None = None  # compute_XY of its GPU, which the equivalence record is made for
    recommendations: dict[str, str] = field(default_factory=dict)
    kernels: list[str] = field(default_factory=list)  # kernels compared, in journal order
    config: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["path"] = str(self.path)
        del d["config"]
        return d


class SessionList(list):
    """SessionInfo items, newest first; ``skipped`` holds (path, error) of unreadable folders."""

    def __init__(self, items=(), skipped: list[tuple[Path, str]] | None = None) -> None:
        super().__init__(items)
        self.skipped: list[tuple[Path, str]] = skipped or []


def _staleness_fields(
    files: Mapping[str, str], arch: str | None, current: Mapping[str, str] | None
) -> dict[str, Any]:
    """``stale`` and ``same_code`` of a listing, by the one rule (provenance.staleness)."""
    from workbench.store import provenance

    st = provenance.staleness(files, arch, current)
    return {"stale": None if st.differ is None else (st.differ if st.stale else []),
            "same_code": st.differ if st.same_code else []}  # fmt: skip


def session_info(s: Session, current: Mapping[str, str] | None = None) -> SessionInfo:
    """The listing facts of a loaded session; ``current``: the working tree's source hashes."""
    from workbench.store import provenance

    git = s.provenance.get("git") or {}
    files = s.provenance.get("files") or {}
    recs = (s.summary or {}).get("recommendations") or {}
    return SessionInfo(
        path=s.path,
        created=s.created,
        slug=s.slug,
        status=s.status,
        gpu=s.gpu_name,
        comparisons=len({c["id"] for c in s.comparisons}),
        samples=len(s.samples),
        warnings=s.warnings,
        commit=git.get("commit")[:10] if git.get("commit") else None,
        dirty=git.get("dirty"),
        sources=provenance.source_digest(files),
        **_staleness_fields(files, provenance.gpu_arch(s.gpu), current),
        arch=provenance.gpu_arch(s.gpu),
        recommendations={k: r["decision"] for k, r in recs.items()},
        kernels=list(dict.fromkeys(c["kernel"] for c in s.comparisons)),
        config=s.config,
    )


def list_sessions(root: str | os.PathLike, current: Mapping[str, str] | None = None) -> SessionList:
    """Sessions directly under ``root``, newest first. Unreadable ones go to ``.skipped`` with
    their one-line error, so one bad folder never hides the good ones.

    ``current``: the kernel sources to judge staleness against (default: the working tree's).
    A missing ``root`` is a BadArgument. Folders without session.json are not sessions and are
    not listed.
    """
    from workbench.store import provenance

    root = Path(root)
    if not root.exists():
        raise BadArgument(f"--sessions-dir {str(root)!r} does not exist")
    if not root.is_dir():
        raise BadArgument(f"--sessions-dir {str(root)!r} is not a folder")
    from workbench.store.index import SessionIndex, signature

    if current is None:
        current = provenance.current_sources()
    index = SessionIndex()
    infos, skipped, seen = [], [], set()
    for d in sorted(root.iterdir()):
        if not d.is_dir() or not (d / META_FILE).exists():
            continue
        seen.add(str(d.resolve()))
        sig = signature(d)
        entry = index.get(d, sig)
        if entry is None:  # new or changed since it was indexed: validate it in full
            try:
                s = load_session(d, nvml=False)
                entry = {"info": _info_facts(session_info(s, current)), "files": _files(s)}
            except SessionError as e:
                entry = {"error": str(e)}
            index.put(d, sig, entry)
        if "error" in entry:
            skipped.append((d, entry["error"]))
        else:
            files = entry["files"]
            infos.append(
                SessionInfo(
                    path=d,
                    **entry["info"],
                    sources=provenance.source_digest(files),
                    **_staleness_fields(files, entry["info"]["arch"], current),
                )
            )
    index.forget_missing(root, seen)
    index.save()
    infos.sort(key=lambda i: (i.created, i.path.name), reverse=True)
    return SessionList(infos, skipped)


def _files(s: Session) -> dict[str, str]:
    return dict(s.provenance.get("files") or {})


def _info_facts(info: SessionInfo) -> dict[str, Any]:
    """What the index keeps of a listing: all but the path and what depends on the working tree."""
    d = {f.name: getattr(info, f.name) for f in dataclasses.fields(info)}
    for k in ("path", "sources", "stale", "same_code"):
        del d[k]
    return d


def find_session(arg: str, root: str | os.PathLike) -> Path:
    """The session a SESSION argument names, as every command reads it: a path (folder or its
    session.json), a folder name under ``root``, a unique part of one (the slug, the time), or
    "latest" (the newest loadable session). A path that does not exist is returned as it is, so
    that the loader names it; a name that matches nothing or several is a BadArgument.
    """
    p = Path(arg)
    if p.exists():
        return p
    root = Path(root)
    if arg == "latest":
        try:
            found = list_sessions(root)
        except WorkbenchError as e:
            raise SessionError(f"SESSION 'latest': {e}") from None
        if not found:
            raise SessionError(f"SESSION 'latest': no loadable session under {root}/")
        return found[0].path  # newest first
    if os.sep in arg or (os.altsep and os.altsep in arg) or arg.endswith(META_FILE):
        return p  # a path: "no such session" from the loader says it best
    if (root / arg / META_FILE).exists():
        return root / arg
    names = (
        sorted(d.name for d in root.iterdir() if (d / META_FILE).is_file()) if root.is_dir() else []
    )
    hits = [n for n in names if arg in n]
    if len(hits) == 1:
        return root / hits[0]
    if not hits:
        gone = "" if root.is_dir() else ", which does not exist: --sessions-dir DIR looks elsewhere"
        raise BadArgument(
            f"SESSION {arg!r} not found (not a path, nor a session under {str(root)!r}{gone})"
        )
    raise BadArgument(f"SESSION {arg!r} is ambiguous: {', '.join(hits[:6])}")
