"""The progress record a run reports to a front end (torch-free, textual-free).

The runner makes these from the protocol's per-sample progress (``runner.run_session``); the TUI
shows them. It lives here, below both, so that the runner never imports the TUI's modules.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProgressEvent:
    """A run's progress: comparison ``step`` of ``steps``, pair ``pair`` of ``pairs``.

    ``pairs`` is None in adaptive mode (the end is not known). ``ratio`` and ``ci`` are the
    comparison's current median pair ratio B/A and its 95 % CI once two pairs are complete.
    """

    cmp_id: str
    step: int
    steps: int
    pair: int
    pairs: int | None
    samples: int
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    message: str = ""
