"""Drive the app without a terminal and save what it shows (`workbench tui --screenshot`).

For GPU machines reached without a terminal: the app runs headless through Textual's
``run_test``, optionally performs the run the form describes (its defaults: both kernels, both
sets, 12 pairs), and writes an SVG of the final screen, the results and recommendation.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from workbench.errors import BadArgument, NoGPUError, WorkbenchError


def parse_size(text: str) -> tuple[int, int]:
    """``"160x48"`` -> (160, 48); BadArgument naming --size otherwise."""
    try:
        w, h = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise BadArgument(f"--size {text!r} must look like 160x48 (columns x rows)") from None
    if w < 80 or h < 24:
        raise BadArgument(f"--size {text!r} is too small: at least 80x24")
    return w, h


async def _settle(pilot) -> None:
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


async def _drive(app, run: bool, out: Path, size: tuple[int, int]) -> str:
    """Returns "" on success, else what went wrong (the app's own status line)."""
    async with app.run_test(size=size) as pilot:
        await _settle(pilot)
        problem = ""
        if run:
            if app.check_action("run", ()) is not True:
                gpu = app.gpu
                raise NoGPUError(f"runs are disabled: {gpu.reason if gpu else 'no GPU status'}")
            app.action_run()
            while app.busy:  # a first run builds every variant: minutes, not seconds
                await pilot.pause(0.5)
            await _settle(pilot)
            if app.query_one("#progress").state == "failed":
                problem = str(app.query_one("#status").content)
        out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=out.name, path=str(out.parent))
        return problem


def screenshot(app, out: Path, run: bool, size: tuple[int, int]) -> int:
    """Run ``app`` headless (performing a run if ``run``), save ``out``; exit code."""
    problem = asyncio.run(_drive(app, run, out, size))
    print(out, file=sys.stderr)
    if problem:
        raise WorkbenchError(problem)
    return 0
