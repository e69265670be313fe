"""A session's hardware counters: ``counters.json`` beside ``session.json`` (docs/ARCHITECTURE.md,
"Sessions"), written once after the timed run by `workbench ab --counters`
(workbench/measure/counters.py) and never part of a verdict. ncu's own CSV stays beside it in
``counters/<set>.csv``.

    {"schema": "workbench.counters/1", "created": ISO, "ncu": version, "runs": [...],
     "launches": [{"cmp", "kernel", "set", "side": "A"|"B", "arm", "kernel_name", "block",
                   "grid", "metrics": {key: number|null}, "stalls": {reason: number}}]}

The loader trusts nothing, as the session loader does: a bad file is one SessionError line
naming the file and the field.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from workbench.core.errors import SessionError
from workbench.store import session_schema as sc
from workbench.store.session import _atomic_write_json

FILE = "counters.json"
SCHEMA = "workbench.counters/1"
_VALUE = sc.nullable(sc.real(-1e18, 1e18))

_LAUNCH = {
    "cmp": (True, sc.text),
    "kernel": (True, sc.one_of("w13", "w2")),
    "set": (True, sc.one_of("hot", "rotating")),
    "side": (True, sc.one_of("A", "B")),
    "arm": (True, sc.text),
    "kernel_name": (True, sc.text),
    "block": (False, sc.any_text),
    "grid": (False, sc.any_text),
    "metrics": (True, lambda v: _numbers(v, _VALUE)),
    "stalls": (True, lambda v: _numbers(v, sc.real(0, 1e9))),
}


def _numbers(v: Any, check) -> str | None:
    if not isinstance(v, dict):
        return "must be an object"
    for k, x in v.items():
        problem = check(x)
        if problem:
            return f"field {k!r} {problem}, got {sc.show(x)}"
    return None


def save(session_path: str | Path, doc: dict[str, Any]) -> Path:
    """Write ``doc`` (measure.counters.collect's) as the session's counters file, atomically."""
    path = Path(session_path) / FILE
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    out = {"schema": SCHEMA, "created": now, **doc}
    problem = problem_of(out)
    if problem:  # a caller's bug: never write what the loader would refuse
        raise SessionError(f"{path}: {problem}")
    _atomic_write_json(path, out)
    return path


def load(session_path: str | Path) -> dict[str, Any] | None:
    """The session's counters document, or None when it has none."""
    path = Path(session_path) / FILE
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SessionError(f"{path}: unreadable ({type(e).__name__}: {e})") from None
    problem = problem_of(doc)
    if problem:
        raise SessionError(f"{path}: {problem}")
    return doc


def problem_of(doc: Any) -> str | None:
    """The first problem of a counters document, or None."""
    if not isinstance(doc, dict):
        return "must be a JSON object"
    if doc.get("schema") != SCHEMA:
        return f"'schema' must be {SCHEMA!r}, got {sc.show(doc.get('schema'))}"
    top = {"created": (True, sc.iso_time), "ncu": (True, sc.any_text)}
    top["launches"] = (True, sc.list_of(sc.mapping(_LAUNCH)))
    problem = sc.fields(doc, top)
    if problem:
        return problem
    seen = set()
    for n, launch in enumerate(doc["launches"]):
        key = (launch["cmp"], launch["side"])
        if key in seen:
            return f"launches[{n}]: {launch['cmp']} side {launch['side']} appears twice"
        seen.add(key)
    return None
