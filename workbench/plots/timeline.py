"""Figures over time: each comparison's samples in time order over the SM clock, and the NVML
timeline of the whole session."""

from __future__ import annotations

import statistics
from typing import Any

from workbench.analysis import Analysis, ComparisonResult
from workbench.plots._common import (
    COLOR_A,
    COLOR_B,
    COLOR_FLAG,
    no_data,
    sample_mid,
    session_start,
    suptitle,
    unzip_xy,
)
from workbench.store.session import Session


def _clock_series(s: Session, t_lo: float, t_hi: float) -> tuple[list[float], list[float]]:
    rs = [r for r in s.nvml if t_lo <= r["t"] <= t_hi and r.get("sm_mhz") is not None]
    return [r["t"] for r in rs], [float(r["sm_mhz"]) for r in rs]


def fig_samples(an: Analysis, r: ComparisonResult) -> Any:
    import matplotlib.pyplot as plt

    s = an.session
    t0 = session_start(s)
    recs = sorted(s.samples_for(r.id), key=lambda x: x["t"])
    fig, (ax, axc) = plt.subplots(
        2, 1, sharex=True, figsize=(10, 6), height_ratios=(3, 1.3), layout="constrained"
    )
    suptitle(fig, an, f"Samples in time order, {r.id} ({r.verdict_words})")
    if not recs:
        no_data(ax, "no samples recorded for this comparison")
        no_data(axc, "")
        return fig
    t = [sample_mid(x) - t0 for x in recs]
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
        ax.scatter(*unzip_xy(pts), color=col, marker=mk, s=28, zorder=3, label=f"{arm}: {variant}")
        ms = r.a_samples_ms if arm == "A" else r.b_samples_ms
        if ms:
            med = statistics.median(ms)
            ax.axhline(med, color=col, ls=":", lw=1, label=f"{arm} median {med:.4f} ms")
    flg = [(tx, x["ms"]) for tx, x in zip(t, recs, strict=True) if x.get("flagged")]
    exc = [(tx, x["ms"]) for tx, x in zip(t, recs, strict=True) if x.get("excluded")]
    if flg:
        ax.scatter(
            *unzip_xy(flg), s=110, facecolors="none", edgecolors=COLOR_FLAG, lw=1.4, zorder=4
        )
        ax.scatter([], [], s=60, facecolors="none", edgecolors=COLOR_FLAG, label="flagged")
    if exc:
        ax.scatter(*unzip_xy(exc), marker="x", s=45, color=COLOR_FLAG, zorder=5, label="excluded")
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


def spread(xs: list[float], gap: float) -> list[float]:
    """Positions near ``xs`` (in their order of size) at least ``gap`` apart, each moved as
    little as a forward then a backward sweep allows: labels of interleaved comparisons (the
    blocks run every comparison in turn) would otherwise print on top of each other."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [xs[i] for i in order]
    for k in range(1, len(out)):
        out[k] = max(out[k], out[k - 1] + gap)
    shift = (out[-1] - max(xs)) / 2 if out else 0.0  # centre the pushed group on the data
    out = [x - max(shift, 0.0) for x in out]
    for k in range(len(out) - 2, -1, -1):
        out[k] = min(out[k], out[k + 1] - gap)
    res = [0.0] * len(xs)
    for k, i in enumerate(order):
        res[i] = out[k]
    return res


def fig_nvml(an: Analysis) -> Any:
    import matplotlib.pyplot as plt

    s = an.session
    t0 = session_start(s)
    fig, axes = plt.subplots(4, 1, sharex=True, figsize=(10, 8.5), layout="constrained")
    suptitle(fig, an, "NVML timeline")
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
    mids: list[tuple[float, str]] = []
    for i, r in enumerate(an.results):
        ts = [x["t"] - t0 for x in s.samples_for(r.id)]
        if not ts:
            continue
        for ax in axes:
            ax.axvspan(min(ts), max(ts), color="#2ca02c" if i % 2 else "#17becf", alpha=0.08, lw=0)
        mids.append(((min(ts) + max(ts)) / 2, r.id))
    if mids:
        # a rotated 6 pt label is ~8 pt wide: in data units, that share of the axis' width
        span = max(t[-1], max(m for m, _ in mids)) - min(0.0, t[0])
        width_pt = axes[0].get_position().width * fig.get_figwidth() * 72
        xs = spread([m for m, _ in mids], span * 8.0 / max(width_pt, 1.0))
        xform = axes[0].get_xaxis_transform()
        for (mid, rid), x in zip(mids, xs, strict=True):
            axes[0].text(x, 0.04, rid, transform=xform, **label_style)
            if abs(x - mid) > 1e-9:  # moved aside: a tick from the label to its comparison
                axes[0].plot([mid, x], [0.0, 0.035], transform=xform, color="#999", lw=0.5)
    for m in s.memory:
        axes[0].axvline(m["t"] - t0, color="#1f77b4", ls=":", lw=0.8)
    flagged = [sample_mid(x) - t0 for x in s.samples if x.get("flagged")]
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
