"""The method check (docs/DESIGN.md §5.11): `ab` times each main hot comparison of w13 and w2 a
second time, by one event pair around a sample's replays ("batch"), on the same captured graphs
in the same blocks, and a cell whose methods' intervals do not overlap says that its word
depends on the timer, with each method's reading. On the simulated device (tests/sim_device.py)
a planted method effect is found and named; none planted, none is said."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import sim_device
from noise_model import Noise

from workbench.analysis import analyse
from workbench.analysis.method_check import MethodCheck, Reading, method_checks, overlap
from workbench.analysis.recommend import recommendations
from workbench.analysis.words import method_check_text
from workbench.core import stats
from workbench.core.vocab import KERNELS, SETS
from workbench.data.shapes import resolve_shape
from workbench.measure import calls, graphs
from workbench.measure.abba import ProtocolConfig
from workbench.measure.plan import plan_ab
from workbench.report.markdown import render_report
from workbench.run import config, runner
from workbench.store.session import load_session

SHAPE = dict(hidden=64, inter=128, experts=8, top_k=2, tp=1)
# pair noise of 0.1 % and no board, process or block levels: a 2 % effect stands far outside
# every interval, and no two timers' intervals part without one
QUIET = {f"{k}/{s}": Noise(pair=0.001) for k in KERNELS for s in SETS}
PLANT = 1.02  # the batch timer reads b3-coop 2 % slower than per-replay events do


# ------------------------------------------------------------------ the batch timer


def test_batch_events_time_the_span_of_a_samples_replays(monkeypatch):
    """One event pair around all replays, behind one blocking kernel: every replay reads the
    span's mean; per-replay events read each replay."""
    sim_device.install(monkeypatch)
    rng = np.random.default_rng(54)
    costs = list(rng.uniform(0.1, 1.0, size=7))  # ms of each replay, in order
    at = {"i": 0}

    def issue():
        sim_device.Clock.t += costs[at["i"] % len(costs)]
        at["i"] += 1

    arm = graphs.GraphArm("b3-coop", [issue], [[]], len(costs), graphs.Cycle(1), timing="batch")
    at["i"] = 0  # the capture's warm-up calls ran it too
    sleeps = sim_device.SAMPLE["n"]
    batch = arm.measure()
    assert sim_device.SAMPLE["n"] == sleeps + 1  # the one blocking kernel before the replays
    assert batch == pytest.approx([sum(costs) / len(costs)] * len(costs))
    # the same captured arm, retimed by per-replay events (what a method check does)
    per_replay = graphs.Retimed(arm, "events").measure()
    assert per_replay == pytest.approx(costs)
    with pytest.raises(Exception, match=r"timing 'cupti' is not one of events, batch"):
        graphs.Retimed(arm, "cupti")


# ------------------------------------------------------------------ the plan


def _ids(plan):
    return [(c.id, c.role, c.timing, c.of) for c in plan]


def test_ab_plans_a_method_check_after_each_main_hot_comparison_of_w13_and_w2():
    plan = plan_ab(("w13", "w2"), SETS, "b3-scalar", "b3-coop", reference=("b4-scalar",))
    got = _ids(plan)
    assert got[:3] == [
        ("w13/hot", "main", "events", ""),
        ("w13/hot/batch", "method", "batch", "w13/hot"),
        ("w13/hot/b4-scalar", "reference", "events", ""),
    ]
    checks = [x for x in got if x[1] == "method"]
    assert [x[0] for x in checks] == ["w13/hot/batch", "w2/hot/batch"]
    by_id = {c.id: c for c in plan}
    for c in plan:  # a check's arms are its host's
        if c.of:
            host = by_id[c.of]
            assert (c.a, c.b, c.kernel, c.set) == (host.a, host.b, host.kernel, host.set)
    # none for the rotating sets, an A/A control, the step kernel, or with the check off
    assert not [c for c in plan_ab(("w13",), ("rotating",), "b3-scalar", "b3-coop") if c.of]
    assert not [c for c in plan_ab(("w13",), SETS, "b3-scalar", "b3-scalar") if c.of]
    assert not [c for c in plan_ab(("step",), SETS, "b3-scalar", "b3-coop") if c.of]
    assert not [c for c in plan_ab(KERNELS, SETS, "b3-scalar", "b3-coop", check=None) if c.of]


# ------------------------------------------------------------------ the analysis


def _verdict(low: float, high: float, m: float = 0.01) -> stats.Verdict:
    """A verdict with the interval [low, high] (words by the current rule; NaN: none)."""
    est = math.sqrt(low * high) if low > 0 and math.isfinite(high) else 1.0
    word, code = ("AMBIGUOUS", "contains-1")
    if math.isfinite(low) and math.isfinite(high):
        word, code = stats._decide(est, low, high, m)
    return stats.Verdict(
        verdict=word, n=12, median=est, ci_low=low, ci_high=high, coverage=0.95,
        wilcoxon_p=0.5, k_faster=6, m=m, conf=0.95, code=code, method="workers",
        rule=stats.RULE,
    )  # fmt: skip


