"""Pair ratios: the forest plot (pairs, median, CI, ±m band per comparison) and the one-page
summary around it (verdict table, recommendation, provenance)."""

from __future__ import annotations

import textwrap
from typing import Any

from workbench.analysis import Analysis, ComparisonResult
from workbench.analysis.words import legend
from workbench.analysis.table import comparison_table
from workbench.core.fmt import change_pct, num
from workbench.plots._common import (
    COLOR_FLAG,
    RATIO_ROLES,
    VERDICT_COLORS,
    no_data,
    suptitle,
    unzip_xy,
)
from workbench.analysis.words import provenance_line

# the verdict table of the summary page (workbench.analysis.table's columns)
SUMMARY_COLUMNS = (
    "comparison",
    "a",
    "b",
    "ratio",
    "change",
    "ci",
    "p",
    "k/n",
    "flagged",
    "verdict",
)


def draw_ratios(ax: Any, an: Analysis, rows: list[ComparisonResult]) -> None:
    """Forest plot: one row per comparison, pairs as dots, CI bar, median diamond, ±m band."""
    m = an.m
    ax.axvspan(1 - m, 1 + m, color="#bbbbbb", alpha=0.35, lw=0, label=f"±m band (m = {m:.0%})")
    ax.axvline(1.0, color="black", ls="--", lw=1, label="1.0 (no change)")
    xs: list[float] = [1 - 2 * m, 1 + 2 * m]
    labels, verdicts = [], []
    for i, r in enumerate(rows):
        y = len(rows) - 1 - i
        v, vals = r.verdict, r.ratios
        col = VERDICT_COLORS[v.verdict]
        n = max(len(vals) - 1, 1)
        # spread the pairs vertically by pair index: a drift over the run shows as a slant
        pts = [(p.ratio, y + 0.28 * (j / n - 0.5), p.flagged) for j, p in enumerate(vals)]
        hollow = {"s": 34, "facecolors": "none", "edgecolors": COLOR_FLAG, "lw": 1}
        for flagged, style in ((False, {"s": 16, "c": "#444"}), (True, hollow)):
            sel = [q for q in pts if q[2] == flagged]
            if sel:
                ax.scatter(*unzip_xy(sel), zorder=3, **style)
        xs += [q[0] for q in pts]
        if v.n and num(v.ci_low) != "n/a":
            ax.plot([v.ci_low, v.ci_high], [y, y], color=col, lw=7, alpha=0.45, zorder=2)
            xs += [v.ci_low, v.ci_high]
        if num(v.median) != "n/a":
            ax.scatter([v.median], [y], marker="D", s=60, color=col, edgecolor="black", zorder=4)
        a, b = str(r.cmp["a"]), str(r.cmp["b"])
        labels.append(f"{r.id}\nB {b}\nA {a}" if len(a + b) > 28 else f"{r.id}\n{b} vs {a}")
        d = r.diagnostic  # the block diagnostic (§7.8), where it finds more than it prints
        extra = [f for f in d.flags() if not f.startswith("rests")] if d is not None else []
        verdicts.append(
            f"{r.verdict_words}  {change_pct(v.median)}\nk/n {v.k_faster}/{v.n}"
            + "".join(f"; {f}" for f in extra)
        )
    lo, hi = min(xs), max(xs)
    pad = 0.06 * (hi - lo)
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ticks = list(range(len(rows) - 1, -1, -1))
    ax.set_yticks(ticks, labels, fontsize=8)
    right = ax.twinx()  # verdicts as right-hand tick labels: the layout engine makes room
    right.set_ylim(ax.get_ylim())
    right.set_yticks(ticks, verdicts, fontsize=8)
    for lab, r in zip(right.get_yticklabels(), rows, strict=True):
        lab.set_color(VERDICT_COLORS[r.verdict.verdict])
        lab.set_fontweight("bold")
    ax.set_xlabel("pair ratio B/A = (B1+B2)/(A1+A2)   (< 1: B faster)")
    ax.grid(axis="x", alpha=0.3)
    from matplotlib.lines import Line2D

    marker, interval = legend({r.verdict.method for r in rows}, an.conf)
    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], ls="", marker="o", color="#444", ms=4, label="one ABBA pair"),
        Line2D([], [], ls="", marker="o", mfc="none", mec=COLOR_FLAG, ms=6, label="flagged pair"),
        Line2D([], [], ls="", marker="D", color="#888", mec="black", ms=6, label=marker),
        Line2D([], [], color="#888", lw=6, alpha=0.5, label=interval),
    ]
    from matplotlib.transforms import offset_copy

    # a fixed distance under the axes (below the x label), whatever the axes' height
    below = offset_copy(ax.transAxes, fig=ax.figure, y=-30, units="points")
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0),
        ncol=3,
        fontsize=8,
        bbox_transform=below,
    )


