"""Replicates across sessions: per comparison, each session's median ratio and 95 % CI side by
side, over the ±m band. Reads only each verdict's median, ci_low and ci_high (recomputed from each
session's journal), so it draws whatever verdict model the stats module has."""

from __future__ import annotations

import math
from typing import Any

from workbench.analysis import Analysis
from workbench.analysis.words import legend
from workbench.plots._common import COLOR_FLAG, RATIO_ROLES, fit_lines, no_data
from workbench.store.provenance import source_digest
from workbench.store.session import Session

# One colour per session (matplotlib's tab10): sessions are peers, none is "A" or "B".
SESSION_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                  "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def source_groups(sessions: list[Session]) -> dict[str, list[int]]:
    """Sessions (numbered from 1, in legend order) by the digest of their kernel sources
    ("unknown" when a session recorded none)."""
    out: dict[str, list[int]] = {}
    for i, s in enumerate(sessions, 1):
        d = source_digest(s.provenance.get("files")) or "unknown"
        out.setdefault(d, []).append(i)
    return out


def replicate_rows(analyses: list[Analysis]) -> list[str]:
    """Comparison ids with a ratio in at least one session, in order of first appearance."""
    ids: dict[str, None] = {}
    for an in analyses:
        for r in an.by_role(*RATIO_ROLES):
            ids.setdefault(r.id, None)
    return list(ids)


def fig_replicates(analyses: list[Analysis]) -> Any:
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    ids = replicate_rows(analyses)
    n = len(analyses)
    fig = plt.figure(
        figsize=(10, max(4.0, 1.8 + (0.35 + 0.22 * n) * len(ids))), layout="constrained"
    )
    names = [an.session.path.name for an in analyses]
    gpus = sorted({an.session.gpu_name or "GPU not recorded" for an in analyses})
    lines = [f"Replicates: ratio B/A and its interval per session ({n} sessions)", ", ".join(gpus)]
    groups = source_groups([an.session for an in analyses])
    if len(groups) > 1:  # replicates of different kernels are no replicates: say it on the figure
        each = "; ".join(f"{d}: session(s) {', '.join(map(str, ix))}" for d, ix in groups.items())
        lines += fit_lines([f"WARNING: measured on different kernel sources: {each}"], fig)
    title = fig.suptitle("\n".join(lines), fontsize=10)
    if len(groups) > 1:
        title.set_color(COLOR_FLAG)
    ax = fig.add_subplot()
    if not ids:
        no_data(ax, "no comparisons with pair ratios in these sessions")
        return fig
    m = analyses[0].m
    ax.axvspan(1 - m, 1 + m, color="#bbbbbb", alpha=0.35, lw=0)
    ax.axvline(1.0, color="black", ls="--", lw=1)
    height = 0.7  # of a row, shared by the sessions
    xs = [1 - 2 * m, 1 + 2 * m]
    for row, cid in enumerate(ids):
        y0 = len(ids) - 1 - row
        for i, an in enumerate(analyses):
            r = next((x for x in an.results if x.id == cid), None)
            if r is None:
                continue
            v = r.verdict
            y = y0 + height * (0.5 - (i + 0.5) / n)  # first session on top
            col = SESSION_COLORS[i % len(SESSION_COLORS)]
            if _finite(v.ci_low) and _finite(v.ci_high):
                ax.plot([v.ci_low, v.ci_high], [y, y], color=col, lw=6, alpha=0.5,
                        solid_capstyle="butt", label="_ci")  # fmt: skip
                xs += [v.ci_low, v.ci_high]
            if _finite(v.median):
                ax.scatter(
                    [v.median], [y], marker="D", s=26, color=col, edgecolor="black", zorder=3
                )
                xs.append(v.median)
        if row:
            ax.axhline(y0 + 0.5, color="#ddd", lw=0.8)
    lo, hi = min(xs), max(xs)
    pad = 0.06 * (hi - lo)
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(-0.5, len(ids) - 0.5)
    ax.set_yticks(range(len(ids) - 1, -1, -1), ids, fontsize=8)
    marker, interval = legend({r.verdict.method for an in analyses for r in an.results})
    ax.set_xlabel(f"ratio B/A (< 1: B faster); diamond: {marker}, bar: {interval}")
    ax.grid(axis="x", alpha=0.3)
    handles = [Line2D([], [], color=SESSION_COLORS[i % len(SESSION_COLORS)], lw=5, alpha=0.7,
                      label=f"{i + 1} {name}") for i, name in enumerate(names)]  # fmt: skip
    handles.append(Line2D([], [], color="#bbbbbb", lw=8, alpha=0.6, label=f"±m band (m = {m:.0%})"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8)
    return fig
