"""Ctrl-C (KeyboardInterrupt) in `ab`, `calibrate`, `build`, `plot` and `report`: exit 130, one
line that says so and what was kept, no traceback, and what was measured or written stays on disk
whole (issue 15). The interrupt is raised inside the work itself: a kernel call of the simulated
GPU (tests/sim_device.py), the build's compiler step, a figure's drawing or saving, the report's
rendering."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import threading
from pathlib import Path

import matplotlib.figure
import matplotlib.image
import pytest
import sim_device
import sim_interrupt
from fixtures_sessions import REPO

from workbench import cli
from workbench.core.errors import BuildError
from workbench.kernels import build
from workbench.store.session import load_session

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

SMALL = ["--hidden", "64", "--inter", "128", "--experts", "8", "--top-k", "2", "--tp", "1"]
FAST = ["--calls", "4", "--replays", "5", "--pairs", "6"]
SESSION = REPO / "sessions" / "20261129T140359Z_default"


@pytest.fixture
def device(monkeypatch):
    return sim_device.install(monkeypatch)


def _one_interrupt_line(err: str) -> str:
    assert "Traceback" not in err, err
    hits = [ln for ln in err.splitlines() if re.search(r"(^|: )interrupted\b", ln)]
    assert len(hits) == 1, err
    return hits[0]


@pytest.mark.parametrize("command", ["ab", "calibrate"])
def test_measuring_commands_keep_the_session(device, monkeypatch, capsys, tmp_path, command):
    extra = ["--spins", "0,40,400"] if command == "calibrate" else []
    argv = [command, *SMALL, *FAST, *extra, "--no-plots", "--sessions-dir"]
    whole = str(tmp_path / "whole")
    sim_interrupt.interrupt_late(monkeypatch, lambda: cli.main([*argv, whole]))
    capsys.readouterr()
    code = cli.main([*argv, str(tmp_path / "cut")])
    err = capsys.readouterr().err
    assert code == 130
    (path,) = list((tmp_path / "cut").iterdir())
    line = _one_interrupt_line(err)
    assert line.endswith(f"session kept as interrupted at {path}")
    sess = load_session(path)
    assert sess.status == "interrupted" and len(sess.samples) > 0
    assert all(x["ms"] > 0 for x in sess.samples)  # what was measured is whole


def test_sigterm_keeps_the_session_as_interrupted(device, monkeypatch, capsys, tmp_path):
    """``timeout`` or ``kill`` mid-measurement: as Ctrl-C, never a session left "running"."""
    argv = ["ab", *SMALL, *FAST, "--no-plots", "--sessions-dir"]
    sim_interrupt.interrupt_late(
        monkeypatch, lambda: cli.main([*argv, str(tmp_path / "whole")]), signum=signal.SIGTERM
    )
    capsys.readouterr()
    before = signal.getsignal(signal.SIGTERM)
    code = cli.main([*argv, str(tmp_path / "cut")])
    assert code == 130
    assert signal.getsignal(signal.SIGTERM) is before  # the command's handler is gone again
    (path,) = list((tmp_path / "cut").iterdir())
    assert _one_interrupt_line(capsys.readouterr().err).endswith(
        f"session kept as interrupted at {path}"
    )
    sess = load_session(path)
    assert sess.status == "interrupted" and len(sess.samples) > 0


def test_ab_interrupted_while_building_measures_nothing(device, monkeypatch, capsys, tmp_path):
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "build_many", interrupted)
    code = cli.main(["ab", *SMALL, *FAST, "--sessions-dir", str(tmp_path / "s")])
    assert code == 130
    assert "nothing was measured" in _one_interrupt_line(capsys.readouterr().err)
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())


def test_ab_interrupted_while_drawing_plots_keeps_the_complete_session(
    device, monkeypatch, capsys, tmp_path
):
    import workbench.plots

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(workbench.plots, "plot_session", interrupted)
    argv = ["ab", *SMALL, *FAST, "--kernel", "w13", "--set", "hot", "--no-reference"]
    code = cli.main([*argv, "--sessions-dir", str(tmp_path / "s"), "--plots-dir", str(tmp_path)])
    assert code == 130
    line = _one_interrupt_line(capsys.readouterr().err)
    assert "while drawing the plots" in line and "(complete)" in line
    (path,) = list((tmp_path / "s").iterdir())
    assert load_session(path).status == "complete"


class _Child:
    """Compiler step of a build: writes a build into its folder. The `at`-th call is Ctrl-C as a
    terminal sends it: SIGINT to the process (Python raises KeyboardInterrupt in the main thread,
    wherever it waits) and to the compiler, which dies (a BuildError in this build's thread) once
    the main thread has taken the interrupt: a fixed half second for it to react once lost the
    race on a loaded machine (the build then failed, exit 4)."""

    def __init__(self, at: int) -> None:
        self.calls, self.at = 0, at
        self.interrupted = threading.Event()

    def handler(self, signum, frame):
        self.interrupted.set()
        signal.default_int_handler(signum, frame)  # KeyboardInterrupt, as Python's own handler

    def __call__(self, v, arch, max_jobs, out):
        self.calls += 1
        if self.calls == self.at:
            os.kill(os.getpid(), signal.SIGINT)
            self.interrupted.wait(30)
            raise BuildError(f"build of {v.name} failed: killed by SIGINT")
        name = build.build_name(v, arch)
        (out / f"{name}.so").write_bytes(b"\x7fELF")
        (out / build.BUILD_META).write_text(
            json.dumps({"status": "ok", "lib_sha256": "ab" * 32, "seconds": 1.0})
        )
        return name


def test_build_keeps_the_finished_builds(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(build, "target_arch", lambda: "9.0")
    child = _Child(at=2)
    monkeypatch.setattr(build, "_build_in_child", child)
    previous = signal.signal(signal.SIGINT, child.handler)
    try:
        code = cli.main(["build", "--kernel", "w2", "--no-calib", "--jobs", "1"])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert child.interrupted.is_set() and code == 130
    line = _one_interrupt_line(capsys.readouterr().err)
    assert (
        line == "workbench build: interrupted; 1 of 3 variant(s) built or cached stay in the cache"
    )
    from workbench.kernels.variants import all_variants

    w2 = [v for v in all_variants(calib=False) if v.kernel == "w2"]
    assert [build.cached_build(v) is not None for v in w2] == [True, False, False]
    assert not [p for p in (tmp_path / "build").iterdir() if p.name.startswith(".building-")]


def test_plot_lists_only_complete_files(monkeypatch, capsys, tmp_path):
    real, real_png = matplotlib.figure.Figure.savefig, matplotlib.image.imsave
    n = {"saves": 0}

    def interrupted(fname) -> None:
        n["saves"] += 1
        if n["saves"] == 5:  # mid-file: half of it on disk, then Ctrl-C
            fname.write_bytes(b"<svg half")
            raise KeyboardInterrupt

    def savefig(self, fname, *a, **k):
        interrupted(fname)
        return real(self, fname, *a, **k)

    def imsave(fname, *a, **k):  # a PNG: the pixels of the draw that laid the figure out
        interrupted(fname)
        return real_png(fname, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    monkeypatch.setattr(matplotlib.image, "imsave", imsave)
    out = tmp_path / "p"
    code = cli.main(["plot", str(SESSION), "--out", str(out), "--format", "png,svg"])
    cap = capsys.readouterr()
    assert code == 130
    line = _one_interrupt_line(cap.err)
    assert line == f"workbench plot: interrupted; 4 file(s) written to {out}"
    listed = cap.out.split()
    assert sorted(listed) == sorted(str(p) for p in out.iterdir())  # no temp file, no half file
    assert len(listed) == 4
    import matplotlib.pyplot as plt

    for p in listed:
        if p.endswith(".png"):
            assert plt.imread(p).shape[0] > 300  # a whole picture
        else:
            assert Path(p).read_text().rstrip().endswith("</svg>")


def test_report_writes_all_or_nothing(monkeypatch, capsys, tmp_path):
    import workbench.report.markdown

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(workbench.report.markdown, "render_report", interrupted)
    out = tmp_path / "r" / "report.md"
    code = cli.main(["report", str(SESSION), "--output", str(out), "--no-plots"])
    assert code == 130
    assert _one_interrupt_line(capsys.readouterr().err) == "workbench report: interrupted"
    assert list((tmp_path / "r").iterdir()) == []


def test_report_interrupted_while_drawing_keeps_whole_figures(monkeypatch, capsys, tmp_path):
    copy = tmp_path / "s" / SESSION.name
    shutil.copytree(SESSION, copy)
    from workbench.plots import distributions

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(distributions, "fig_distributions", interrupted)
    plots = tmp_path / "plots"
    code = cli.main(
        ["report", str(copy), "--output", str(tmp_path / "r.md"), "--plots-dir", str(plots)]
    )
    assert code == 130
    _one_interrupt_line(capsys.readouterr().err)
    names = sorted(p.name for p in plots.iterdir())
    assert names == sorted(
        f"{SESSION.name}_{k}.{f}" for k in ("summary", "ratios") for f in ("png", "svg")
    )
    assert not (tmp_path / "r.md").exists()
