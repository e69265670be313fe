"""The app's thread workers: each calls the `Backend` and only posts a message (messages.py).

The event loop never blocks: a worker runs in a thread (``@work(thread=True)``), and the app's
``on_*`` handlers turn its messages into updates of the widgets. `AppWorkers` is mixed into
`WorkbenchApp`, which supplies ``backend``; a build or a run polls ``stop`` (the app's Cancel).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from textual import work
from textual.worker import get_current_worker

from workbench.core.errors import WorkbenchError
from workbench.tui.backend import Backend, BuildStatus, GpuStatus, RunConfig
from workbench.tui.detached import Abandoned, detached
from workbench.tui.messages import (
    BuildEnded,
    BuildProgressed,
    Compared,
    Exported,
    GpuProbed,
    MonitorRead,
    RunEnded,
    RunProgressed,
    SessionOpened,
    SessionsListed,
    WorkFailed,
)

if TYPE_CHECKING:
    from textual.app import App

M = TypeVar("M")
A = TypeVar("A", bound="App")


def while_running(handler: Callable[[A, M], None]) -> Callable[[A, M], None]:
    """For handlers of worker messages: a worker may post while the app shuts down (quit,
    Ctrl-C, the end of a headless run), when its widgets are already gone; then there is
    nothing left to show and the message is dropped."""

    @functools.wraps(handler)
    def guarded(self: A, message: M) -> None:
        if self.is_running:
            handler(self, message)

    return guarded


def _cancelled(stop: threading.Event) -> Callable[[], bool]:
    """The predicate a build or run polls, from its worker's thread: the user cancelled (``stop``)
    or textual cancelled the worker (the app is closing)."""
    worker = get_current_worker()
    return lambda: stop.is_set() or worker.is_cancelled


def describe(error: BaseException) -> str:
    """One line for the user: our errors speak for themselves, others get their type."""
    if isinstance(error, WorkbenchError):
        return str(error)
    return f"{type(error).__name__}: {error}"


class AppWorkers:
    """The workers of `WorkbenchApp` (a mixin: ``@work`` runs them on the app)."""

    backend: Backend
    post_message: Callable[..., bool]

    def _fail(self, what: str, error: BaseException) -> None:
        self.post_message(WorkFailed(what, describe(error)))

    @work(thread=True, group="probe", exit_on_error=False)
    def probe_gpu(self) -> None:
        with contextlib.suppress(Abandoned):
            self.post_message(detached(self._probe))

    def _probe(self) -> GpuProbed:
        try:
            status = self.backend.gpu_status()
        except Exception as e:  # a probe must never take the app down
            status = GpuStatus(False, describe(e))
        try:
            build = self.backend.build_status()
        except Exception as e:
            build = BuildStatus(False, describe(e))
        try:
            variants = self.backend.variants()
        except Exception as e:
            variants = []
            self._fail("variants", e)
        return GpuProbed(status, variants, build)

    @work(thread=True, group="sessions", exclusive=True, exit_on_error=False)
    def list_sessions(self) -> None:
        try:
            self.post_message(SessionsListed(detached(self.backend.sessions)))
        except Abandoned:
            pass
        except Exception as e:
            self._fail("list sessions", e)

    @work(thread=True, group="monitor", exclusive=True, exit_on_error=False)
    def refresh_monitor(self) -> None:
        try:
            reading = self.backend.monitor_reading()
            note = "" if reading is not None else self.backend.monitor_note()
        except Exception as e:
            reading, note = None, describe(e)
        self.post_message(MonitorRead(reading, note))

    @work(thread=True, group="build", exit_on_error=False)
    def build_variants(self, names: list[str], stop: threading.Event) -> None:
        cancelled = _cancelled(stop)
        try:
            self.backend.build(
                names, lambda row: self.post_message(BuildProgressed(row)), cancelled
            )
        except Exception as e:
            self.post_message(BuildEnded(cancelled(), describe(e)))
            return
        self.post_message(BuildEnded(cancelled()))

    @work(thread=True, group="run", exit_on_error=False)
    def run_ab(self, config: RunConfig, stop: threading.Event) -> None:
        cancelled = _cancelled(stop)
        try:
            path = self.backend.run(
                config, lambda event: self.post_message(RunProgressed(event)), cancelled
            )
        except Exception as e:
            self.post_message(RunEnded(None, cancelled(), describe(e)))
            return
        self.post_message(RunEnded(path, cancelled()))

    @work(thread=True, group="open", exclusive=True, exit_on_error=False)
    def open_session(self, path: Path) -> None:
        try:
            self.post_message(SessionOpened(detached(lambda: self.backend.open_session(path))))
        except Abandoned:
            pass
        except Exception as e:
            self.post_message(WorkFailed(f"open {path.name}", describe(e)))

    @work(thread=True, group="export", exit_on_error=False)
    def export_session(self, path: Path) -> None:
        try:
            self.post_message(Exported(detached(lambda: self.backend.export(path))))
        except Abandoned:
            pass
        except Exception as e:
            self._fail(f"export {path.name}", e)

    @work(thread=True, group="compare", exclusive=True, exit_on_error=False)
    def compare_sessions(self, a: Path, b: Path) -> None:
        try:
            text = detached(lambda: self.backend.compare(a, b))
        except Abandoned:
            return
        except Exception as e:
            self._fail("compare", e)
            return
        self.post_message(Compared(f"{a.name} → {b.name}", text))
