"""Defects a newcomer hit in the figures (issue 25, "Plots"), each pinned by a test on a real
committed session (or fixtures where the real ones cannot show it)."""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from fixtures_sessions import REPO, write_session

from workbench.analysis import analyse
from workbench.cli import main
from workbench.plots.distributions import fig_distributions
from workbench.plots.ratios import fig_ratios
from workbench.plots.replicates import fig_replicates
from workbench.plots.timeline import fig_nvml
from workbench.store.session import load_session

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

REAL = REPO / "sessions"
BLOCKS = "20261130T201628Z_default-r1"  # 6 blocks, placement seed, peers 1.7x and 25x slower


@pytest.fixture(scope="module")
def an():
    return analyse(load_session(REAL / BLOCKS))


def _drawn(fig):
    fig.canvas.draw()
    return fig.canvas.get_renderer()


@pytest.mark.parametrize("make", [fig_ratios, fig_distributions, fig_nvml])
def test_subtitles_fit_the_figure_and_keep_gpu_and_seed(an, make):
    fig = make(an)
    r = _drawn(fig)
    box = fig._suptitle.get_window_extent(r)
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width, (box, fig.bbox.width)
    text = fig._suptitle.get_text()
    assert "NVIDIA H200" in text and "placement seed 2895461992804506298" in text


def _legend_texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_ratio_legend_names_the_estimate_and_interval_drawn(an):
    texts = _legend_texts(fig_ratios(an))
    assert "geometric mean of the block medians" in texts
    assert "95 % t-interval over blocks" in texts
    assert not any(t in ("median", "95 % CI of the median") for t in texts)


def test_ratio_legend_of_a_session_without_blocks(tmp_path):
    s = load_session(write_session(tmp_path, seed=5))
    an = analyse(s)
    assert all(r.verdict.method == "pairs" for r in an.results)
    texts = _legend_texts(fig_ratios(an))
    assert "median pair ratio" in texts
    assert "95 % CI of the median over pairs (distribution-free)" in texts


def test_nvml_comparison_labels_do_not_overlap(an):
    fig = fig_nvml(an)
    r = _drawn(fig)
    ids = {x.id for x in an.results}
    labels = [t for t in fig.axes[0].texts if t.get_text() in ids]
    assert len(labels) == len(ids)
    boxes = [t.get_window_extent(r) for t in labels]
    for (i, a), (j, b) in itertools.combinations(enumerate(boxes), 2):
        assert not a.overlaps(b), (labels[i].get_text(), labels[j].get_text())


def test_distributions_scale_to_the_readers(an):
    fig = fig_distributions(an)
    ax = next(a for a in fig.axes if a.get_title() == "w13 / hot")
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["b4-scalar", "b3-scalar", "b3-coop"]  # the peers are notes, not boxes
    note = " ".join(t.get_text() for t in ax.texts)
    assert "triton-moe" in note and "tinygemm" in note and "off scale" in note
    lo, hi = ax.get_ylim()
    s = an.session
    meds = {}
    for r in an.results:
        if r.kernel == "w13" and r.set == "hot" and r.role == "main":
            for arm in ("a", "b"):
                reps = [x for y in s.samples_for(r.id) if y["arm"] == arm.upper()
                        for x in (y.get("replay_ms") or [y["ms"]])]  # fmt: skip
                meds[r.cmp[arm]] = float(np.median(reps))
    gap = abs(meds["b3-scalar"] - meds["b3-coop"])
    assert gap / (hi - lo) > 0.05, (gap, lo, hi)  # the ~1 % reader gap is visible


def test_replicates_warn_when_kernel_sources_differ(tmp_path, capsys):
    names = ["20261130T143109Z_default-r2", BLOCKS]
    fig = fig_replicates([analyse(load_session(REAL / n)) for n in names])
    title = fig._suptitle.get_text()
    assert "WARNING: measured on different kernel sources" in title
    rc = main(
        ["plot", *names, "--root", str(REAL), "--out", str(tmp_path / "p"), "--format", "png",
         "--figure", "replicates"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 0 and "different kernel sources" in err and all(n in err for n in names)


def test_replicates_of_the_same_sources_carry_no_warning(tmp_path):
    paths = [write_session(tmp_path, seed=i, slug=f"r{i}") for i in (1, 2)]
    fig = fig_replicates([analyse(load_session(p)) for p in paths])
    assert "WARNING" not in fig._suptitle.get_text()


def test_fixture_sessions_share_their_sources(tmp_path):
    """The guard above means something only if the fixtures record kernel sources."""
    p = write_session(tmp_path, seed=1)
    assert load_session(Path(p)).provenance.get("files")