class _Result:
    """What a method check reads of a comparison's result: its record and its verdict."""

    def __init__(self, cid, role="main", interval=(0.99, 1.0), **extra):
        self.cmp = {"id": cid, "kernel": "w13", "set": "hot", "role": role, **extra}
        self.verdict = _verdict(*interval)


def _check(*intervals) -> MethodCheck:
    readings = tuple(
        Reading(t, _Result(f"w13/hot{'' if t == 'events' else '/' + t}", interval=iv))
        for t, iv in zip(("events", "batch", "other"), intervals, strict=False)
    )
    return MethodCheck("w13", "hot", readings)


@pytest.mark.parametrize(
    "intervals, disagree",
    [
        (((0.995, 1.005), (1.001, 1.009)), False),  # overlapping, though the words may differ
        (((0.995, 1.005), (1.005, 1.010)), False),  # touching: a shared point
        (((0.995, 1.001), (1.012, 1.022)), True),  # apart: SAME against SLOWER
        (((0.990, 0.994), (0.996, 0.999)), True),  # apart, one word (FASTER<m)
        (((0.995, 1.001), (-math.inf, math.inf)), False),  # an unbounded interval shows nothing
        (((0.995, 1.001), (math.nan, math.nan)), False),
        (((0.995, 1.001), (0.996, 1.000), (1.012, 1.022)), True),  # any two apart
    ],
)
def test_methods_disagree_only_where_their_intervals_do_not_overlap(intervals, disagree):
    chk = _check(*intervals)
    assert chk.disagree is disagree
    assert overlap(chk.readings[0].verdict, chk.readings[1].verdict) is (
        len(intervals) > 2 or not disagree
    )
    text = method_check_text(chk)
    assert text.startswith("w13/hot, by timer: events: ")
    if not disagree:
        assert text.endswith("the intervals overlap") and "depends" not in text


def test_the_word_depends_on_the_timer_only_where_intervals_part_and_words_differ():
    apart_words = _check((0.995, 1.001), (1.012, 1.022))
    assert apart_words.word_depends
    text = method_check_text(apart_words)
    v0, v1 = (r.verdict for r in apart_words.readings)
    assert f"events: {v0.words} {v0.median:.4f} [0.9950, 1.0010]" in text
    assert f"batch: {v1.words} {v1.median:.4f} [1.0120, 1.0220]" in text
    assert text.endswith("the word depends on the timer (the intervals do not overlap)")
    one_word = _check((0.990, 0.994), (0.996, 0.999))
    assert one_word.disagree and not one_word.word_depends
    assert "with one word" in method_check_text(one_word)


def test_results_without_a_method_comparison_have_no_check():
    R = _Result
    assert method_checks([R("w13/hot", "main"), R("w13/hot/b4-scalar", "reference")]) == []
    got = method_checks(
        [R("w13/hot", "main"), R("w13/hot/batch", "method", of="w13/hot", timing="batch")]
    )
    assert [(c.id, [r.timing for r in c.readings]) for c in got] == [
        ("w13/hot", ["events", "batch"])
    ]


# ------------------------------------------------------------------ ab on the simulated device


def _run(monkeypatch, tmp_path, plant: float | None, seed: int, **kw):
    """`ab` on the hot sets (quiet noise, seeded); ``plant``: the batch timer reads b3-coop
    that much slower than its per-replay events. W13's readers cost the same here, so the
    planted effect moves its word from SAME to SLOWER."""
    sim_device.install(monkeypatch)
    monkeypatch.setattr(sim_device, "MODEL", QUIET)
    monkeypatch.setitem(sim_device.COST_US, ("w13", "b3", "coop"), 2.0)
    sim_device.reseed(seed)
    if plant is not None:
        real = graphs.TIMINGS["batch"]

        def planted(arm):
            f = plant if arm.variant == "b3-coop" else 1.0
            return [x * f for x in real(arm)]

        monkeypatch.setitem(graphs.TIMINGS, "batch", planted)
    made = []
    real_arm = calls.Calls.arm

    def counting(self, spec, c, geom, cycle):
        made.append(c.id)
        return real_arm(self, spec, c, geom, cycle)

    monkeypatch.setattr(calls.Calls, "arm", counting)
    cfg = config.make_config(
        resolve_shape(**SHAPE), kernels=KERNELS, sets=("hot",), reference=False, confirm=False,
        calls=4, replays=5, protocol=ProtocolConfig(pairs=2, blocks=4), workers=1,
        sessions_dir=str(tmp_path / f"s{seed}"), **kw,
    )  # fmt: skip
    result = runner.Runner(cfg).run()
    return load_session(result.session_path), result, made


