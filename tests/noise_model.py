"""The noise model of the simulated device and of the statistical tests (tests only).

SDs of the log pair ratio B/A (0.001 = 0.1 %) per level (board, run, worker, block, pair) and
reader comparison, as REML fits them to the nine default H200 runs of 519ef2b: read from
benchmarks/results/h200_head_519ef2b/components.json, which `workbench sessions pool --json` of
those runs wrote (its ``command``) and tests/test_components.py holds to a fresh fit. Nothing
here types a component again.

``FITTED`` is the default model. The named variants add what those runs did not show:

* ``PROCESS``: a process (worker) effect of 0.086 % on every comparison that has less, the
  between-process SD once estimated on the H200 (docs/investigations/2026-12-03-worker-processes.md;
  the nine runs reject it at p = 0.004 on both rotating comparisons);
* ``BOARD``: a board offset of W13 rotating's fitted 0.098 % on every comparison that has less
  (two H200 boards differed by that much there).

The step kernel (W13 then W2 in each call) has no fit of its own: its variance per level is the
mean of the two kernels' of its expert set.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMPONENTS_JSON = REPO / "benchmarks" / "results" / "h200_head_519ef2b" / "components.json"
LEVELS = ("board", "run", "worker", "block", "pair")
PROCESS_SD = 0.00086  # the process variant's worker SD
BOARD_COMPARISON = "w13/rotating"  # the board variant takes this comparison's fitted board SD


@dataclass(frozen=True)
class Noise:
    """One comparison's SDs of the log pair ratio per level (log scale)."""

    board: float = 0.0
    run: float = 0.0
    worker: float = 0.0
    block: float = 0.0
    pair: float = 0.0

    def worker_sd(self, blocks: int, pairs: int) -> float:
        """SD of one worker's mean of its blocks' mean log ratios (pairs <= 2: the median of a
        block's pairs is their mean), within a board and run."""
        return math.sqrt(self.worker**2 + (self.block**2 + self.pair**2 / pairs) / blocks)


def _read() -> dict[str, Noise]:
    doc = json.loads(COMPONENTS_JSON.read_text())
    return {
        cid: Noise(**{lv: float(levels[lv]["sd"]) for lv in LEVELS})
        for cid, levels in doc["components"].items()
    }


FITTED: dict[str, Noise] = _read()
PROCESS: dict[str, Noise] = {
    cid: dataclasses.replace(n, worker=max(n.worker, PROCESS_SD)) for cid, n in FITTED.items()
}
BOARD: dict[str, Noise] = {
    cid: dataclasses.replace(n, board=max(n.board, FITTED[BOARD_COMPARISON].board))
    for cid, n in FITTED.items()
}
MODELS = {"fitted": FITTED, "process": PROCESS, "board": BOARD}


def noise_of(model: dict[str, Noise], kernel: str, set_: str) -> Noise:
    """The SDs of ``kernel``/``set_`` in ``model``; step's: the mean variance of W13's and W2's
    of that set per level."""
    if kernel != "step":
        return model[f"{kernel}/{set_}"]
    parts = [model[f"{k}/{set_}"] for k in ("w13", "w2")]
    return Noise(**{lv: math.sqrt(sum(getattr(p, lv) ** 2 for p in parts) / 2) for lv in LEVELS})
