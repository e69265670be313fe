"""Drive the app without a terminal and save what it shows (`workbench tui --screenshot`).

For GPU machines reached without a terminal: the app runs headless through Textual's
``run_test``, optionally performs the run the form describes (its defaults: both kernels, both
sets, 12 pairs), and writes an SVG of the final screen, the results and recommendation.

Ctrl-C is the app's cancel, as Escape is interactively: the run stops after the sample in
flight, its session is closed as "interrupted" with every measured sample, the screenshot shows
that, and the exit code is 130. A second Ctrl-C quits without waiting for the screenshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from textual.worker import WorkerCancelled

from workbench.core.errors import BadArgument, NoGPUError, WorkbenchError

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as `workbench` itself exits on Ctrl-C (cli.main)


def parse_size(text: str) -> tuple[int, int]:
    """``"160x48"`` -> (160, 48); BadArgument naming --size otherwise."""
    try:
        w, h = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise BadArgument(f"--size {text!r} must look like 160x48 (columns x rows)") from None
    if w < 80 or h < 24:
        raise BadArgument(f"--size {text!r} is too small: at least 80x24")
    return w, h


@dataclass
class _Outcome:
    """What a headless session ended with."""

    interrupts: int = 0  # Ctrl-C presses seen
    problem: str = ""  # the status line of a failed run
    status: str = ""  # the app's last status line
    session: Path | None = None  # the session the run saved (opened in the results view)
    saved: bool = False  # whether the screenshot was written


async def _settle(pilot) -> None:
    """Let one-off workers finish and their messages (which may start more) be handled.

    The NVML poll (group "monitor") is left alone: it repeats for as long as the app runs. A
    worker cancelled meanwhile (an exclusive worker replaced by a newer one) raises
    WorkerCancelled when waited on, so it is not waited for. A cancelled build or run is not a
    cancelled worker: its thread sees the app's stop flag and returns, and is waited for.
    """
    app = pilot.app
    for _ in range(3):
        live = [w for w in app.workers if w.group != "monitor" and not w.is_cancelled]
        if live:
            with contextlib.suppress(WorkerCancelled):
                await app.workers.wait_for_complete(live)
        await pilot.pause()


@contextlib.contextmanager
def _catch_sigint(app, outcome: _Outcome):
    """Route SIGINT to the app's cancel (in the app's own message loop) while the block runs.

    asyncio.run's default would cancel the driving task in the middle of an await: Textual's
    worker waits then mistake that for the worker being cancelled (WorkerCancelled), and the
    app is torn down while worker messages are still in flight.
    """

    def on_sigint() -> None:
        outcome.interrupts += 1
        if outcome.interrupts == 1:
            app.call_later(app.action_cancel)

    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (ValueError, RuntimeError, NotImplementedError):  # not the main thread, or Windows
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def _drive(app, run: bool, out: Path, size: tuple[int, int]) -> _Outcome:
    outcome = _Outcome()
    async with app.run_test(size=size) as pilot:
        with _catch_sigint(app, outcome):
            await _settle(pilot)
            if outcome.interrupts:  # before anything was measured: nothing to show
                return outcome
            if run:
                gpu = app.gpu
                if gpu is None or not gpu.available:
                    raise NoGPUError(f"runs are disabled: {gpu.reason if gpu else 'no GPU status'}")
                app.action_run()
                # a first run builds every variant: minutes, not seconds
                while app.busy and outcome.interrupts < 2:
                    await pilot.pause(0.2)
                if outcome.interrupts < 2:
                    await _settle(pilot)
                outcome.status = str(app.query_one("#status").content)
                outcome.session = app.open_path
                if outcome.interrupts >= 2:
                    return outcome
                if app.query_one("#progress").state == "failed":
                    outcome.problem = outcome.status
            out.parent.mkdir(parents=True, exist_ok=True)
            app.save_screenshot(filename=out.name, path=str(out.parent))
            outcome.saved = True
    return outcome


def screenshot(app, out: Path, run: bool, size: tuple[int, int]) -> int:
    """Run ``app`` headless (performing a run if ``run``), save ``out``; exit code."""
    outcome = asyncio.run(_drive(app, run, out, size))
    if outcome.saved:
        print(out, file=sys.stderr)
    if outcome.interrupts:
        kept = f": the measured samples are kept in {outcome.session}" if outcome.session else ""
        print(f"workbench tui: interrupted{kept}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if outcome.problem:
        raise WorkbenchError(outcome.problem)
    return 0
