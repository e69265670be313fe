"""A run whose settings cannot be pickled for a worker process stops with one line that says so
(the queue's feeder thread would otherwise print a traceback and the worker wait for ever)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from workbench.core.errors import WorkbenchError
from workbench.run import pool


class _Event:
    def __init__(self) -> None:
        self.set_called = False

    def set(self) -> None:
        self.set_called = True


class _Queue:
    def __init__(self) -> None:
        self.items: list = []

    def put(self, item) -> None:
        self.items.append(item)


@dataclass
class _Cfg:  # a run's settings as far as the parent's job reads them, plus what cannot pickle
    comparisons: list = field(default_factory=list)
    lock: object = field(default_factory=threading.Lock)


def test_settings_that_do_not_pickle_are_one_line_before_any_worker_gets_them():
    run = pool.ProcessPool(_Cfg())
    run._listener = type("L", (), {"has_session": lambda self: False})()
    go, jobs = _Event(), _Queue()
    run.spares = {0: pool._Proc(proc=None, go=go, jobs=jobs, spawned=0.0)}
    gpu = pool.GPU(visible="0", nvml=0, name="sim")
    job = pool.WorkerJob(0, "main", _Cfg(), gpu)  # a lock does not pickle
    with pytest.raises(WorkbenchError, match=r"cannot be sent to a worker process \(TypeError: "):
        run._start(pool._Worker(job), 0)
    assert jobs.items == [] and not go.set_called  # nothing reached the worker
