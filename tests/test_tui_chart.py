"""The ratio chart (workbench/tui/widgets/ratio_chart.py): where each mark lands on the axis.

The chart is drawn as text, so positions are checked in cells: the ±m band around 1.0, the CI
bar and the median dot of each comparison, at wide and narrow widths.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("textual")

from workbench.core import stats  # noqa: E402
from workbench.tui.backend import RatioPoint  # noqa: E402
from workbench.tui.widgets.ratio_chart import (  # noqa: E402
    BAND,
    MAX_HALF,
    RatioChart,
    axis_half_width,
)

FASTER = RatioPoint("w13/hot", 0.93, 0.92, 0.94, 0.01, "FASTER", "12 pairs")
SLOWER = RatioPoint("w2/hot", 1.11, 1.10, 1.12, 0.01, "SLOWER")
SAME = RatioPoint("aa/hot", 1.001, 0.995, 1.006, 0.01, "SAME")
LIVE = RatioPoint("live", 0.97, None, None, 0.01)  # fewer pairs than a CI needs


def chart_lines(points, width):
    chart = RatioChart()
    chart.show(points)
    return chart.render_lines_text(width)


def axis_cols(line, label_w):
    """Cells of the bar of one chart line: {column: character}, columns from the axis start."""
    return {i - label_w - 1: ch for i, ch in enumerate(line.plain) if i > label_w}


def band_cols(line, label_w):
    """Axis columns drawn with the band's background."""
    cols = set()
    for span in line.spans:
        if getattr(span.style, "bgcolor", None) == BAND.bgcolor:
            cols |= {i - label_w - 1 for i in range(span.start, span.end) if i > label_w}
    return cols


def test_marks_land_on_the_side_of_one_their_ratio_says():
    points = [FASTER, SLOWER, SAME, LIVE]
    lines = chart_lines(points, 100)
    ticks, rows, legend = lines[0], lines[1:-1], lines[-1]
    assert len(rows) == 4 and "±1 % band" in legend.plain
    label_w = len("w13/hot")
    one = axis_cols(rows[0], label_w)
    centre = next(c for c, ch in one.items() if ch == "│")
    assert "1.00" in ticks.plain
    # the tick label 1.00 is centred over the 1.0 line
    assert ticks.plain.index("1.00") + 2 == label_w + 1 + centre
    for row, side in zip(rows, (-1, +1, 0, -1), strict=True):
        cells = axis_cols(row, label_w)
        dot = next(c for c, ch in cells.items() if ch == "●")
        assert (dot > centre) - (dot < centre) == side, row.plain
    # the FASTER bar lies wholly left of the band; the SAME bar inside it
    band = band_cols(rows[0], label_w)
    assert centre in band and len(band) >= 3
    faster_bar = {c for c, ch in axis_cols(rows[0], label_w).items() if ch in "━●"}
    same_bar = {c for c, ch in axis_cols(rows[2], label_w).items() if ch in "━●"}
    assert max(faster_bar) < min(band) and same_bar <= band
    # no CI yet: a dot and no bar; the figures say so
    assert "━" not in rows[3].plain and "[–, –]" in rows[3].plain
    assert rows[0].plain.rstrip().endswith("0.9300 [0.9200, 0.9400] FASTER    12 pairs")


def test_narrow_widths_drop_figures_before_the_axis_and_never_overflow():
    points = [FASTER, SLOWER, SAME]
    for width in (160, 100, 80, 60, 42, 30, 24):
        lines = chart_lines(points, width)
        assert all(len(line.plain) <= width for line in lines), width
        rows = [ln for ln in lines[1:] if not ln.plain.startswith("  ")]  # not the legend
        assert sum("●" in line.plain for line in rows) == 3, width
    assert "[0.9200, 0.9400]" in chart_lines(points, 80)[1].plain
    assert "[" not in chart_lines(points, 42)[1].plain  # the median alone, axis kept wide


def test_axis_spans_every_ci_and_band_but_not_a_far_off_one():
    assert axis_half_width([SAME]) == pytest.approx(0.011)  # the band, 10 % spare
    assert axis_half_width([FASTER, SLOWER]) == pytest.approx(0.12 * 1.1)
    # a far-off reference arm (tinygemm at 0.04 in a real session) does not flatten the rest:
    # its mark is an arrow at the edge, its figures in full
    far = RatioPoint("w13/hot/tinygemm", 0.0409, 0.0408, 0.0410, 0.01, "FASTER")
    assert axis_half_width([FASTER, far]) == axis_half_width([FASTER])
    row = chart_lines([FASTER, far], 100)[2].plain
    assert row.split()[1].startswith("◀") and "●" not in row and "0.0409 [0.0408" in row
    # a CI past the axis ends in arrows; its median still sets the axis
    wide = RatioPoint("wide", 1.2, 0.3, 4.0, 0.01, "AMBIGUOUS")
    assert axis_half_width([FASTER, wide]) == pytest.approx(0.2 * 1.1)
    assert MAX_HALF >= 0.2 * 1.1
    row = chart_lines([FASTER, wide], 100)[2].plain
    assert "◀" in row and "▶" in row and "●" in row


def test_points_come_from_the_verdict_dict_fields():
    rng = np.random.default_rng(3)
    ratios = 0.95 * np.exp(0.004 * rng.standard_normal(16))
    verdict = stats.compare(ratios, 0.02).to_dict()
    point = RatioPoint.from_verdict("w13/hot", verdict, "16 pairs")
    assert (point.median, point.ci_low, point.ci_high, point.m, point.verdict) == (
        verdict["median"],
        verdict["ci_low"],
        verdict["ci_high"],
        0.02,
        "FASTER",
    )
    # too few pairs: JSON nulls (or non-finite figures) become "unknown", never a mark at inf
    few = RatioPoint.from_verdict(
        "x", {"median": 0.9, "ci_low": None, "ci_high": math.inf, "m": 0.01, "verdict": "AMBIGUOUS"}
    )
    assert (few.ci_low, few.ci_high) == (None, None)
    nothing = RatioPoint.from_verdict(
        "x",
        {"median": math.nan, "ci_low": None, "ci_high": None, "m": None, "verdict": "AMBIGUOUS"},
    )
    assert nothing.median is None and nothing.m == 0.0
    assert "●" not in chart_lines([nothing], 80)[1].plain


def test_empty_chart_says_so_within_its_width():
    lines = chart_lines([], 30)
    assert all(len(line.plain) <= 30 for line in lines)
    assert " ".join(line.plain for line in lines) == "No comparison to chart yet."
