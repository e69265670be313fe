"""Time per replay of every variant, per kernel and expert set (boxes over the raw replays)."""

from __future__ import annotations

from typing import Any

from workbench.analysis import TIMING_ROLES, Analysis
from workbench.plots._common import (
    OFF_SCALE,
    no_data,
    panel_grid,
    short_arm,
    suptitle,
    variant_color,
)
from workbench.analysis.words import variant_order

NEAR = 0.10  # a reference arm within 10 % of the readers' range is drawn beside them


def _on_scale(meds: dict[str, float], readers: set[str]) -> list[str]:
    """The variants drawn to scale: the readers the cell compares (its main, confirm, ...
    arms) and any reference arm within NEAR of their range; a peer 1.5x or 25x slower gets a
    note instead, so that a 1 % gap between the readers stays visible. Without readers (a
    reference-only cell): every variant up to OFF_SCALE times the fastest."""
    own = [v for v in meds if v in readers]
    if not own:
        fastest = min(meds.values())
        return [v for v in meds if meds[v] <= OFF_SCALE * fastest]
    lo, hi = min(meds[v] for v in own), max(meds[v] for v in own)
    return [v for v in meds if v in readers or lo * (1 - NEAR) <= meds[v] <= hi * (1 + NEAR)]


def fig_distributions(an: Analysis) -> Any:
    import numpy as np

    s = an.session
    cells: dict[tuple[str, str], dict[str, list[float]]] = {}
    readers: dict[tuple[str, str], set[str]] = {}  # arms of the cell's own comparisons
    calls: dict[str, int] = {}
    # a tune session's screened and confirmed candidates are timed arms too (docs/DESIGN.md §11)
    for r in an.by_role(*TIMING_ROLES, "calibration", "screen", "tune"):
        calls.setdefault(r.kernel, r.calls)
        if r.cmp["role"] != "reference":
            readers.setdefault((r.kernel, r.set), set()).update((r.cmp["a"], r.cmp["b"]))
        for x in s.samples_for(r.id):
            if x.get("excluded"):
                continue
            v = x.get("variant") or r.cmp[str(x["arm"]).lower()]
            reps = x.get("replay_ms") or [x["ms"]]
            cells.setdefault((r.kernel, r.set), {}).setdefault(v, []).extend(map(float, reps))
    rank = {"w13": 0, "w2": 1, "step": 2, "hot": 0, "rotating": 1}
    keys = sorted(cells, key=lambda c: (rank.get(c[0], 9), c[0], rank.get(c[1], 9), c[1]))
    fig, flat = panel_grid(len(keys), 3.4, 1)
    suptitle(fig, an, "Time per replay of each variant")
    if not cells:
        no_data(flat[0], "no samples in this session")
        return fig
    rng = np.random.default_rng(0)  # fixed jitter: the same session draws the same figure
    colors: dict[str, str] = {}
    for ax, (k, st) in zip(flat, keys, strict=False):
        data = cells[k, st]
        names = variant_order(data)
        meds = {v: float(np.median(data[v])) for v in names}
        shown = _on_scale(meds, readers.get((k, st), set()))
        fastest = min(meds[v] for v in shown)
        off = [v for v in names if v not in shown]
        bp = ax.boxplot(
            [data[v] for v in shown],
            widths=0.5,
            showfliers=False,
            patch_artist=True,
            medianprops={"color": "black"},
        )
        for patch, v in zip(bp["boxes"], shown, strict=True):
            patch.set_facecolor(variant_color(v, colors))
            patch.set_alpha(0.35)
        for x, v in enumerate(shown, start=1):
            y = data[v]
            ax.scatter(
                x + rng.uniform(-0.18, 0.18, len(y)),
                y,
                s=4,
                alpha=0.35,
                color=variant_color(v, colors),
                zorder=3,
                rasterized=True,  # thousands of replays: pixels, not one SVG element each
            )
        ax.set_xticks(range(1, len(shown) + 1), [short_arm(v) for v in shown], fontsize=8)
        ax.set_title(f"{k} / {st}")
        ax.set_ylabel(f"ms per replay ({calls[k]} calls)")
        ax.grid(axis="y", alpha=0.3)
        if off:
            note = "\n".join(
                f"{v}: median {meds[v]:.3f} ms = {meds[v] / fastest:.2f}× the fastest shown "
                "(off scale)"
                for v in off
            )
            ax.text(
                0.02,
                0.97,
                note,
                transform=ax.transAxes,
                va="top",
                fontsize=7,
                bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "#ccc"},
            )
            lo, hi = ax.get_ylim()
            ax.set_ylim(lo, hi + 0.35 * (hi - lo))  # room for the note above the boxes
    return fig
