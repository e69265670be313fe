"""Figures added by issue 15 and the size of every SVG: calibration dose-response, µs per call
against a streaming floor, replicates across sessions; each SVG the plot code writes for a
committed session stays under 500 KB (dense layers rasterized), and so does every committed SVG."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from fixtures_sessions import REPO, write_session

from workbench.analysis import analyse
from workbench.cli import main
from workbench.core.errors import BadArgument
from workbench.plots import (
    _write,
    parse_floor,
    plot_replicates,
    read_floor_file,
    session_figures,
)
from workbench.store.session import load_session

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

MAX_SVG = 500 * 1024
SESSIONS = REPO / "sessions"
DEFAULT = SESSIONS / "20261129T140359Z_default"
REPLICATE = SESSIONS / "20261129T141409Z_default-r2"
CALIBRATE = SESSIONS / "20261129T141504Z_calibrate"
FLOOR_FILE = REPO / "benchmarks" / "results" / "h200_floor.txt"


def test_replicates_svg_under_500_kb(tmp_path):
    (svg,) = plot_replicates([DEFAULT, REPLICATE], tmp_path, formats=("svg",))
    assert svg.name == f"replicates_{DEFAULT.name}+1.svg"
    assert svg.stat().st_size < MAX_SVG


def test_committed_svgs_are_under_500_kb():
    svgs = list((REPO / "plots").glob("*.svg"))
    assert svgs, "the README cites at least one SVG"
    for f in svgs:
        assert f.stat().st_size < MAX_SVG, f"{f.name}: {f.stat().st_size / 1024:.0f} KB"


def test_committed_plots_are_the_cited_ones():
    """plots/ holds what README.md and docs/ link to, and nothing else."""
    texts = [(REPO / "README.md").read_text()] + [p.read_text() for p in REPO.glob("docs/*.md")]
    texts += [(REPO / "benchmarks" / "results" / "README.md").read_text()]
    cited = {ln for t in texts for ln in _plot_links(t)}
    present = {p.name for p in (REPO / "plots").iterdir()}
    assert present == cited, (sorted(present - cited), sorted(cited - present))


def _plot_links(text: str) -> set[str]:
    import re

    return set(re.findall(r"plots/([A-Za-z0-9_.+\-]+\.(?:png|svg))", text))


# ---------------------------------------------------------------------------- calibration


def one_figure(path: Path, kind: str, out: Path, formats=("svg",), **floor) -> list[Path]:
    """Only the figure ``kind`` of a session, as plot_session draws it (plot_session draws all
    5 to 21 figures of a session: seconds each on a 2-core machine)."""
    s = load_session(path)
    jobs = dict(session_figures(analyse(s), **floor))
    out.mkdir(parents=True, exist_ok=True)
    return list(_write([(f"{s.path.name}_{kind}", jobs[kind])], out, formats))


def test_calibration_dose_response_of_the_committed_session(tmp_path):
    files = one_figure(CALIBRATE, "calibration", tmp_path, formats=("svg", "png"))
    svg = (tmp_path / f"{CALIBRATE.name}_calibration.svg").read_text()
    summary = load_session(CALIBRATE).summary["calibration"]
    for group, info in summary["groups"].items():
        spin = info["resolution"]["spin_cycles"]
        assert group in svg and f"resolution spin={spin}" in svg
        assert f"{info['resolution']['effect_pct']:+.2f} %" in svg
    assert "measured = injected" in svg and "injected delay (µs per CTA" in svg
    assert f"{CALIBRATE.name}_calibration.png" in {f.name for f in files}


def test_calibration_figure_reads_the_rungs(tmp_path):
    """The left panel's points are the analysis' rungs: injected µs per CTA vs measured."""
    import matplotlib

    matplotlib.use("Agg")
    from workbench.plots.calibration import calibration_rungs, fig_calibration

    an = analyse(load_session(CALIBRATE))
    fig = fig_calibration(an)
    left = fig.axes[0]
    drawn = {tuple(np.round(xy, 9)) for c in left.collections for xy in c.get_offsets()}
    want = {
        (round(r["injected_us_per_cta"], 9), round(r["measured_us_per_call"], 9))
        for r in calibration_rungs(an)
    }
    assert len(want) == 16 and want <= drawn


def test_calibration_without_summary_draws_both_panels_from_the_journal(tmp_path):
    """A session stopped before its summary: the rungs come from the journal (the analysis
    model), so the dose-response panel is drawn too, not only the effects."""
    copy = tmp_path / "s" / CALIBRATE.name
    shutil.copytree(CALIBRATE, copy)
    meta = json.loads((copy / "session.json").read_text())
    meta["summary"], meta["status"] = None, "interrupted"
    (copy / "session.json").write_text(json.dumps(meta))
    one_figure(copy, "calibration", tmp_path / "p")
    svg = (tmp_path / "p" / f"{CALIBRATE.name}_calibration.svg").read_text()
    assert "no calibration rung" not in svg and "measured = injected" in svg
    assert "measured effect B/A" in svg and "INTERRUPTED" in svg


def test_no_calibration_figure_without_calibration(tmp_path):
    # the figures plot_session draws (tests/test_session_fuzz.py draws them all)
    sess = write_session(tmp_path / "s", seed=3, slug="ab")
    names = [n for n, _ in session_figures(analyse(load_session(sess)))]
    assert "ratios" in names and not any("calibration" in n or "floor" in n for n in names)


# ---------------------------------------------------------------------------------- floor


def test_parse_floor():
    text = "# a comment, with a comma\nw13/hot = 1.94  # best row\nw2/rotating=2.18,step/hot=4\n"
    assert parse_floor(text) == {("w13", "hot"): 1.94, ("w2", "rotating"): 2.18, ("step", "hot"): 4}
    assert read_floor_file(FLOOR_FILE) == {
        ("w13", "hot"): 1.94, ("w13", "rotating"): 2.76, ("w2", "hot"): 1.64,
        ("w2", "rotating"): 2.18,
    }  # fmt: skip
    for bad, needle in [
        ("w13/cold=1", "'w13/cold=1'"),
        ("w5/hot=1", "'w5/hot=1'"),
        ("w13/hot=abc", "'abc' is not a number"),
        ("w13/hot=-1", "must be in (0"),
        ("w13/hot=nan", "must be in (0"),
        ("w13/hot=1e9", "must be in (0"),
        ("w13/hot", "KERNEL/SET=US"),
        (" , ", "holds no KERNEL/SET=US entry"),
    ]:
        with pytest.raises(BadArgument, match=None) as e:
            parse_floor(bad)
        assert "--floor-us" in str(e.value) and needle in str(e.value), str(e.value)


def test_floor_figure_states_each_median_against_the_floor(tmp_path):
    floor = {("w13", "hot"): 1.94, ("w2", "rotating"): 2.18}
    one_figure(DEFAULT, "floor", tmp_path, floor=floor, floor_source="probe X")
    svg = (tmp_path / f"{DEFAULT.name}_floor.svg").read_text()
    us = analyse(load_session(DEFAULT)).variant_us()
    for (k, st), f_us in floor.items():
        assert f"streaming floor {f_us:.2f} µs" in svg
        for arm in ("b4-scalar", "b3-scalar", "b3-coop"):
            med = float(np.median(us[(k, st, arm)]))
            assert f"{med / f_us:.2f}× floor" in svg, (k, st, arm)
        tg = float(np.median(us[(k, st, "tinygemm")]))
        assert f"tinygemm: {tg:.1f} µs = {tg / f_us:.0f}× floor (off scale)" in svg
    assert "w13 / hot" in svg and "w2 / rotating" in svg and "w13 / rotating" not in svg
    assert "floor: probe X" in svg


def test_plot_cli_floor_and_replicates(tmp_path, capsys):
    # the floor and the replicates only (--figure): every figure of a session is the fuzz's
    argv = ["plot", str(DEFAULT), str(REPLICATE), str(CALIBRATE), "--out", str(tmp_path)]
    argv += ["--figure", "floor,replicates"]
    assert main([*argv, "--format", "svg", "--floor-file", str(FLOOR_FILE)]) == 0
    cap = capsys.readouterr()
    listed = cap.out.split()
    assert f"{tmp_path}/{DEFAULT.name}_floor.svg" in listed
    assert f"{tmp_path}/{REPLICATE.name}_floor.svg" in listed
    assert f"{CALIBRATE.name}_floor.svg" not in cap.out  # calibration times no arm: no floor
    assert f"{CALIBRATE.name} timed no w13/hot" in cap.err
    rep = tmp_path / f"replicates_{DEFAULT.name}+2.svg"
    assert str(rep) in listed and sorted(listed) == sorted(str(p) for p in tmp_path.iterdir())


def test_figure_draws_only_the_kinds_asked_for(tmp_path, capsys):
    from workbench.plots import KINDS, kind_of

    figures = {
        p: [n for n, _ in session_figures(analyse(load_session(p)))] for p in (DEFAULT, REPLICATE)
    }
    assert {kind_of(n) for ns in figures.values() for n in ns} == set(KINDS) - {
        "calibration",
        "floor",
        "replicates",
    }
    assert kind_of("samples_step-rotating-confirm") == "samples"
    argv = ["plot", str(DEFAULT), str(REPLICATE), "--out", str(tmp_path), "--format", "svg"]
    assert main([*argv, "--figure", "ratios,nvml"]) == 0
    listed = capsys.readouterr().out.split()
    want = [str(tmp_path / f"{p.name}_{n}.svg") for p, ns in figures.items() for n in ns
            if n in ("ratios", "nvml")]  # fmt: skip
    assert len(want) == 4 and listed == want  # and no replicates: not asked for
    assert sorted(listed) == sorted(str(p) for p in tmp_path.iterdir())
    # what cannot be drawn is refused in one line, before or without writing anything
    for extra, says in (
        (["--figure", "ratio"], "choose from summary, ratios,"),
        (["--figure", "floor"], "give the floor"),
        (["--figure", ""], "choose from"),
    ):
        assert main([*argv, "--out", str(tmp_path / "bad"), *extra]) == 2, extra
        err = capsys.readouterr().err.strip()
        assert says in err and len(err.splitlines()) == 1, (extra, err)
    one = ["plot", str(DEFAULT), "--out", str(tmp_path / "bad")]
    assert main([*one, "--figure", "replicates"]) == 2
    assert "two sessions or more" in capsys.readouterr().err
    assert main([*one, "--figure", "calibration"]) == 2  # a default session has none
    err = capsys.readouterr().err.strip()
    assert f"{DEFAULT.name} has no figure of that kind" in err and len(err.splitlines()) == 1
    assert not list((tmp_path / "bad").glob("*.*"))


def test_replicates_draw_each_sessions_median_and_ci():
    import matplotlib

    matplotlib.use("Agg")
    from workbench.plots.replicates import fig_replicates, replicate_rows

    ans = [analyse(load_session(p)) for p in (DEFAULT, REPLICATE)]
    fig = fig_replicates(ans)
    ax = fig.axes[0]
    medians = sorted(float(x) for c in ax.collections for x, _ in c.get_offsets())
    want = sorted(r.verdict.median for an in ans for r in an.results if r.id in replicate_rows(ans))
    assert len(want) == 12 and np.allclose(medians, want)
    ci_lines = sorted(
        tuple(np.round(ln.get_xdata(), 9)) for ln in ax.lines if ln.get_label() == "_ci"
    )
    want_ci = sorted(
        (round(r.verdict.ci_low, 9), round(r.verdict.ci_high, 9))
        for an in ans for r in an.results if r.id in replicate_rows(ans)
        and math.isfinite(r.verdict.ci_low)
    )  # fmt: skip
    assert ci_lines == want_ci
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == replicate_rows(ans)
    assert "w13/hot" in labels and "step/rotating/confirm" in labels


def test_replicates_need_two_sessions(tmp_path):
    with pytest.raises(BadArgument, match="two sessions or more"):
        plot_replicates([DEFAULT], tmp_path)
