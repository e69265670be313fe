"""Test double for the TUI: a `Backend` that replays a recorded session instead of a GPU.

`ReplayBackend` inherits the real CPU paths of `EngineBackend` (session listing, loading,
statistics, comparison, plots and report export) and replaces only what needs a GPU: probing,
builds, runs and NVML.
A run replays the source session's journal through the real `SessionWriter`, pair by pair,
reporting progress as the engine would, and honours the run form (kernels, sets, pairs).

Until real H200 sessions are committed under sessions/, `write_synthetic_session` writes one in
the documented format (docs/ARCHITECTURE.md, "Sessions") with known effects: W13's cooperative
reader 7 % faster, W2's 11 % slower (the seed's V100 pattern), so the verdicts are certain.

The Pilot helpers at the end (`drive`, `make_app`, `settle`, `shown`, ...) are what the TUI tests
(tests/test_tui*.py) share to drive an app on this double.
"""

from __future__ import annotations

import asyncio
import functools
import io
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from workbench.core import stats
from workbench.data.shapes import PRESETS
from workbench.store.session import SessionWriter, load_session
from workbench.tui.backend import BuildStatus, GpuStatus, ProgressEvent, RunConfig, VariantRow
from workbench.tui.engine import EngineBackend

if TYPE_CHECKING:
    from textual.widgets import Static

    from workbench.tui.app import WorkbenchApp

SYNTHETIC_NAME = "20261120T120000Z_synthetic-h200"
GIB = 1024**3

# (id, kernel, set, role, a, b, ms of A per 48-call replay, true ratio B/A)
SYNTHETIC_COMPARISONS = (
    ("w13/hot", "w13", "hot", "main", "b3-scalar", "b3-coop", 0.0912, 0.93),
    ("w13/rotating", "w13", "rotating", "main", "b3-scalar", "b3-coop", 0.1105, 0.92),
    ("w2/hot", "w2", "hot", "main", "b3-scalar", "b3-coop", 0.0634, 1.11),
    ("w2/rotating", "w2", "rotating", "main", "b3-scalar", "b3-coop", 0.0702, 1.12),
    (
        "step/rotating",
        "step",
        "rotating",
        "confirm",
        "w13=b3-scalar,w2=b3-scalar",
        "w13=b3-coop,w2=b3-scalar",
        0.1871,
        0.96,
    ),
)


