"""µs per call of every arm against a streaming floor: the time a kernel needs just to load the
call's bytes with the same launch (benchmarks/floor_probe.cu). The floor is measured per GPU and
shape, so it is an input (``--floor-us`` or ``--floor-file``), never a constant of the package.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from workbench.core.vocab import KERNEL_CHOICES as KERNELS, SETS
from workbench.analysis import Analysis
from workbench.core.errors import BadArgument
from workbench.plots._common import (
    COLOR_FLAG,
    OFF_SCALE,
    panel_grid,
    short_arm,
    suptitle,
    variant_color,
)
from workbench.analysis.words import variant_order

# A floor above 1 s per call is a unit mistake (ms or ns given as µs), not a kernel.
MAX_FLOOR_US = 1e6


def parse_floor(text: str, option: str = "--floor-us") -> dict[tuple[str, str], float]:
    """``"w13/hot=1.94,w2/rotating=2.18"`` (commas or lines, ``#`` comments) -> {(kernel, set): µs}.

    BadArgument names ``option`` and the bad entry."""
    out: dict[tuple[str, str], float] = {}
    uncommented = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    for raw in re.split(r"[,\n]", uncommented):
        item = raw.strip()
        if not item:
            continue
        key, sep, value = (x.strip() for x in item.partition("="))
        kernel, _, st = key.partition("/")
        if not sep or kernel not in KERNELS or st not in SETS:
            raise BadArgument(
                f"{option} entry {item!r}: write KERNEL/SET=US with KERNEL one of "
                f"{', '.join(KERNELS)} and SET one of {', '.join(SETS)}, e.g. w13/hot=1.94"
            )
        try:
            us = float(value)
        except ValueError:
            raise BadArgument(f"{option} entry {item!r}: {value!r} is not a number") from None
        if not (math.isfinite(us) and 0 < us <= MAX_FLOOR_US):
            raise BadArgument(
                f"{option} entry {item!r}: µs per call must be in (0, {MAX_FLOOR_US:g}]"
            )
        out[(kernel, st)] = us
    if not out:
        raise BadArgument(f"{option} {text!r} holds no KERNEL/SET=US entry")
    return out


def read_floor_file(path: str | Path, option: str = "--floor-file") -> dict[tuple[str, str], float]:
    """The floor from a file of ``KERNEL/SET = US`` lines (``#`` comments)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
        raise BadArgument(f"{option} {str(p)!r}: cannot read it ({why})") from None
    return parse_floor(text, f"{option} {str(p)!r}")


def fig_floor(an: Analysis, floor: dict[tuple[str, str], float], source: str) -> Any:
    """One panel per (kernel, set) with a floor: bars at each arm's median µs per call, the
    samples as dots, the floor as a dashed line, and each median as a multiple of the floor."""
    import numpy as np

    us = an.variant_us()
    have = {(k, st) for k, st, _ in us}
    keys = [k for k in floor if k in have]
    fig, flat = panel_grid(len(keys), 3.6, 1.2)
    suptitle(fig, an, "µs per call against the streaming floor")
    rng = np.random.default_rng(0)  # fixed jitter: the same session draws the same figure
    colors: dict[str, str] = {}
    for ax, (kernel, st) in zip(flat, keys, strict=False):
        data = {v: xs for (k, s_, v), xs in us.items() if (k, s_) == (kernel, st) and xs}
        names = variant_order(data)
        meds = {v: float(np.median(data[v])) for v in names}
        fastest = min(meds.values())
        shown = [v for v in names if meds[v] <= OFF_SCALE * fastest]
        off = [v for v in names if v not in shown]
        f_us = floor[(kernel, st)]
        x = np.arange(len(shown))
        ax.bar(x, [meds[v] for v in shown], width=0.6, alpha=0.45,
               color=[variant_color(v, colors) for v in shown])  # fmt: skip
        for i, v in enumerate(shown):
            ys = data[v]
            ax.scatter(i + rng.uniform(-0.2, 0.2, len(ys)), ys, s=5, alpha=0.5,
                       color=variant_color(v, colors), zorder=3, rasterized=True)  # fmt: skip
            ax.annotate(f"{meds[v]:.2f} µs\n{meds[v] / f_us:.2f}× floor", (i, meds[v]),
                        xytext=(0, 6), textcoords="offset points", ha="center", va="bottom",
                        fontsize=8)  # fmt: skip
        ax.axhline(f_us, color=COLOR_FLAG, ls="--", lw=1.4, label=f"streaming floor {f_us:.2f} µs")
        top = max([f_us, *(meds[v] for v in shown)])
        ax.set_ylim(0, top * 1.3)
        ax.set_xticks(x, [short_arm(v) for v in shown], fontsize=8)
        ax.set_ylabel("µs per call")
        ax.set_title(f"{kernel} / {st}")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        if off:
            note = "\n".join(f"{v}: {meds[v]:.1f} µs = {meds[v] / f_us:.0f}× floor (off scale)"
                             for v in off)  # fmt: skip
            ax.text(0.02, 0.97, note, transform=ax.transAxes, va="top", fontsize=7,
                    bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "#ccc"})  # fmt: skip
    fig.supxlabel(f"floor: {source}", fontsize=8, color="#555")
    return fig


def floor_keys_missing(an: Analysis, floor: dict[tuple[str, str], float]) -> list[str]:
    """Floor entries no timed comparison of the session matches (the CLI says so)."""
    have = {(k, s) for k, s, _ in an.variant_us()}
    return [f"{k}/{s}" for k, s in floor if (k, s) not in have]
