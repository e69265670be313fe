"""Figures of sessions (docs/DESIGN.md §8): matplotlib on the headless Agg backend, PNG, SVG or PDF.

Every figure is drawn from the journals through ``workbench.analysis.analyse`` and titled with the GPU, the
shape and the protocol (the calibration figure's left panel reads the rungs the runner stored).
Files are named after the session folder, ``<session>_<kind>.<fmt>``:

* ``summary``: one page, verdict table + pair-ratio plot + recommendation + provenance;
* ``ratios``: pair ratios per comparison with the median, its 95 % CI, the ±m band and 1.0;
* ``distributions``: ms per replay of every variant, per kernel and expert set;
* ``nvml``: memory used, SM clock, temperature and power over the session;
* ``calibration`` (calibration sessions): injected vs measured delay, effect per spin;
* ``floor`` (given a floor): µs per call of each arm against the streaming floor;
* ``samples_<kernel>-<set>``: samples in time order (A and B alternating) over the SM clock.

``kinds`` (``workbench plot --figure``) draws only the figures of those kinds (``KINDS``: the
names above, ``samples`` for every samples figure, ``replicates``); the default draws them all.

Several sessions (replicate runs) add ``replicates_<first session>+<n-1>.<fmt>``: each session's
ratio and CI side by side per comparison. Dense layers are rasterized (``rasterized=True``) so an
SVG stays under 500 KB. Modules by concern: _common (style, saving), ratios (+ summary),
timeline (samples, NVML), distributions, floor, calibration, replicates. matplotlib is imported
inside the functions that draw, so importing this package is cheap.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from workbench.analysis import Analysis, analyse
from workbench.core.errors import BadArgument
from workbench.plots._common import (
    COLOR_A,
    COLOR_B,
    COLOR_FLAG,
    DPI,
    FORMATS,
    VERDICT_COLORS,
    file_slug,
    save_all,
)
from workbench.plots.floor import floor_keys_missing, parse_floor, read_floor_file
from workbench.store.plot_files import existing_plots, plot_name
from workbench.store.session import Session, load_session

__all__ = [
    "COLOR_A", "COLOR_B", "COLOR_FLAG", "DPI", "FORMATS", "KINDS", "VERDICT_COLORS", "existing_plots",
    "floor_keys_missing", "iter_plots", "iter_replicates", "kind_of", "parse_floor", "plot_name",
    "plot_replicates", "plot_session", "read_floor_file", "session_figures",
]  # fmt: skip

Floor = dict[tuple[str, str], float]
# the kinds of figure, in the order a session's are drawn; a samples figure's kind is "samples"
KINDS = ("summary", "ratios", "distributions", "nvml", "calibration", "floor", "samples",
         "replicates")  # fmt: skip
STYLE = {"font.size": 9, "axes.titlesize": 10, "svg.fonttype": "none"}
# a figure is laid out once, then its layout engine is removed (_common.settle): no rc may
# bring one back
STYLE |= {"figure.autolayout": False, "figure.constrained_layout.use": False}


def _check_formats(formats: Any) -> tuple[str, ...]:
    fs = tuple(formats)
    bad = [f for f in fs if f not in FORMATS]
    if bad or not fs:
        raise BadArgument(f"format={','.join(map(str, fs))!r}: choose from {', '.join(FORMATS)}")
    return fs


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # headless: no display on GPU machines and CI
    import matplotlib.pyplot as plt

    return plt


def _write(jobs: list[tuple[str, Callable[[], Any]]], out: Path, fs: tuple[str, ...]):
    """Draw each (file stem, draw) job and save it in every format; yields the files."""
    plt = _pyplot()
    with plt.rc_context(STYLE):
        for stem, draw in jobs:
            fig = draw()
            try:
                yield from save_all(fig, out / stem, fs)
            finally:
                plt.close(fig)  # pyplot keeps every open figure alive otherwise


def kind_of(name: str) -> str:
    """The kind (``KINDS``) of a session figure's name: ``samples_w13-hot`` is a samples figure."""
    return name.split("_", 1)[0]


