"""An ABBA arm from a plain function (workbench.measure.abba.Arm): the tests' fake arms."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass
class FnArm:
    variant: str
    fn: Callable[[], Sequence[float]]

    def measure(self) -> Sequence[float]:
        return self.fn()
