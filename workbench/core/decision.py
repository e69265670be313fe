"""The decision file an inference engine reads, and the one function that reads it (docs/EXPORT.md).

``workbench export`` writes, per device and MoE shape, which metadata layout and reader each
kernel should use, with the evidence behind it. An engine calls ``resolve`` at weight-loading
time; it follows the rules of the engine default the workbench was opened for:

* no request (``None`` / ``"auto"``): the evidence decides where there is evidence (the compact
  3-byte layout with each kernel's measured reader); where there is none (another GPU, another
  shape, a build without the readers, a reader verdict still inconclusive), the safe choice, the 4-byte layout with its scalar reader,
  and an info message saying why;
* an explicit request for the compact layout (``"1"``, ``"on"``, ``True``, ``"b3"``) is served
  where the file has both kernels' readers for this device and shape (an inconclusive one keeps
  the scalar reader) and the build has them; one that cannot be served fails closed: ``DecisionError`` names the device, the shape and what is missing;
* an explicit off (``"0"``, ``"off"``, ``False``, ``"b4"``) keeps the 4-byte layout, evidence or not.

Standard library only, and no other workbench module: an engine may vendor this one file, and
importing it costs nothing (tests/test_export.py checks that it pulls in no NumPy, torch or SciPy).
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "workbench.decisions/1"
KERNELS = ("w13", "w2")  # core/vocab.KERNELS, spelled out: this module imports no workbench module
COMPACT = "b3"  # the 3-byte layout, {FP16 scale, u8 zero}
SAFE = "b4"  # the 4-byte layout: one reader (scalar), the engine's layout before the evidence
SAFE_ARM = "b4-scalar"
# What an engine may pass as ``requested`` (an environment variable's text, or a bool).
AUTO = (None, "", "auto", "default")
ON = (True, "1", "on", "true", "yes", COMPACT)
OFF = (False, "0", "off", "false", "no", SAFE)


class DecisionError(ValueError):
    """A request that cannot be served, or a file that is not a decision file: one line that
    names what is wrong."""


def device_key(name: str) -> str:
    """The device name as vLLM keys its tuned MoE files: every space becomes an underscore, and
    any GPU of the H200 family (a name with the word H200) is ``NVIDIA_H200``. Idempotent."""
    key = "_".join(name.split(" "))
    return "NVIDIA_H200" if "H200" in key.split("_") else key


@dataclass(frozen=True)
class ShapeKey:
    """A MoE layer as vLLM's fused-MoE tuner names it, plus what our kernels depend on:
    ``E`` experts, ``N`` the intermediate size per rank (inter / tp), ``K`` the hidden size,
    ``group`` the quantization group size, ``tp`` the tensor-parallel size."""

    E: int
    N: int
    K: int
    group: int
    tp: int

    @classmethod
    def of(cls, shape: ShapeKey | Mapping[str, Any] | str) -> ShapeKey:
        """From a ShapeKey, a {E, N, K, group, tp} mapping, a workbench shape dict (hidden,
        inter, experts, tp, group) or a key string ``E=512,N=160,K=2560,group=32,tp=4``."""
        if isinstance(shape, ShapeKey):
            return shape
        if isinstance(shape, str):
            try:
                d: dict[str, Any] = dict(kv.split("=", 1) for kv in shape.split(","))
            except ValueError:
                raise DecisionError(
                    f"shape {shape!r} is not E=..,N=..,K=..,group=..,tp=.."
                ) from None
            shape = d
        if not isinstance(shape, Mapping):
            raise DecisionError(f"shape {shape!r} is neither a ShapeKey, a mapping nor a key")
        if "hidden" in shape:  # a workbench Shape.to_dict()
            tp = shape.get("tp", 1)
            shape = {"E": shape.get("experts"), "N": _div(shape.get("inter"), tp),
                     "K": shape.get("hidden"), "group": shape.get("group", 32), "tp": tp}  # fmt: skip
        vals = {}
        for f in ("E", "N", "K", "group", "tp"):
            v = shape.get(f)
            try:
                vals[f] = int(v)
            except (TypeError, ValueError):
                raise DecisionError(f"shape field {f}={v!r} is not an integer") from None
            if vals[f] <= 0 or str(vals[f]) != str(v).strip():
                raise DecisionError(f"shape field {f}={v!r} must be a positive integer")
        return cls(**vals)

    def key(self) -> str:
        return f"E={self.E},N={self.N},K={self.K},group={self.group},tp={self.tp}"


def _div(a: Any, b: Any) -> Any:
    return a // b if isinstance(a, int) and isinstance(b, int) and b and a % b == 0 else None


def file_name(device: str, shape: ShapeKey | Mapping[str, Any] | str) -> str:
    """The vLLM-style name of the file that holds ``device``'s entries for ``shape``'s E and N
    (every K, group and tp of them is an entry inside): ``E=512,N=160,device_name=NVIDIA_H200.json``."""
    s = ShapeKey.of(shape)
    return f"E={s.E},N={s.N},device_name={device_key(device)}.json"


# ------------------------------------------------------------------------------ reading


def check(doc: Any, where: str = "decisions") -> dict[str, Any]:
    """``doc`` if it is a decision document this module can read; DecisionError otherwise."""
    if not isinstance(doc, Mapping) or doc.get("schema") != SCHEMA:
        got = doc.get("schema") if isinstance(doc, Mapping) else type(doc).__name__
        raise DecisionError(
            f"{where}: not a workbench decision file (schema {got!r}, want {SCHEMA!r})"
        )
    devices = doc.get("devices")
    if not isinstance(devices, Mapping):
        raise DecisionError(f"{where}: 'devices' must be an object")
    for dev, d in devices.items():
        shapes = d.get("shapes") if isinstance(d, Mapping) else None
        if not isinstance(shapes, Mapping):
            raise DecisionError(f"{where}: devices.{dev}.shapes must be an object")
        for key, e in shapes.items():
            layouts = e.get("layouts") if isinstance(e, Mapping) else None
            if not isinstance(layouts, Mapping):
                raise DecisionError(
                    f"{where}: devices.{dev}.shapes[{key!r}].layouts must be an object"
                )
            for lay, ks in layouts.items():
                for k, choice in (ks or {}).items() if isinstance(ks, Mapping) else [(None, None)]:
                    if not isinstance(choice, Mapping) or not isinstance(choice.get("arm"), str):
                        raise DecisionError(
                            f"{where}: devices.{dev}.shapes[{key!r}].layouts.{lay}.{k} lacks an arm"
                        )
    return dict(doc)


def merge(docs: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One document from several (the files of a vLLM-format folder); an entry present twice
    must be the same entry."""
    out: dict[str, Any] = {"schema": SCHEMA, "devices": {}}
    for doc in docs:
        for dev, d in doc["devices"].items():
            slot = out["devices"].setdefault(dev, {"names": [], "shapes": {}})
            slot["names"] = sorted(set(slot["names"]) | set(d.get("names") or []))
            for key, e in d["shapes"].items():
                if key in slot["shapes"] and slot["shapes"][key] != e:
                    raise DecisionError(f"{dev} {key}: two different entries in one folder")
                slot["shapes"][key] = e
    return out


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A decision document from a plain JSON file (``--format json``) or a folder of vLLM-style
    files (``--format per-shape``; every ``E=*,N=*,device_name=*.json`` in it, merged)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("E=*,N=*,device_name=*.json"))
        if not files:
            raise DecisionError(f"{p}: no E=...,N=...,device_name=....json file in the folder")
        return merge([_read(f) for f in files])
    return _read(p)