def write_synthetic_session(root: Path, seed: int = 7, pairs: int = 12) -> Path:
    """Write a complete session with fixed name and times (deterministic screenshots)."""
    rng = np.random.default_rng(seed)
    folder = root / SYNTHETIC_NAME
    folder.mkdir(parents=True)
    shape = PRESETS["qwen3.8-flash-next"]
    t = 1_795_000_000.0
    journal = []
    for cmp_id, kernel, set_, role, a, b, a_ms, ratio in SYNTHETIC_COMPARISONS:
        journal.append(
            dict(
                type="comparison",
                t=t,
                id=cmp_id,
                kernel=kernel,
                set=set_,
                role=role,
                a=a,
                b=b,
                calls=48,
                replays=20,
                working_set_bytes=0,
                l2_bytes=62_914_560,
                graphs=1,
            )
        )
        journal.append(dict(type="gate", t=t, cmp=cmp_id, ok=True, max_abs_diff=0.0))
        for pair in range(pairs):
            order = "ABBA" if pair % 2 == 0 else "BAAB"
            for slot, arm in enumerate(order):
                t += 0.01
                # 0.6 % sample noise plus a slow drift the ABBA order cancels
                base = a_ms * (ratio if arm == "B" else 1.0) * (1 + 0.0004 * pair)
                ms = float(base * (1 + 0.006 * rng.standard_normal()))
                journal.append(
                    dict(
                        type="sample",
                        t=t,
                        cmp=cmp_id,
                        pair=pair,
                        slot=slot,
                        arm=arm,
                        variant=a if arm == "A" else b,
                        ms=ms,
                        replay_ms=[ms],
                        sm_mhz_min=1980,
                        sm_mhz_max=1980,
                        throttle=0,
                        flagged=False,
                        excluded=False,
                    )
                )
    nvml = []
    for i in range(40):
        nvml.append(
            dict(
                t=1_795_000_000.0 + 0.05 * i,
                mem_used=int((20 + 0.2 * i) * GIB),
                mem_free=int((120.4 - 0.2 * i) * GIB),
                mem_total=int(140.4 * GIB),
                sm_mhz=int(1980 - 15 * (i % 5)),
                mem_mhz=3201,
                temp_c=41 + i // 8,
                power_w=float(180 + 40 * rng.random()),
                throttle=0 if i % 13 else 0x4,
            )
        )
    meta = {
        "schema": "workbench.session/1",
        "status": "complete",
        "created": "2026-11-20T12:00:00.000Z",
        "finished": "2026-11-20T12:01:10.000Z",
        "slug": "synthetic-h200",
        "config": {"shape": asdict(shape), "m": 0.01, "pairs": pairs, "calls": 48, "replays": 20},
        "provenance": {"package": "workbench", "version": "0.1.0", "synthetic": True},
        "environment": {"gpu": {"name": "NVIDIA H200 (synthetic)", "l2_bytes": 62_914_560}},
        "summary": None,
        "error": None,
    }
    (folder / "journal.jsonl").write_text("".join(json.dumps(r) + "\n" for r in journal))
    (folder / "nvml.jsonl").write_text("".join(json.dumps(r) + "\n" for r in nvml))
    (folder / "session.json").write_text(json.dumps(meta, indent=2) + "\n")
    return folder


VARIANT_TABLE = (
    # (name, kernel, layout, reader, seconds, registers, spills, smem): a plausible ptxas report
    ("w13:b4-scalar", "w13", "b4", "scalar", 41.2, 64, 0, 0),
    ("w13:b3-scalar", "w13", "b3", "scalar", 40.8, 72, 0, 0),
    ("w13:b3-coop", "w13", "b3", "coop", 42.5, 80, 0, 0),
    ("w2:b4-scalar", "w2", "b4", "scalar", 38.9, 56, 0, 0),
    ("w2:b3-scalar", "w2", "b3", "scalar", 39.4, 60, 0, 0),
    ("w2:b3-coop", "w2", "b3", "coop", 40.1, 70, 8, 0),
)


