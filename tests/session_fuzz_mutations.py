"""The bases and mutations behind tests/session_fuzz.py's corrupted sessions.

`make_base` writes a trimmed copy of a real H200 session under sessions/: session.json (its
summary counting the pairs kept, so that the copy is whole, not partial), the journal's memory records plus a few comparisons with their gates and the samples of their
first pairs, and the first NVML readings. Trimmed so that the six commands over ~250 cases stay
fast (a Wilcoxon test over 12 tied pairs costs scipy half a second; over 6 pairs, milliseconds).

A `Mutation` breaks one thing of such a copy in place: a field of session.json (`meta`), of one
journal record (`record`) or of one NVML reading (`nvml_line`), a line (`journal`,
`edit_lines`, `insert_record`, `binary_line`) or a whole file (`write`, `remove`).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.store.session import stored

REPO = Path(__file__).resolve().parent.parent
NAN, INF = float("nan"), float("inf")

BASES = {
    # (committed session, comparisons kept, pairs kept, NVML lines kept)
    "default": (
        "20261129T141409Z_default-r2",
        ("w13/hot", "w13/hot/tinygemm", "w2/rotating", "step/rotating/confirm"),
        6,
        120,
    ),
    "calibrate": ("20261129T141504Z_calibrate", ("w13/hot/spin=0", "w13/hot/spin=80"), 6, 60),
}


def _text(folder: Path, name: str) -> str:
    """A committed session's journal or NVML file, packed (.gz) or not."""
    path = stored(folder, name)
    raw = path.read_bytes()
    return (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode()


def make_base(kind: str, dst: Path) -> Path:
    """A trimmed copy of the committed session behind ``BASES[kind]`` at ``dst``."""
    name, keep, pairs, nvml_lines = BASES[kind]
    src = REPO / "sessions" / name
    dst.mkdir(parents=True)
    m = json.loads((src / "session.json").read_text())
    # the summary counts what the trimmed journal holds (else the copy loads as partial)
    m["summary"]["comparisons"] = [
        dict(c, pairs=min(c["pairs"], pairs))
        for c in m["summary"]["comparisons"]
        if c["id"] in keep
    ]
    (dst / "session.json").write_text(json.dumps(m, indent=2) + "\n")
    out = []
    for line in _text(src, "journal.jsonl").splitlines():
        rec = json.loads(line)
        t = rec["type"]
        if (
            t in ("memory", "note")
            or (t == "comparison" and rec["id"] in keep)
            or (t == "gate" and rec["cmp"] in keep)
            or (t == "sample" and rec["cmp"] in keep and rec["pair"] < pairs)
        ):
            out.append(line)
    (dst / "journal.jsonl").write_text("\n".join(out) + "\n")
    nv = _text(src, "nvml.jsonl").splitlines()[:nvml_lines]
    (dst / "nvml.jsonl").write_text("\n".join(nv) + "\n")
    return dst


# ------------------------------------------------------------------------------ mutations

Mutation = Callable[[Path], None]


def dump(obj: Any) -> str:
    return json.dumps(obj, allow_nan=True)


def meta(*keys: str, value: Any = None, delete: bool = False) -> Mutation:
    """Set (or delete) session.json[keys[0]][keys[1]]...; missing parents are created."""

    def mutate(d: Path) -> None:
        m = json.loads((d / "session.json").read_text())
        node = m
        for k in keys[:-1]:
            if not isinstance(node.get(k), dict):
                node[k] = {}
            node = node[k]
        if delete:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value
        (d / "session.json").write_text(dump(m))

    return mutate


def edit_lines(d: Path, file: str, edit: Callable[[list[str]], list[str]]) -> None:
    p = d / file
    p.write_text("\n".join(edit(p.read_text().splitlines())) + "\n")


def nth_index(lines: list[str], rtype: str, nth: int = 0) -> int:
    hits = [i for i, ln in enumerate(lines) if json.loads(ln).get("type") == rtype]
    return hits[nth]


def record(rtype: str, field: str, value: Any = None, delete: bool = False, nth: int = 0):
    """Set (or delete) ``field`` of the nth journal record of type ``rtype``."""

    def edit(lines: list[str]) -> list[str]:
        i = nth_index(lines, rtype, nth)
        rec = json.loads(lines[i])
        if delete:
            del rec[field]
        else:
            rec[field] = value
        lines[i] = dump(rec)
        return lines

    return lambda d: edit_lines(d, "journal.jsonl", edit)


def journal(edit: Callable[[list[str]], list[str]]) -> Mutation:
    return lambda d: edit_lines(d, "journal.jsonl", edit)


def nvml_line(i: int, field: str, value: Any) -> Mutation:
    def edit(lines: list[str]) -> list[str]:
        rec = json.loads(lines[i])
        rec[field] = value
        lines[i] = dump(rec)
        return lines

    return lambda d: edit_lines(d, "nvml.jsonl", edit)


def write(file: str, content: str | bytes) -> Mutation:
    def mutate(d: Path) -> None:
        p = d / file
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)

    return mutate


def remove(file: str, as_dir: bool = False) -> Mutation:
    def mutate(d: Path) -> None:
        (d / file).unlink()
        if as_dir:
            (d / file).mkdir()

    return mutate


def parse_records(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in lines]


def samples_where(pred: Callable[[dict], bool], change: Callable[[dict], dict | None]) -> Mutation:
    """Replace every sample matching ``pred`` by ``change(sample)`` (None drops it)."""

    def edit(lines: list[str]) -> list[str]:
        out = []
        for rec in parse_records(lines):
            if rec["type"] == "sample" and pred(rec):
                rec = change(dict(rec))
            if rec is not None:
                out.append(dump(rec))
        return out

    return journal(edit)


def insert_record(obj: Any, raw: bool = False) -> Mutation:
    """Insert a journal line after the third: ``obj`` as JSON, or as it is with ``raw``."""
    line = obj if raw else dump(obj)
    return journal(lambda ls: [*ls[:3], line, *ls[3:]])


def binary_line(p: Path, i: int) -> None:
    """Put two non-UTF-8 bytes in front of line ``i`` of the file at ``p``."""
    lines = p.read_bytes().split(b"\n")
    lines[i] = b"\xff\xfe" + lines[i]
    p.write_bytes(b"\n".join(lines))