def _read(p: Path) -> dict[str, Any]:
    try:
        return check(json.loads(p.read_text()), str(p))
    except OSError as e:
        raise DecisionError(f"{p}: cannot read ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise DecisionError(f"{p}: not JSON ({e.msg} at line {e.lineno})") from None


# ------------------------------------------------------------------------------ resolving


@dataclass(frozen=True)
class Resolution:
    """What the engine uses: ``layout`` (b3 or b4) and ``arms`` {kernel: arm}, why
    (``source``: "evidence", "fallback", "explicit-on" or "explicit-off"), a message to log at
    info level, and the evidence entry it came from (None without one)."""

    layout: str
    arms: dict[str, str]
    source: str
    message: str
    entry: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def compact(self) -> bool:
        return self.layout == COMPACT

    def reader(self, kernel: str) -> str:
        """ "coop" or "scalar": the reader part of the kernel's arm (its parameters dropped)."""
        return self.arms[kernel].partition("@")[0].rpartition("-")[2]


def _mode(requested: Any) -> str:
    r = requested.strip().lower() if isinstance(requested, str) else requested
    if isinstance(r, bool):
        return "on" if r else "off"
    if r in AUTO:
        return "auto"
    if r in ON:
        return "on"
    if r in OFF:
        return "off"
    raise DecisionError(
        f"requested {requested!r} is not a layout request: use 1/on/b3 (compact), 0/off/b4 "
        "(4-byte) or leave it unset (the evidence decides)"
    )


def resolve(
    decisions: Mapping[str, Any] | None,
    device: str,
    shape: ShapeKey | Mapping[str, Any] | str,
    requested: Any = None,
    available: Collection[str] | None = None,
) -> Resolution:
    """The layout and reader per kernel for ``device`` (its name as the driver gives it, or the
    vLLM key) and ``shape``, by the rules in the module docstring. ``decisions``: a loaded
    document (``load``), or None when the engine found no file. ``available``: the arms this
    build can run (e.g. {"b4-scalar", "b3-scalar", "b3-coop"}); None means all of them.

    Pure: it logs nothing and reads no environment; the caller logs ``message``."""
    mode = _mode(requested)
    s = ShapeKey.of(shape)
    dev = device_key(device)
    safe = {k: SAFE_ARM for k in KERNELS}
    where = f"{dev} {s.key()}"
    if mode == "off":
        return Resolution(SAFE, safe, "explicit-off", f"{where}: 4-byte layout, as requested")
    why, entry, arms = _evidence(decisions, dev, s)
    undecided = [
        k
        for k in KERNELS
        if arms and entry["layouts"][COMPACT][k].get("decision") == "inconclusive"
    ]
    if undecided and mode == "auto":  # "measure more" is no evidence for a new default
        why, arms = f"the reader evidence for {', '.join(undecided)} is inconclusive", None
    if arms is not None and available is not None:
        missing = sorted(set(arms.values()) - set(available))
        if missing:
            why, arms = f"this build lacks {', '.join(missing)}", None
    if arms is not None:
        sessions = ", ".join(x.get("id", "?") for x in (entry or {}).get("sessions", []))
        readers = ", ".join(f"{k} {a}" for k, a in arms.items())
        return Resolution(COMPACT, arms, "evidence" if mode == "auto" else "explicit-on",
                          f"{where}: compact layout, {readers} (evidence: {sessions}"
                          f"{_scope(entry)})", entry)  # fmt: skip
    if mode == "on":
        raise DecisionError(
            f"{where}: the compact layout was requested but cannot be served: {why}"
        )
    return Resolution(
        SAFE, safe, "fallback", f"{where}: 4-byte layout (safe default): {why}", entry
    )


def _scope(entry: Mapping[str, Any] | None) -> str:
    """ "; the model's, over 2 boards" or "; GPU-712d216e's, not the model's": whose decision
    an entry is (`export`'s scope; files written before entries had one say nothing)."""
    boards = [b.get("board", "?") for b in (entry or {}).get("boards") or []]
    scope = (entry or {}).get("scope")
    if scope == "model":
        return f"; the model's, over {len(boards)} boards"
    if scope == "board":
        return f"; {', '.join(b[:12] for b in boards) or 'one board'}'s, not the model's"
    return ""


def _evidence(
    decisions: Mapping[str, Any] | None, dev: str, s: ShapeKey
) -> tuple[str, dict[str, Any] | None, dict[str, str] | None]:
    """(why there is no usable evidence, the entry, {kernel: compact arm} or None)."""
    if decisions is None:
        return "no decision file", None, None
    doc = check(decisions)
    d = doc["devices"].get(dev)
    if d is None:
        known = ", ".join(sorted(doc["devices"])) or "none"
        return f"no evidence for this device (the file has {known})", None, None
    entry = d["shapes"].get(s.key())
    if entry is None:
        known = "; ".join(sorted(d["shapes"])) or "none"
        return f"no evidence for this shape (the file has {known})", None, None
    compact = entry["layouts"].get(COMPACT) or {}
    lacking = [k for k in KERNELS if k not in compact]
    if lacking:
        return f"no reader evidence for {', '.join(lacking)}", dict(entry), None
    return "", dict(entry), {k: str(compact[k]["arm"]) for k in KERNELS}
