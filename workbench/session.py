"""Session folders (docs/DESIGN.md §8): ``session.json`` plus append-only JSON-lines journals.

Layout (docs/ARCHITECTURE.md, "Sessions")::

    <root>/<YYYYmmddTHHMMSSZ>_<slug>/
        session.json    metadata, rewritten atomically (temp file + os.replace)
        journal.jsonl   comparison | block | gate | memory | sample | note records, flushed + fsynced per record
        nvml.jsonl      NVML readings, flushed per line, fsynced about once a second

The writer is what makes a killed run still useful: every finished record is on disk before
``record`` returns, so SIGKILL loses at most the record being written (a truncated last line,
which the loader tolerates and reports). A session whose status is still "running" when loaded
was killed and loads as "interrupted".
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from workbench.errors import BadArgument, SessionError

SCHEMA = "workbench.session/1"
STATUSES = ("running", "complete", "interrupted", "failed")
FINAL_STATUSES = ("complete", "interrupted", "failed")
META_FILE, JOURNAL_FILE, NVML_FILE = "session.json", "journal.jsonl", "nvml.jsonl"

# Fields every journal record of a type must carry (besides "type" and "t"); checked by the
# writer (BadArgument, so a caller's bug shows at once) and by the loader (SessionError).
REQUIRED: dict[str, tuple[str, ...]] = {
    "comparison": ("id", "kernel", "set", "role", "a", "b", "calls", "replays"),
    "sample": ("cmp", "pair", "slot", "arm", "ms"),
    "gate": ("cmp", "ok"),
    "memory": (),
    "note": ("text",),
    "block": ("block", "status"),  # a block's placement (docs/DESIGN.md §5.5)
}
_META_KEYS = ("schema", "status", "created", "slug", "config", "provenance", "environment")
_SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
_NVML_FSYNC_S = 1.0  # the sampler writes 20 lines/s; one fsync a second bounds the loss to ~1 s


def _utc_iso(t: float | None = None) -> str:
    d = datetime.fromtimestamp(time.time() if t is None else t, tz=timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _jsonable(x: Any) -> Any:
    """json.dumps fallback: NumPy scalars/arrays, dataclasses, paths, tuples of those."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.asdict(x)
    if hasattr(x, "tolist"):  # NumPy scalar or array, without importing NumPy here
        return x.tolist()
    if isinstance(x, (Path, set, frozenset)):
        return str(x) if isinstance(x, Path) else sorted(x)
    raise TypeError(f"{type(x).__name__} is not JSON serialisable")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, default=_jsonable)


