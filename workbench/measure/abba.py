"""The ABBA timing protocol (docs/DESIGN.md §5, §6) as plain Python, independent of torch and CUDA.

An *arm* is anything with a ``measure()`` that times one sample and returns the milliseconds of
its timed replays; the runner passes CUDA-Graph arms, the tests pass fake arms of known timing.

Protocol, per comparison:

* warm-up: ``warmup`` untimed-for-statistics samples of each arm (A, B alternating);
* pairs: pair ``i`` takes four samples in order A B B A (even ``i``) or B A A B (odd ``i``);
  its ratio is ``(B1 + B2) / (A1 + A2)`` with each sample the median of its replays;
* one call runs one block: it stops after ``pairs`` complete pairs; when a comparison stops
  (after ``blocks`` blocks, or in adaptive mode on the block-level interval, or at the time
  budget) is ``stop_reason``'s decision, the one home of the stopping rule, which the engine
  asks after every block;
* flagging: a sample whose NVML window shows non-idle throttle bits or an SM clock spread above
  ``max_clock_spread`` is *flagged*. It is journaled (flagged, excluded) and re-measured in the
  same slot after ``recovery_s``, at most ``retries`` times. If the last attempt is still flagged
  it is excluded too (or kept, flagged, with ``keep_flagged``), which loses the pair; a lost pair
  is replaced by a new one, at most ``max_lost_pairs`` times;
* every sample, kept or not, is journaled as it is measured (the ``sample`` record);
* ``cancel`` (a threading.Event) is checked before every sample: what was measured is kept.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from typing import Protocol as _Proto

from workbench.core import defaults
from workbench.core.errors import BadArgument

ORDERS = (("A", "B", "B", "A"), ("B", "A", "A", "B"))


def pair_order(pair: int) -> tuple[str, str, str, str]:
    """Slot order of pair ``pair``: ABBA for even pairs, BAAB for odd ones."""
    return ORDERS[pair % 2]


class Arm(_Proto):
    variant: str  # what the journal calls it, e.g. "b3-coop"

    def measure(self) -> Sequence[float]:
        """Time one sample; return the ms of each timed replay."""
        ...


@dataclass(frozen=True)
class ProtocolConfig:
    """Knobs of the protocol; ``validate()`` names the bad one."""

    # Defaults: workbench.core.defaults (why: docs/DESIGN.md §5.10.1).
    pairs: int = defaults.PAIRS  # ABBA pairs per block
    blocks: int = defaults.BLOCKS  # blocks per comparison, each at its own memory placement
    placement_seed: int | None = None  # None: drawn fresh per run (and journaled)
    # adaptive mode: more blocks until the block-level CI half-width is at most ``target``
    adaptive: bool = False
    target: float = defaults.TARGET
    budget_s: float | None = None  # a comparison's time budget, checked between blocks
    min_blocks: int = 3  # adaptive mode: never stop on fewer blocks (a 2-block t has 1 dof)
    max_blocks: int = defaults.MAX_BLOCKS  # adaptive mode: the cap on blocks
    # whole blocks of every comparison of a group, timed and journaled but not counted, before
    # its first counted block (docs/DESIGN.md §5.5)
    warmup_blocks: int = defaults.WARMUP_BLOCKS
    warmup_pairs: int = defaults.WARMUP_PAIRS  # pairs of a warm-up block (defaults: why)
    # the expert sets whose comparisons a warm-up block runs (empty: every set); the placement,
    # and so the banks placed, is the same whichever run (issue 44's trial of a rotating-only
    # warm-up: defaults.WARMUP_BLOCKS says what the warm-up absorbs)
    warmup_sets: tuple[str, ...] = ()
    warmup: int = 2
    retries: int = defaults.RETRIES
    keep_flagged: bool = False
    max_clock_spread: float = 0.05
    recovery_s: float = 0.05  # pause before re-measuring: lets clocks recover, as nvbench does
    max_lost_pairs: int | None = None  # default: max(4, pairs // 2)

    def validate(self) -> ProtocolConfig:
        def bad(name: str, value: Any, why: str) -> BadArgument:
            return BadArgument(f"{name} {value!r} {why}")

        for name in ("pairs", "blocks", "min_blocks", "max_blocks", "warmup_pairs"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise bad(f"--{name.replace('_', '-')}", v, "must be an integer >= 1")
        for name in ("warmup", "retries", "warmup_blocks"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise bad(f"--{name.replace('_', '-')}", v, "must be an integer >= 0")
        unknown = [x for x in self.warmup_sets if x not in defaults.SETS]
        if unknown or len(set(self.warmup_sets)) != len(self.warmup_sets):
            raise bad("--warmup-sets", ",".join(self.warmup_sets),
                      f"must name distinct sets of {', '.join(defaults.SETS)}")  # fmt: skip
        if self.placement_seed is not None and (
            isinstance(self.placement_seed, bool)
            or not isinstance(self.placement_seed, int)
            or not 0 <= self.placement_seed < 2**63
        ):
            raise bad("--placement-seed", self.placement_seed, "must be an integer in [0, 2^63)")
        if self.adaptive and self.max_blocks < self.min_blocks:
            raise bad(
                "--max-blocks", self.max_blocks,
                f"is below the {self.min_blocks} blocks adaptive mode runs at least",
            )  # fmt: skip
        if not 0 < self.target < 1:
            raise bad("--target", self.target, "must be a fraction in (0, 1), e.g. 0.005")
        if self.budget_s is not None and not self.budget_s > 0:
            raise bad("--budget", self.budget_s, "must be > 0 seconds")
        if not self.max_clock_spread > 0:
            raise bad("max_clock_spread", self.max_clock_spread, "must be > 0")
        if self.recovery_s < 0:
            raise bad("recovery_s", self.recovery_s, "must be >= 0")
        if self.max_lost_pairs is not None and self.max_lost_pairs < 0:
            raise bad("max_lost_pairs", self.max_lost_pairs, "must be >= 0")
        return self

    @property
    def lost_limit(self) -> int:
        return self.max_lost_pairs if self.max_lost_pairs is not None else max(4, self.pairs // 2)

    @property
    def block_goal(self) -> int:
        """Blocks after which a comparison stops at the latest."""
        return self.max_blocks if self.adaptive else self.blocks


def stop_reason(
    cfg: ProtocolConfig, blocks_done: int, half_width: float | None, elapsed_s: float
) -> str | None:
    """Whether a comparison stops after ``blocks_done`` blocks: the stopping rule, the one home
    of it (docs/DESIGN.md §5.4, §5.5); None: run another block. ``half_width`` is the relative
    half-width of its block-level interval (§7.3), ``elapsed_s`` the time its group has run.

    Fixed mode stops after ``blocks`` blocks ("blocks"); adaptive mode once the half-width is at
    most ``target`` after at least ``min_blocks`` blocks ("target", ``stats.should_stop``), else
    at ``max_blocks`` ("max_blocks"); either stops at the time budget ("budget")."""
    from workbench.core import stats

    if not cfg.adaptive:
        if blocks_done >= cfg.blocks:
            return "blocks"
    elif stats.should_stop(
        half_width=half_width, n=blocks_done, min_n=cfg.min_blocks, target=cfg.target
    ):
        return "target"
    elif blocks_done >= cfg.max_blocks:
        return "max_blocks"
    if cfg.budget_s is not None and elapsed_s >= cfg.budget_s:
        return "budget"
    return None


def look_stop(
    cfg: ProtocolConfig,
    labels: dict[str, str],
    look: int,
    looks: int,
    workers: int,
    elapsed_s: float,
) -> Any:
    """A settling run's next look (`ab --settle`: workbench.core.sequential.next_look, its rule)
    within this protocol's time budget: the budget is read here, where the stopping rule is."""
    from workbench.core.sequential import next_look

    return next_look(labels, look, looks, workers, elapsed_s, cfg.budget_s)


