"""The comparison of two sessions (docs/DESIGN.md §7.6): per comparison id, the shift of its ratio.

Both sides come from ``workbench.analysis.model``: every number is recomputed from the journals.

The shift between two sessions is the difference of their estimates, d = est_B - est_A, each
session's by its own method (over workers, blocks or pairs: workbench.analysis.words says which).
Its interval is a conservative combination, not a bootstrap: each session's own interval is
taken at √conf (97.47 % for conf = 95 %); the sessions are independent runs, so both intervals
hold together with probability >= conf, and then d lies in [low_B - high_A, high_B - low_A].
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workbench.analysis.model import (
    ComparisonResult,
    comparison_results,
    finite_or_none,
    session_m,
)
from workbench.analysis.words import compare_method
from workbench.core.stats import DEFAULT_CONF, compare
from workbench.store.session import Session

# Config keys that define the problem (shape) and the measurement (protocol).
SHAPE_KEYS = ("preset", "shape", "hidden", "inter", "experts", "top_k", "layers", "tp", "group")
PROTOCOL_KEYS = ("calls", "replays", "pairs", "adaptive", "target", "budget_s", "warmup", "seed")


# ------------------------------------------------------------------------------ two sessions


@dataclass
class Shift:
    """Change of the median pair ratio of one comparison id from session A to session B."""

    id: str
    a: ComparisonResult
    b: ComparisonResult
    shift: float  # med_B - med_A
    low: float
    high: float
    conf: float

    @property
    def changed(self) -> bool:
        """The ratio moved: the shift's interval excludes 0."""
        return self.low > 0 or self.high < 0

    @property
    def verdict_changed(self) -> bool:
        return self.a.verdict.label != self.b.verdict.label

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "shift": finite_or_none(self.shift),
            "shift_low": finite_or_none(self.low),
            "shift_high": finite_or_none(self.high),
            "conf": self.conf,
            "changed": self.changed,
            "verdict_changed": self.verdict_changed,
        }


@dataclass
class SessionDiff:
    a: Session
    b: Session
    shifts: list[Shift]
    only_a: list[str]
    only_b: list[str]
    warnings: list[str]  # loud: sources, shapes, protocol or arms differ
    notes: list[str]  # expected differences (GPU, commit, L2 ratio)
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": str(self.a.path),
            "b": str(self.b.path),
            "method": self.method,
            "warnings": self.warnings,
            "notes": self.notes,
            "shifts": [s.to_dict() for s in self.shifts],
            "only_a": self.only_a,
            "only_b": self.only_b,
        }


def _diff_keys(a: Mapping[str, Any], b: Mapping[str, Any], keys: tuple[str, ...]) -> list[str]:
    return [f"{k} {a.get(k)!r} vs {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def _source_warnings(a: Session, b: Session) -> list[str]:
    fa, fb = a.provenance.get("files"), b.provenance.get("files")
    if not fa or not fb:
        missing = " and ".join(n for n, f in (("A", fa), ("B", fb)) if not f)
        return [
            f"KERNEL SOURCE HASHES UNKNOWN for session {missing}: cannot tell whether the kernels are the same"
        ]
    out = []
    for name in sorted(set(fa) | set(fb)):
        ha, hb = fa.get(name), fb.get(name)
        if ha != hb:
            show = [h[:12] if h else "absent" for h in (ha, hb)]
            out.append(f"KERNEL SOURCES DIFFER: {name} ({show[0]} vs {show[1]})")
    return out


def compare_sessions(
    a: Session,
    b: Session,
    m: float | None = None,
    conf: float = DEFAULT_CONF,
    results: tuple[list[ComparisonResult], list[ComparisonResult]] | None = None,
    shifts: bool = True,
) -> SessionDiff:
    """Per comparison id present in both sessions, the shift of the median ratio (B - A).

    ``results``: both sessions' ``comparison_results`` when the caller has them already (pool
    compares every replicate with the first); ``shifts=False``: only the warnings and notes.
    """
    each = math.sqrt(conf)
    if results is None:
        results = (comparison_results(a, m, conf), comparison_results(b, m, conf))
    ra = {r.id: r for r in results[0]}
    rb = {r.id: r for r in results[1]}
    want_shifts = shifts
    warnings = [
        f"SESSION {n} IS {s.status.upper()}: {s.path.name}"
        for n, s in (("A", a), ("B", b))
        if s.status != "complete"
    ]
    warnings += _source_warnings(a, b)
    shape = _diff_keys(a.config, b.config, SHAPE_KEYS)
    if shape:
        warnings.append("SHAPES DIFFER: " + "; ".join(shape))
    proto = _diff_keys(a.config, b.config, PROTOCOL_KEYS)
    if proto:
        warnings.append("PROTOCOL DIFFERS (config): " + "; ".join(proto))
    notes = []
    ga, gb = a.gpu_name, b.gpu_name
    if ga != gb:
        notes.append(
            f"different GPUs: {ga or 'unknown'} vs {gb or 'unknown'} (shifts include the GPU difference)"
        )
    ca, cb = (s.provenance.get("git", {}).get("commit") for s in (a, b))
    if ca != cb:
        notes.append(f"different commits: {str(ca)[:10]} vs {str(cb)[:10]}")
    shifts: list[Shift] = []
    for cid in [i for i in ra if i in rb]:
        x, y = ra[cid], rb[cid]
        diffs = _diff_keys(x.cmp, y.cmp, ("kernel", "set", "a", "b"))
        if diffs:
            warnings.append(f"ARMS DIFFER for {cid}: " + "; ".join(diffs))
        diffs = _diff_keys(x.cmp, y.cmp, ("calls", "replays", "graphs"))
        if x.verdict.n != y.verdict.n:
            diffs.append(f"pairs {x.verdict.n} vs {y.verdict.n}")
        if diffs:
            warnings.append(f"PROTOCOL DIFFERS for {cid}: " + "; ".join(diffs))
        la, lb = (_l2_ratio(r.cmp) for r in (x, y))
        if la and lb and abs(la - lb) > 0.05 * max(la, lb):
            notes.append(f"{cid}: working set / L2 {la:.1f}x vs {lb:.1f}x")
        if not want_shifts:
            continue
        # each session's own interval at sqrt(conf): block-level where it has blocks (§7.3)
        va, vb = (compare(r.ratios, m=session_m(s, m), conf=each) for r, s in ((x, a), (y, b)))
        shifts.append(
            Shift(
                cid,
                x,
                y,
                vb.median - va.median,
                vb.ci_low - va.ci_high,
                vb.ci_high - va.ci_low,
                conf,
            )
        )
    method = compare_method(
        [{r.verdict.method for r in rs} for rs in results], conf, [a.boards, b.boards]
    )
    return SessionDiff(
        a,
        b,
        shifts,
        [i for i in ra if i not in rb],
        [i for i in rb if i not in ra],
        warnings,
        notes,
        method,
    )


def _l2_ratio(cmp: Mapping[str, Any]) -> float | None:
    ws, l2 = cmp.get("working_set_bytes"), cmp.get("l2_bytes")
    return ws / l2 if ws and l2 else None