def ratio_rows(an: Analysis) -> list[ComparisonResult]:
    return an.by_role(*RATIO_ROLES)


def fig_ratios(an: Analysis) -> Any:
    import matplotlib.pyplot as plt

    rows = ratio_rows(an)
    fig = plt.figure(figsize=(10, max(4.0, 1.6 + 0.75 * len(rows))), layout="constrained")
    suptitle(fig, an, "Pair ratios B/A")
    ax = fig.add_subplot()
    if rows:
        draw_ratios(ax, an, rows)
    else:
        no_data(ax, "no comparisons with pair ratios in this session")
    return fig


def fig_summary(an: Analysis) -> Any:
    import matplotlib.pyplot as plt

    s = an.session
    rows = ratio_rows(an)
    n_tab = max(len(an.results), 1)
    # A4 landscape, taller only when a long session (calibration, many sets) needs the room
    height = max(8.3, 3.2 + 0.2 * n_tab + 0.55 * len(rows))
    fig = plt.figure(figsize=(11.7, height), layout="constrained")
    suptitle(fig, an, "Summary")
    gs = fig.add_gridspec(3, 1, height_ratios=(0.45 + 0.22 * n_tab, 0.5 + 0.6 * len(rows), 1.6))
    axt = fig.add_subplot(gs[0])
    axt.set_axis_off()
    t = comparison_table(an.results, SUMMARY_COLUMNS)
    header = list(t.headers)
    cells = [list(row.cells) for row in t.rows]
    colors = [
        ["white"] * (len(header) - 1) + [VERDICT_COLORS[row.verdict] + "55"] for row in t.rows
    ]
    if cells:
        tab = axt.table(
            cellText=cells, colLabels=header, cellColours=colors, loc="center", cellLoc="center"
        )
        tab.auto_set_font_size(False)
        tab.set_fontsize(7.5)
        tab.auto_set_column_width(list(range(len(header))))
    else:
        no_data(axt, "no comparisons in this session")
    axr = fig.add_subplot(gs[1])
    if rows:
        draw_ratios(axr, an, rows)
    else:
        no_data(axr, "no pair ratios")
    axx = fig.add_subplot(gs[2])
    axx.set_axis_off()
    lines = []
    for kernel, rec in an.recommendations.items():
        ev = ", ".join(f"{k} {v}" for k, v in rec.verdicts.items())
        lines.append(f"Recommendation {kernel}: {rec.decision.upper()} → {rec.arm}   ({ev})")
    for r in an.by_role("confirm"):
        lines.append(
            f"Step confirmation {r.id}: {r.cmp['b']} vs {r.cmp['a']}: ratio {num(r.verdict.median)}"
            f" ({change_pct(r.verdict.median)}), {r.verdict_words}"
        )
    if s.status != "complete":
        lines.append(f"Session {s.status}: figures cover the samples measured before it stopped.")
    lines += textwrap.wrap(provenance_line(s), 160, subsequent_indent="  ")
    from matplotlib.transforms import blended_transform_factory

    # from the figure's left edge, not the axes' (which lines up with the ratio plot's)
    where = blended_transform_factory(fig.transFigure, axx.transAxes)
    style = {"va": "top", "ha": "left", "fontsize": 8, "family": "monospace"}
    axx.text(0.015, 1, "\n".join(lines), transform=where, **style)
    return fig
