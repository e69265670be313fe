"""Turn loaded sessions into the records the TUI shows, through the engine's own analysis.

Verdicts and recommendations come from the analysis model (`workbench.analysis`, which
recomputes them from the raw journal), the same numbers `workbench sessions show/compare` and
the report print, so an interrupted session shows exactly what its kept samples support. No
torch, no textual.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workbench import analysis
from workbench.analysis import shifts, words
from workbench.analysis.model import session_rule
from workbench.analysis.words import reason, sample_size
from workbench.core import stats
from workbench.store.provenance import staleness_text
from workbench.tui.backend import (
    CompareView,
    RatioPoint,
    Recommendation,
    SessionInfo,
    SessionView,
)


def shape_text(config: Mapping[str, Any]) -> str:
    """``qwen3.8-flash-next tp4`` from config["shape"] (asdict of Shape) or config["preset"]."""
    shape = config.get("shape")
    if isinstance(shape, Mapping):
        name = shape.get("name", "custom")
        return f"{name} tp{shape['tp']}" if "tp" in shape else str(name)
    preset = config.get("preset")
    if preset:
        return f"{preset} tp{config['tp']}" if "tp" in config else str(preset)
    return ""


def _short_time(iso: str) -> str:
    # "2026-11-29T12:34:56.789Z" -> "2026-11-29 12:34": the browser has no room for more
    return iso.replace("T", " ")[:16] if iso else ""


def info_from_listing(i: Any) -> SessionInfo:
    """SessionInfo of a `workbench.store.listing.SessionInfo` (what `list_sessions` returns)."""
    return SessionInfo(
        path=Path(i.path),
        name=i.path.name,
        status=i.status,
        created=_short_time(i.created),
        gpu=i.gpu or "",
        shape=shape_text(i.config),
        # "5: w13 w2 step": how many comparisons, over which kernels (in journal order)
        kernels=f"{i.comparisons}: {' '.join(i.kernels)}",
        samples=i.samples,
        commit=(i.commit or "") + ("+" if i.dirty else ""),
        sources=i.sources or "",
        stale=None if i.stale is None else tuple(i.stale),
        recommendation=", ".join(f"{k} {v}" for k, v in i.recommendations.items()),
    )


def info_from_session(s: Any) -> SessionInfo:
    """SessionInfo of a loaded `workbench.store.session.Session`."""
    from workbench.store.listing import session_info

    return info_from_listing(session_info(s))


def _recommendation(rec: analysis.Recommendation) -> Recommendation:
    """The panel's record of ``rec``, laid out from its evidence data (``rec.sets``): per set its
    word and figures (the why restates the rule, printed once below them), the decision as the
    reason, then any caution."""
    per_set = [f"{e.set}: {e.word} — {words.set_figures(e)}" for e in rec.sets]
    caution = words.caution_text(rec)
    choice = rec.arm if rec.decision != "inconclusive" else f"inconclusive ({rec.arm} stays)"
    lines = (*per_set, *([caution] if caution else []))
    return Recommendation(rec.kernel, choice, words.decision_text(rec), lines)


def view_from_session(s: Any) -> SessionView:
    """The results view of a loaded session (see the module docstring)."""
    an = analysis.analyse(s)
    results = an.results
    notes = list(s.warnings)
    notes += [why.replace("`", "") for why in an.not_counted()]  # no recommendation, and why
    rows, chart = [], []
    for r in results:
        if r.verdict.n == 0:
            notes.append(f"{r.id}: no complete pair measured")
        else:
            rows.append(r)
            role = r.cmp["role"]
            label = r.id if role == "main" else f"{r.id} ({role})"
            chart.append(
                RatioPoint.from_verdict(label, r.verdict.to_dict(), _sample_size(r.verdict))
            )
    info = info_from_session(s)
    if info.stale:
        notes.insert(0, staleness_text(list(info.stale)))
    if s.status == "interrupted":
        notes.insert(0, f"interrupted: {len(s.samples)} samples kept; incomplete pairs are dropped")
    recs = [_recommendation(rec) for rec in an.recommendations.values()]
    for r in rows:
        if r.role == "confirm":
            words = r.verdict_words
            blocks = "" if r.diagnostic is None else f"; blocks: {r.diagnostic.summary()}"
            recs.append(
                Recommendation(
                    r.kernel,
                    f"{words} on {r.set}: {r.cmp['b']} against {r.cmp['a']}",
                    f"confirmation of the recommended mix on the combined step ({r.set} set)",
                    (f"{r.set}: {words} ({reason(r.verdict)}{blocks})",),
                )
            )
    return SessionView(
        info=info,
        rows=tuple(rows),
        recommendations=tuple(recs),
        rule=analysis.rule_text(
            an.m, an.conf, {r.verdict.method for r in rows}, session_rule(an.session)
        ),
        notes=tuple(notes),
        config=dict(s.config),
        chart=tuple(chart),
    )


def compare_view(diff: analysis.SessionDiff) -> CompareView:
    """The compare screen's record of `analysis.compare_sessions`: the shift table with every
    column (the screen picks its own by key), the Markdown before it (the sessions, warnings
    first) and after it (the legend, the method), and each comparison's role."""
    a, b = diff.a, diff.b
    head = [
        f"- **A** `{a.path.name}` ({a.status}, {a.gpu_name or 'GPU unknown'})",
        f"- **B** `{b.path.name}` ({b.status}, {b.gpu_name or 'GPU unknown'})",
        "",
    ]
    # one paragraph each: lines of one quote would run together
    head += [f"- **WARNING:** {w}" for w in diff.warnings]
    head += [f"- note: {n}" for n in diff.notes]
    if diff.shifts:
        table = shifts.shift_table(diff, tuple(shifts.COLUMNS))
        tail = [shifts.CHANGED_LEGEND, "", f"Method: {diff.method}"]
    else:
        table, tail = None, ["No comparison id is present in both sessions."]
    for name, ids in (("A", diff.only_a), ("B", diff.only_b)):
        if ids:
            tail.append(f"\nOnly in {name}: {', '.join(ids)}")
    roles = {s.id: s.a.role for s in diff.shifts}
    return CompareView("\n".join(head), table, "\n".join(tail), roles)


def _sample_size(v: stats.Verdict) -> str:
    """ "6 workers, 12 blocks, 24 pairs", "6 blocks, 12 pairs" or "12 pairs"."""
    return sample_size(v)
