"""Verdicts recomputed from a session's journal, and the comparison of two sessions (docs/DESIGN.md §8).

Nothing here trusts a session's stored ``summary``: every number comes from the raw samples.

The shift between two sessions is the difference of their median pair ratios, d = med_B - med_A.
Its interval is a conservative combination, not a bootstrap (a bootstrap of a median from 12
pairs is too discrete to trust): each session's distribution-free median CI is taken at
√conf (97.47 % for conf = 95 %); the sessions are independent runs, so both intervals hold
together with probability >= conf, and then d lies in [low_B - high_A, high_B - low_A].
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.session import Session
from workbench.stats import (
    DEFAULT_CONF,
    DEFAULT_M,
    PairRatio,
    Recommendation,
    Verdict,
    compare,
    pair_ratios,
    recommend,
)

# Config keys that define the problem (shape) and the measurement (protocol).
SHAPE_KEYS = ("preset", "shape", "hidden", "inter", "experts", "top_k", "layers", "tp", "group")
PROTOCOL_KEYS = ("calls", "replays", "pairs", "adaptive", "target", "budget_s", "warmup", "seed")
READER_KERNELS = ("w13", "w2")  # kernels with a reader choice; "step" is the confirmation


def finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass
class ComparisonResult:
    """One comparison of a session with its verdict recomputed from the samples."""

    cmp: dict[str, Any]
    verdict: Verdict
    a_ms: float  # median over the A samples of the pairs used; ms per replay of `calls` calls
    b_ms: float
    flagged: int  # samples flagged by the monitor (all records, used or not)
    excluded: int
    gate: bool | None  # numerics gate: None when no gate record
    ratios: list[float] = field(default_factory=list)
    pair_ratios: list[PairRatio] = field(default_factory=list)  # with their blocks

    @property
    def id(self) -> str:
        return self.cmp["id"]

    def us_per_call(self, ms: float) -> float:
        return ms * 1000.0 / self.cmp["calls"] if self.cmp.get("calls") else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            **{
                k: self.cmp.get(k)
                for k in ("id", "kernel", "set", "role", "a", "b", "calls", "replays")
            },
            "working_set_bytes": self.cmp.get("working_set_bytes"),
            "l2_bytes": self.cmp.get("l2_bytes"),
            "a_ms": finite_or_none(self.a_ms),
            "b_ms": finite_or_none(self.b_ms),
            "a_us_per_call": finite_or_none(self.us_per_call(self.a_ms)),
            "b_us_per_call": finite_or_none(self.us_per_call(self.b_ms)),
            "flagged": self.flagged,
            "excluded": self.excluded,
            "gate": self.gate,
            "ratios": self.ratios,
            "verdict": self.verdict.to_dict(),
        }


def session_m(session: Session, m: float | None = None) -> float:
    """The minimum effect: the explicit ``m``, else the session's config["m"], else 1 %."""
    return float(m if m is not None else session.config.get("m", DEFAULT_M))


def analyse(
    session: Session, m: float | None = None, conf: float = DEFAULT_CONF
) -> list[ComparisonResult]:
    """Recompute every comparison of ``session`` (journal order; a re-declared id counts once)."""
    m = session_m(session, m)
    out, seen = [], set()
    for c in session.comparisons:
        if c["id"] in seen:
            continue
        seen.add(c["id"])
        c = session.comparison(c["id"])  # the last declaration wins
        samples = session.samples_for(c["id"])
        pr = pair_ratios(samples)
        a = [x for p in pr for x in p.a_ms]
        b = [x for p in pr for x in p.b_ms]
        gates = session.gates_for(c["id"])
        out.append(
            ComparisonResult(
                cmp=c,
                verdict=compare(pr, m=m, conf=conf),
                a_ms=float(np.median(a)) if a else math.nan,
                b_ms=float(np.median(b)) if b else math.nan,
                flagged=sum(bool(s.get("flagged")) for s in samples),
                excluded=sum(bool(s.get("excluded")) for s in samples),
                gate=all(bool(g["ok"]) for g in gates) if gates else None,
                ratios=pr.values,
                pair_ratios=list(pr),
            )
        )
    return out


def recommendations(results: list[ComparisonResult]) -> list[Recommendation]:
    """Per reader kernel (w13, w2): the recommendation from its "main" comparisons per set."""
    recs = []
    for kernel in READER_KERNELS:
        main = [r for r in results if r.cmp["kernel"] == kernel and r.cmp["role"] == "main"]
        if main:
            verdicts = {r.cmp["set"]: r.verdict for r in main}
            recs.append(recommend(kernel, verdicts, a=main[0].cmp["a"], b=main[0].cmp["b"]))
    return recs


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
        return self.low > 0 or self.high < 0

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
    a: Session, b: Session, m: float | None = None, conf: float = DEFAULT_CONF
) -> SessionDiff:
    """Per comparison id present in both sessions, the shift of the median ratio (B - A)."""
    each = math.sqrt(conf)
    ra = {r.id: r for r in analyse(a, m, conf)}
    rb = {r.id: r for r in analyse(b, m, conf)}
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
    shifts = []
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
        # each session's own interval at sqrt(conf): block-level where it has blocks (§7.3)
        va, vb = (compare(r.pair_ratios, m=session_m(s), conf=each) for r, s in ((x, a), (y, b)))
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
    method = (
        f"shift = ratio in B minus ratio in A (each session's estimate: the geometric mean of its "
        f"block medians, or the median pair ratio without blocks); interval: each session's CI "
        f"(t-interval over blocks, or the distribution-free median CI without blocks) at "
        f"sqrt({conf:g}) = {each * 100:.2f} %, combined as [low_B - high_A, high_B - low_A], "
        f"which holds with probability >= {conf * 100:g} % for independent sessions (conservative)"
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
