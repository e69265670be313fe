"""Calls the app's workers make in a thread the process does not wait for at exit."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from textual.worker import get_current_worker

R = TypeVar("R")


class Abandoned(Exception):
    """The app closed while a detached call was still running: nothing is left to show."""


def detached(call: Callable[[], R]) -> R:
    """``call()`` in a daemon thread, waited for from the worker's thread; `Abandoned` once
    textual cancels the worker (the app is closing). The app's executor then ends at once and
    the process with it: quitting while the sessions load or the GPU is probed restored the
    terminal and then left it blank for seconds, until they finished (issue 33). For calls
    that only read, and for an export the user chose to abandon."""
    worker = get_current_worker()
    done = threading.Event()
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as e:  # handed to the worker, which reports it
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=target, name="workbench-call", daemon=True).start()
    while not done.wait(0.05):
        if worker.is_cancelled:
            raise Abandoned
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
