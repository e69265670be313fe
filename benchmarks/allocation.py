"""Workers x blocks x pairs at equal run time, on the fitted noise model (docs/DESIGN.md §5.10.1).

    python3 benchmarks/allocation.py [--phases benchmarks/results/h100_minute_9763616/phases.txt]

The expected half-width of a run's interval over W workers of B blocks of P pairs, for each
reader comparison, from the variance components REML fits to the nine default H200 runs
(benchmarks/results/h200_head_519ef2b/components.json, read through tests/noise_model.py): a
worker's mean has variance worker^2 + (block^2 + v(P) pair^2) / B, with v(P) the variance of
the median of P standard normals (1/P for P <= 2), and the interval's expected half-width is
t_{W-1, 0.975} c4(W) sd / sqrt(W) (c4: E[s] = c4 sd for normal samples).

The cost of an allocation is the GPU turns of its workers, main round and confirm round
(max(2, ceil(W/2)) workers), read from a phases table (`workbench sessions show --phases`):
per worker a fixed part (startup, build, describe, banks, the warm-up block, the rest), per
counted block its capture and gate (and RELOCATE_S for moving the banks, not split out of
"banks" by the table), per pair-equivalent of timing its share (a block times its P pairs and
one pair-equivalent of warm-up samples). The rows of the default runs of the table give the
mean of each part over the workers after the first (the first also spawns the spare). The last
column scales the half-width to the default's time (workers added or taken away in proportion:
half-width x sqrt(time / default's)). Prints the table the investigation note cites
(docs/investigations/2026-12-05-allocation.md).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import special, stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from noise_model import FITTED, Noise  # noqa: E402

from workbench.core import defaults  # noqa: E402

PHASES = ROOT / "benchmarks" / "results" / "h100_minute_9763616" / "phases.txt"
RELOCATE_S = 0.2  # seconds per placement to move the banks (a guess: see --relocate)
WARMUP_SAMPLES = 1  # pair-equivalents of warm-up samples per timed block (2 samples per arm)
# 9763616 ran its warm-up block with one pair; today's has defaults.WARMUP_PAIRS
PHASES_WARMUP_PAIRS = 1
ALSO = [(6, 3, 1), (7, 2, 1)]  # issue 45: "at equal time, 6 x 3 x 1 or 7 x 2 x 1 would narrow"


@dataclass(frozen=True)
class Cost:
    """Seconds of one worker's turn: fixed, per counted block, per pair-equivalent of timing."""

    worker: float
    block: float
    pair: float

    def turn(self, blocks: int, pairs: int) -> float:
        return self.worker + blocks * (self.block + (pairs + WARMUP_SAMPLES) * self.pair)


def read_costs(path: Path, relocate_s: float) -> dict[str, Cost]:
    """Per round ("main", "confirm"): the Cost of a worker, from the default runs' rows of the
    phases table at ``path`` (blocks and pairs per worker: the defaults' at the time, 2 and 2)."""
    rows: dict[str, list[dict[str, float]]] = {"main": [], "confirm": []}
    header: list[str] = []
    default = False
    for line in path.read_text().splitlines():
        if "(complete)" in line or "(interrupted)" in line:
            default = "_default" in line
            continue
        words = line.split()
        if words[:2] == ["round", "w"]:
            header = words
        elif default and words and words[0] in rows and len(words) == len(header):
            rec = dict(zip(header, words, strict=True))
            if int(rec["w"]) > 0:
                rows[rec["round"]].append({k: float(v) for k, v in rec.items()
                                           if re.fullmatch(r"[\d.]+", v)})  # fmt: skip
    out = {}
    blocks, pairs = 2, 2
    for rnd, recs in rows.items():
        mean = {k: float(np.mean([r[k] for r in recs])) for k in recs[0]}
        pair = mean["timing"] / (blocks * (pairs + WARMUP_SAMPLES))
        block = (mean["capture"] + mean["gate"]) / blocks + relocate_s
        warmup = mean["warmup"] + (defaults.WARMUP_PAIRS - PHASES_WARMUP_PAIRS) * pair
        fixed = sum(mean[k] for k in ("startup", "build", "describe", "rest")) + warmup
        fixed += mean["banks"] - (blocks + defaults.WARMUP_BLOCKS) * relocate_s
        out[rnd] = Cost(fixed, block, pair)
    return out


