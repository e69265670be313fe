"""Dose-response of a calibration session: the delay measured per call against the delay injected
(left) and each rung's measured effect with its 95 % CI against the ±m band (right), both from
the journal through workbench.analysis.calibration, with the resolution (the smallest spin detected SLOWER at that rung and every larger
one) marked."""

from __future__ import annotations

import math
from typing import Any

from workbench.analysis import Analysis, ComparisonResult
from workbench.plots._common import PALETTE, VERDICT_COLORS, no_data, suptitle


def _finite(*xs: Any) -> bool:
    return all(isinstance(x, (int, float)) and math.isfinite(x) for x in xs)


def _spin(r: ComparisonResult) -> int | None:
    """Injected cycles of a calibration comparison: its record's "spin" (what the runner wrote)."""
    spin = r.cmp.get("spin")
    return spin if isinstance(spin, int) and not isinstance(spin, bool) else None


def calibration_rungs(an: Analysis) -> list[dict[str, Any]]:
    """The rungs of the analysis' calibration (workbench.analysis.calibration) with finite
    injected and measured delays."""
    cal = an.calibration() or {}
    return [
        r
        for r in cal.get("rungs", [])
        if _finite(r.get("injected_us_per_cta"), r.get("measured_us_per_call"))
    ]


def _resolutions(an: Analysis) -> dict[str, str]:
    """{group: id of its resolution rung}."""
    cal = an.calibration() or {}
    return {
        g: info["resolution"]["id"]
        for g, info in cal.get("groups", {}).items()
        if info["resolution"]
    }


def fig_calibration(an: Analysis) -> Any:
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5.2), layout="constrained")
    suptitle(fig, an, "Calibration: injected vs measured delay")
    res_ids = set(_resolutions(an).values())
    rungs = calibration_rungs(an)
    groups = list(dict.fromkeys(str(r.get("group")) for r in rungs))
    group_color = {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(groups)}
    if rungs:
        top = max(max(r["injected_us_per_cta"], r["measured_us_per_call"]) for r in rungs)
        left.plot([0, top], [0, top], color="black", ls="--", lw=1, label="measured = injected")
        for g in groups:
            rs = sorted((r for r in rungs if str(r.get("group")) == g),
                        key=lambda r: r["injected_us_per_cta"])  # fmt: skip
            xs = [r["injected_us_per_cta"] for r in rs]
            ys = [r["measured_us_per_call"] for r in rs]
            left.plot(xs, ys, color=group_color[g], lw=1.2, label=g)
            left.scatter(xs, ys, s=40, zorder=3, edgecolors=group_color[g], linewidths=1.2,
                         c=[VERDICT_COLORS.get(r.get("verdict"), "#999") for r in rs])  # fmt: skip
            for r in rs:
                if r.get("id") in res_ids:
                    left.scatter([r["injected_us_per_cta"]], [r["measured_us_per_call"]], s=180,
                                 facecolors="none", edgecolors="black", lw=1.5, zorder=4)  # fmt: skip
        left.set_xlabel("injected delay (µs per CTA = spin cycles / SM MHz)")
        left.set_ylabel("measured delay (µs per call, B − A)")
        left.grid(alpha=0.3)
        handles, _ = left.get_legend_handles_labels()
        handles += [
            Line2D([], [], ls="", marker="o", mfc="none", mec="black", ms=11, label="resolution"),
            *(Line2D([], [], ls="", marker="o", color=c, ms=6, label=v)
              for v, c in VERDICT_COLORS.items() if v in {r.get("verdict") for r in rungs}),
        ]  # fmt: skip
        left.legend(handles=handles, loc="upper left", fontsize=8)
    else:
        no_data(left, "no calibration rung with a known SM clock\n(no NVML clock, no rated clock)")
    _draw_effects(right, an, res_ids)
    return fig


def _draw_effects(ax: Any, an: Analysis, res_ids: set[str]) -> None:
    """Measured effect (B/A − 1, %) with its CI per injected spin, log scale; spin 0 (the A/A
    control of each group) is written in the legend, as a log axis has no 0."""
    cal = [(r, _spin(r)) for r in an.by_role("calibration")]
    pts = [(r, s) for r, s in cal if s is not None and _finite(r.verdict.median)]
    if not any(s > 0 for _, s in pts):
        no_data(ax, "no calibration comparisons with an injected spin")
        return
    m = an.m * 100
    ax.axhspan(-m, m, color="#bbbbbb", alpha=0.35, lw=0, label=f"±m band (m = {m:g} %)")
    ax.axhline(0, color="black", lw=0.8)
    groups = list(dict.fromkeys(f"{r.kernel}/{r.set}" for r, _ in pts))
    for gi, g in enumerate(groups):
        rs = sorted(((r, s) for r, s in pts if f"{r.kernel}/{r.set}" == g), key=lambda p: p[1])
        col = PALETTE[gi % len(PALETTE)]
        controls = [r for r, s in rs if s == 0]
        effects = [(r.verdict.median - 1) * 100 for r in controls]
        ctl = (  # trials repeat the control: their range, not a list that fills the figure
            "; control " + ", ".join(f"{e:+.2f} %" for e in effects)
            if len(effects) <= 3
            else f"; {len(effects)} controls {min(effects):+.2f}..{max(effects):+.2f} %"
        )
        on = [(r, s) for r, s in rs if s > 0]
        xs = [s * (1 + 0.03 * (gi - (len(groups) - 1) / 2)) for _, s in on]  # dodge the groups
        ys = [(r.verdict.median - 1) * 100 for r, _ in on]
        ax.plot(xs, ys, color=col, lw=1, label=g + (ctl if controls else ""))
        det = (an.calibration() or {}).get("groups", {}).get(g, {}).get("detectable_pct")
        if det is not None:  # what the block spread can see (§5.8), below m where it is
            ax.axhline(det, color=col, ls=":", lw=1.2, label=f"{g}: detectable {det:.2f} %")
        for x, y, (r, _) in zip(xs, ys, on, strict=True):
            v = r.verdict
            if _finite(v.ci_low, v.ci_high):
                lo, hi = (v.ci_low - 1) * 100, (v.ci_high - 1) * 100
                ax.plot([x, x], [lo, hi], color=col, lw=2.5, alpha=0.6)
            ax.scatter([x], [y], s=36, zorder=3, color=VERDICT_COLORS.get(v.verdict, "#999"),
                       edgecolors=col)  # fmt: skip
            if r.id in res_ids:
                ax.scatter([x], [y], s=170, facecolors="none", edgecolors="black", lw=1.5, zorder=4)
                ax.annotate(f"resolution {r.id.rsplit('/', 1)[-1]}\n{y:+.2f} %", (x, y),
                            xytext=(-8, 12), textcoords="offset points", ha="right",
                            fontsize=8)  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel("injected spin (SM cycles per CTA)")
    ax.set_ylabel("measured effect B/A − 1 (%), 95 % CI")
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="upper left", fontsize=8)
