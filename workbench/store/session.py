"""Session folders (docs/DESIGN.md §8): ``session.json`` plus append-only JSON-lines journals.

Layout (docs/ARCHITECTURE.md, "Sessions")::

    <root>/<YYYYmmddTHHMMSSZ>_<slug>/
        session.json    metadata, rewritten atomically (temp file + os.replace)
        journal.jsonl   comparison | block | gate | memory | sample | note records, flushed + fsynced per record
        nvml.jsonl      NVML readings, flushed per line, fsynced about once a second

A finished session may be packed (``workbench sessions pack``): both JSON-lines files become
``.gz``, which every reader loads alike (``stored``).

The writer is what makes a killed run still useful: every finished record is on disk before
``record`` returns, so SIGKILL loses at most the record being written (a truncated last line,
which the loader tolerates and reports). A session whose status is still "running" when loaded
was killed and loads as "interrupted".
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import re
import tempfile
import threading
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from workbench.core.errors import BadArgument, SessionError
from workbench.core.files import share
from workbench.store import session_schema as schema
from workbench.store.session_schema import SCHEMA, STATUSES  # noqa: F401 (part of this module's API)

FINAL_STATUSES = ("complete", "interrupted", "failed")
META_FILE, JOURNAL_FILE, NVML_FILE = "session.json", "journal.jsonl", "nvml.jsonl"
PACKED = ".gz"  # the suffix of a packed (compressed) journal or NVML file

# Fields every journal record of a type must carry (besides "type" and "t"); checked by the
# writer (BadArgument, so a caller's bug shows at once) and by the loader (SessionError).
REQUIRED: dict[str, tuple[str, ...]] = {
    "comparison": ("id", "kernel", "set", "role", "a", "b", "calls", "replays"),
    "sample": ("cmp", "pair", "slot", "arm", "ms"),
    "gate": ("cmp", "ok"),
    "memory": (),
    "note": ("text",),
    "block": ("block", "status"),  # a block's placement (docs/DESIGN.md §5.5)
    "candidate": ("candidate", "status"),  # a screened tune candidate (docs/DESIGN.md §11)
    "worker": ("worker", "status"),  # one worker process of the run (docs/DESIGN.md §5.10)
}
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
        share(fd)  # mkstemp makes it 0600; session.json is for everyone who may read the folder
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

    @property
    def environment(self) -> dict[str, Any]:
        """session.json's environment as it stands (a copy)."""
        return dict(self._meta.get("environment") or {})

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
    """A loaded, validated session (`workbench.store.session_schema` lists what is checked).

    ``status`` is "interrupted" for a session left "running", and "partial" for one that says
    "complete" but journals fewer samples than its summary counted (a truncated journal).
    """

    path: Path
    meta: dict[str, Any]
    status: str
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    gates: list[dict[str, Any]] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    blocks: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)  # tune sessions
    workers: list[dict[str, Any]] = field(default_factory=list)  # one per worker process
    nvml: list[dict[str, Any]] = field(default_factory=list)
    other: list[dict[str, Any]] = field(default_factory=list)  # unknown record types, kept
    warnings: list[str] = field(default_factory=list)

    config = property(lambda self: self.meta.get("config") or {})
    provenance = property(lambda self: self.meta.get("provenance") or {})
    environment = property(lambda self: self.meta.get("environment") or {})

    @property
    def gpu(self) -> dict[str, Any]:
        """environment.gpu as a dict (name, uuid, clocks...); {} where absent or an older session
        spelled it as a bare string (gpu_name reads that spelling)."""
        gpu = self.environment.get("gpu")
        return gpu if isinstance(gpu, dict) else {}

    summary = property(lambda self: self.meta.get("summary"))
    created = property(lambda self: self.meta.get("created", ""))
    finished = property(lambda self: self.meta.get("finished"))
    slug = property(lambda self: self.meta.get("slug", ""))

    @property
    def boards(self) -> list[str]:
        """The boards this session measured on: its workers' GPU UUIDs, else the GPU its
        environment names; empty where neither was recorded."""
        uuids = sorted({w["uuid"] for w in self.workers if w.get("uuid")})
        if not uuids:
            one = self.gpu.get("uuid")
            uuids = [one] if one else []
        return uuids

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
        if not meta.is_file():
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
    except (json.JSONDecodeError, RecursionError) as e:
        where = f"line {e.lineno}, column {e.colno}: {e.msg}" if hasattr(e, "lineno") else e
        raise SessionError(f"{meta_path} is truncated or not JSON ({where})") from None
    problem = schema.meta_problem(meta)
    if problem:
        raise SessionError(f"{meta_path}: {problem}")
    return meta


