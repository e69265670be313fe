"""Turn a loaded session into the records the TUI shows, with the engine's statistics.

Everything is recomputed from the raw journal (``stats.pair_ratios`` → ``stats.compare`` →
``stats.recommend``), exactly as the report does, so an interrupted session shows what its
kept samples support. NumPy/SciPy only: no torch, no textual.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workbench import stats
from workbench.tui.backend import Recommendation, ResultRow, SessionInfo, SessionView

RECOMMENDED_KERNELS = ("w13", "w2")  # `step` is confirmed, never recommended


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


def info_from_session(s: Any) -> SessionInfo:
    """SessionInfo of a loaded `workbench.session.Session`."""
    # "5: w13 w2 step": how many comparisons, over which kernels (in journal order)
    kernels = list(dict.fromkeys(c["kernel"] for c in s.comparisons))
    return SessionInfo(
        path=Path(s.path),
        name=s.name,
        status=s.status,
        created=_short_time(s.created),
        gpu=s.gpu_name or "",
        shape=shape_text(s.config),
        kernels=f"{len({c['id'] for c in s.comparisons})}: {' '.join(kernels)}",
        samples=len(s.samples),
    )


def _short_time(iso: str) -> str:
    # "2026-11-29T12:34:56.789Z" -> "2026-11-29 12:34": the browser has no room for more
    return iso.replace("T", " ")[:16] if iso else ""


def _median_ms(samples: list[dict], arm: str, pairs: set[int]) -> float:
    kept = [
        float(x["ms"])
        for x in samples
        if x["arm"] == arm and not x.get("excluded", False) and int(x["pair"]) in pairs
    ]
    return statistics.median(kept) if kept else math.nan


def _row(c: Mapping[str, Any], samples: list[dict], m: float) -> tuple[ResultRow, Any] | None:
    ratios = stats.pair_ratios(samples)
    if not ratios:
        return None
    v = stats.compare(ratios, m=m)
    pairs = {r.pair for r in ratios}
    row = ResultRow(
        cmp_id=c["id"],
        kernel=c["kernel"],
        set=c["set"],
        role=c["role"],
        a=c["a"],
        b=c["b"],
        calls=int(c["calls"]),
        a_ms=_median_ms(samples, "A", pairs),
        b_ms=_median_ms(samples, "B", pairs),
        ratio=v.median,
        ci_lo=v.ci_low,
        ci_hi=v.ci_high,
        p=v.wilcoxon_p,
        k=v.k_faster,
        n=v.n,
        verdict=v.verdict,
        flagged=sum(1 for x in samples if x.get("flagged", False)),
        note=v.reason,
    )
    return row, v


def view_from_session(s: Any) -> SessionView:
    """The results view of a loaded session (see the module docstring)."""
    m = float(s.config.get("m", stats.DEFAULT_M))
    rows: list[ResultRow] = []
    notes: list[str] = list(s.warnings)
    main: dict[str, dict[str, Any]] = {}
    arms: dict[str, tuple[str, str]] = {}
    confirms: list[ResultRow] = []
    declared: dict[str, Mapping[str, Any]] = {}
    for c in s.comparisons:  # a re-declared id counts once, with its last declaration
        declared[c["id"]] = c
    for cmp_id, c in declared.items():
        made = _row(c, s.samples_for(cmp_id), m)
        if made is None:
            notes.append(f"{cmp_id}: no complete pair measured")
            continue
        row, verdict = made
        rows.append(row)
        if c["role"] == "main" and c["kernel"] in RECOMMENDED_KERNELS:
            main.setdefault(c["kernel"], {})[c["set"]] = verdict
            arms[c["kernel"]] = (c["a"], c["b"])
        elif c["kernel"] == "step" or c["role"] == "confirm":
            confirms.append(row)
    if s.status == "interrupted":
        notes.insert(0, f"interrupted: {len(s.samples)} samples kept; incomplete pairs are dropped")
    recs: list[Recommendation] = []
    for kernel, verdicts in main.items():
        a, b = arms[kernel]
        rec = stats.recommend(kernel, verdicts, a=a, b=b)
        choice = rec.arm if rec.decision != "inconclusive" else f"inconclusive ({rec.arm} stays)"
        # stats.recommend lists one line per set, then the decision, then any caution.
        per_set, rest = rec.evidence[: len(verdicts)], rec.evidence[len(verdicts) :]
        recs.append(Recommendation(kernel, choice, rest[0], tuple(per_set + rest[1:])))
    for row in confirms:
        recs.append(
            Recommendation(
                row.kernel,
                f"{row.verdict}: {row.b} against {row.a}",
                f"confirmation on the combined step ({row.set} set)",
                (f"{row.set}: {row.verdict} ({row.note})",),
            )
        )
    return SessionView(
        info=info_from_session(s),
        rows=tuple(rows),
        recommendations=tuple(recs),
        rule=stats.rule_text(m),
        notes=tuple(notes),
        config=dict(s.config),
    )


def compare_views(a: SessionView, b: SessionView) -> str:
    """Markdown: per comparison in both sessions, the ratio in each and the shift between them."""
    lines = []
    for label, fa, fb in (("GPU", a.info.gpu, b.info.gpu), ("shape", a.info.shape, b.info.shape)):
        if fa != fb:
            lines.append(f"> **Warning:** the {label} differs: `{fa or '?'}` vs `{fb or '?'}`.\n")
    lines.append(
        f"First: `{a.info.name}` ({a.info.status}), second: `{b.info.name}` ({b.info.status})\n"
    )
    lines.append("| comparison | ratio (first) | verdict | ratio (second) | verdict | shift |")
    lines.append("|---|---|---|---|---|---|")
    second = {r.cmp_id: r for r in b.rows}
    shared = [r for r in a.rows if r.cmp_id in second]
    for ra in shared:
        rb = second[ra.cmp_id]
        shift = (rb.ratio / ra.ratio - 1.0) * 100.0
        lines.append(
            f"| {ra.cmp_id} | {ra.ratio:.4f} [{ra.ci_lo:.4f}, {ra.ci_hi:.4f}] | {ra.verdict} "
            f"| {rb.ratio:.4f} [{rb.ci_lo:.4f}, {rb.ci_hi:.4f}] | {rb.verdict} | {shift:+.2f} % |"
        )
    if not shared:
        lines.append("| (no comparison in common) | | | | | |")
    only = sorted({r.cmp_id for r in a.rows} ^ set(second))
    if only:
        lines.append(f"\nIn one session only: {', '.join(only)}")
    return "\n".join(lines)