@dataclass
class Progress:
    """Where a comparison stands; sent after every sample (for progress bars and the TUI)."""

    cmp: str
    pair: int  # index of the pair being measured
    slot: int
    complete: int  # complete pairs so far
    goal: int  # pairs of the block
    median: float | None  # median pair ratio B/A so far
    ci_low: float | None
    ci_high: float | None
    half_width: float | None
    flagged: int
    excluded: int
    elapsed_s: float
    last_arm: str
    last_ms: float
    flagged_last: bool
    block: int | None = None


@dataclass
class Outcome:
    """What one comparison measured. ``samples`` are the journaled records, in order."""

    cmp: str
    a: str
    b: str
    samples: list[dict[str, Any]] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)  # of complete pairs, in pair order
    pairs_started: int = 0
    flagged: int = 0
    remeasured: int = 0
    excluded: int = 0
    lost_pairs: int = 0
    # run_abba: pairs | lost | cancelled; the engine, between blocks: blocks | target |
    # max_blocks | budget (stop_reason)
    stop: str = ""
    elapsed_s: float = 0.0

    @property
    def cancelled(self) -> bool:
        return self.stop == "cancelled"

    def extend(self, other: Outcome) -> None:
        """Add the next block's outcome of the same comparison (its stop reason wins)."""
        if other.cmp != self.cmp:
            raise BadArgument(f"cannot merge outcomes of {other.cmp!r} into {self.cmp!r}")
        self.samples += other.samples
        self.ratios += other.ratios
        for name in ("pairs_started", "flagged", "remeasured", "excluded", "lost_pairs"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.elapsed_s += other.elapsed_s
        self.stop = other.stop or self.stop

    @property
    def pair_index(self) -> int:
        """The index the next block's first pair takes (pair indices stay unique)."""
        return 1 + max((int(s["pair"]) for s in self.samples), default=-1)

    @property
    def complete(self) -> int:
        return len(self.ratios)

    def kept_ms(self, arm: str) -> list[float]:
        """Sample medians (ms per replay) of ``arm`` ("A"/"B") in complete pairs."""
        done = set(self._complete_pairs())
        return [
            s["ms"]
            for s in self.samples
            if s["arm"] == arm and not s["excluded"] and s["pair"] in done
        ]

    def median_ms(self, arm: str) -> float | None:
        ms = self.kept_ms(arm)
        return statistics.median(ms) if ms else None

    def _complete_pairs(self) -> list[int]:
        slots: dict[int, set[int]] = {}
        for s in self.samples:
            if not s["excluded"]:
                slots.setdefault(s["pair"], set()).add(s["slot"])
        return [p for p, sl in slots.items() if sl == {0, 1, 2, 3}]


def sample_flagged(window: Any, max_clock_spread: float) -> bool:
    """True when the monitor window shows non-idle throttle bits or too wide an SM clock range."""
    if window is None:
        return False
    return bool(window.throttle) or window.clock_spread > max_clock_spread


def _ci(ratios: list[float]) -> tuple[float | None, float | None, float | None]:
    """(ci_low, ci_high, half_width) of the median ratio (stats' distribution-free CI); Nones
    while there are too few pairs for one (fewer than 6 at 95 %)."""
    from workbench.core import stats

    c = stats.median_ci(ratios)
    if not (math.isfinite(c.low) and math.isfinite(c.high)):
        return None, None, None
    return c.low, c.high, stats.ci_half_width(ratios)


class _Run:
    """State of one comparison in flight (kept small: run_abba below is the API)."""

    def __init__(
        self, cmp_id, a, b, cfg, record, window, progress, cancel, clock, wall, sleep, block
    ):
        self.cmp_id, self.arms, self.cfg, self.block = cmp_id, {"A": a, "B": b}, cfg, block
        self.record, self.window, self.progress = record, window, progress
        self.cancel, self.clock, self.wall, self.sleep = cancel, clock, wall, sleep
        self.out = Outcome(cmp_id, a.variant, b.variant)
        self.t_start = clock()
        self.ci: tuple[float | None, float | None, float | None] = (None, None, None)

    def elapsed(self) -> float:
        return self.clock() - self.t_start

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def take(self, pair: int, slot: int, label: str, excluded_if_flagged: bool) -> dict:
        arm = self.arms[label]
        t0 = self.wall()
        replay_ms = [float(x) for x in arm.measure()]
        t1 = self.wall()
        if not replay_ms:
            raise BadArgument(f"arm {arm.variant!r} returned no replay timings")
        w = self.window(t0, t1) if self.window is not None else None
        flagged = sample_flagged(w, self.cfg.max_clock_spread)
        rec = {
            "cmp": self.cmp_id,
            "pair": pair,
            "slot": slot,
            "arm": label,
            "variant": arm.variant,
            "ms": statistics.median(replay_ms),
            "replay_ms": replay_ms,
            "sm_mhz_min": None if w is None else w.sm_mhz_min,
            "sm_mhz_max": None if w is None else w.sm_mhz_max,
            "throttle": 0 if w is None else int(w.throttle),
            "flagged": flagged,
            "excluded": flagged and excluded_if_flagged,
        }
        if self.block is not None:
            rec["block"] = self.block
        if self.record is not None:
            self.record("sample", t=t1, **rec)
        self.out.samples.append(rec)
        if flagged:
            self.out.flagged += 1
        if rec["excluded"]:
            self.out.excluded += 1
        return rec

    def _report(self, pair: int, slot: int, rec: dict) -> None:
        if self.progress is None:
            return
        lo, hi, hw = self.ci
        r = self.out.ratios
        self.progress(
            Progress(
                self.cmp_id, pair, slot, len(r), self.cfg.pairs,
                statistics.median(r) if r else None, lo, hi, hw,
                self.out.flagged, self.out.excluded, self.elapsed(),
                rec["arm"], rec["ms"], rec["flagged"], self.block,
            )
        )  # fmt: skip

    def slot_sample(self, pair: int, slot: int, label: str) -> dict | None:
        """One slot with bounded re-measuring; None when cancelled before it finished."""
        cfg = self.cfg
        for attempt in range(cfg.retries + 1):
            if self.cancelled():
                return None
            last = attempt == cfg.retries
            rec = self.take(pair, slot, label, excluded_if_flagged=not (last and cfg.keep_flagged))
            if not rec["excluded"]:
                return rec  # accepted: one_pair reports it (after the pair ratio, on slot 3)
            self._report(pair, slot, rec)
            if not last:
                self.out.remeasured += 1
                self.sleep(cfg.recovery_s)
        return rec

    def one_pair(self, pair: int) -> bool | None:
        """Measure pair ``pair``: True complete, False lost, None cancelled."""
        got: dict[int, float] = {}
        order = pair_order(pair)
        for slot, label in enumerate(order):
            rec = self.slot_sample(pair, slot, label)
            if rec is None:
                return None
            if rec["excluded"]:
                return False
            got[slot] = rec["ms"]
            if slot == 3:
                a = sum(got[s] for s in range(4) if order[s] == "A")
                b = sum(got[s] for s in range(4) if order[s] == "B")
                self.out.ratios.append(b / a)
                self.ci = _ci(self.out.ratios)
            self._report(pair, slot, rec)
        return True

    def warm_up(self) -> bool:
        for _ in range(self.cfg.warmup):
            for label in ("A", "B"):
                if self.cancelled():
                    return False
                self.arms[label].measure()
        return True

    def block_over(self) -> str | None:
        """Why this block ends now (its pairs done, too many lost, cancelled), or None."""
        if self.cancelled():
            return "cancelled"
        if self.out.complete >= self.cfg.pairs:
            return "pairs"
        if self.out.lost_pairs > self.cfg.lost_limit:
            return "lost"
        return None


def run_abba(
    cmp_id: str,
    a: Arm,
    b: Arm,
    cfg: ProtocolConfig | None = None,
    *,
    record: Callable[..., Any] | None = None,
    window: Callable[[float, float], Any] | None = None,
    progress: Callable[[Progress], Any] | None = None,
    cancel: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    sleep: Callable[[float], Any] = time.sleep,
    block: int | None = None,
    first_pair: int = 0,
) -> Outcome:
    """Run one block of a comparison of arm ``a`` against arm ``b``: ``cfg.pairs`` pairs.

    ``record(type, **fields)``: journal (``SessionWriter.record``); ``window(t0, t1)``: the
    monitor's view of a sample (``Monitor.window``; unix seconds from ``wall``); ``progress``:
    called after every sample; ``cancel``: checked before every sample. Returns the Outcome,
    also when cancelled (``stop == "cancelled"``). Exceptions from the arms propagate; every
    sample measured before them is already journaled.

    ``block``: the block these pairs belong to (written into every sample); ``first_pair``: the
    index of the first pair, so that pair indices stay unique across the blocks of a comparison
    (and ABBA/BAAB keep alternating).
    """
    cfg = (cfg or ProtocolConfig()).validate()
    run = _Run(cmp_id, a, b, cfg, record, window, progress, cancel, clock, wall, sleep, block)
    if not run.warm_up():
        run.out.stop = "cancelled"
    pair = first_pair
    while not run.out.stop:
        reason = run.block_over()
        if reason:
            run.out.stop = reason
            break
        done = run.one_pair(pair)
        run.out.pairs_started = pair + 1 - first_pair
        if done is None:
            run.out.stop = "cancelled"
        elif done is False:
            run.out.lost_pairs += 1
        pair += 1
    run.out.elapsed_s = run.elapsed()
    return run.out