class ReplayBackend(EngineBackend):
    """Replays ``source`` (a session folder). ``hold_at``: after that many pairs of a run (or
    variants of a build), wait until cancelled (makes "cancel midway" deterministic). ``gpu=False`` acts as a
    machine without a GPU; ``nvml=False`` as one without NVML; ``compiler=False`` as one without
    nvcc (builds, which need no GPU, are possible unless that is set)."""

    def __init__(
        self,
        source: Path,
        sessions_root: Path,
        plots_root: Path,
        gpu: bool = True,
        nvml: bool = True,
        compiler: bool = True,
        pace_s: float = 0.0,
        hold_at: int | None = None,
        closing_s: float = 0.0,
    ) -> None:
        super().__init__(sessions_root, plots_root)
        self.source = Path(source)
        self.gpu = gpu
        self.nvml = nvml
        self.compiler = compiler
        self.pace_s = pace_s
        self.hold_at = hold_at
        self.closing_s = closing_s  # how long a cancelled run takes to stop (a sample in flight)
        self.held = threading.Event()  # set while a run waits at hold_at
        self._readings = load_session(self.source).nvml
        self._tick = 0
        self.built: list[str] = []

    def gpu_status(self) -> GpuStatus:
        if not self.gpu:
            return GpuStatus(False, "no CUDA device (replay double without a GPU)")
        return GpuStatus(True, f"replaying {self.source.name}", "NVIDIA H200 (replay)")

    def build_status(self) -> BuildStatus:
        if not self.compiler:
            return BuildStatus(False, "no CUDA toolkit found (replay double without nvcc)")
        return BuildStatus(True, "replayed builds, for sm_90")

    def variants(self) -> list[VariantRow]:
        return [VariantRow(n, k, lay, r) for n, k, lay, r, *_ in VARIANT_TABLE]

    def build(
        self,
        names: Sequence[str],
        progress: Callable[[VariantRow], None],
        cancelled: Callable[[], bool],
    ) -> list[VariantRow]:
        rows = []
        for name, k, lay, r, secs, regs, spills, smem in VARIANT_TABLE:
            if names and name not in names:
                continue
            if cancelled():
                break
            progress(VariantRow(name, k, lay, r, "building"))
            time.sleep(self.pace_s)
            log = f"ptxas info    : Compiling entry function for 'sm_90'\nptxas info    : Used {regs} registers"
            row = VariantRow(name, k, lay, r, "built", secs, regs, spills, smem, log)
            progress(row)
            rows.append(row)
            self.built.append(name)
            if self.hold_at is not None and len(self.built) == self.hold_at:
                self._hold(cancelled)
        return rows

    def _hold(self, cancelled: Callable[[], bool]) -> None:
        """Wait (at most 20 s) until the app cancels; tests cancel at a known point this way."""
        self.held.set()
        deadline = time.monotonic() + 20
        while not cancelled() and time.monotonic() < deadline:
            time.sleep(0.005)

    def monitor_reading(self) -> dict | None:
        if not self.nvml or not self._readings:
            return None
        reading = dict(self._readings[self._tick % len(self._readings)])
        self._tick += 1
        reading["gpu"] = "NVIDIA H200 (replay)"
        return reading

    def monitor_note(self) -> str:
        return "" if self.nvml else "NVML unavailable: NVMLError_LibraryNotFound (replay double)"

    def run(
        self,
        config: RunConfig,
        progress: Callable[[ProgressEvent], None],
        cancelled: Callable[[], bool],
    ) -> Path:
        src = load_session(self.source, nvml=False)
        # The engine confirms the recommended mix on `step` only when both kernels were timed.
        both = {"w13", "w2"} <= set(config.kernels)
        chosen = [
            c
            for c in src.comparisons
            if c["set"] in config.sets
            and (c["kernel"] in config.kernels or (c["role"] == "confirm" and both))
        ]
        writer = SessionWriter(
            self.sessions_root,
            "replay",
            # the source's minimum effect and verdict rule (config "labels"): the same samples
            # read by another rule may rest on other blocks
            config={
                **config.to_dict(),
                "shape": src.config.get("shape"),
                "m": src.config.get("m", 0.01),
                **{k: src.config[k] for k in ("labels",) if k in src.config},
            },
            provenance={"replay_of": src.name},
            environment=src.environment,
        )
        done = 0
        for step, c in enumerate(chosen, start=1):
            writer.record("comparison", **{k: v for k, v in c.items() if k not in ("type", "t")})
            total = config.pairs * config.blocks  # the run form's pairs are per block
            samples = [s for s in src.samples_for(c["id"]) if s["pair"] < total]
            kept: list[dict] = []
            for s in samples:
                if cancelled():
                    time.sleep(self.closing_s)
                    writer.finish("interrupted", error="cancelled from the TUI")
                    return writer.path
                kept.append(writer.record("sample", **{k: v for k, v in s.items() if k != "type"}))
                if s["slot"] != 3:
                    continue
                time.sleep(self.pace_s)
                ratios = stats.pair_ratios(kept)
                ci = stats.median_ci(ratios.values)
                finite = np.isfinite(ci.low) and np.isfinite(ci.high)
                progress(
                    ProgressEvent(
                        c["id"],
                        step,
                        len(chosen),
                        s["pair"] + 1,
                        config.pairs * config.blocks,
                        len(kept),
                        ci.median,
                        (ci.low, ci.high) if finite else None,
                    )
                )
                done += 1
                if self.hold_at is not None and done == self.hold_at:
                    self._hold(cancelled)
        writer.finish("complete")
        return writer.path


