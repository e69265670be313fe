"""What a loadable session holds: the type and range of every field the workbench reads.

Like pyperf's loader, the session loader trusts nothing: ``session.json`` must carry the schema
this code knows, and every field that a command, a plot, the report or the TUI reads is checked
for type and range here, so that analysis code downstream can index and divide without guards.
A value outside its range is an error even when it is a valid number: a sample of 1e308 ms would
otherwise print a ratio of 5.8e-309, and an L2 size of 1e-300 bytes an "inf×" working set.

Each check returns ``None`` or the problem as ``"<field> must be ..., got <value>"``; the loader
(`workbench.store.session`) adds the file (and line) and raises `errors.SessionError`, so a bad session
costs the user one line naming the file and the field. Fields nothing reads are not checked, and
unknown fields are kept: newer writers may add them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

SCHEMA = "workbench.session/1"
STATUSES = ("running", "complete", "interrupted", "failed")

# Ranges of "not absurd" values. A sample is the median ms of one replay of `calls` kernel calls:
# under a nanosecond or over a quarter of an hour is a corrupt file, not a measurement.
MS_RANGE = (1e-6, 1e6)
MAX_BYTES = 1 << 50  # 1 PiB: above any GPU memory, L2 or working set
MAX_COUNT = 10**6  # calls per replay, replays per sample, banks, graphs
MAX_DIM = 10**7  # a shape dimension
T_RANGE = (0.0, 1e10)  # unix seconds (1e10 is the year 2286)
DIAG_MAX = 1e6  # a gate's error beyond this (or NaN/inf) is broken numerics: kept, shown as n/a
MAX_CONFIG_ABS = 1e15  # any number stored in config
M_RANGE = (0.0, 0.5)  # minimum effect, open at both ends: the runner's own rule (--min-effect)

Check = Callable[[Any], "str | None"]


def show(v: Any) -> str:
    """A value for an error message: its repr, cut to 40 characters."""
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def integer(lo: int, hi: int) -> Check:
    def check(v: Any) -> str | None:
        if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi:
            return None
        return f"must be an integer in [{lo}, {hi:g}]"

    return check


def real(lo: float, hi: float, open_lo: bool = False, open_hi: bool = False) -> Check:
    """A finite number in [lo, hi]; ``open_lo``/``open_hi`` exclude the bound."""
    above = (lambda v: v > lo) if open_lo else (lambda v: v >= lo)
    below = (lambda v: v < hi) if open_hi else (lambda v: v <= hi)
    interval = f"{'(' if open_lo else '['}{lo:g}, {hi:g}{')' if open_hi else ']'}"

    def check(v: Any) -> str | None:
        if _is_num(v) and math.isfinite(v) and above(v) and below(v):
            return None
        return f"must be a finite number in {interval}"

    def all_ok(v: list[Any]) -> bool:
        """True when every item of ``v`` is a float that passes ``check``; False means "look at
        each item". A sample carries 20-50 replay times: this runs in C (type set, fsum for
        NaN/inf, min and max) instead of one call per item."""
        if not v or set(map(type, v)) != {float}:
            return False
        try:
            if not math.isfinite(math.fsum(v)):
                return False
        except (ValueError, OverflowError):  # inf - inf
            return False
        return above(min(v)) and below(max(v))

    check.all_ok = all_ok  # type: ignore[attr-defined]
    return check


def text(v: Any) -> str | None:
    return None if isinstance(v, str) and v else "must be a non-empty string"


def any_text(v: Any) -> str | None:
    return None if isinstance(v, str) else "must be a string"


def boolean(v: Any) -> str | None:
    return None if isinstance(v, bool) else "must be true or false"


def one_of(*choices: str) -> Check:
    return lambda v: None if v in choices and isinstance(v, str) else f"must be one of {choices}"


def nullable(check: Check) -> Check:
    return lambda v: None if v is None else check(v)


def list_of(check: Check, max_len: int = MAX_COUNT) -> Check:
    all_ok = getattr(check, "all_ok", None)

    def run(v: Any) -> str | None:
        if not isinstance(v, list) or len(v) > max_len:
            return "must be a list"
        if all_ok is not None and all_ok(v):
            return None
        for x in v:
            problem = check(x)
            if problem:
                return f"holds {show(x)}: each item {problem}"
        return None

    return run


def scalar(v: Any) -> str | None:
    """A printable fact (driver, CUDA or torch version, sm)."""
    if isinstance(v, str) or (_is_num(v) and math.isfinite(v)):
        return None
    return "must be a string or a finite number"


def iso_time(v: Any) -> str | None:
    if isinstance(v, str):
        try:
            datetime.fromisoformat(v.replace("Z", "+00:00"))
            return None
        except ValueError:
            pass
    return "must be an ISO-8601 time like 2026-11-29T14:03:59.123Z"


_t = real(*T_RANGE, open_lo=True)  # unix seconds


def fields(
    obj: Mapping[str, Any], spec: Mapping[str, tuple[bool, Check]], where: str = ""
) -> str | None:
    """The first problem of ``obj`` against ``spec`` ({field: (required, check)}), or None."""
    for name, (required, check) in spec.items():
        if name not in obj:
            if required:
                return f"lacks '{where}{name}'"
            continue
        problem = check(obj[name])
        if problem:
            return f"'{where}{name}' {problem}, got {show(obj[name])}"
    return None


def mapping(spec: Mapping[str, tuple[bool, Check]]) -> Check:
    """An object whose fields follow ``spec`` (nested problems name the inner field)."""

    def check(v: Any) -> str | None:
        if not isinstance(v, dict):
            return "must be an object"
        inner = fields(v, spec)
        return None if inner is None else f"has a bad field: {inner}"

    return check


# ---------------------------------------------------------------------------- journal records

REQ, OPT = True, False
BYTES = nullable(integer(0, MAX_BYTES))
MS = real(*MS_RANGE)
MHZ = nullable(real(0, 1e5))
THROTTLE = nullable(integer(0, 2**64 - 1))
DIAG = nullable(real(0, DIAG_MAX))  # a gate's rel_l2 / max_abs_diff (normalised first)
GPU = nullable(integer(0, 1023))  # index among the run's visible GPUs (tune workers)
HOST = nullable(text)  # the host a Ray sweep's record was measured on (GPU: its index there)

RECORDS: dict[str, dict[str, tuple[bool, Check]]] = {
    "comparison": {
        "t": (REQ, _t),
        "id": (REQ, text),
        "kernel": (REQ, text),
        "set": (REQ, text),
        "role": (REQ, text),
        "a": (REQ, text),
        "b": (REQ, text),
        "calls": (REQ, integer(1, MAX_COUNT)),
        "replays": (REQ, integer(1, MAX_COUNT)),
        "working_set_bytes": (OPT, BYTES),
        "l2_bytes": (OPT, BYTES),
        "graphs": (OPT, integer(1, MAX_COUNT)),
        "set_label": (OPT, text),
        "working_set_largest_bytes": (OPT, BYTES),
        "residency": (OPT, one_of("resident", "marginal", "partly resident", "unknown")),
        "spin": (OPT, integer(0, 10**12)),
        "timing": (OPT, text),  # a timing method other than per-replay events (§5.11)
        "of": (OPT, text),  # a method check: the comparison whose arms it times again
    },
    "sample": {
        "t": (REQ, _t),
        "cmp": (REQ, text),
        "pair": (REQ, integer(0, 10**9)),
        "slot": (REQ, integer(0, 3)),
        "arm": (REQ, one_of("A", "B")),
        "ms": (REQ, MS),
        "replay_ms": (OPT, nullable(list_of(MS))),
        "variant": (OPT, nullable(text)),
        "flagged": (OPT, boolean),
        "excluded": (OPT, boolean),
        "sm_mhz_min": (OPT, MHZ),
        "sm_mhz_max": (OPT, MHZ),
        "throttle": (OPT, THROTTLE),
        "block": (OPT, nullable(integer(0, MAX_COUNT))),
        "worker": (OPT, nullable(integer(0, MAX_COUNT))),
        "gpu": (OPT, GPU),
        "host": (OPT, HOST),
    },
    "gate": {
        "t": (REQ, _t),
        "cmp": (REQ, text),
        "ok": (REQ, boolean),
        "gated": (OPT, boolean),
        "kind": (OPT, nullable(any_text)),
        "rel_l2": (OPT, DIAG),
        "max_abs_diff": (OPT, DIAG),
        "block": (OPT, nullable(integer(0, MAX_COUNT))),
    },
    "memory": {
        "t": (REQ, _t),
        "layout": (OPT, nullable(any_text)),
        "kernel": (OPT, nullable(any_text)),
        "banks": (OPT, nullable(integer(0, MAX_COUNT))),
        "used_before": (OPT, BYTES),
        "used_after": (OPT, BYTES),
        "computed": (OPT, BYTES),
        "others": (OPT, nullable(integer(0, MAX_COUNT))),  # other processes on the GPU meanwhile
    },
    "note": {"t": (REQ, _t), "text": (REQ, any_text)},
    "block": {  # one block's placement (docs/DESIGN.md §5.5)
        "t": (REQ, _t),
        "block": (REQ, integer(0, MAX_COUNT)),
        # primed: an untimed placement before block 0; warmup: a block timed, not counted
        "status": (REQ, one_of("placed", "failed", "primed", "warmup")),
        "group": (OPT, integer(0, MAX_COUNT)),
        "placement_seed": (OPT, nullable(integer(0, 2**63))),
        "padding_bytes": (OPT, BYTES),
        "comparisons": (OPT, nullable(list_of(text))),
        "cmp": (OPT, nullable(text)),
        "error": (OPT, nullable(any_text)),
    },
}

# One worker process of a run (docs/DESIGN.md §5.10): its GPU, its seconds per phase, its end.
RECORDS["worker"] = {
    "t": (REQ, _t),
    "worker": (REQ, integer(0, MAX_COUNT)),
    "status": (REQ, one_of("complete", "interrupted", "failed", "fault", "numerics", "running")),
    "round": (OPT, one_of("main", "confirm", "tune", "reader", "screen")),
    "uuid": (OPT, nullable(any_text)),
    "name": (OPT, nullable(any_text)),
    "phases": (OPT, nullable(mapping({}))),
    "error": (OPT, nullable(any_text)),
}

# A screened candidate of `workbench tune` (docs/DESIGN.md §11): its result as the screen saw it.
RECORDS["candidate"] = {
    "t": (REQ, _t),
    "candidate": (REQ, text),
    "status": (REQ, one_of("screened", "excluded", "failed", "cancelled")),
    "gpu": (OPT, GPU),
    "host": (OPT, HOST),
    "source": (OPT, nullable(one_of("measured", "cache"))),
    "score": (OPT, nullable(real(0, 1e6, open_lo=True))),
    "reason": (OPT, nullable(any_text)),
}

NVML_READING: dict[str, tuple[bool, Check]] = {
    "t": (REQ, _t),
    "mem_used": (OPT, BYTES),
    "mem_free": (OPT, BYTES),
    "mem_total": (OPT, BYTES),
    "sm_mhz": (OPT, MHZ),
    "mem_mhz": (OPT, MHZ),
    "temp_c": (OPT, nullable(real(-100, 300))),
    "power_w": (OPT, nullable(real(0, 1e5))),
    "throttle": (OPT, THROTTLE),
}


def record_problem(rtype: str, rec: Mapping[str, Any]) -> str | None:
    """What is wrong with a loaded journal record of a known type (None when it is valid)."""
    problem = fields(rec, RECORDS[rtype])
    if problem is None:
        return None
    return (
        f"{rtype} record {problem}" if problem.startswith("lacks") else f"{rtype} record: {problem}"
    )


# ------------------------------------------------------------------------------ session.json

_SHAPE = {
    **{k: (OPT, integer(1, MAX_DIM)) for k in ("hidden", "inter", "experts", "top_k", "layers")},
    **{k: (OPT, integer(1, MAX_DIM)) for k in ("tp", "group")},
    "name": (OPT, nullable(any_text)),
}
CONFIG: dict[str, tuple[bool, Check]] = {
    "m": (OPT, real(*M_RANGE, open_lo=True, open_hi=True)),
    "shape": (OPT, nullable(mapping(_SHAPE))),
    "preset": (OPT, nullable(text)),
    **{k: (OPT, nullable(integer(1, MAX_DIM))) for k in _SHAPE if k != "name"},
    **{k: (OPT, nullable(integer(1, MAX_COUNT))) for k in ("calls", "replays", "pairs")},
    "kernels": (OPT, nullable(list_of(text))),
    "comparisons": (OPT, nullable(list_of(text))),
}
_GIT = {
    "commit": (OPT, nullable(any_text)),
    "dirty": (OPT, nullable(boolean)),
    "branch": (OPT, nullable(any_text)),
}
_REC = {"decision": (REQ, text), "arm": (REQ, text)}


def _files(v: Any) -> str | None:
    if not isinstance(v, dict):
        return "must be an object {path: sha256}"
    bad = next((k for k, h in v.items() if not (isinstance(h, str) and h)), None)
    return None if bad is None else f"entry {bad!r} must be a hash string (got {show(v[bad])})"


def _builds(v: Any) -> str | None:
    return None if isinstance(v, dict) else "must be an object {variant: sha256}"


def _recommendations(v: Any) -> str | None:
    if not isinstance(v, dict):
        return "must be an object {kernel: recommendation}"
    for kernel, rec in v.items():
        problem = mapping(_REC)(rec)
        if problem:
            return f"entry {kernel!r} {problem}"
    return None


PROVENANCE = {
    "git": (OPT, mapping(_GIT)),
    "files": (OPT, nullable(_files)),
    "builds": (OPT, nullable(_builds)),
    "version": (OPT, nullable(scalar)),
}
_GPU = {"name": (OPT, nullable(any_text))} | {
    k: (OPT, nullable(scalar)) for k in ("driver", "cuda", "torch", "sm")
}


def _gpu(v: Any) -> str | None:
    return None if isinstance(v, str) else mapping(_GPU)(v)


ENVIRONMENT = {
    "gpu": (OPT, nullable(_gpu)),
    "gpu_name": (OPT, nullable(any_text)),
    "nvml": (OPT, nullable(any_text)),
    **{k: (OPT, nullable(scalar)) for k in ("driver", "cuda", "torch")},
}
META = {
    "status": (REQ, one_of(*STATUSES)),
    "created": (REQ, iso_time),
    "finished": (OPT, nullable(iso_time)),
    "slug": (REQ, text),
    "error": (OPT, nullable(any_text)),
    "config": (REQ, lambda v: None if isinstance(v, dict) else "must be an object"),
    "provenance": (REQ, lambda v: None if isinstance(v, dict) else "must be an object"),
    "environment": (REQ, lambda v: None if isinstance(v, dict) else "must be an object"),
    "summary": (OPT, nullable(mapping({"recommendations": (OPT, _recommendations)}))),
}


def _absurd_number(obj: Any, where: str) -> str | None:
    """The first non-finite or absurdly large number anywhere in ``obj`` (config is echoed)."""
    if _is_num(obj):
        # integers are identifiers as often as sizes (a 62-bit placement seed): exact, so any
        # 64-bit value is fine; a float past MAX_CONFIG_ABS is a corrupted figure
        limit = 2**63 if isinstance(obj, int) else MAX_CONFIG_ABS
        ok = math.isfinite(obj) and abs(obj) <= limit
        return (
            None if ok else f"{where} must be a finite number of at most {limit:g}, got {show(obj)}"
        )
    items = (
        obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    )
    for k, v in items:
        problem = _absurd_number(v, f"{where}.{k}" if isinstance(obj, dict) else f"{where}[{k}]")
        if problem:
            return problem
    return None


def meta_problem(meta: Any) -> str | None:
    """What is wrong with a parsed session.json (None when it is valid)."""
    if not isinstance(meta, dict) or "schema" not in meta:
        return "foreign file: not a workbench session.json (no 'schema')"
    if meta["schema"] != SCHEMA:
        return f"unknown schema {show(meta['schema'])}; this workbench reads {SCHEMA!r}"
    if "status" in meta and (meta["status"] not in STATUSES or not isinstance(meta["status"], str)):
        return f"unknown status {show(meta['status'])} (known: {', '.join(STATUSES)})"
    problem = fields(meta, META)
    if problem:
        return problem
    for section, spec in (
        ("config", CONFIG),
        ("provenance", PROVENANCE),
        ("environment", ENVIRONMENT),
    ):
        problem = fields(meta[section], spec, f"{section}.")
        if problem:
            return problem
    prov = meta["provenance"]
    for section in ("gpu", "gpu_name"):  # older sessions kept the GPU under provenance
        if section in prov:
            problem = fields(prov, {section: ENVIRONMENT[section]}, "provenance.")
            if problem:
                return problem
    return _absurd_number(meta["config"], "config")


# ------------------------------------------------------------------------------- across records


def pair_problem(samples: list[Mapping[str, Any]]) -> str | None:
    """A pair whose arms over slots 0..3 cannot read ABBA or BAAB (re-measures included), or
    whose samples name different blocks (a pair is measured within one block)."""
    arms: dict[tuple[Any, ...], dict[int, str]] = {}
    blocks: dict[tuple[Any, Any], Any] = {}
    for s in samples:
        if blocks.setdefault((s["cmp"], s["pair"]), s.get("block")) != s.get("block"):
            return f"samples of {s['cmp']!r} pair {s['pair']} name different blocks ('block')"
        key = (s["cmp"], s.get("block"), s["pair"])
        slots = arms.setdefault(key, {})
        if slots.setdefault(s["slot"], s["arm"]) != s["arm"]:
            return f"samples of {key[0]!r} pair {key[2]} slot {s['slot']} disagree on the arm"
    for (cmp_id, _, pair), slots in arms.items():
        if not any(all(p[k] == a for k, a in slots.items()) for p in ("ABBA", "BAAB")):
            got = "".join(slots.get(k, "?") for k in range(4))
            return f"samples of {cmp_id!r} pair {pair} have arms {got!r} (need ABBA or BAAB)"
    return None
