"""How work and the app stop: Escape cancels a build or run, q and Ctrl-C quit (once what is in
flight is saved), and so does a SIGINT from outside.

`Stopping` is mixed into `WorkbenchApp`, which owns the state it reads: ``busy`` ("", "build" or
"run"), ``stop_work`` (the event the worker in flight polls), ``quit_when_idle`` and
``interrupted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading

from textual.worker import Worker

from workbench.tui.headless import EXIT_INTERRUPTED
from workbench.tui.widgets.run_progress import RunProgress


class Stopping:
    """The app's Cancel, Quit and Interrupt (a mixin of `WorkbenchApp`)."""

    busy: str
    stop_work: threading.Event
    quit_when_idle: bool
    interrupted: bool

    def catch_sigint(self) -> None:
        # SIGINT from outside (in the terminal's raw mode Ctrl-C is a key, not a signal) must
        # not tear the app down mid-run: it interrupts like Ctrl-C. Not where signals cannot
        # be caught (a thread other than the main one, Windows).
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            asyncio.get_running_loop().add_signal_handler(
                signal.SIGINT, lambda: self.call_later(self.action_interrupt)
            )

    def action_cancel(self) -> None:
        # A flag the worker's thread polls, not Worker.cancel: that cancels the asyncio task
        # waiting on the thread, so the worker would read as finished (wait_for_complete
        # returns) while its thread is still closing the session.
        if self.busy == "run":
            self.stop_work.set()
            self.query_one(RunProgress).state = "cancelling"
            self.set_status("Cancelling the run…")
        elif self.busy == "build":
            self.stop_work.set()
            self.set_status("Cancelling the build…")

    def exporting(self) -> bool:
        return any(w.group == "export" and not w.is_finished for w in self.workers)

    async def action_quit(self) -> None:
        """Quit; during a build or run, cancel it first so that its session is closed properly
        ("interrupted", every measured sample kept); during an export, once it is written. The
        screen stays up meanwhile, saying so. A second q quits at once."""
        if (self.busy or self.exporting()) and not self.quit_when_idle:
            self.quit_when_idle = True
            if self.busy:
                self.action_cancel()
                self.set_status("Quitting once the sample in flight is saved (q again: quit now)…")
            else:
                self.set_status(
                    "Quitting once the export is written (q again: quit now, leaving it unfinished)…"
                )
            return
        self.leave()

    def leave_if_idle(self) -> None:
        """After a build, run or export ended: quit if a q is waiting for it and nothing else
        is left running."""
        if self.quit_when_idle and not self.busy and not self.exporting():
            self.leave()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "export" and event.worker.is_finished:
            self.leave_if_idle()

    async def action_interrupt(self) -> None:
        """Ctrl-C: quit as q does (a build or run is cancelled first, its session kept), with
        the exit code of an interrupted program."""
        self.interrupted = True
        await self.action_quit()

    def leave(self) -> None:
        self.exit(return_code=EXIT_INTERRUPTED if self.interrupted else 0)
