"""Ratio chart: per comparison, the ratio B/A, its CI and the ±m band, on one shared axis.

A forest plot in text. Each comparison is a line on a common ratio axis centred on 1.0: the
band of ratios within ±m of 1 (m: the minimum effect that counts) is shaded, the CI is a bar in
the colour of the verdict and the median a dot. A bar wholly left of the band reads "B faster",
wholly inside it "same", across an edge of it "ambiguous": the verdict rule, seen at a glance.
A CI reaching beyond the axis ends in an arrow at its edge; with too few pairs for a CI
only the median is drawn.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from workbench.analysis.words import legend
from workbench.tui.backend import RatioPoint
from workbench.tui.widgets.results_table import verdict_style

# The axis never spans more than 0.75..1.25: the effects this tool weighs are a few per cent,
# and one far-off comparison (a tinygemm reference at 0.04) must not flatten the others. What
# lies beyond is drawn as an arrow at the edge, its figures in full beside it.
MAX_HALF = 0.25
MIN_HALF = 0.005  # nor less than 0.995..1.005 (m = 0 and no CI yet would leave it no span)
MIN_AXIS = 12  # narrower than this, a comparison takes two lines (its figures, then its bar)
LABEL_MAX = 24
BAND = Style(bgcolor="grey23")
LIVE_STYLE = "bold bright_white"  # a comparison still being measured has no verdict yet


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def axis_half_width(points: Sequence[RatioPoint]) -> float:
    """Half the span of the axis around 1.0: room for every band and every finite CI, 10 %
    spare, but no more than MAX_HALF (a median or a CI bound past it does not widen the axis)."""
    reach = max((p.m for p in points), default=0.01)
    for p in points:
        for x in (p.ci_low, p.ci_high, p.median):
            if _finite(x) and abs(x - 1.0) <= MAX_HALF:
                reach = max(reach, abs(x - 1.0))
    return min(MAX_HALF, max(MIN_HALF, reach * 1.1))


def _tick_step(half: float, width: int) -> float:
    """The smallest 1-2-5 step whose labels ("0.95", 6 cells apart at least) fit the axis."""
    for step in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5):
        if 2 * half / step * 7 <= width:
            return step
    return 0.5


def _fit(label: str, width: int) -> str:
    """``label`` in ``width`` cells: a parenthesised role ("(confirm)") goes first, then the
    middle of the id (its set), then its start: the last part ("tinygemm", "triton-moe") is
    what tells two references of one kernel and set apart, so it stays."""
    if len(label) > width:
        label = label.split(" (")[0]
    if len(label) <= width:
        return label
    parts = label.split("/")
    if len(parts) > 2:
        for keep in (3, 1):
            short = "/".join([parts[0], *(x[:keep] for x in parts[1:-1]), parts[-1]])
            if len(short) <= width:
                return short
        return "…" + label[-(width - 1) :] if width > 1 else "…"  # "…/triton-moe"
    return label[: width - 1] + "…"  # "w13/rotating": its start says the most


def _value_text(p: RatioPoint, form: int) -> str:
    """The figures after a bar; ``form`` 0 is the fullest, 3 the shortest."""
    med = f"{p.median:.4f}" if _finite(p.median) else "–"
    lo = f"{p.ci_low:.4f}" if _finite(p.ci_low) else "–"
    hi = f"{p.ci_high:.4f}" if _finite(p.ci_high) else "–"
    verdict = p.verdict or "…"
    return [
        f"{med} [{lo}, {hi}] {verdict:<9} {p.note}".rstrip(),
        f"{med} [{lo}, {hi}] {verdict}",
        f"{med} {verdict}",
        med,
    ][form]


class RatioChart(Widget):
    """Shows ``points`` (one `RatioPoint` per comparison); re-lays itself out at every width."""

    DEFAULT_CSS = """
    RatioChart { height: auto; }
    """

    points: reactive[tuple[RatioPoint, ...]] = reactive((), layout=True)

    def __init__(self, empty: str = "No comparison to chart yet.", **kwargs) -> None:
        super().__init__(**kwargs)
        self.empty = empty

    def show(self, points: Sequence[RatioPoint]) -> None:
        self.points = tuple(points)

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.render_lines_text(width))

    def render(self) -> Text:
        return Text("\n").join(self.render_lines_text(self.content_size.width))

    # ---- drawing ---------------------------------------------------------------------------

    def render_lines_text(self, width: int) -> list[Text]:
        """The chart as lines of at most ``width`` cells."""
        points = self.points
        width = max(width, 20)
        if not points:
            return [Text(line, style="dim") for line in textwrap.wrap(self.empty, width)]
        label_w = min(LABEL_MAX, width // 5, max(len(p.label) for p in points))
        # The fullest figures that leave the axis a third of the width; the axis comes first.
        for form in range(4):
            value_w = max(len(_value_text(p, form)) for p in points)
            axis_w = width - label_w - value_w - 2
            if axis_w >= max(MIN_AXIS + 8, width // 3) or (form == 3 and axis_w >= MIN_AXIS):
                return self._one_line_rows(points, label_w, axis_w, form, width)
        return self._two_line_rows(points, width)

    def _one_line_rows(
        self, points: Sequence[RatioPoint], label_w: int, axis_w: int, form: int, width: int
    ) -> list[Text]:
        half = axis_half_width(points)
        lines = [Text(" " * (label_w + 1)) + self._ticks(half, axis_w)]
        for p in points:
            line = Text(_fit(p.label, label_w).ljust(label_w) + " ", style="bold")
            line += self._bar(p, half, axis_w)
            line += Text(" " + _value_text(p, form), style=self._style(p))
            lines.append(line)
        lines += self._legend(points, width)
        return lines

    def _two_line_rows(self, points: Sequence[RatioPoint], width: int) -> list[Text]:
        half = axis_half_width(points)
        lines = [self._ticks(half, width)]
        for p in points:
            figures = _value_text(p, 1 if len(p.label) + 26 <= width else 3)
            lines.append(Text(_fit(p.label, width - len(figures) - 1), style="bold"))
            lines[-1] += Text(" " + figures, style=self._style(p))
            lines.append(self._bar(p, half, width))
        lines += self._legend(points, width)
        return lines

    @staticmethod
    def _style(p: RatioPoint) -> str:
        return verdict_style(p.verdict) or LIVE_STYLE

    @staticmethod
    def _col(x: float, half: float, width: int) -> int:
        """The cell of ratio ``x`` on an axis of ``width`` cells spanning 1 ± half."""
        return round((x - (1.0 - half)) / (2 * half) * (width - 1))

    def _ticks(self, half: float, width: int) -> Text:
        cells = [" "] * width
        step = _tick_step(half, width)
        k = math.ceil((1.0 - half) / step - 1e-9)
        while k * step <= 1.0 + half + 1e-9:
            x = k * step
            label = f"{x:.3f}".rstrip("0").rstrip(".") if step < 0.01 else f"{x:.2f}"
            # centred on its mark; at the ends of the axis, pulled inside it
            start = min(max(0, self._col(x, half, width) - len(label) // 2), width - len(label))
            free = cells[max(0, start - 1) : start + len(label) + 1]
            if start >= 0 and start + len(label) <= width and all(c == " " for c in free):
                cells[start : start + len(label)] = label
            k += 1
        return Text("".join(cells), style="dim")

    def _bar(self, p: RatioPoint, half: float, width: int) -> Text:
        style = self._style(p)
        cells = ["─"] * width
        styles: list[Style | str] = ["dim"] * width
        lo_band, hi_band = self._col(1 - p.m, half, width), self._col(1 + p.m, half, width)
        for c in range(max(0, lo_band), min(width, hi_band + 1)):
            cells[c] = " "
        one = self._col(1.0, half, width)
        cells[one] = "│"
        if _finite(p.median):
            if _finite(p.ci_low) and _finite(p.ci_high):  # else too few pairs: no bar yet
                lo, hi = p.ci_low, p.ci_high
                c_lo = max(0, self._col(max(lo, 1 - half), half, width))
                c_hi = min(width - 1, self._col(min(hi, 1 + half), half, width))
                for c in range(c_lo, c_hi + 1):
                    cells[c], styles[c] = "━", style
                if lo < 1 - half:
                    cells[0], styles[0] = "◀", style
                if hi > 1 + half:
                    cells[-1], styles[-1] = "▶", style
            c_med = self._col(min(max(p.median, 1 - half), 1 + half), half, width)
            off_scale = "◀" if p.median < 1 - half else "▶" if p.median > 1 + half else ""
            cells[c_med], styles[c_med] = off_scale or "●", style
        text = Text()
        for c, (ch, st) in enumerate(zip(cells, styles, strict=True)):
            in_band = lo_band <= c <= hi_band
            text.append(ch, Style.parse(st) + BAND if in_band else st)
        return text

    @staticmethod
    def _legend(points: Sequence[RatioPoint], width: int) -> list[Text]:
        """What the band, the bar and the dot are, in as many lines as ``width`` needs: the dot
        is the verdict's estimate, the bar its interval, in the words of their method
        (workbench.analysis.words.legend)."""
        m = max(p.m for p in points)
        methods = {p.method for p in points if p.method}
        if methods:
            marker, interval = legend(methods)
        else:  # a run still measuring: its figures are the pairs' so far
            marker, interval = "estimate so far", "95 % CI"
        parts = [
            (f"  ±{m * 100:g} % band ", BAND),
            (f"  ━ {interval}", "dim"),
            (f"  ● {marker}", "dim"),
            ("  ratio < 1: B faster", "dim"),
        ]
        lines = [Text()]
        for words, style in parts:
            if lines[-1].cell_len and lines[-1].cell_len + len(words) > width:
                lines.append(Text())
            lines[-1].append(words[: max(width - lines[-1].cell_len, 0)], style)
        return lines
