"""Figures of a session (docs/DESIGN.md §8): matplotlib on the headless Agg backend, PNG and SVG.

Every figure is drawn from the journals through ``report.analyse`` (never from the stored
summary) and titled with the GPU, the shape and the protocol. Files are named after the session
folder, ``<session>_<kind>.<fmt>``:

* ``summary``: one page, verdict table + pair-ratio plot + recommendation + provenance;
* ``ratios``: pair ratios per comparison with the median, its 95 % CI, the ±m band and 1.0;
* ``samples_<kernel>-<set>``: samples in time order (A and B alternating) over the SM clock;
* ``distributions``: ms per replay of every variant, per kernel and expert set;
* ``nvml``: memory used, SM clock, temperature and power over the session.

matplotlib is imported inside the functions that draw, so importing this module is cheap.
"""

from __future__ import annotations

import os
import re
import statistics
import textwrap
from pathlib import Path
from typing import Any

from workbench.errors import BadArgument
from workbench.report import (
    TIMING_ROLES,
    Analysis,
    CmpResult,
    _variant_order,
    analyse,
    fmt,
    fmt_ci,
    fmt_p,
    fmt_pct,
    gpu_text,
    protocol_text,
    provenance_line,
    shape_text,
)
from workbench.session import Session, load_session

FORMATS = ("png", "svg", "pdf")
COLOR_A, COLOR_B, COLOR_FLAG = "#1f77b4", "#ff7f0e", "#d62728"
VERDICT_COLORS = {"FASTER": "#2ca02c", "SLOWER": "#d62728", "SAME": "#7f7f7f"}
VERDICT_COLORS["AMBIGUOUS"] = "#e6a700"
VARIANT_COLORS = {"b4-scalar": "#7f7f7f", "b3-scalar": COLOR_A, "b3-coop": COLOR_B}
PALETTE = ("#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#2ca02c")
OFF_SCALE = 3.0  # a variant this many times slower than the fastest is noted, not boxed
DPI = 130
RATIO_ROLES = ("main", "confirm", "aa", "calibration")  # reference arms differ by 10x: no ratio


def plot_name(session_name: str, kind: str, fmt_: str) -> str:
    return f"{session_name}_{kind}.{fmt_}"


def existing_plots(session_name: str, plots_dir: str | os.PathLike) -> dict[str, Path]:
    """PNG figures of ``session_name`` already in ``plots_dir``: {kind: path}, summary first."""
    d = Path(plots_dir)
    if not d.is_dir():
        return {}
    pat = re.compile(re.escape(session_name) + r"_(.+)\.png$")
    found = {m.group(1): p for p in sorted(d.iterdir()) if (m := pat.match(p.name))}
    order = ["summary", "ratios", "distributions", "nvml"]
    return {k: found[k] for k in sorted(found, key=lambda k: (order + [k]).index(k))}


def _check_formats(formats: Any) -> tuple[str, ...]:
    fs = tuple(formats)
    bad = [f for f in fs if f not in FORMATS]
    if bad or not fs:
        raise BadArgument(f"format={','.join(map(str, fs))!r}: choose from {', '.join(FORMATS)}")
    return fs


def plot_session(
    session_path: str | os.PathLike | Session,
    out_dir: str | os.PathLike = "plots",
    formats: tuple[str, ...] | list[str] = ("png", "svg"),
) -> list[Path]:
    """Draw every figure of a session into ``out_dir``; return the files written."""
    fs = _check_formats(formats)
    import matplotlib

    matplotlib.use("Agg")  # headless: no display on GPU machines and CI
    import matplotlib.pyplot as plt

    s = session_path if isinstance(session_path, Session) else load_session(session_path)
    an = analyse(s)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs = [("summary", _fig_summary), ("ratios", _fig_ratios)]
    figs += [("distributions", _fig_distributions), ("nvml", _fig_nvml)]
    written: list[Path] = []
    with plt.rc_context({"font.size": 9, "axes.titlesize": 10, "svg.fonttype": "none"}):
        jobs = [(kind, lambda f=f: f(an)) for kind, f in figs]
        for r in an.by_role("main", "confirm", "aa", "calibration"):
            jobs.append((f"samples_{_slug(r.id)}", lambda r=r: _fig_samples(an, r)))
        for kind, draw in jobs:
            fig = draw()
            try:
                for f in fs:
                    path = out / plot_name(s.path.name, kind, f)
                    fig.savefig(path, dpi=DPI)
                    written.append(path)
            finally:
                plt.close(fig)  # pyplot keeps every open figure alive otherwise
    return written


