"""`workbench plot`: every figure is written, in each format, and is a real picture.

PNGs are read back as pixels (size, dimensions, colours, not blank); SVGs keep their text
(svg.fonttype "none"), so titles and annotations are checked as text.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fixtures_sessions import REPO, sessions_to_plot, write_session

from workbench.cli import main
from workbench.core.errors import BadArgument, SessionError
from workbench.plots import (
    COLOR_A,
    COLOR_B,
    COLOR_FLAG,
    existing_plots,
    plot_session,
    read_floor_file,
)
from workbench.store.session import load_session

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

MAX_SVG = 500 * 1024  # the evidence rule: cited figures stay small
FLOOR_FILE = REPO / "benchmarks" / "results" / "h200_floor.txt"

KINDS = ["summary", "ratios", "distributions", "nvml"]
KINDS += [f"samples_{k}-{s}" for k in ("w13", "w2") for s in ("hot", "rotating")]
KINDS += ["samples_step-hot-confirm", "samples_step-rotating-confirm"]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> tuple[Path, Path]:
    sess = write_session(tmp_path_factory.mktemp("sessions"), seed=21, slug="plots")
    out = tmp_path_factory.mktemp("plots")
    assert main(["plot", str(sess), "--out", str(out), "--format", "png,svg"]) == 0
    return sess, out


def _pixels(path: Path) -> np.ndarray:
    import matplotlib.pyplot as plt

    img = plt.imread(path)
    return (img[..., :3] * 255).round().astype(np.int16)  # RGB, alpha dropped


def _near(img: np.ndarray, hex_color: str, tol: int = 12) -> int:
    rgb = np.array([int(hex_color[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)
    return int((np.abs(img - rgb).max(axis=-1) <= tol).sum())


def _assert_real_png(path: Path) -> np.ndarray:
    assert path.stat().st_size > 15_000, f"{path.name} is suspiciously small"
    img = _pixels(path)
    h, w = img.shape[:2]
    assert w >= 900 and h >= 500, f"{path.name} is {w}x{h}"
    non_white = (img.min(axis=-1) < 245).mean()
    assert non_white > 0.03, f"{path.name} is nearly blank ({non_white:.1%} ink)"
    # colours used by at least 200 pixels, quantised to 16 levels a channel (antialiasing aside)
    q = (img // 16).reshape(-1, 3)
    counts = np.bincount(q[:, 0] * 256 + q[:, 1] * 16 + q[:, 2], minlength=4096)
    assert (counts >= 200).sum() >= 4, f"{path.name} has too few colours"
    return img


def test_every_figure_in_every_format_named_after_the_session(drawn):
    sess, out = drawn
    for kind in KINDS:
        for fmt in ("png", "svg"):
            assert (out / f"{sess.name}_{kind}.{fmt}").is_file(), f"{kind}.{fmt} missing"
    assert set(existing_plots(sess.name, out)) == set(KINDS)
    assert list(existing_plots(sess.name, out))[0] == "summary"


def test_pngs_are_non_trivial_pictures(drawn):
    sess, out = drawn
    for kind in KINDS:
        _assert_real_png(out / f"{sess.name}_{kind}.png")


def test_samples_show_a_and_b_and_the_flagged_sample(drawn):
    sess, out = drawn
    img = _pixels(out / f"{sess.name}_samples_w13-rotating.png")
    assert _near(img, COLOR_A) > 300 and _near(img, COLOR_B) > 300  # both arms, own colours
    assert _near(img, COLOR_FLAG) > 50  # the flagged, excluded sample and its clock mark
    svg = (out / f"{sess.name}_samples_w13-rotating.svg").read_text()
    for text in ("A: b3-scalar", "B: b3-coop", "excluded", "SM clock (MHz)", "time since"):
        assert text in svg
    clean = (out / f"{sess.name}_samples_w13-hot.svg").read_text()
    assert "excluded" not in clean  # w13/hot has no excluded sample: no such legend entry


def test_every_figure_is_titled_with_gpu_shape_and_protocol(drawn):
    sess, out = drawn
    for kind in KINDS:
        svg = (out / f"{sess.name}_{kind}.svg").read_text()
        for text in ("NVIDIA H200", "qwen3.8-flash-next, tp 4", "48 calls per replay"):
            assert text in svg, f"{kind}: {text!r} missing from the title"
        assert "20 replays per sample" in svg and sess.name in svg


def test_summary_carries_verdicts_and_recommendation(drawn):
    sess, out = drawn
    svg = (out / f"{sess.name}_summary.svg").read_text()
    for text in ("FASTER", "SLOWER", "COOPERATIVE → b3-coop", "SCALAR → b3-scalar"):
        assert text in svg
    assert "±m band (m = 1%)" in svg and "95 % CI of the median" in svg
    img = _pixels(out / f"{sess.name}_summary.png")
    assert _near(img, "#2ca02c", 20) > 50 and _near(img, "#d62728", 20) > 50  # FASTER, SLOWER


def test_distributions_note_the_off_scale_peer(drawn):
    sess, out = drawn
    svg = (out / f"{sess.name}_distributions.svg").read_text()
    assert "tinygemm: median" in svg and "off scale" in svg
    assert "ms per replay (48 calls)" in svg


def test_nvml_unavailable(tmp_path):
    sess = write_session(tmp_path / "s", seed=4, slug="nonvml", nvml=False)
    files = plot_session(sess, tmp_path / "p", formats=("svg",))
    assert len(files) == len(KINDS)
    assert "NVML unavailable" in (tmp_path / "p" / f"{sess.name}_nvml.svg").read_text()
    samples = (tmp_path / "p" / f"{sess.name}_samples_w2-hot.svg").read_text()
    assert "NVML unavailable" in samples


def test_interrupted_session(tmp_path):
    sess = write_session(tmp_path / "s", seed=6, slug="killed", stop_after_samples=70)
    files = plot_session(sess, tmp_path / "p", formats=("png", "svg"))
    names = {f.name for f in files}
    assert f"{sess.name}_samples_w13-hot.png" in names
    assert f"{sess.name}_samples_w2-hot.png" not in names  # never started
    for f in files:
        if f.suffix == ".png":
            _assert_real_png(f)
    assert "INTERRUPTED" in (tmp_path / "p" / f"{sess.name}_summary.svg").read_text()


@pytest.mark.parametrize("path", sessions_to_plot(), ids=lambda p: p.name)
def test_real_sessions_plot(tmp_path, path):
    """The largest committed session of each mode plots (the synthetic sessions above check the
    PNGs); every SVG stays under 500 KB, the replays drawn as pixels inside it, the text as text."""
    floor = read_floor_file(FLOOR_FILE)
    files = plot_session(path, tmp_path, formats=("svg",), floor=floor, floor_source="test")
    assert any(f.name.endswith("_summary.svg") for f in files)
    assert any(f.name.endswith("_distributions.svg") for f in files)
    for f in files:
        assert f.stat().st_size < MAX_SVG, f"{f.name}: {f.stat().st_size / 1024:.0f} KB"
    # the replays are pixels inside the SVG (they made it 3.5-5.7 MB as vectors), the text is text
    dist = next(f for f in files if f.name.endswith("_distributions.svg")).read_text()
    if load_session(path).samples:
        assert "<image" in dist and "ms per replay" in dist


def test_bad_format_and_bad_session(tmp_path, capsys):
    with pytest.raises(BadArgument, match="format='png,gif'"):
        plot_session(tmp_path, tmp_path, formats=("png", "gif"))
    with pytest.raises(SessionError, match="no such session"):
        plot_session(tmp_path / "nope", tmp_path)
    assert main(["plot", str(tmp_path / "nope"), "--out", str(tmp_path)]) == 2
    assert main(["plot", str(tmp_path), "--format", "jpeg"]) == 2
    err = capsys.readouterr().err
    assert "no such session" in err and "--format 'jpeg'" in err


def test_importing_plots_does_not_import_matplotlib():
    code = (
        "import sys, workbench.plots, workbench.report.markdown; print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_every_text_of_every_figure_lies_inside_the_canvas(tmp_path, monkeypatch):
    """Issue #33: the summary's verdict table (wider than its axes) lost the comparison names at
    the left edge, its last ratio label the right. Each figure kind is saved as `workbench plot`
    saves it, then drawn again at the save DPI; every visible, non-empty text the draw renders
    (tick labels, axis labels, titles, legends, annotations, table cells) must lie inside the
    canvas, 1 px allowed."""
    import matplotlib.pyplot as plt
    from fixtures_sessions import write_calibration_session
    from matplotlib.text import Text

    from workbench.analysis import analyse
    from workbench.plots import STYLE, session_figures
    from workbench.plots._common import DPI, save
    from workbench.plots.replicates import fig_replicates
    from workbench.store.session import load_session

    # long arm names, as a step comparison has them (w13=b3-coop,w2=b3-scalar): a wide table
    sess = write_session(tmp_path / "s", seed=21, slug="plots", pairs=6)
    an = analyse(load_session(sess))
    for r in an.results:
        r.cmp = {**r.cmp, "a": f"w13={r.cmp['a']},w2=b3-scalar-{r.cmp['a']}"}
    cal = analyse(load_session(write_calibration_session(tmp_path / "c", spins=(0, 40))))
    floor = {("w13", "hot"): 5.0, ("w2", "rotating"): 3.0}
    # one samples figure stands for all (one function draws them); the calibration's own figure
    figures = [(k, d) for k, d in session_figures(an, floor, "given") if "samples_" not in k]
    figures += [(k, d) for k, d in session_figures(an) if k == "samples_w13-hot"]
    figures += [(k, d) for k, d in session_figures(cal) if k == "calibration"]
    figures.append(("replicates", lambda: fig_replicates([an, an])))
    drawn: list[tuple[Text, object]] = []
    draw = Text.draw

    def record(self, renderer):
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn.append((self, self.get_window_extent(renderer)))

    outside = []
    with plt.rc_context(STYLE):
        for kind, make in figures:
            fig = make()
            try:
                png = save(fig, tmp_path / f"{kind.replace(' ', '_')}.png", "png")
                h, w = plt.imread(png).shape[:2]
                fig.set_dpi(DPI)
                assert (w, h) == tuple(round(x) for x in fig.bbox.size), kind
                drawn.clear()
                with monkeypatch.context() as m:
                    m.setattr(Text, "draw", record)
                    fig.canvas.draw()
                renderer = fig.canvas.get_renderer()
                box = fig.bbox
                for t, _ in drawn:
                    e = t.get_window_extent(renderer)
                    if (e.x0 < box.x0 - 1 or e.y0 < box.y0 - 1 or e.x1 > box.x1 + 1
                            or e.y1 > box.y1 + 1):  # fmt: skip
                        outside.append(f"{kind}: {t.get_text()[:30]!r} at {e.extents.round()}")
            finally:
                plt.close(fig)
    assert not outside, "\n".join(outside)


def test_a_figure_is_laid_out_once_for_all_its_formats(tmp_path, monkeypatch):
    """Issue 46.7: a figure is laid out once (``settle``) and its PNG is the pixels of that
    draw, not of a second one: a figure that fits its canvas is drawn twice for a PNG and an
    SVG (it was drawn five times: a measuring draw, and a layout and a render per format). The
    PNG equals what savefig writes of the same figure, and the SVG saved after it leaves every
    axes where the PNG has it (one layout for both). The one
    exception is matplotlib's: a Table measures its columns again in every draw, from its texts
    as the previous draw placed them, and may alternate between widths a pixel apart; so in
    the summary the verdict table is left out of the comparison."""
    import io

    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from workbench.analysis import analyse
    from workbench.plots import STYLE, session_figures
    from workbench.plots._common import DPI, save_all

    draw, draws = Figure.draw, []

    def counted(self, renderer):
        draws.append(renderer)
        draw(self, renderer)

    sess = write_session(tmp_path / "s", seed=21, slug="plots", pairs=6)
    an = analyse(load_session(sess))
    kinds = ("summary", "ratios", "distributions", "nvml", "samples_w13-rotating")
    with plt.rc_context(STYLE):
        for kind, make in session_figures(an):
            if kind not in kinds:
                continue
            fig = make()
            try:
                draws.clear()
                with monkeypatch.context() as m:
                    m.setattr(Figure, "draw", counted)
                    files = list(save_all(fig, tmp_path / kind, ("png", "svg")))
                assert len(draws) == 2, f"{kind}: drawn {len(draws)} times"
                assert [f.name for f in files] == [f"{kind}.png", f"{kind}.svg"]
                assert fig.get_layout_engine() is None, kind  # no second layout in a save
                placed = [ax.get_position().bounds for ax in fig.axes]
                again = io.BytesIO()
                fig.savefig(again, format="png", dpi=DPI)
                assert [ax.get_position().bounds for ax in fig.axes] == placed, kind
                again.seek(0)
                png, redrawn = plt.imread(files[0]), plt.imread(again)
                assert png.shape == redrawn.shape, kind
                same = (png == redrawn).all(axis=-1)
                if kind == "summary":
                    table = fig.axes[0].tables[0].get_window_extent(fig.canvas.get_renderer())
                    x0, y0, x1, y1 = table.extents.round().astype(int)
                    h = png.shape[0]
                    same[max(h - y1 - 2, 0) : h - y0 + 2, max(x0 - 2, 0) : x1 + 2] = True
                assert same.all(), f"{kind}: {(~same).sum()} pixels differ from a savefig"
            finally:
                plt.close(fig)
