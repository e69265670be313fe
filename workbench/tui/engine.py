"""`EngineBackend`: the `Backend` the real app drives, adapting the engine modules.

Every engine import happens inside a method and every failure becomes a `WorkbenchError` with a
readable message, so the app opens (in browse mode) even without torch, CUDA, a GPU, NVML or a
finished engine. Runs go through the same runner the CLI's `workbench ab` uses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from workbench.core.errors import GPU_EXTRA, WorkbenchError, extra_install, gpu_stack_module
from workbench.tui.backend import (
    BuildStatus,
    CompareView,
    ExportResult,
    GpuStatus,
    ProgressEvent,
    RunConfig,
    SessionInfo,
    SessionView,
    VariantRow,
)


class EngineUnavailable(WorkbenchError):
    """A part of the engine could not be imported or does not offer what the TUI needs."""


def _engine(module: str):
    """Import ``workbench.<module>``; raise EngineUnavailable naming it and why not."""
    import importlib

    try:
        return importlib.import_module(f"workbench.{module}")
    except Exception as e:  # ImportError, or torch failing to initialise inside the module
        raise EngineUnavailable(f"workbench.{module} unavailable: {type(e).__name__}: {e}") from e


def _row(v, state: str = "not built", result=None, log: str = "") -> VariantRow:
    """VariantRow from a `variants.Variant` and, if built, its `build.BuildResult`."""
    ptxas = getattr(result, "ptxas", None) or {}
    spills = None
    if "spill_stores" in ptxas or "spill_loads" in ptxas:
        spills = int(ptxas.get("spill_stores", 0)) + int(ptxas.get("spill_loads", 0))
    return VariantRow(
        name=v.name,
        kernel=v.kernel,
        layout=v.layout,
        reader=v.reader,
        state=state,
        seconds=None if result is None else float(result.seconds),
        registers=ptxas.get("registers"),
        spills=spills,
        smem=ptxas.get("smem"),
        log=log or (getattr(result, "log", "") or ""),
    )


class EngineBackend:
    """Adapts runner/build/monitor/session/stats/plots/report to the TUI's `Backend` protocol."""

    def __init__(
        self,
        sessions_root: str | Path = "sessions",
        plots_root: str | Path = "plots",
        browse_only: bool = False,
    ) -> None:
        self.sessions_root = Path(sessions_root)
        self.plots_root = Path(plots_root)
        self.browse_only = browse_only
        self._monitor = None
        self._monitor_note = ""
        self._gpu_name = ""
        self._monitor_lock = threading.Lock()

    # ---- GPU and builds -----------------------------------------------------------------

    def gpu_status(self) -> GpuStatus:
        if self.browse_only:
            return GpuStatus(False, "started with --browse")
        try:
            import torch
        except ImportError as e:  # the light install: a missing package, named with its install
            module = gpu_stack_module(e)
            if module is not None:
                return GpuStatus(False, f"{module} is not installed: {extra_install(GPU_EXTRA)}")
            return GpuStatus(False, f"torch cannot be imported ({type(e).__name__}: {e})")
        except Exception as e:
            return GpuStatus(False, f"torch cannot be imported ({type(e).__name__}: {e})")
        if not torch.cuda.is_available():
            return GpuStatus(False, "no CUDA device (torch.cuda.is_available() is False)")
        try:
            _engine("run.runner")
        except EngineUnavailable as e:
            return GpuStatus(False, str(e))
        major, minor = torch.cuda.get_device_capability()
        name = torch.cuda.get_device_name()
        return GpuStatus(True, f"sm_{major}{minor}, torch {torch.__version__}", name)

    def build_status(self) -> BuildStatus:
        # Compiling needs no GPU and no torch (`workbench build` works on a CPU machine, in the
        # light install too): nvcc alone builds a variant (docs/DESIGN.md §4.2).
        try:
            build = _engine("kernels.build")
            home = build.cuda_home()
            arch = build.target_arch()
        except Exception as e:
            return BuildStatus(False, f"{type(e).__name__}: {e}")
        if home is None:
            return BuildStatus(
                False, "no CUDA toolkit found (set CUDA_HOME to the folder holding bin/nvcc)"
            )
        return BuildStatus(True, f"nvcc in {home}, for sm_{arch.replace('.', '')}")

    def variants(self) -> list[VariantRow]:
        variants, build = _engine("kernels.variants"), _engine("kernels.build")
        rows = []
        # what `workbench build` builds: every built-in, its calibration build, the users' specs
        for v in variants.all_variants(calib=True, user=True):
            try:
                cached = build.cached_build(v)
            except Exception:  # no torch here: the cache key needs its version
                cached = None
            rows.append(_row(v, "cached" if cached else "not built", cached))
        return rows

    def build(
        self,
        names: Sequence[str],
        progress: Callable[[VariantRow], None],
        cancelled: Callable[[], bool],
    ) -> list[VariantRow]:
        variants, build = _engine("kernels.variants"), _engine("kernels.build")
        todo = [v for v in variants.all_variants(user=True) if not names or v.name in names]
        rows = []
        # One at a time so that cancel takes effect between variants (a compile in flight
        # finishes: killing nvcc midway would leave nothing worth keeping).
        for v in todo:
            if cancelled():
                break
            progress(_row(v, "building"))
            try:
                result = build.build_variant(v, load=False)
                row = _row(v, "cached" if result.cache_hit else "built", result)
            except WorkbenchError as e:
                row = _row(v, "failed", log=getattr(e, "log", "") or str(e))
            progress(row)
            rows.append(row)
        return rows

    # ---- runs ---------------------------------------------------------------------------

    def run(
        self,
        config: RunConfig,
        progress: Callable[[ProgressEvent], None],
        cancelled: Callable[[], bool],
    ) -> Path:
        runner = _engine("run.runner")
        entry = getattr(runner, "run_session", None)
        if entry is None:
            raise EngineUnavailable(
                "workbench.run.runner has no run_session(): the engine is unfinished"
            )
        return Path(
            entry(
                config,
                root=self.sessions_root,
                progress=progress,
                cancelled=cancelled,
            )
        )

    def tune(
        self,
        config: dict,
        events: Callable[[str, object], None],
        cancelled: Callable[[], bool],
    ) -> Path:
        """A `workbench tune` from the TUI's tune screen; returns its session folder."""
        from workbench.tune.tuner import run_tune_session

        return Path(run_tune_session(config, str(self.sessions_root), events, cancelled))

    # ---- NVML ---------------------------------------------------------------------------

    def monitor_reading(self) -> dict | None:
        with self._monitor_lock:
            if self._monitor is None:
                try:
                    self._monitor = _engine("measure.monitor").Monitor()
                except EngineUnavailable as e:
                    self._monitor_note = str(e)
                    return None
            m = self._monitor
            if not m.available:
                self._monitor_note = m.reason
                return None
            reading = m.read()
        if reading is None:
            return None
        if not self._gpu_name:  # a static fact: ask NVML once, not every second
            self._gpu_name = (m.device_info() or {}).get("name") or "GPU"
        return {**reading.to_dict(), "gpu": self._gpu_name}

    def monitor_note(self) -> str:
        return self._monitor_note

    # ---- sessions -----------------------------------------------------------------------

    def sessions(self) -> list[SessionInfo]:
        """Newest first; an unreadable folder becomes an "unreadable" row with its one-line
        error, after the good ones, so that one bad folder never hides the others."""
        listed = _engine("store.listing")
        analysis = _engine("tui.analysis")
        if not self.sessions_root.exists():
            return []  # no run saved yet
        listing = listed.list_sessions(self.sessions_root)
        out = [analysis.info_from_listing(info) for info in listing]
        for path, error in listing.skipped:
            out.append(SessionInfo(Path(path), Path(path).name, "unreadable", error=error))
        return out

    def open_session(self, path: Path) -> SessionView:
        session = _engine("store.session")
        analysis = _engine("tui.analysis")
        return analysis.view_from_session(session.load_session(path, nvml=False))

    def compare(self, a: Path, b: Path) -> CompareView:
        session, model = _engine("store.session"), _engine("analysis")
        view = _engine("tui.analysis")
        diff = model.compare_sessions(session.load_session(a), session.load_session(b))
        return view.compare_view(diff)

    def export(self, path: Path) -> ExportResult:
        """Figures (PNG and SVG) and the Markdown report, side by side in the plots folder, so
        that the report's links to the figures work where it lies."""
        session, plots, report = (
            _engine("store.session"),
            _engine("plots"),
            _engine("report.markdown"),
        )
        s = session.load_session(path)
        written = plots.plot_session(s, self.plots_root, ("png", "svg"))
        out = self.plots_root / f"{s.name}_report.md"
        text = report.render_report(s, plots_dir=self.plots_root, link_base=self.plots_root)
        out.write_text(text, encoding="utf-8")
        return ExportResult(tuple(Path(p) for p in written), out)
