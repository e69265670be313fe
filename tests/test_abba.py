"""The ABBA protocol on CPU with fake arms of known timing."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pytest
from fn_arm import FnArm

from workbench.analysis.words import reason
from workbench.core import stats
from workbench.core.errors import BadArgument
from workbench.measure.abba import ProtocolConfig, pair_order, run_abba, sample_flagged, stop_reason
from workbench.measure.monitor import Window
from workbench.store.session import SessionWriter, load_session


class FakeClock:
    """Monotonic and wall clocks that advance only when an arm "runs"."""

    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


class Bench:
    """Two fake arms sharing a clock and a call log. Sample k of the whole run (A or B) takes
    ``base * (1 + drift * k)`` ms per replay, with multiplicative noise."""

    def __init__(self, a_ms, b_ms, noise=0.0, drift=0.0, seed=None, replays=5, step_s=0.01):
        self.rng = np.random.default_rng(seed)
        self.base = {"A": a_ms, "B": b_ms}
        self.noise, self.drift, self.replays, self.step_s = noise, drift, replays, step_s
        self.clock = FakeClock()
        self.log: list[tuple[str, float]] = []  # (arm, wall time at start)

    def arm(self, label: str, name: str) -> FnArm:
        def measure():
            k = len(self.log)
            self.log.append((label, self.clock.t))
            self.clock.t += self.step_s
            scale = self.base[label] * (1 + self.drift * k)
            return list(scale * (1 + self.noise * self.rng.standard_normal(self.replays)))

        return FnArm(name, measure)

    def run(self, cfg, **kw):
        kw.setdefault("sleep", self.clock.sleep)
        return run_abba(
            "w13/hot", self.arm("A", "b3-scalar"), self.arm("B", "b3-coop"), cfg,
            clock=self.clock, wall=self.clock, **kw,
        )  # fmt: skip


def fresh_seed() -> int:
    return int(np.random.SeedSequence().entropy % (2**32))


def test_pair_orders_alternate():
    assert pair_order(0) == ("A", "B", "B", "A")
    assert pair_order(1) == ("B", "A", "A", "B")
    assert pair_order(6) == pair_order(0) and pair_order(7) == pair_order(1)


def test_fixed_mode_recovers_ratio_and_order():
    seed = fresh_seed()
    b = Bench(0.200, 0.214, noise=0.002, seed=seed)  # B 7 % slower
    out = b.run(ProtocolConfig(pairs=12, warmup=2))
    assert out.stop == "pairs" and out.complete == 12
    # warm-up A B A B, then the pairs ABBA BAAB ...
    labels = "".join(lbl for lbl, _ in b.log)
    assert labels[:4] == "ABAB"
    assert labels[4:] == "".join("ABBA" if i % 2 == 0 else "BAAB" for i in range(12))
    assert np.median(out.ratios) == pytest.approx(1.07, rel=0.005), f"seed {seed}"
    v = stats.compare(out.ratios, 0.01)
    assert v.verdict == "SLOWER", f"seed {seed}: {reason(v)}"
    # the journaled samples give the same ratios through the statistics module
    assert stats.pair_ratios(out.samples).values == pytest.approx(out.ratios)
    assert out.median_ms("A") == pytest.approx(0.200, rel=0.01)
    assert out.median_ms("B") == pytest.approx(0.214, rel=0.01)


def test_linear_drift_cancels_exactly():
    b = Bench(0.300, 0.270, drift=0.01)  # 1 % slower every sample, no noise
    out = b.run(ProtocolConfig(pairs=8, warmup=0))
    assert out.ratios == pytest.approx([0.9] * 8, rel=1e-12)


def test_every_sample_is_journaled_as_measured(tmp_path):
    b = Bench(0.1, 0.1, noise=0.01, seed=fresh_seed())
    seen_at_progress: list[int] = []
    with SessionWriter(tmp_path, "abba", {"m": 0.01}) as w:
        w.record("comparison", id="w13/hot", kernel="w13", set="hot", role="aa",
                 a="b3-scalar", b="b3-scalar", calls=48, replays=5)  # fmt: skip

        def progress(p):
            # the record is on disk before progress is reported
            seen_at_progress.append(len(load_session(w.path).samples))

        out = b.run(ProtocolConfig(pairs=3, warmup=1), record=w.record, progress=progress)
    s = load_session(w.path)
    assert len(s.samples) == 12 == len(out.samples)
    assert seen_at_progress == list(range(1, 13))
    first = s.samples[0]
    assert {"cmp", "pair", "slot", "arm", "variant", "ms", "replay_ms", "sm_mhz_min",
            "sm_mhz_max", "throttle", "flagged", "excluded"} <= set(first)  # fmt: skip
    assert [x["arm"] for x in s.samples[:4]] == ["A", "B", "B", "A"]
    assert first["ms"] == pytest.approx(float(np.median(first["replay_ms"])))
    assert stats.pair_ratios(s.samples).values == pytest.approx(out.ratios)


def test_one_block_runs_its_pairs_whatever_the_adaptive_switches_say():
    """Adaptive mode and the budget act between blocks (stop_reason), never inside one."""
    b = Bench(0.2, 0.19, noise=0.0005, seed=fresh_seed(), step_s=0.5)
    out = b.run(ProtocolConfig(pairs=9, adaptive=True, target=0.3, budget_s=1.0))
    assert out.stop == "pairs" and out.complete == 9


@pytest.mark.parametrize(
    "kw, blocks, hw, elapsed, want",
    [
        ({"blocks": 3}, 2, None, 0.0, None),
        ({"blocks": 3}, 3, None, 0.0, "blocks"),
        ({"blocks": 3, "budget_s": 5.0}, 1, None, 5.0, "budget"),
        ({"adaptive": True, "target": 0.005}, 3, 0.004, 0.0, "target"),
        ({"adaptive": True, "target": 0.005}, 2, 0.004, 0.0, None),  # below min_blocks (3)
        ({"adaptive": True, "target": 0.005}, 9, 0.006, 0.0, None),
        ({"adaptive": True, "target": 0.005, "max_blocks": 9}, 9, 0.006, 0.0, "max_blocks"),
        ({"adaptive": True, "budget_s": 2.0}, 4, float("inf"), 2.5, "budget"),
        ({"adaptive": True, "target": 0.005}, 3, float("nan"), 0.0, None),
    ],
)
def test_stop_reason_is_the_stopping_rule(kw, blocks, hw, elapsed, want):
    assert stop_reason(ProtocolConfig(**kw), blocks, hw, elapsed) == want


@dataclass
class ScriptedWindow:
    """Window function flagging the samples whose index (in measuring order) is in ``bad``."""

    bench: Bench
    bad: set[int]
    warmup: int

    def __call__(self, t0, t1):
        k = len(self.bench.log) - 1 - self.warmup  # index of the sample just measured
        if k in self.bad:
            return Window(2, 1500, 1980, 0)  # 24 % clock spread
        return Window(1, 1980, 1980, 0)


def test_flagged_sample_is_remeasured_and_counted():
    b = Bench(0.2, 0.22, noise=0.001, seed=fresh_seed())
    win = ScriptedWindow(b, bad={1}, warmup=0)  # pair 0, slot 1 (B) flagged once
    out = b.run(ProtocolConfig(pairs=4, warmup=0), window=win)
    assert out.flagged == 1 and out.remeasured == 1 and out.excluded == 1
    assert out.lost_pairs == 0 and out.complete == 4
    slot1 = [s for s in out.samples if s["pair"] == 0 and s["slot"] == 1]
    assert [(s["flagged"], s["excluded"]) for s in slot1] == [(True, True), (False, False)]
    assert slot1[0]["sm_mhz_min"] == 1500 and slot1[1]["sm_mhz_min"] == 1980
    assert stats.pair_ratios(out.samples).values == pytest.approx(out.ratios)


def test_persistently_flagged_slot_loses_the_pair_which_is_replaced():
    b = Bench(0.2, 0.22, noise=0.001, seed=fresh_seed())
    # pair 0 slot 2 fails three times in a row (retries=2): samples 2, 3, 4
    win = ScriptedWindow(b, bad={2, 3, 4}, warmup=0)
    out = b.run(ProtocolConfig(pairs=3, warmup=0, retries=2, recovery_s=0.25), window=win)
    assert out.flagged == 3 and out.remeasured == 2 and out.excluded == 3
    assert out.lost_pairs == 1 and out.complete == 3 and out.pairs_started == 4
    r = stats.pair_ratios(out.samples)
    assert 0 in r.dropped and len(r) == 3
    assert [p.pair for p in r] == [1, 2, 3]


def test_keep_flagged_keeps_the_last_attempt():
    b = Bench(0.2, 0.22, noise=0.001, seed=fresh_seed())
    win = ScriptedWindow(b, bad={0, 1}, warmup=0)
    out = b.run(ProtocolConfig(pairs=2, warmup=0, retries=1, keep_flagged=True), window=win)
    assert out.lost_pairs == 0 and out.complete == 2
    kept = [s for s in out.samples if s["pair"] == 0 and s["slot"] == 0]
    assert [(s["flagged"], s["excluded"]) for s in kept] == [(True, True), (True, False)]


def test_throttle_bits_flag():
    assert sample_flagged(Window(1, 1980, 1980, 0x4), 0.05)
    assert not sample_flagged(Window(1, 1980, 1980, 0), 0.05)
    assert not sample_flagged(None, 0.05)


def test_too_many_lost_pairs_stop():
    b = Bench(0.2, 0.2, seed=fresh_seed())
    out = b.run(
        ProtocolConfig(pairs=12, warmup=0, retries=0, max_lost_pairs=2),
        window=lambda t0, t1: Window(1, 1980, 1980, 0x40),
    )
    assert out.stop == "lost" and out.complete == 0 and out.lost_pairs == 3


def test_cancel_keeps_what_was_measured():
    b = Bench(0.2, 0.21, noise=0.001, seed=fresh_seed())
    cancel = threading.Event()

    def progress(p):
        if p.complete == 2 and p.slot == 1:  # mid-way through pair 2
            cancel.set()

    out = b.run(ProtocolConfig(pairs=12, warmup=1), cancel=cancel, progress=progress)
    assert out.cancelled and out.complete == 2
    assert len(out.samples) == 10  # pairs 0, 1 and two slots of pair 2
    r = stats.pair_ratios(out.samples)
    assert len(r) == 2 and r.dropped.keys() == {2}


def test_cancel_before_start():
    b = Bench(0.2, 0.21)
    cancel = threading.Event()
    cancel.set()
    out = b.run(ProtocolConfig(), cancel=cancel)
    assert out.cancelled and out.samples == [] and b.log == []


def test_progress_reports_ci_once_enough_pairs():
    b = Bench(0.2, 0.19, noise=0.002, seed=fresh_seed())
    seen = []
    out = b.run(ProtocolConfig(pairs=8, warmup=0), progress=seen.append)
    assert len(seen) == 32
    assert seen[0].median is None and seen[0].ci_low is None
    # the CI appears once 6 pairs are complete (a distribution-free 95 % CI needs 6)
    assert all(p.ci_low is None for p in seen if p.complete < 6)
    last = seen[-1]
    assert last.complete == 8 and last.goal == 8
    assert last.median == pytest.approx(float(np.median(out.ratios)))
    c = stats.median_ci(out.ratios)
    assert (last.ci_low, last.ci_high) == (c.low, c.high)
    assert last.half_width == pytest.approx(stats.ci_half_width(out.ratios))


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"pairs": 0}, "--pairs"),
        ({"pairs": 2.5}, "--pairs"),
        ({"target": 0}, "--target"),
        ({"target": 1.5}, "--target"),
        ({"budget_s": -1}, "--budget"),
        ({"retries": -1}, "--retries"),
        ({"warmup": -2}, "--warmup"),
        ({"max_blocks": 0}, "--max-blocks"),
        ({"warmup_blocks": -1}, "--warmup-blocks"),
    ],
)
def test_bad_protocol_names_the_argument(kw, name):
    with pytest.raises(BadArgument, match=name):
        ProtocolConfig(**kw).validate()


def test_arm_returning_nothing_is_an_error():
    with pytest.raises(BadArgument, match="no replay timings"):
        run_abba("x", FnArm("a", lambda: []), FnArm("b", lambda: [1.0]), ProtocolConfig(warmup=0))