def stored(folder: Path, name: str) -> Path:
    """Where a session keeps its journal or NVML file: ``name``, or ``name.gz`` once packed."""
    plain = folder / name
    packed = folder / (name + PACKED)
    return packed if not plain.exists() and packed.exists() else plain


def pack_session(folder: str | Path) -> int:
    """Compress a finished session's journal and NVML readings in place (``.gz``; every reader
    loads either form): the journal of a default run shrinks about 5x, its readings 15x, for
    sessions committed as evidence. Returns the bytes saved. Refuses a running session."""
    folder = Path(folder)
    s = load_session(folder, nvml=False)  # a session that does not load is not packed
    if s.status == "running" or s.meta.get("status") == "running":
        raise BadArgument(f"{folder}: the session is still running; pack it once it has finished")
    saved = 0
    for name in (JOURNAL_FILE, NVML_FILE):
        plain = folder / name
        if not plain.is_file():
            continue
        raw = plain.read_bytes()
        packed = folder / (name + PACKED)
        tmp = packed.with_suffix(packed.suffix + ".tmp")
        try:
            tmp.write_bytes(gzip.compress(raw, mtime=0))
            os.chmod(tmp, 0o644)
            os.replace(tmp, packed)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise BadArgument(f"cannot write {packed}: {e.strerror or e}") from None
        saved += len(raw) - packed.stat().st_size
        plain.unlink()
    return saved


def _read_jsonl(path: Path, warnings: list[str], kind: str) -> list[tuple[int, Any]]:
    """(line number, parsed value) per non-blank line. A bad last line WITHOUT its newline is a
    warning (the writer, which writes a record and its newline at once, was killed mid-line);
    any other bad line, the last one included when it ends in a newline, raises SessionError
    unless ``kind`` is "NVML", whose bad lines are skipped with one warning (readings only
    annotate the plots)."""
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":  # a packed session (pack_session)
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise SessionError(f"cannot read {path}: {e}") from None
    lines = raw.split(b"\n")
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    out: list[tuple[int, Any]] = []
    for i, ln in enumerate(lines):
        if not ln.strip():
            continue
        try:
            out.append((i + 1, json.loads(ln.decode("utf-8"))))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
            if i == last and i == len(lines) - 1:  # cut short: no newline after it
                warnings.append(
                    f"{path.name} line {i + 1}: truncated last {kind} record ignored "
                    "(the writer was killed while writing it)"
                )
                break
            if kind == "NVML":
                out.append((i + 1, None))  # reported with the other bad readings
                continue
            raise SessionError(f"{path} line {i + 1} is not JSON ({e})") from None
    return out


def _finite_diagnostics(rec: dict[str, Any], lineno: int, warnings: list[str]) -> None:
    """A gate may measure NaN, inf or an absurd error (the numerics are broken): keep the
    record, drop the number. Its ``ok`` is false already; the report shows the error as n/a."""
    for key in ("rel_l2", "max_abs_diff"):
        v = rec.get(key)
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if number and not (math.isfinite(v) and v <= schema.DIAG_MAX):
            rec[key] = None
            warnings.append(
                f"{JOURNAL_FILE} line {lineno}: gate {key} is not a finite number of at most "
                f"{schema.DIAG_MAX:g} (shown as n/a)"
            )