def _slug(cmp_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", cmp_id).strip("-")


# ------------------------------------------------------------------------------- helpers


def _title(fig: Any, an: Analysis, what: str) -> None:
    s = an.session
    state = "" if s.status == "complete" else f"  [{s.status.upper()}]"
    fig.suptitle(
        f"{what}: {s.path.name}{state}\n{gpu_text(s)} · {shape_text(s)} · {protocol_text(an)}",
        fontsize=10,
    )


def _t0(s: Session) -> float:
    ts = [r["t"] for r in (*s.comparisons, *s.samples, *s.memory, *s.nvml)]
    return min(ts) if ts else 0.0


def _xy(pts: list[tuple]) -> tuple[list[float], list[float]]:
    return [p[0] for p in pts], [p[1] for p in pts]


def _mid(x: dict[str, Any]) -> float:
    """Middle of a sample's timed replays: the journal's ``t`` is when the sample ended."""
    return float(x["t"]) - sum(x.get("replay_ms") or [x["ms"]]) / 2000.0


def _variant_color(v: str, cache: dict[str, str]) -> str:
    if v in VARIANT_COLORS:
        return VARIANT_COLORS[v]
    return cache.setdefault(v, PALETTE[len(cache) % len(PALETTE)])


def _short(v: str) -> str:
    return v.replace(",", ",\n")  # step arms are "w13=...,w2=...": one kernel per line


def _no_data(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11)
    ax.set_xticks([])
    ax.set_yticks([])


# -------------------------------------------------------------------------------- ratios


def _draw_ratios(ax: Any, an: Analysis, rows: list[CmpResult]) -> None:
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
                ax.scatter(*_xy(sel), zorder=3, **style)
        xs += [q[0] for q in pts]
        if v.n and fmt(v.ci_low) != "n/a":
            ax.plot([v.ci_low, v.ci_high], [y, y], color=col, lw=7, alpha=0.45, zorder=2)
            xs += [v.ci_low, v.ci_high]
        if fmt(v.median) != "n/a":
            ax.scatter([v.median], [y], marker="D", s=60, color=col, edgecolor="black", zorder=4)
        a, b = str(r.cmp["a"]), str(r.cmp["b"])
        labels.append(f"{r.id}\nB {b}\nA {a}" if len(a + b) > 28 else f"{r.id}\n{b} vs {a}")
        verdicts.append(f"{v.verdict}  {fmt_pct(v.median)}\nk/n {v.k_faster}/{v.n}")
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

    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], ls="", marker="o", color="#444", ms=4, label="one ABBA pair"),
        Line2D([], [], ls="", marker="o", mfc="none", mec=COLOR_FLAG, ms=6, label="flagged pair"),
        Line2D([], [], ls="", marker="D", color="#888", mec="black", ms=6, label="median"),
        Line2D([], [], color="#888", lw=6, alpha=0.5, label="95 % CI of the median"),
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


def _ratio_rows(an: Analysis) -> list[CmpResult]:
    return an.by_role(*RATIO_ROLES)


def _fig_ratios(an: Analysis) -> Any:
    import matplotlib.pyplot as plt

    rows = _ratio_rows(an)
    fig = plt.figure(figsize=(10, max(4.0, 1.6 + 0.75 * len(rows))), layout="constrained")
    _title(fig, an, "Pair ratios B/A")
    ax = fig.add_subplot()
    if rows:
        _draw_ratios(ax, an, rows)
    else:
        _no_data(ax, "no comparisons with pair ratios in this session")
    return fig


# ----------------------------------------------------------------------- samples over time


def _clock_series(s: Session, t_lo: float, t_hi: float) -> tuple[list[float], list[float]]:
    rs = [r for r in s.nvml if t_lo <= r["t"] <= t_hi and r.get("sm_mhz") is not None]
    return [r["t"] for r in rs], [float(r["sm_mhz"]) for r in rs]