def median_variance(pairs: int, draws: int = 400_000) -> float:
    """Var of the median of ``pairs`` standard normals (1/P for P <= 2; seeded draws above)."""
    if pairs <= 2:
        return 1.0 / pairs
    x = np.random.default_rng(pairs).standard_normal((draws, pairs))
    return float(np.var(np.median(x, axis=1)))


def c4(n: int) -> float:
    return math.sqrt(2 / (n - 1)) * math.exp(special.gammaln(n / 2) - special.gammaln((n - 1) / 2))


def half_width(n: Noise, workers: int, blocks: int, pairs: int) -> float:
    """Expected relative half-width of the 95 % t-interval over workers (board excluded: a run's
    interval holds for its board)."""
    var = n.worker**2 + (n.block**2 + median_variance(pairs) * n.pair**2) / blocks
    t = stats.t.ppf(0.5 + defaults.CONF / 2, workers - 1)
    return t * c4(workers) * math.sqrt(var) / math.sqrt(workers)


def run_seconds(costs: dict[str, Cost], workers: int, blocks: int, pairs: int) -> float:
    confirm = max(2, (workers + 1) // 2)
    return workers * costs["main"].turn(blocks, pairs) + confirm * costs["confirm"].turn(
        blocks, pairs
    )


def table(costs: dict[str, Cost], slack: float = 0.02) -> list[str]:
    base = (defaults.WORKERS, defaults.BLOCKS, defaults.PAIRS)
    base_s = run_seconds(costs, *base)
    base_hw = {cid: half_width(n, *base) for cid, n in FITTED.items()}
    rows = []
    for w in range(3, 11):
        for b in range(1, 5):
            for p in range(1, 4):
                s = run_seconds(costs, w, b, p)
                if s > base_s * (1 + slack) and (w, b, p) != base:
                    continue
                hw = {cid: half_width(n, w, b, p) for cid, n in FITTED.items()}
                rel = float(np.mean([hw[c] / base_hw[c] for c in hw]))
                rows.append((rel, w, b, p, s, hw))
    rows.sort()
    ids = list(FITTED)
    out = [
        "| W x B x P | GPU turns, s | vs default | "
        + " | ".join(f"{c} %" for c in ids)
        + " | mean half-width vs default | at the default's time |",
        "|---|---|---|" + "---|" * len(ids) + "---|---|",
    ]
    for rel, w, b, p, s, hw in rows[:12]:
        mark = " (default)" if (w, b, p) == base else ""
        out.append(
            f"| {w} x {b} x {p}{mark} | {s:.1f} | {s / base_s - 1:+.1%} | "
            + " | ".join(f"{hw[c] * 100:.3f}" for c in ids)
            + f" | {rel - 1:+.1%} | {rel * math.sqrt(s / base_s) - 1:+.1%} |"
        )
    shown = {(w, b, p) for _, w, b, p, _, _ in rows[:12]}
    for w, b, p in [base, *ALSO]:  # the default and the candidates named in issue 45
        if (w, b, p) in shown:
            continue
        s = run_seconds(costs, w, b, p)
        hw = {cid: half_width(n, w, b, p) for cid, n in FITTED.items()}
        rel = float(np.mean([hw[c] / base_hw[c] for c in hw]))
        mark = " (default)" if (w, b, p) == base else " (issue 45)"
        out.append(
            f"| {w} x {b} x {p}{mark} | {s:.1f} | {s / base_s - 1:+.1%} | "
            + " | ".join(f"{hw[c] * 100:.3f}" for c in ids)
            + f" | {rel - 1:+.1%} | {rel * math.sqrt(s / base_s) - 1:+.1%} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--phases", type=Path, default=PHASES)
    ap.add_argument("--relocate", type=float, default=RELOCATE_S,
                    help="seconds per placement to move the banks (%(default)s)")  # fmt: skip
    ap.add_argument("--slack", type=float, default=0.02,
                    help="allocations up to this fraction dearer than the default (%(default)s)")  # fmt: skip
    a = ap.parse_args(argv)
    costs = read_costs(a.phases, a.relocate)
    for rnd, c in costs.items():
        print(f"{rnd}: per worker {c.worker:.2f} s, per block {c.block:.2f} s, "
              f"per pair-equivalent {c.pair:.2f} s")  # fmt: skip
    print("\n".join(table(costs, a.slack)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
