"""Ctrl-C (or a signal) mid-measurement on the simulated device (tests/sim_device.py): the call
that interrupts is found by counting the simulated kernel calls of one whole run."""

from __future__ import annotations

import os

from sim_device import FakeKernelOp


def interrupt_late(
    monkeypatch, whole_run, fraction: float = 0.6, signum: int | None = None
) -> None:
    """Run ``whole_run()`` once, counting the simulated kernel calls, then make the call at
    ``fraction`` of that count raise KeyboardInterrupt in the next run (Ctrl-C mid-measurement,
    past the warm-up block of docs/DESIGN.md §5.5, whose pairs are never counted), or, with
    ``signum``, send that signal to this process instead."""
    calls = {"n": 0, "stop": None}
    real = FakeKernelOp.__call__

    def counting(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == calls["stop"]:
            if signum is None:
                raise KeyboardInterrupt
            os.kill(os.getpid(), signum)
        return real(self, *a, **k)

    monkeypatch.setattr(FakeKernelOp, "__call__", counting)
    whole_run()
    calls.update(stop=max(1, int(calls["n"] * fraction)), n=0)
