"""What every figure shares: colours, sizes, the title line, small drawing helpers, and writing
a figure to disk whole (a temporary file renamed into place: Ctrl-C never leaves half a file)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench.analysis import Analysis
from workbench.analysis.words import gpu_text, protocol_text, shape_text
from workbench.core.arms import COLORS
from workbench.core.files import write_whole
from workbench.store.session import Session

FORMATS = ("png", "svg", "pdf")
COLOR_A, COLOR_B, COLOR_FLAG = "#1f77b4", "#ff7f0e", "#d62728"
VERDICT_COLORS = {"FASTER": "#2ca02c", "SLOWER": "#d62728", "SAME": "#7f7f7f"}
VERDICT_COLORS["AMBIGUOUS"] = "#e6a700"
VARIANT_COLORS = dict(COLORS)  # the arm table's (core/arms.py)
PALETTE = ("#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#2ca02c")
OFF_SCALE = 3.0  # a variant this many times slower than the fastest is noted, not boxed
# Resolution of PNGs and of the rasterized layers inside SVG/PDF (dense scatters): crisp at
# 100 % zoom, while a distributions SVG of thousands of points stays small (5.7 MB before).
DPI = 130
RATIO_ROLES = ("main", "confirm", "aa", "calibration")  # reference arms differ by 10x: no ratio


def _draw(fig: Any, render: bool) -> None:
    """Draw ``fig`` at its DPI: ``render``, a full draw into its Agg canvas (whose pixels are
    then a PNG's); else a draw that lays out and places every artist but rasterizes nothing."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not render:
        fig.draw_without_rendering()
    elif isinstance(fig.canvas, FigureCanvasAgg):
        fig.canvas.draw()
    else:
        FigureCanvasAgg(fig).draw()  # becomes the figure's canvas


def drawn_texts(fig: Any, dpi: float = DPI, render: bool = False) -> list[tuple[Any, Any]]:
    """Every visible, non-empty text ``fig`` draws at ``dpi`` (tick labels, titles, legends,
    annotations, table cells), each with its extent in pixels: the texts a draw renders, not
    every Text the figure holds (an axis keeps tick labels outside its limits that it does not
    draw). ``render``: measured in a full draw into the Agg canvas (``_draw``)."""
    import functools

    from matplotlib.text import Text

    out: list[tuple[Any, Any]] = []
    draw = Text.draw

    @functools.wraps(draw)  # keeps the draw's marks (rasterization support)
    def record(self: Any, renderer: Any) -> None:
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            out.append((self, self.get_window_extent(renderer)))

    fig.set_dpi(dpi)
    Text.draw = record
    try:
        _draw(fig, render)
    finally:
        Text.draw = draw
    return out


def settle(fig: Any, dpi: float = DPI, render: bool = False, pad_px: float = 2.0,
           rounds: int = 4) -> None:  # fmt: skip
    """Lay ``fig`` out once for all its formats, grown until every text it draws lies inside
    the canvas; then turn its layout engine off, so that each save draws it once as it stands
    (a save with the engine on draws it twice: once to lay it out, once to render it).

    The layout engine places axes, their labels and legends, but not what is placed by hand: a
    table wider than its axes (the summary's verdict table, centred, lost both ends), a label at
    a fixed offset, and text metrics at the save DPI differ slightly from those at the screen
    DPI. So draw at ``dpi`` and measure every text drawn; if some stick out, widen or heighten
    the figure by that much and draw again (the layout engine places it anew). Most figures
    fit at once: one layout and one draw. That layout is kept for every format: an SVG or a
    PDF is placed by the PNG's text metrics (a fraction of a point away from their own).
    ``render``: the draws are full Agg draws, and the last one's pixels are the PNG (``save``);
    otherwise they lay out and place every artist but rasterize nothing."""
    if getattr(fig, "_workbench_settled", (None,))[0] == dpi:
        return  # saved in a second format: laid out already, its engine off
    for i in range(rounds + 1):
        boxes = [b for _, b in drawn_texts(fig, dpi, render)]
        fb = fig.bbox
        if not boxes:
            break
        out_x = max(0.0, fb.x0 - min(b.x0 for b in boxes))
        out_x += max(0.0, max(b.x1 for b in boxes) - fb.x1)
        out_y = max(0.0, fb.y0 - min(b.y0 for b in boxes))
        out_y += max(0.0, max(b.y1 for b in boxes) - fb.y1)
        if (out_x <= 0 and out_y <= 0) or i == rounds:
            break
        w, h = fig.get_size_inches()
        grow_x = (out_x + 2 * pad_px) / dpi if out_x > 0 else 0.0
        grow_y = (out_y + 2 * pad_px) / dpi if out_y > 0 else 0.0
        fig.set_size_inches(w + grow_x, h + grow_y)
    # None, not "none": "none" leaves a placeholder engine, and savefig lays out any figure
    # that has an engine (STYLE keeps figure.autolayout and constrained_layout.use off)
    fig.set_layout_engine(None)
    fig._workbench_settled = (dpi, render)


def save(fig: Any, path: Path, fmt: str) -> Path:
    """Write ``fig`` to ``path`` whole: into a hidden temporary file first, then renamed. The
    figure is first laid out and grown until every text lies inside its canvas (``settle``); a
    PNG is the pixels of that draw, when it rendered them."""
    settle(fig, DPI, render=fmt == "png")
    if fmt == "png" and fig._workbench_settled == (DPI, True):
        import matplotlib.image

        # what savefig writes (FigureCanvasAgg.print_png), without drawing the figure again
        buf = fig.canvas.buffer_rgba()
        return write_whole(
            path,
            lambda tmp: matplotlib.image.imsave(
                tmp, buf, format="png", origin="upper", dpi=DPI, metadata=None
            ),
        )
    return write_whole(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=DPI))