# ------------------------------------------------------------------ Pilot helpers for tests
# Shared by tests/test_tui*.py (the `roots` fixture they take is in tests/conftest.py). Textual and
# rich are imported inside the helpers that need them: this module loads without textual.

SIZE = (160, 48)


def drive(test):
    """Run an async test body in a fresh event loop (no pytest-asyncio needed)."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        asyncio.run(test(*args, **kwargs))

    return run


def make_roots(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(source session, sessions root, plots root); the source lives in the sessions root."""
    sessions = tmp_path / "sessions"
    source = write_synthetic_session(sessions)
    return source, sessions, tmp_path / "plots"


def make_app(roots, **kwargs) -> tuple[WorkbenchApp, ReplayBackend]:
    from workbench.tui.app import WorkbenchApp

    source, sessions, plots = roots
    backend = ReplayBackend(source, sessions, plots, **kwargs)
    return WorkbenchApp(backend, monitor_interval=None), backend


async def settle(pilot, rounds: int = 4) -> None:
    """Let workers finish and their messages (which may start more workers) be handled. A
    worker's end may close the app (q or Ctrl-C during a run), which cancels the workers still
    listed, the one that just returned among them: that is an end too, and every other worker
    is still waited for (return_exceptions), not only the first to end."""
    for _ in range(rounds):
        workers = list(pilot.app.workers)
        await asyncio.gather(*(w.wait() for w in workers), return_exceptions=True)
        await pilot.pause()


def screen_lines(app) -> list[str]:
    """The screen as painted, one string per line (the compositor's strips: what an SVG
    screenshot would show, without drawing one; test_session_fuzz's 61 screens took 3.3 s
    less user CPU so)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def shown(widget: Static) -> str:
    """The plain text a Static shows (strings, rich Text and rich renderables alike)."""
    from rich.console import Console

    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(widget.content)
    return console.export_text()


def status_text(app: WorkbenchApp) -> str:
    from textual.widgets import Static

    return shown(app.query_one("#status", Static))


def session_dirs(sessions: Path) -> list[Path]:
    return sorted(p for p in sessions.iterdir() if p.name != SYNTHETIC_NAME)


def main(argv: list[str]) -> int:
    """``python tests/tui_backend_double.py ROOT HOLD_AT [CLOSING_S] [--app]``: `workbench tui
    --screenshot ROOT/shot.svg --run` on this double, in a process of its own (with ``--app``:
    the app itself, run headless as `workbench tui` runs it in a terminal, starting the run
    once it is up); prints "held" once the run waits after HOLD_AT pairs, so that a test can
    press Ctrl-C (send SIGINT) at a known point."""
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.headless import screenshot

    as_app = "--app" in argv
    argv = [a for a in argv if a != "--app"]
    root, hold_at = Path(argv[0]), int(argv[1])
    closing_s = float(argv[2]) if len(argv) > 2 else 0.0
    source = write_synthetic_session(root / "sessions")
    backend = ReplayBackend(
        source, root / "sessions", root / "plots", hold_at=hold_at, closing_s=closing_s
    )

    def announce() -> None:
        if backend.held.wait(60):
            print("held", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    # NVML readings every 20 ms: worker messages keep arriving while the app shuts down
    app = WorkbenchApp(backend, monitor_interval=0.02)
    if not as_app:
        return screenshot(app, root / "shot.svg", run=True, size=(160, 48))

    async def start_run(pilot) -> None:
        while app.gpu is None:
            await pilot.pause(0.05)
        app.action_run()

    app.run(headless=True, auto_pilot=start_run)
    return app.return_code or 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
