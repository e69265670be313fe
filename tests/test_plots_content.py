"""What each figure plots, counted on the figure: every pair, every sample, every replay and every
NVML reading of the session is there, and the legends say what they said. A cut to the plots'
time (issue 46, item 7) that dropped data or a legend fails here. The figures are made but not
drawn (no rendering: this file runs in the fast lane); tests/test_plots.py saves them."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
from fixtures_sessions import REPO, write_session
from matplotlib.collections import PathCollection

from workbench.analysis import TIMING_ROLES, analyse
from workbench.analysis.words import legend
from workbench.plots import STYLE, session_figures
from workbench.plots.ratios import SUMMARY_COLUMNS, ratio_rows
from workbench.plots.replicates import fig_replicates
from workbench.store.session import load_session

REAL = REPO / "sessions" / "20261204T035946Z_default-r8"  # benchmarks/bench_plots.py's ONE


@pytest.fixture(scope="module", params=["synthetic", "real"])
def an(request, tmp_path_factory):
    if request.param == "real":
        return analyse(load_session(REAL))
    # the synthetic session has a flagged and an excluded sample and a peer off scale
    return analyse(load_session(write_session(tmp_path_factory.mktemp("s"), seed=21)))


@pytest.fixture(scope="module")
def figs(an):
    with plt.rc_context(STYLE):
        made = {kind: draw() for kind, draw in session_figures(an)}
    yield made
    for fig in made.values():
        plt.close(fig)


def _points(ax, size: float | None = None) -> int:
    """Points of the axes' scatters (of marker size ``size`` only, if given)."""
    n = 0
    for c in ax.collections:
        if isinstance(c, PathCollection) and (size is None or list(c.get_sizes()) == [size]):
            n += len(c.get_offsets())
    return n


def _legend(ax) -> list[str]:
    leg = ax.get_legend()
    return [t.get_text() for t in leg.get_texts()] if leg else []


def _ratio_axes_checks(ax, an) -> None:
    rows = ratio_rows(an)
    pairs = [p for r in rows for p in r.ratios]
    assert pairs, "the session has pair ratios"
    assert _points(ax, 16) == sum(not p.flagged for p in pairs)  # every pair, once
    assert _points(ax, 34) == sum(p.flagged for p in pairs)  # flagged ones hollow
    medians = [r for r in rows if math.isfinite(r.verdict.median)]
    assert _points(ax, 60) == len(medians)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert [lab.split("\n")[0] for lab in labels] == [r.id for r in rows]
    marker, interval = legend({r.verdict.method for r in rows}, an.conf)
    assert _legend(ax) == [
        f"±m band (m = {an.m:.0%})",
        "1.0 (no change)",
        "one ABBA pair",
        "flagged pair",
        marker,
        interval,
    ]


@pytest.mark.slow  # 2 s of the fast lane on the 2-core machine
def test_every_figure_kind_is_made(an, figs):
    kinds = {"summary", "ratios", "distributions", "nvml"}
    kinds |= {f"samples_{r.id.replace('/', '-')}" for r in an.by_role("main", "confirm", "aa")}
    assert kinds <= set(figs)


def test_ratios_plot_every_pair_and_median(an, figs):
    _ratio_axes_checks(figs["ratios"].axes[0], an)


def test_summary_tables_every_comparison_and_plots_every_pair(an, figs):
    fig = figs["summary"]
    table = fig.axes[0].tables[0]
    cells = table.get_celld()
    assert max(r for r, _ in cells) == len(an.results)  # a header and one row a comparison
    assert max(c for _, c in cells) == len(SUMMARY_COLUMNS) - 1
    first = [cells[i, 0].get_text().get_text() for i in range(1, len(an.results) + 1)]
    assert first == [r.id for r in an.results]
    _ratio_axes_checks(fig.axes[1], an)
    words = fig.axes[-1].texts[0].get_text()
    for kernel, rec in an.recommendations.items():
        assert f"Recommendation {kernel}: {rec.decision.upper()} → {rec.arm}" in words