def test_a_planted_method_effect_is_reported_with_both_readings(monkeypatch, tmp_path):
    sess, result, made = _run(monkeypatch, tmp_path, PLANT, seed=5401)
    an = analyse(sess)
    checks = {c.kernel: c for c in an.method_checks()}
    assert set(checks) == {"w13", "w2"}
    w13 = checks["w13"]
    events, batch = w13.readings
    assert (events.timing, batch.timing) == ("events", "batch")
    assert events.verdict.median == pytest.approx(1.0, abs=0.003)
    assert batch.verdict.median == pytest.approx(PLANT, abs=0.003)
    assert events.verdict.words == "SAME" and batch.verdict.words == "SLOWER"
    assert w13.disagree and w13.word_depends
    line = method_check_text(w13)
    assert re.search(r"events: SAME 1\.00\d\d \[.*\]; batch: SLOWER 1\.0[12]\d\d \[", line)
    assert "the word depends on the timer" in line
    # W2 reads SLOWER by both timers, 1.10 against 1.122: apart, one word
    w2 = checks["w2"]
    assert w2.disagree and not w2.word_depends
    # the recommendation's evidence says it, as the runner recorded it and the analysis redoes it
    ev = an.recommendations["w13"].evidence
    assert line in ev
    assert sess.summary["recommendations"]["w13"]["evidence"] == ev
    assert [c["id"] for c in sess.summary["method_checks"]] == ["w13/hot", "w2/hot"]
    # a pool words its evidence from its sessions' verdicts (reasons): no one session's timers
    pooled = recommendations(an.results, {r.id: "pooled words" for r in an.results})
    assert not [e for e in pooled["w13"].evidence if "by timer" in e]
    # the report and sessions show name both readings
    report = render_report(sess)
    assert "## Timing methods" in report
    assert re.search(r"- `w13/hot`, by timer: events: SAME .* batch: SLOWER .*timer", report)
    # the recommendation itself still reads the main comparison (per-replay events)
    assert an.recommendations["w13"].verdicts == {"hot": "SAME"}
    # the check captured nothing of its own: the arms made are the main comparisons' alone
    assert "w13/hot/batch" not in made and made.count("w13/hot") == 2 * (1 + 4)


def test_no_method_effect_no_disagreement(monkeypatch, tmp_path, capsys):
    from workbench import cli

    sess, _, made = _run(monkeypatch, tmp_path, None, seed=5402)
    an = analyse(sess)
    checks = an.method_checks()
    assert [c.id for c in checks] == ["w13/hot", "w2/hot"]
    assert not any(c.disagree for c in checks)
    for kernel, rec in an.recommendations.items():
        assert not [e for e in rec.evidence if "by timer" in e], kernel
    # the check's samples: the same blocks as its host, pairs of its own, no warm-up block
    cmp = sess.comparison("w13/hot/batch")
    assert (cmp["role"], cmp["timing"], cmp["of"]) == ("method", "batch", "w13/hot")
    blocks = lambda cid: sorted({s["block"] for s in sess.samples_for(cid)})  # noqa: E731
    assert blocks("w13/hot/batch") == blocks("w13/hot") == [0, 1, 2, 3]
    assert len(sess.samples_for("w13/hot/batch")) == 4 * 2 * 4
    warm = [b for b in sess.blocks if b["status"] == "warmup"]
    assert warm and not [b for b in warm if b.get("cmp") == "w13/hot/batch"]
    # its gate is its host's, journaled once
    assert sess.gates_for("w13/hot/batch") == []
    check = next(r for r in an.results if r.id == "w13/hot/batch")
    assert check.gates == sess.gates_for("w13/hot") and len(check.gates) == 4 and check.gate
    assert cli.main(["sessions", "show", str(sess.path)]) == 0
    out = capsys.readouterr().out
    assert "w13/hot, by timer: events: " in out and "the intervals overlap" in out


@pytest.mark.slow  # renders a report of each kind of committed session
def _has_method_role(sess) -> bool:
    return any(c.get("role") == "method" for c in sess.comparisons)


@pytest.mark.slow  # 3 s of the fast lane on the 2-core machine
def test_committed_sessions_have_no_method_check():
    """Sessions before the check read as they did: no cell, no line, no section."""
    from fixtures_sessions import representative_sessions

    before = [s for s in map(load_session, representative_sessions()) if not _has_method_role(s)]
    assert before, "no committed session before the method check"
    for sess in before:
        an = analyse(sess)
        assert an.method_checks() == []
        assert "Timing methods" not in render_report(sess)
        assert all("by timer" not in e for r in an.recommendations.values() for e in r.evidence)


@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_committed_sessions_with_the_check_show_it():
    """The committed sessions timed with the method check (the H100 runs of 2026-12-07) give
    one cell per main hot comparison of w13 and w2, and the report's section names them."""
    from fixtures_sessions import representative_sessions

    after = [s for s in map(load_session, representative_sessions()) if _has_method_role(s)]
    assert after, "no committed session with a method check"
    for sess in after:
        checks = analyse(sess).method_checks()
        assert sorted((c.kernel, c.set) for c in checks) == [("w13", "hot"), ("w2", "hot")]
        text = render_report(sess)
        assert "Timing methods" in text
        assert all(len(c.readings) >= 2 for c in checks)