def _load_journal(s: Session, journal: Path) -> None:
    buckets = {
        "comparison": s.comparisons,
        "sample": s.samples,
        "gate": s.gates,
        "memory": s.memory,
        "note": s.notes,
        "block": s.blocks,
        "candidate": s.candidates,
        "worker": s.workers,
    }
    for lineno, rec in _read_jsonl(journal, s.warnings, "journal"):
        if not isinstance(rec, dict):
            raise SessionError(f"{journal} line {lineno}: not a journal record (needs an object)")
        rtype = rec.get("type")
        if not isinstance(rtype, str) or rtype not in REQUIRED:
            problem = schema.fields(rec, {"t": schema.RECORDS["note"]["t"]})
            if problem:
                raise SessionError(f"{journal} line {lineno}: record {problem}")
            s.other.append(rec)
            s.warnings.append(
                f"{JOURNAL_FILE} line {lineno}: unknown record type {schema.show(rtype)} kept aside"
            )
            continue
        if rtype == "gate":
            _finite_diagnostics(rec, lineno, s.warnings)
        problem = schema.record_problem(rtype, rec)
        if problem:
            raise SessionError(f"{journal} line {lineno}: {problem}")
        buckets[rtype].append(rec)
    problem = schema.pair_problem(s.samples)
    if problem:
        raise SessionError(f"{journal}: {problem}")
    ids = [c["id"] for c in s.comparisons]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        s.warnings.append(f"comparison id {dup!r} is declared more than once")
    orphans = sorted({x["cmp"] for x in s.samples} - set(ids))
    if orphans:
        s.warnings.append(f"samples refer to undeclared comparison(s): {', '.join(orphans)}")


def _load_nvml(path: Path, warnings: list[str]) -> list[dict[str, Any]]:
    readings, bad = [], []
    for lineno, rec in _read_jsonl(path, warnings, "NVML"):
        if not isinstance(rec, dict):
            bad.append(f"line {lineno}: not a JSON object")
            continue
        problem = schema.fields(rec, schema.NVML_READING)
        if problem:
            bad.append(f"line {lineno}: {problem}")
        else:
            readings.append(rec)
    if bad:
        warnings.append(f"{path.name}: {len(bad)} bad reading(s) skipped (first: {bad[0]})")
    return readings


def _samples_present(s: Session) -> tuple[int, int]:
    """(samples journaled, samples the finished run counted): session.json's summary records
    each comparison's complete ABBA pairs (4 samples each) when the run ends, so a journal
    holding fewer was cut short afterwards. A sample measured again (a flagged one) counts
    once; a session without a summary counts nothing here."""
    taken: dict[str, set[tuple[Any, Any, Any]]] = {}
    for x in s.samples:
        taken.setdefault(x["cmp"], set()).add((x.get("block"), x["pair"], x["slot"]))
    present = planned = 0
    for c in (s.summary or {}).get("comparisons") or []:
        pairs = c.get("pairs") if isinstance(c, dict) else None
        if isinstance(pairs, int) and not isinstance(pairs, bool) and pairs > 0:
            planned += 4 * pairs
            present += min(len(taken.get(c.get("id"), ())), 4 * pairs)
    return present, planned


def load_session(path: str | os.PathLike, nvml: bool = True) -> Session:
    """Load and validate a session (folder or its session.json). Raises errors.SessionError
    with one line naming the file (and line) and the bad field.

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
    journal = stored(folder, JOURNAL_FILE)
    if not journal.is_file():
        raise SessionError(f"{folder} has {META_FILE} but no {JOURNAL_FILE} (incomplete copy?)")
    _load_journal(s, journal)
    records = (s.comparisons, s.samples, s.gates, s.memory, s.notes, s.blocks, s.candidates)
    if status == "complete" and not any(records) and not s.other:
        raise SessionError(
            f"{journal} holds no records, yet {META_FILE} says 'status': 'complete' "
            "(a finished run journals at least its comparisons)"
        )
    if status == "complete":
        present, planned = _samples_present(s)
        if present < planned:
            s.status = "partial"
            warnings.append(
                f"{JOURNAL_FILE} holds {present} of the {planned} samples the run counted in "
                f"{META_FILE}'s summary (a truncated copy?): shown as partial, not complete"
            )
    if nvml:
        nv = stored(folder, NVML_FILE)
        if nv.is_file():
            s.nvml = _load_nvml(nv, warnings)
        else:
            warnings.append(f"no {NVML_FILE} (no NVML readings)")
    return s