def test_distributions_plot_every_replay(an, figs):
    s = an.session
    want: dict[str, dict[str, int]] = {}  # "kernel / set" -> variant -> replays
    for r in an.by_role(*TIMING_ROLES, "calibration", "screen", "tune"):
        for x in s.samples_for(r.id):
            if not x.get("excluded"):
                v = x.get("variant") or r.cmp[str(x["arm"]).lower()]
                cell = want.setdefault(f"{r.kernel} / {r.set}", {})
                cell[v] = cell.get(v, 0) + len(x.get("replay_ms") or [x["ms"]])
    axes = {ax.get_title(): ax for ax in figs["distributions"].axes if ax.get_title()}
    assert set(axes) == set(want)
    for title, ax in axes.items():
        shown = [t.get_text().replace(",\n", ",") for t in ax.get_xticklabels()]
        notes = "\n".join(t.get_text() for t in ax.texts).splitlines()
        off = [line.split(": median")[0] for line in notes if "(off scale)" in line]
        assert sorted(shown + off) == sorted(want[title]), title  # each variant, boxed or noted
        assert _points(ax) == sum(want[title][v] for v in shown), title


def test_samples_plot_every_sample_of_each_arm(an, figs):
    for r in an.by_role("main", "confirm", "aa"):
        fig = figs[f"samples_{r.id.replace('/', '-')}"]
        ax = fig.axes[0]
        recs = an.session.samples_for(r.id)
        by_label = {c.get_label(): len(c.get_offsets()) for c in ax.collections}
        for arm in ("A", "B"):
            kept = sum(1 for x in recs if x["arm"] == arm and not x.get("excluded"))
            assert by_label[f"{arm}: {r.cmp[arm.lower()]}"] == kept, (r.id, arm)
        texts = _legend(ax)
        assert [t for t in texts if t[:2] in ("A:", "B:")] == [
            f"A: {r.cmp['a']}",
            f"B: {r.cmp['b']}",
        ]
        assert [t.split(" ", 2)[:2] for t in texts if "median" in t] == [
            ["A", "median"],
            ["B", "median"],
        ]
        assert ("flagged" in texts) == any(x.get("flagged") for x in recs)
        assert ("excluded" in texts) == any(x.get("excluded") for x in recs)
        if any(x.get("excluded") for x in recs):
            assert by_label["excluded"] == sum(1 for x in recs if x.get("excluded"))


def test_nvml_plots_every_reading(an, figs):
    rd = an.session.nvml
    axes = figs["nvml"].axes
    keys = ("mem_used", "sm_mhz", "temp_c", "power_w")
    for ax, key in zip(axes, keys, strict=True):
        n = sum(1 for r in rd if r.get(key) is not None)
        drawn = [len(line.get_xdata()) for line in ax.lines if line.get_drawstyle() != "default"]
        assert drawn == ([n] if n else []), key


def test_replicates_plot_every_session(tmp_path):
    ans = [analyse(load_session(write_session(tmp_path / str(i), seed=i))) for i in (3, 4)]
    with plt.rc_context(STYLE):
        fig = fig_replicates(ans)
    try:
        ax = fig.axes[0]
        medians = sum(math.isfinite(r.verdict.median) for an in ans for r in ratio_rows(an))
        assert _points(ax, 26) == medians
        names = [an.session.path.name for an in ans]
        assert _legend(ax) == [f"{i} {n}" for i, n in enumerate(names, 1)] + [
            f"±m band (m = {ans[0].m:.0%})"
        ]
    finally:
        plt.close(fig)


def test_the_benchmarks_session_is_committed():
    assert Path(REAL, "session.json").is_file()  # benchmarks/bench_plots.py times this one


def test_plot_analyses_each_session_once(tmp_path, monkeypatch):
    """`workbench plot A B` analyses each session once, for its own figures and for the
    replicates figure alike (it analysed each twice: issue 46.7)."""
    import workbench.analysis
    import workbench.plots
    from workbench.cli import main

    paths = [write_session(tmp_path / str(i), seed=i) for i in (3, 4)]
    seen: list[str] = []
    real = workbench.analysis.analyse

    def counted(s, *a, **k):
        seen.append(s.path.name)
        return real(s, *a, **k)

    drawn: list[str] = []

    def no_drawing(jobs, out, fs):  # the figures' stems, nothing drawn
        drawn.extend(stem for stem, _ in jobs)
        return iter(())

    monkeypatch.setattr(workbench.analysis, "analyse", counted)
    monkeypatch.setattr(workbench.plots, "analyse", counted)
    monkeypatch.setattr(workbench.plots, "_write", no_drawing)
    out = tmp_path / "plots"
    assert main(["plot", *map(str, paths), "--out", str(out), "--format", "svg"]) == 0
    assert sorted(seen) == sorted(p.name for p in paths)
    assert f"replicates_{paths[0].name}+1" in drawn
    assert sum(stem.endswith("_summary") for stem in drawn) == 2