def _fig_samples(an: Analysis, r: CmpResult) -> Any:
    import matplotlib.pyplot as plt

    s = an.session
    t0 = _t0(s)
    recs = sorted(s.samples_for(r.id), key=lambda x: x["t"])
    fig, (ax, axc) = plt.subplots(
        2, 1, sharex=True, figsize=(10, 6), height_ratios=(3, 1.3), layout="constrained"
    )
    _title(fig, an, f"Samples in time order, {r.id} ({r.verdict.verdict})")
    if not recs:
        _no_data(ax, "no samples recorded for this comparison")
        _no_data(axc, "")
        return fig
    t = [_mid(x) - t0 for x in recs]
    # shade every other pair so that the ABBA / BAAB groups read at a glance
    pairs: dict[int, list[float]] = {}
    for x, tx in zip(recs, t, strict=True):
        pairs.setdefault(int(x["pair"]), []).append(tx)
    for p, ts in pairs.items():
        if p % 2 == 1:
            ax.axvspan(min(ts), max(ts), color="#000", alpha=0.05, lw=0)
    kept = [(tx, x) for tx, x in zip(t, recs, strict=True) if not x.get("excluded")]
    ax.plot([k[0] for k in kept], [k[1]["ms"] for k in kept], color="#999", lw=0.7, zorder=1)
    for arm, col, mk in (("A", COLOR_A, "o"), ("B", COLOR_B, "^")):
        pts = [(tx, x["ms"]) for tx, x in kept if x["arm"] == arm]
        variant = r.cmp[arm.lower()]
        ax.scatter(*_xy(pts), color=col, marker=mk, s=28, zorder=3, label=f"{arm}: {variant}")
        ms = r.a_ms if arm == "A" else r.b_ms
        if ms:
            med = statistics.median(ms)
            ax.axhline(med, color=col, ls=":", lw=1, label=f"{arm} median {med:.4f} ms")
    flg = [(tx, x["ms"]) for tx, x in zip(t, recs, strict=True) if x.get("flagged")]
    exc = [(tx, x["ms"]) for tx, x in zip(t, recs, strict=True) if x.get("excluded")]
    if flg:
        ax.scatter(*_xy(flg), s=110, facecolors="none", edgecolors=COLOR_FLAG, lw=1.4, zorder=4)
        ax.scatter([], [], s=60, facecolors="none", edgecolors=COLOR_FLAG, label="flagged")
    if exc:
        ax.scatter(*_xy(exc), marker="x", s=45, color=COLOR_FLAG, zorder=5, label="excluded")
    ax.set_ylabel(f"ms per replay ({r.calls} calls)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(f"{len(recs)} samples, {r.verdict.n} complete pairs (grey bands: odd pairs, BAAB)")
    # the SM clock under the samples, from NVML (or the per-sample min/max in the journal)
    pad = max(0.02, 0.03 * (recs[-1]["t"] - recs[0]["t"]))
    tc, mhz = _clock_series(s, recs[0]["t"] - pad, recs[-1]["t"] + pad)
    if tc:
        axc.step([x - t0 for x in tc], mhz, where="post", color="#555", lw=1, label="NVML SM clock")
    else:
        # no NVML journal: fall back on the per-sample clock range the runner recorded
        spans = [
            (tx, x["sm_mhz_min"], x.get("sm_mhz_max") or x["sm_mhz_min"])
            for tx, x in zip(t, recs, strict=True)
            if x.get("sm_mhz_min") is not None
        ]
        if spans:
            axc.vlines(*zip(*spans, strict=True), color="#555", lw=2, label="SM clock per sample")
            mhz = [v for sp in spans for v in sp[1:]]
        else:
            axc.text(
                0.5,
                0.5,
                "NVML unavailable: no SM clock recorded",
                ha="center",
                va="center",
                transform=axc.transAxes,
                color=COLOR_FLAG,
                fontsize=11,
            )
            axc.set_yticks([])
    if mhz:
        axc.set_ylim(min(mhz) - 60, max(mhz) + 60)
    for tx, x in zip(t, recs, strict=True):
        if x.get("flagged"):
            axc.axvline(tx, color=COLOR_FLAG, alpha=0.6, lw=1)
    if flg:
        axc.plot([], [], color=COLOR_FLAG, lw=1, label="flagged sample")
    if axc.get_legend_handles_labels()[0]:
        axc.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    axc.set_ylabel("SM clock (MHz)")
    axc.set_xlabel("time since session start (s)")
    axc.grid(alpha=0.3)
    return fig


# ------------------------------------------------------------------------- distributions


def _fig_distributions(an: Analysis) -> Any:
    import matplotlib.pyplot as plt
    import numpy as np

    s = an.session
    cells: dict[tuple[str, str], dict[str, list[float]]] = {}
    calls: dict[str, int] = {}
    for r in an.by_role(*TIMING_ROLES, "calibration"):
        calls.setdefault(r.kernel, r.calls)
        for x in s.samples_for(r.id):
            if x.get("excluded"):
                continue
            v = x.get("variant") or r.cmp[str(x["arm"]).lower()]
            reps = x.get("replay_ms") or [x["ms"]]
            cells.setdefault((r.kernel, r.set), {}).setdefault(v, []).extend(map(float, reps))
    rank = {"w13": 0, "w2": 1, "step": 2, "hot": 0, "rotating": 1}
    keys = sorted(cells, key=lambda c: (rank.get(c[0], 9), c[0], rank.get(c[1], 9), c[1]))
    nc = 2 if len(keys) > 1 else 1
    nr = max(-(-len(keys) // nc), 1)
    fig, axes = plt.subplots(
        nr, nc, figsize=(max(10.0, 5.2 * nc), 3.4 * nr + 1), squeeze=False, layout="constrained"
    )
    _title(fig, an, "Time per replay of each variant")
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(keys) :]:
        ax.set_axis_off()
    if not cells:
        _no_data(flat[0], "no samples in this session")
        return fig
    rng = np.random.default_rng(0)  # fixed jitter: the same session draws the same figure
    colors: dict[str, str] = {}
    for ax, (k, st) in zip(flat, keys, strict=False):
        data = cells[k, st]
        names = _variant_order(data)
        meds = {v: float(np.median(data[v])) for v in names}
        fastest = min(meds.values())
        shown = [v for v in names if meds[v] <= OFF_SCALE * fastest]
        off = [v for v in names if v not in shown]
        bp = ax.boxplot(
            [data[v] for v in shown],
            widths=0.5,
            showfliers=False,
            patch_artist=True,
            medianprops={"color": "black"},
        )
        for patch, v in zip(bp["boxes"], shown, strict=True):
            patch.set_facecolor(_variant_color(v, colors))
            patch.set_alpha(0.35)
        for x, v in enumerate(shown, start=1):
            y = data[v]
            ax.scatter(
                x + rng.uniform(-0.18, 0.18, len(y)),
                y,
                s=4,
                alpha=0.35,
                color=_variant_color(v, colors),
                zorder=3,
            )
        ax.set_xticks(range(1, len(shown) + 1), [_short(v) for v in shown], fontsize=8)
        ax.set_title(f"{k} / {st}")
        ax.set_ylabel(f"ms per replay ({calls[k]} calls)")
        ax.grid(axis="y", alpha=0.3)
        if off:
            note = "\n".join(
                f"{v}: median {meds[v]:.3f} ms = {meds[v] / fastest:.1f}× fastest (off scale)"
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


# ---------------------------------------------------------------------------- NVML timeline


def _fig_nvml(an: Analysis) -> Any:
    import matplotlib.pyplot as plt

    s = an.session
    t0 = _t0(s)
    fig, axes = plt.subplots(4, 1, sharex=True, figsize=(10, 8.5), layout="constrained")
    _title(fig, an, "NVML timeline")
    rd = s.nvml
    if not rd:
        why = s.environment.get("nvml")
        why = why if isinstance(why, str) and "unavailable" in why else "NVML unavailable"
        for ax in axes:
            ax.set_axis_off()
        axes[1].text(
            0.5,
            0.5,
            f"{why}\n(no readings in nvml.jsonl)",
            ha="center",
            va="center",
            transform=axes[1].transAxes,
            fontsize=13,
            color=COLOR_FLAG,
        )
        return fig
    t = [r["t"] - t0 for r in rd]

    def series(key: str, scale: float = 1.0) -> tuple[list[float], list[float]]:
        pts = [(tx, r[key] * scale) for tx, r in zip(t, rd, strict=True) if r.get(key) is not None]
        return ([p[0] for p in pts], [p[1] for p in pts]) if pts else ([], [])

    gib = 1.0 / (1 << 30)
    spec = [
        (axes[0], "mem_used", gib, "memory used (GiB)", "#1f77b4"),
        (axes[1], "sm_mhz", 1.0, "SM clock (MHz)", "#555555"),
        (axes[2], "temp_c", 1.0, "temperature (°C)", "#d62728"),
        (axes[3], "power_w", 1.0, "power (W)", "#9467bd"),
    ]
    for ax, key, scale, label, col in spec:
        xs, ys = series(key, scale)
        if xs:
            ax.step(xs, ys, where="post", color=col, lw=1)
            if key == "sm_mhz":
                ax.set_ylim(min(ys) - 60, max(ys) + 60)
        else:
            ax.text(
                0.5,
                0.5,
                f"{key}: not reported by NVML",
                ha="center",
                va="center",
                transform=ax.transAxes,
            )
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    tot = [r.get("mem_total") for r in rd if r.get("mem_total")]
    if tot:
        axes[0].set_title(f"device memory total {tot[-1] * gib:.1f} GiB", fontsize=9, loc="right")
    # comparisons as shaded spans, labelled on the memory axis
    label_style = {"rotation": 90, "fontsize": 6, "ha": "center", "va": "bottom", "color": "#333"}
    for i, r in enumerate(an.results):
        ts = [x["t"] - t0 for x in s.samples_for(r.id)]
        if not ts:
            continue
        for ax in axes:
            ax.axvspan(min(ts), max(ts), color="#2ca02c" if i % 2 else "#17becf", alpha=0.08, lw=0)
        mid = (min(ts) + max(ts)) / 2
        axes[0].text(mid, 0.04, r.id, transform=axes[0].get_xaxis_transform(), **label_style)
    for m in s.memory:
        axes[0].axvline(m["t"] - t0, color="#1f77b4", ls=":", lw=0.8)
    flagged = [_mid(x) - t0 for x in s.samples if x.get("flagged")]
    for tx in flagged:
        axes[1].axvline(tx, color=COLOR_FLAG, lw=1, alpha=0.7)
    thr = [tx for tx, r in zip(t, rd, strict=True) if r.get("throttle")]
    if thr:
        axes[1].scatter(
            thr,
            [0.02] * len(thr),
            marker="|",
            color=COLOR_FLAG,
            s=40,
            transform=axes[1].get_xaxis_transform(),
            label="throttle bits set",
        )
    if flagged:
        axes[1].plot([], [], color=COLOR_FLAG, lw=1, label="flagged sample")
    if flagged or thr:
        axes[1].legend(loc="lower right", fontsize=8)
    axes[-1].set_xlabel(
        "time since session start (s)   (shaded: comparisons; dotted: bank allocations)"
    )
    return fig


# -------------------------------------------------------------------------------- summary


def _fig_summary(an: Analysis) -> Any:
    import matplotlib.pyplot as plt

    s = an.session
    rows = _ratio_rows(an)
    n_tab = max(len(an.results), 1)
    # A4 landscape, taller only when a long session (calibration, many sets) needs the room
    height = max(8.3, 3.2 + 0.2 * n_tab + 0.55 * len(rows))
    fig = plt.figure(figsize=(11.7, height), layout="constrained")
    _title(fig, an, "Summary")
    gs = fig.add_gridspec(3, 1, height_ratios=(0.45 + 0.22 * n_tab, 0.5 + 0.6 * len(rows), 1.6))
    axt = fig.add_subplot(gs[0])
    axt.set_axis_off()
    header = ["comparison", "A", "B", "ratio", "change", "95 % CI", "p", "k/n", "flagged"]
    header.append("verdict")
    cells, colors = [], []
    for r in an.results:
        v = r.verdict
        row = [r.id, r.cmp["a"], r.cmp["b"], fmt(v.median), fmt_pct(v.median), fmt_ci(v)]
        cells.append(row + [fmt_p(v.wilcoxon_p), f"{v.k_faster}/{v.n}", str(r.flagged), v.verdict])
        colors.append(["white"] * 9 + [VERDICT_COLORS[v.verdict] + "55"])
    if cells:
        tab = axt.table(
            cellText=cells, colLabels=header, cellColours=colors, loc="center", cellLoc="center"
        )
        tab.auto_set_font_size(False)
        tab.set_fontsize(7.5)
        tab.auto_set_column_width(list(range(len(header))))
    else:
        _no_data(axt, "no comparisons in this session")
    axr = fig.add_subplot(gs[1])
    if rows:
        _draw_ratios(axr, an, rows)
    else:
        _no_data(axr, "no pair ratios")
    axx = fig.add_subplot(gs[2])
    axx.set_axis_off()
    lines = []
    for kernel, rec in an.recommendations.items():
        ev = ", ".join(f"{k} {v}" for k, v in rec.verdicts.items())
        lines.append(f"Recommendation {kernel}: {rec.decision.upper()} → {rec.arm}   ({ev})")
    for r in an.by_role("confirm"):
        lines.append(
            f"Step confirmation {r.id}: {r.cmp['b']} vs {r.cmp['a']}: ratio {fmt(r.verdict.median)}"
            f" ({fmt_pct(r.verdict.median)}), {r.verdict.verdict}"
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