def save_all(fig: Any, stem: Path, formats: tuple[str, ...]) -> Iterator[Path]:
    """``fig`` saved as ``<stem>.<fmt>`` in each format, laid out once (by a full draw when one
    of them is a PNG: that draw's pixels are the PNG); yields each file once it is complete."""
    settle(fig, DPI, render="png" in formats)
    for f in formats:
        yield save(fig, stem.with_name(f"{stem.name}.{f}"), f)


def file_slug(cmp_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", cmp_id).strip("-")


def fit_lines(parts: list[str], fig: Any, fontsize: float = 10) -> list[str]:
    """``parts`` joined by " · " into lines that fit the figure's width (a part too long for
    one line is wrapped at its spaces): a centred title wider than the figure loses both ends."""
    import textwrap

    # DejaVu Sans averages about 0.55 em a character; 0.62 leaves a margin
    width = max(int(fig.get_figwidth() * 72 / (0.62 * fontsize)), 20)
    lines: list[str] = []
    for part in parts:
        for piece in textwrap.wrap(part, width) or [""]:
            if lines and len(lines[-1]) + 3 + len(piece) <= width:
                lines[-1] += " · " + piece
            else:
                lines.append(piece)
    return lines


def suptitle(fig: Any, an: Analysis, what: str) -> None:
    s = an.session
    state = "" if s.status == "complete" else f"  [{s.status.upper()}]"
    facts = fit_lines([gpu_text(s), shape_text(s), protocol_text(an)], fig)
    fig.suptitle("\n".join([f"{what}: {s.path.name}{state}", *facts]), fontsize=10)


def panel_grid(n: int, height: float, extra: float) -> tuple[Any, list[Any]]:
    """A figure of ``n`` panels, two a row (one where there is a single panel), each row
    ``height`` inches tall plus ``extra`` for the titles; the panels in reading order, those past
    ``n`` switched off. The one grid of the per-(kernel, set) figures."""
    import matplotlib.pyplot as plt

    nc = 2 if n > 1 else 1
    nr = max(-(-n // nc), 1)
    fig, axes = plt.subplots(
        nr, nc, figsize=(max(10.0, 5.2 * nc), height * nr + extra), squeeze=False,
        layout="constrained",
    )  # fmt: skip
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_axis_off()
    return fig, flat


def session_start(s: Session) -> float:
    ts = [r["t"] for r in (*s.comparisons, *s.samples, *s.memory, *s.nvml)]
    return min(ts) if ts else 0.0


def unzip_xy(pts: list[tuple]) -> tuple[list[float], list[float]]:
    return [p[0] for p in pts], [p[1] for p in pts]


def sample_mid(x: dict[str, Any]) -> float:
    """Middle of a sample's timed replays: the journal's ``t`` is when the sample ended."""
    return float(x["t"]) - sum(x.get("replay_ms") or [x["ms"]]) / 2000.0


def variant_color(v: str, cache: dict[str, str]) -> str:
    if v in VARIANT_COLORS:
        return VARIANT_COLORS[v]
    return cache.setdefault(v, PALETTE[len(cache) % len(PALETTE)])


def short_arm(v: str) -> str:
    return v.replace(",", ",\n")  # step arms are "w13=...,w2=...": one kernel per line


def no_data(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11)
    ax.set_xticks([])
    ax.set_yticks([])
