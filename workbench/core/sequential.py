"""Settling a label over looks (docs/DESIGN.md §7.4): the rule of `ab --settle`, in one home.

A run that settles measures a round of workers, reads every label of its main (or A/A)
comparisons, and, while one of them is undecided, adds a round of as many workers again (a
look), up to ``looks`` looks or the time budget. A label is **decided** when its interval
straddles none of 1 - m, 1 and 1 + m (FASTER, FASTER<m, SLOWER<m, SLOWER: four labels whose
true ratios cannot overlap); SAME, FASTER~m, SLOWER~m and AMBIGUOUS straddle one or more, and a
run that stops with one says which threshold its effect sits on.

Looking again because a label looked undecided is optional stopping: a 95 % interval at each of
K looks misses the truth at some look far more often than 5 % (an A/A run that stops once its
interval excludes 1 calls a difference in about 13 % of runs at K = 4; tests/test_settle.py).
So every look's interval is a **repeated confidence interval** at the level ``look_conf``:
1 - (1 - conf) / K, alpha spent evenly over the K looks. By the union bound the intervals of
all K looks cover the truth together with probability at least ``conf`` whatever the stopping
rule, so a label read at the look where the run stopped is wrong at most 5 % of the time; the
bound needs no normal approximation of the t statistics (Pocock's constant boundary, 98.18 %
at K = 4, assumes one and let 5.4 % of simulated A/A runs call a difference with six workers a
look). Plain Python: the analysis reads the level from here, the runner the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from workbench.core.errors import BadArgument

# the labels a run may stop on: their intervals straddle none of 1 - m, 1, 1 + m
DECIDED = ("FASTER", "FASTER<m", "SLOWER<m", "SLOWER")
# the roles whose labels a settling run waits for: what the run reports as its answer
SETTLED_ROLES = ("main", "aa")
MAX_LOOKS = 8  # a run of 6 workers a look: 48 at most


def check_looks(looks: int, option: str = "--settle") -> int:
    """``looks`` if it is a number of looks a run may settle over (2..MAX_LOOKS), else
    BadArgument naming ``option``."""
    if isinstance(looks, bool) or not isinstance(looks, int) or not 2 <= looks <= MAX_LOOKS:
        raise BadArgument(f"{option} {looks!r} must be a number of looks in 2..{MAX_LOOKS}")
    return looks


def look_conf(looks: int, conf: float) -> float:
    """The level of each look's interval so that all ``looks`` cover together at ``conf``."""
    if not 0.0 < conf < 1.0:
        raise BadArgument(f"conf must be in (0, 1), got {conf!r}")
    return 1.0 - (1.0 - conf) / looks


def decided(label: str) -> bool:
    return label in DECIDED


def straddled(low: float, high: float, m: float) -> list[str]:
    """The thresholds (1 - m, 1, 1 + m, as text) strictly inside the interval [low, high]."""
    return [name for name, x in (("1 - m", 1.0 - m), ("1", 1.0), ("1 + m", 1.0 + m))
            if low < x < high]  # fmt: skip


class Look(NamedTuple):
    """Where a settling run stands after a look: the look (1-based), the workers so far, the
    labels of the comparisons it waits for, and why it stops (None: another look)."""

    look: int
    workers: int
    labels: dict[str, str]
    stop: str | None


def next_look(
    labels: Mapping[str, str],
    look: int,
    looks: int,
    workers: int,
    elapsed_s: float,
    budget_s: float | None,
) -> Look:
    """After look ``look`` of ``looks`` (``workers`` so far, ``elapsed_s`` seconds of them):
    stop when every label is decided ("decided"), the looks are spent ("looks"), or another look
    of the same length would end past ``budget_s`` ("budget"); else go on (stop None)."""
    stop = None
    if all(decided(x) for x in labels.values()):
        stop = "decided"
    elif look >= looks:
        stop = "looks"
    elif budget_s is not None and elapsed_s * (look + 1) / look > budget_s:
        stop = "budget"
    return Look(look, workers, dict(labels), stop)
