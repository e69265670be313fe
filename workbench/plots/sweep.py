"""The sweep of a tune session (docs/DESIGN.md §11): one panel per expert set, every screened
candidate's µs per call, the confirmed ones with their block-level 95 % CI, the default's time,
and the streaming floor when one is given (``--floor-file``, as plots/floor.py reads it).

Everything is read from the journal: screened times from the ``candidate`` records, confirmed
estimates recomputed from the ``tune/<candidate>/<set>`` samples through workbench.core.stats.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from workbench.core.vocab import SETS
from workbench.core import stats
from workbench.plots._common import COLOR_A, COLOR_FLAG, VERDICT_COLORS, save
from workbench.store.session import Session



def confirmed(s: Session, cand: str, set_name: str) -> dict[str, Any] | None:
    """The confirmation of ``cand`` in ``set_name`` recomputed from its samples, in µs per call:
    the default's median, the candidate's estimate and CI (default × ratio)."""
    samples = s.samples_for(f"tune/{cand}/{set_name}")
    if not samples:
        return None
    v = stats.compare(stats.pair_ratios(samples), float(s.config.get("m", stats.DEFAULT_M)))
    calls = int(s.config.get("calls", 48))
    a = [x["ms"] for x in samples if x["arm"] == "A" and not x.get("excluded")]
    if not a or v.median is None:
        return None
    a_us = statistics.median(a) * 1000 / calls
    return {"a_us": a_us, "us": a_us * v.median, "low": a_us * v.ci_low,
            "high": a_us * v.ci_high, "verdict": v.verdict}  # fmt: skip


def fig_sweep(s: Session, floor: dict[tuple[str, str], float] | None = None) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tune = s.config.get("tune") or {}
    kernel = tune.get("kernel", "?")
    recs = {c["candidate"]: c for c in s.candidates}  # the last record of a candidate wins
    sets = [x for x in SETS if x in (s.config.get("sets") or SETS)]
    order = sorted(recs, key=lambda n: (recs[n].get("score") is None, recs[n].get("score") or 0))
    fig, axes = plt.subplots(len(sets), 1, figsize=(max(7, 0.45 * len(order) + 3), 3.4 * len(sets)),
                             squeeze=False, layout="constrained")  # fmt: skip
    for ax, set_name in zip(axes[:, 0], sets, strict=True):
        defaults = []
        for i, name in enumerate(order):
            rec = recs[name]
            res = (rec.get("sets") or {}).get(set_name) or {}
            if rec["status"] != "screened" or not res.get("b_us"):
                ax.scatter([i], [0], marker="x", color=COLOR_FLAG, zorder=3)
                continue
            defaults.append(res["a_us"])
            ax.scatter([i], [res["b_us"]], color=COLOR_A, s=18, zorder=3)
            c = confirmed(s, name, set_name)
            if c is not None:
                col = VERDICT_COLORS.get(c["verdict"], "#333")
                ax.errorbar([i + 0.2], [c["us"]], yerr=[[c["us"] - c["low"]], [c["high"] - c["us"]]],
                            fmt="D", color=col, ms=5, capsize=3, zorder=4,
                            label=f"confirmed {c['verdict']}")  # fmt: skip
        if defaults:
            d = statistics.median(defaults)
            dflt = ",".join(f"{k}={v}" for k, v in (tune.get("default") or {}).items())
            ax.axhline(d, color="#555", lw=1, label=f"default {dflt}: {d:.2f} µs")
        f_us = (floor or {}).get((kernel, set_name))
        if f_us:
            ax.axhline(
                f_us, color=COLOR_FLAG, ls="--", lw=1.2, label=f"streaming floor {f_us:.2f} µs"
            )
        ax.set_xticks(range(len(order)))
        ax.set_xticklabels(order, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("µs per call")
        ax.set_title(f"{kernel} {set_name}: screened (dots), confirmed with 95 % CI (diamonds), "
                     "excluded (x at 0)", fontsize=9)  # fmt: skip
        handles, labels = ax.get_legend_handles_labels()
        uniq = dict(zip(labels, handles, strict=True))
        ax.legend(uniq.values(), uniq.keys(), fontsize=7, loc="best")
    gpu = s.gpu.get("name", "")
    fig.suptitle(f"tune {kernel} {tune.get('arm', '')} on {gpu}: {s.path.name}", fontsize=10)
    return fig


def plot_sweep(
    s: Session, out_dir: str | Path, floor: dict[tuple[str, str], float] | None = None,
    fmt: str = "png",
) -> Path:  # fmt: skip
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig = fig_sweep(s, floor)
    try:
        return save(fig, out / f"{s.path.name}_sweep.{fmt}", fmt)
    finally:
        plt.close(fig)