def _atomic_write_json(path: Path, obj: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".session.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, default=_jsonable)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_record(rtype: str, fields: Mapping[str, Any]) -> str | None:
    """Return what is wrong with a journal record of type ``rtype`` (None when it is valid)."""
    if rtype not in REQUIRED:
        return f"unknown record type {rtype!r} (known: {', '.join(REQUIRED)})"
    missing = [k for k in REQUIRED[rtype] if k not in fields]
    if missing:
        return f"{rtype} record lacks {', '.join(repr(k) for k in missing)}"
    if rtype == "sample":
        if fields["arm"] not in ("A", "B"):
            return f"sample arm must be 'A' or 'B', got {fields['arm']!r}"
        if fields["slot"] not in (0, 1, 2, 3) or isinstance(fields["slot"], bool):
            return f"sample slot must be 0..3, got {fields['slot']!r}"
        if not isinstance(fields["pair"], int) or fields["pair"] < 0:
            return f"sample pair must be an int >= 0, got {fields['pair']!r}"
        if not isinstance(fields["ms"], (int, float)) or isinstance(fields["ms"], bool):
            return f"sample ms must be a number, got {fields['ms']!r}"
    return None


class SessionWriter:
    """Create a session folder and append its journals as measurements arrive.

    ``root``: parent folder (created if needed); ``slug``: short name, ``[A-Za-z0-9._-]``;
    ``config``/``provenance``/``environment``: JSON-able dicts stored in session.json.
    Use as a context manager: a clean exit finishes "complete", KeyboardInterrupt "interrupted",
    any other exception "failed" with its text; the exception propagates in both cases.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        slug: str,
        config: Mapping[str, Any] | None = None,
        provenance: Mapping[str, Any] | None = None,
        environment: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(slug, str) or not _SLUG.match(slug):
            raise BadArgument(
                f"slug {slug!r} is not a valid session name (letters, digits, '.', '_', '-'; "
                "starts with a letter or digit; at most 80 characters)"
            )
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        now = time.time()
        stamp = datetime.fromtimestamp(now, tz=timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        self.path = self._make_unique_dir(root, f"{stamp}_{slug}")
        self._meta: dict[str, Any] = {
            "schema": SCHEMA,
            "status": "running",
            "created": _utc_iso(now),
            "finished": None,
            "slug": slug,
            "config": dict(config or {}),
            "provenance": dict(provenance or {}),
            "environment": dict(environment or {}),
            "summary": None,
            "error": None,
        }
        self._journal_lock = threading.Lock()
        self._nvml_lock = threading.Lock()
        self._meta_lock = threading.RLock()  # guards self._meta and session.json together
        # Journals exist before session.json does, so a valid session.json implies both files.
        self._journal = open(self.path / JOURNAL_FILE, "a", encoding="utf-8")  # noqa: SIM115
        self._nvml = open(self.path / NVML_FILE, "a", encoding="utf-8")  # noqa: SIM115
        self._nvml_synced = time.monotonic()
        self._write_meta()

    @staticmethod
    def _make_unique_dir(root: Path, name: str) -> Path:
        # mkdir is atomic: two writers starting in the same second get distinct folders.
        for i in range(1, 1000):
            p = root / (name if i == 1 else f"{name}-{i}")
            try:
                p.mkdir()
                return p
            except FileExistsError:
                continue
        raise SessionError(f"cannot create a unique session folder for {name!r} under {root}")

    @property
    def status(self) -> str:
        return self._meta["status"]

    @property
    def finished(self) -> bool:
        return self._meta["status"] != "running"

    def _write_meta(self) -> None:
        with self._meta_lock:
            _atomic_write_json(self.path / META_FILE, self._meta)

    def update(self, **fields: Any) -> None:
        """Replace top-level entries of session.json (config, provenance, environment, summary)."""
        allowed = ("config", "provenance", "environment", "summary")
        for k in fields:
            if k not in allowed:
                raise BadArgument(f"session field {k!r} cannot be updated (allowed: {allowed})")
        with self._meta_lock:
            self._meta.update(fields)
            self._write_meta()

    def record(self, type: str, **fields: Any) -> dict[str, Any]:
        """Append one journal record, then flush and fsync it; returns the record written.

        ``t`` (unix seconds) defaults to now. Thread-safe.
        """
        problem = check_record(type, fields)
        if problem:
            raise BadArgument(f"journal record: {problem}")
        rec = {"type": type, "t": fields.pop("t", time.time()), **fields}
        line = _dumps(rec) + "\n"  # serialise before locking: a bad value never leaves half a line
        with self._journal_lock:
            if self._journal.closed:
                raise SessionError(f"session {self.path} is finished; cannot record more")
            self._journal.write(line)
            self._journal.flush()
            os.fsync(self._journal.fileno())
        return rec

    def nvml(self, reading: Mapping[str, Any] | Any) -> None:
        """Append one NVML reading (dict or dataclass; ``t`` defaults to now). Thread-safe."""
        if dataclasses.is_dataclass(reading) and not isinstance(reading, type):
            reading = dataclasses.asdict(reading)
        rec = {"t": time.time(), **reading}
        line = _dumps(rec) + "\n"
        with self._nvml_lock:
            if self._nvml.closed:
                return  # the sampler may outlive the session by one tick; drop, don't crash it
            self._nvml.write(line)
            self._nvml.flush()
            if time.monotonic() - self._nvml_synced >= _NVML_FSYNC_S:
                os.fsync(self._nvml.fileno())
                self._nvml_synced = time.monotonic()

    def finish(
        self,
        status: str = "complete",
        summary: Mapping[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        """Close the journals and mark the session finished (status: complete/interrupted/failed)."""
        if status not in FINAL_STATUSES:
            raise BadArgument(f"status {status!r} is not one of {FINAL_STATUSES}")
        if self.finished:
            raise SessionError(f"session {self.path} is already finished ({self.status})")
        with self._journal_lock, self._nvml_lock:
            for f in (self._journal, self._nvml):
                f.flush()
                os.fsync(f.fileno())
                f.close()
        with self._meta_lock:
            self._meta.update(status=status, finished=_utc_iso())
            if summary is not None:
                self._meta["summary"] = dict(summary)
            if error is not None:
                self._meta["error"] = error
            self._write_meta()

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.finished:
            return False
        if exc_type is None:
            self.finish("complete")
        elif issubclass(exc_type, KeyboardInterrupt):
            self.finish("interrupted", error="interrupted (KeyboardInterrupt)")
        else:
            self.finish("failed", error=f"{exc_type.__name__}: {exc}")
        return False  # never swallow the exception


# ---------------------------------------------------------------------------------- loading


@dataclass
class Session:
    """A loaded session. ``status`` is "interrupted" for a session left "running"."""

    path: Path
    meta: dict[str, Any]
    status: str
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    gates: list[dict[str, Any]] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    blocks: list[dict[str, Any]] = field(default_factory=list)
    nvml: list[dict[str, Any]] = field(default_factory=list)
    other: list[dict[str, Any]] = field(default_factory=list)  # unknown record types, kept
    warnings: list[str] = field(default_factory=list)

    config = property(lambda self: self.meta.get("config") or {})
    provenance = property(lambda self: self.meta.get("provenance") or {})
    environment = property(lambda self: self.meta.get("environment") or {})
    summary = property(lambda self: self.meta.get("summary"))
    created = property(lambda self: self.meta.get("created", ""))
    finished = property(lambda self: self.meta.get("finished"))
    slug = property(lambda self: self.meta.get("slug", ""))

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def gpu_name(self) -> str | None:
        return gpu_name(self.meta)

    def comparison(self, cmp_id: str) -> dict[str, Any] | None:
        """The comparison record with id ``cmp_id`` (the last one, if repeated), or None."""
        found = [c for c in self.comparisons if c["id"] == cmp_id]
        return found[-1] if found else None

    def samples_for(self, cmp_id: str) -> list[dict[str, Any]]:
        """Samples of one comparison, in journal order."""
        return [s for s in self.samples if s["cmp"] == cmp_id]

    def gates_for(self, cmp_id: str) -> list[dict[str, Any]]:
        return [g for g in self.gates if g["cmp"] == cmp_id]


def gpu_name(meta: Mapping[str, Any]) -> str | None:
    """GPU name from session.json: environment.gpu.name (the contract), else older spellings."""
    for section in ("environment", "provenance"):
        d = meta.get(section) or {}
        gpu = d.get("gpu")
        if isinstance(gpu, Mapping) and gpu.get("name"):
            return str(gpu["name"])
        if isinstance(gpu, str) and gpu:
            return gpu
        if d.get("gpu_name"):
            return str(d["gpu_name"])
    return None


def _resolve(path: str | os.PathLike) -> tuple[Path, Path]:
    p = Path(path)
    if not p.exists():
        raise SessionError(f"no such session: {p}")
    if p.is_dir():
        folder, meta = p, p / META_FILE
        if not meta.exists():
            raise SessionError(f"not a workbench session: {p} has no {META_FILE}")
        return folder, meta
    if p.name != META_FILE:
        raise SessionError(
            f"not a workbench session: {p} (give the session folder or its {META_FILE})"
        )
    return p.parent, p


def _load_meta(meta_path: Path) -> dict[str, Any]:
    try:
        text = meta_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SessionError(f"cannot read {meta_path}: {e}") from None
    if not text.strip():
        raise SessionError(f"{meta_path} is empty (truncated session.json)")
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as e:
        raise SessionError(
            f"{meta_path} is truncated or not JSON (line {e.lineno}, column {e.colno}: {e.msg})"
        ) from None
    if not isinstance(meta, dict) or "schema" not in meta:
        raise SessionError(
            f"foreign file: {meta_path} is not a workbench session.json (no 'schema')"
        )
    if meta["schema"] != SCHEMA:
        raise SessionError(
            f"unknown schema {meta['schema']!r} in {meta_path}; this workbench reads {SCHEMA!r}"
        )
    missing = [k for k in _META_KEYS if k not in meta]
    if missing:
        raise SessionError(f"{meta_path} lacks {', '.join(repr(k) for k in missing)}")
    if meta["status"] not in STATUSES:
        raise SessionError(f"{meta_path}: unknown status {meta['status']!r} (known: {STATUSES})")
    for k in ("config", "provenance", "environment"):
        if not isinstance(meta[k], dict):
            raise SessionError(
                f"{meta_path}: {k!r} must be an object, got {type(meta[k]).__name__}"
            )
    return meta


def _read_jsonl(path: Path, warnings: list[str], kind: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for each line; a bad last line becomes a warning, any other an error."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise SessionError(f"cannot read {path}: {e}") from None
    lines = raw.split(b"\n")
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    out: list[tuple[int, dict[str, Any]]] = []
    for i, ln in enumerate(lines):
        if not ln.strip():
            continue
        try:
            obj = json.loads(ln.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            if i == last:
                # The writer was killed mid-line: everything before it is intact.
                warnings.append(
                    f"{path.name} line {i + 1}: truncated last {kind} record ignored "
                    "(the writer was killed while writing it)"
                )
                break
            raise SessionError(f"{path} line {i + 1} is not JSON ({e})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("t"), (int, float)):
            raise SessionError(
                f"{path} line {i + 1}: not a {kind} record (needs an object with 't')"
            )
        out.append((i + 1, obj))
    return out


def load_session(path: str | os.PathLike, nvml: bool = True) -> Session:
    """Load and validate a session (folder or its session.json). Raises errors.SessionError.

    ``nvml=False`` skips the NVML journal (cheaper for listings).
    """
    folder, meta_path = _resolve(path)
    meta = _load_meta(meta_path)
    warnings: list[str] = []
    status = meta["status"]
    if status == "running":
        status = "interrupted"
        warnings.append(
            "session.json still says 'running': the writer was killed; loaded as interrupted"
        )
    s = Session(path=folder, meta=meta, status=status, warnings=warnings)

    journal = folder / JOURNAL_FILE
    if not journal.exists():
        raise SessionError(f"{folder} has {META_FILE} but no {JOURNAL_FILE} (incomplete copy?)")
    buckets = {
        "comparison": s.comparisons,
        "sample": s.samples,
        "gate": s.gates,
        "memory": s.memory,
        "note": s.notes,
        "block": s.blocks,
    }
    for lineno, rec in _read_jsonl(journal, warnings, "journal"):
        rtype = rec.get("type")
        if rtype not in REQUIRED:
            s.other.append(rec)
            warnings.append(
                f"{JOURNAL_FILE} line {lineno}: unknown record type {rtype!r} kept aside"
            )
            continue
        problem = check_record(rtype, rec)
        if problem:
            raise SessionError(f"{journal} line {lineno}: {problem}")
        buckets[rtype].append(rec)

    ids = [c["id"] for c in s.comparisons]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        warnings.append(f"comparison id {dup!r} is declared more than once")
    orphans = sorted({x["cmp"] for x in s.samples} - set(ids))
    if orphans:
        warnings.append(f"samples refer to undeclared comparison(s): {', '.join(orphans)}")

    if nvml:
        nv = folder / NVML_FILE
        if nv.exists():
            s.nvml = [r for _, r in _read_jsonl(nv, warnings, "NVML")]
        else:
            warnings.append(f"no {NVML_FILE} (no NVML readings)")
    return s


@dataclass
class SessionInfo:
    """Light facts about one session, for listings."""

    path: Path
    created: str
    slug: str
    status: str
    gpu: str | None
    comparisons: int
    samples: int
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["path"] = str(self.path)
        return d


class SessionList(list):
    """A list of SessionInfo, sorted by creation time; ``skipped`` holds (path, error) pairs."""

    def __init__(self, items=(), skipped: list[tuple[Path, str]] | None = None) -> None:
        super().__init__(items)
        self.skipped: list[tuple[Path, str]] = skipped or []


def list_sessions(root: str | os.PathLike) -> SessionList:
    """Sessions directly under ``root`` (oldest first). Unreadable ones go to ``.skipped``.

    A missing root is an empty listing, not an error. Folders without session.json are ignored
    silently (they are not sessions), except that they are not listed at all.
    """
    root = Path(root)
    if not root.exists():
        return SessionList()
    if not root.is_dir():
        raise BadArgument(f"--root {str(root)!r} is not a folder")
    infos, skipped = [], []
    for d in sorted(root.iterdir()):
        if not d.is_dir() or not (d / META_FILE).exists():
            continue
        try:
            s = load_session(d, nvml=False)
        except SessionError as e:
            skipped.append((d, str(e)))
            continue
        infos.append(
            SessionInfo(
                d,
                s.created,
                s.slug,
                s.status,
                s.gpu_name,
                len(s.comparisons),
                len(s.samples),
                s.warnings,
            )
        )
    infos.sort(key=lambda i: (i.created, i.path.name))
    return SessionList(infos, skipped)