def session_figures(
    an: Analysis, floor: Floor | None = None, floor_source: str = "", kinds: Any = None
) -> list[tuple[str, Callable[[], Any]]]:
    """The figures of one analysed session: (name, draw) pairs, ``draw()`` making the figure;
    ``kinds``: only the figures of those kinds (default all)."""
    from workbench.plots.calibration import fig_calibration
    from workbench.plots.distributions import fig_distributions
    from workbench.plots.floor import fig_floor
    from workbench.plots.ratios import fig_ratios, fig_summary
    from workbench.plots.timeline import fig_nvml, fig_samples

    jobs: list[tuple[str, Callable[[], Any]]] = [
        ("summary", lambda: fig_summary(an)),
        ("ratios", lambda: fig_ratios(an)),
        ("distributions", lambda: fig_distributions(an)),
        ("nvml", lambda: fig_nvml(an)),
    ]
    if an.by_role("calibration"):
        jobs.append(("calibration", lambda: fig_calibration(an)))
    if floor and len(floor_keys_missing(an, floor)) < len(floor):  # some panel to draw
        jobs.append(("floor", lambda: fig_floor(an, floor, floor_source or "given")))
    for r in an.by_role("main", "confirm", "aa", "calibration"):
        jobs.append((f"samples_{file_slug(r.id)}", lambda r=r: fig_samples(an, r)))
    return [j for j in jobs if kinds is None or kind_of(j[0]) in kinds]


SessionLike = str | os.PathLike | Session | Analysis


def _analysis(x: SessionLike) -> Analysis:
    """``x`` analysed: a session's path or Session is read and analysed, an Analysis is used
    as it is (a caller that has one does not pay for a second)."""
    if isinstance(x, Analysis):
        return x
    return analyse(x if isinstance(x, Session) else load_session(x))


def iter_plots(
    session_path: SessionLike,
    out_dir: str | os.PathLike = "plots",
    formats: tuple[str, ...] | list[str] = ("png", "svg"),
    floor: Floor | None = None,
    floor_source: str = "",
    kinds: Any = None,
) -> Iterator[Path]:
    """Draw every figure of a session (its folder, its Session, or its Analysis) into
    ``out_dir``, yielding each file once it is complete (so an interrupted caller knows what
    is on disk). ``floor``: {(kernel, set): µs per call} adds the floor figure where the
    session timed one of those; ``floor_source`` says where the numbers come from; ``kinds``:
    only the figures of those kinds (``KINDS``; default all)."""
    fs = _check_formats(formats)
    an = _analysis(session_path)
    s = an.session
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs = session_figures(an, floor, floor_source, kinds)
    yield from _write([(f"{s.path.name}_{kind}", draw) for kind, draw in jobs], out, fs)


def plot_session(
    session_path: SessionLike,
    out_dir: str | os.PathLike = "plots",
    formats: tuple[str, ...] | list[str] = ("png", "svg"),
    floor: Floor | None = None,
    floor_source: str = "",
    progress: Callable[[Path], Any] | None = None,
) -> list[Path]:
    """Draw every figure of a session into ``out_dir``; return the files written. ``progress``
    is called with each file once it is complete (a front end's progress line)."""
    out = []
    for path in iter_plots(session_path, out_dir, formats, floor, floor_source):
        out.append(path)
        if progress is not None:
            progress(path)
    return out


def replicates_stem(sessions: list[Session]) -> str:
    return f"replicates_{sessions[0].path.name}+{len(sessions) - 1}"


def iter_replicates(
    sessions: list[SessionLike],
    out_dir: str | os.PathLike = "plots",
    formats: tuple[str, ...] | list[str] = ("png", "svg"),
) -> Iterator[Path]:
    """The replicates figure of two or more sessions (folders, Sessions or Analyses; see the
    module docstring); yields its files."""
    from workbench.plots.replicates import fig_replicates

    fs = _check_formats(formats)
    if len(sessions) < 2:
        raise BadArgument(f"replicates need two sessions or more, got {len(sessions)}")
    analyses = [_analysis(s) for s in sessions]
    ss = [an.session for an in analyses]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    yield from _write([(replicates_stem(ss), lambda: fig_replicates(analyses))], out, fs)


def plot_replicates(
    sessions: list[SessionLike],
    out_dir: str | os.PathLike = "plots",
    formats: tuple[str, ...] | list[str] = ("png", "svg"),
) -> list[Path]:
    return list(iter_replicates(sessions, out_dir, formats))
