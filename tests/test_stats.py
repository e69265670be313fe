"""Statistics: pair ratios, the distribution-free CI, verdicts (docs/DESIGN.md §7)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats as sps

from workbench.analysis.words import reason
from workbench.core import stats
from workbench.core.errors import BadArgument
from workbench.core.stats import (
    LEGACY_RULE,
    MAX_MORE_PAIRS,
    RULE,
    PairRatio,
    Verdict,
    ci_half_width,
    compare,
    median_ci,
    min_pairs,
    pair_ratios,
    should_stop,
)


def make_samples(
    rng, true_ratio, pairs=12, noise=0.01, base=0.6, drift=0.0, cmp="w13/hot", spikes=0.0
):
    """Journal-like sample records for one comparison: ABBA on even pairs, BAAB on odd.

    Each sample time = base * arm factor * (1 + drift * sample index) * lognormal noise, plus an
    occasional +3 % spike (a throttle or a context switch) with probability ``spikes``.
    """
    recs, idx = [], 0
    for p in range(pairs):
        order = "ABBA" if p % 2 == 0 else "BAAB"
        for slot, arm in enumerate(order):
            ms = base * (true_ratio if arm == "B" else 1.0) * (1 + drift * idx)
            ms *= math.exp(rng.normal(0, noise))
            if spikes and rng.random() < spikes:
                ms *= 1.03
            recs.append(
                {
                    "type": "sample",
                    "t": 1000.0 + idx,
                    "cmp": cmp,
                    "pair": p,
                    "slot": slot,
                    "arm": arm,
                    "variant": "b3-coop" if arm == "B" else "b3-scalar",
                    "ms": ms,
                    "flagged": False,
                    "excluded": False,
                }
            )
            idx += 1
    return recs


# ------------------------------------------------------------------------------ pair ratios


def test_pair_ratio_is_sum_b_over_sum_a_in_both_orders():
    rng = np.random.default_rng(11)
    recs = make_samples(rng, 0.93, pairs=6, noise=0.05)
    pr = pair_ratios(recs)
    assert [p.pair for p in pr] == list(range(6)) and pr.dropped == {}
    for p in pr:
        four = [r for r in recs if r["pair"] == p.pair]
        a = sum(r["ms"] for r in four if r["arm"] == "A")
        b = sum(r["ms"] for r in four if r["arm"] == "B")
        assert p.ratio == pytest.approx(b / a, rel=1e-15)
        assert p.order == ("ABBA" if p.pair % 2 == 0 else "BAAB")
        assert p.t == four[0]["t"]


def test_linear_drift_cancels_exactly():
    # No noise, equal arms, a strong clock drift: ABBA/BAAB must give ratio 1 to rounding.
    recs = make_samples(np.random.default_rng(0), 1.0, pairs=8, noise=0.0, drift=0.02)
    assert np.allclose(pair_ratios(recs).values, 1.0, rtol=1e-12, atol=0)
    # ...while a naive B/A of neighbouring samples would be biased by the drift.
    naive = [recs[4 * p + 1]["ms"] / recs[4 * p]["ms"] for p in range(8)]
    assert not np.allclose(naive, 1.0, rtol=1e-3)


def test_remeasured_slot_uses_last_non_excluded_record():
    rng = np.random.default_rng(3)
    recs = make_samples(rng, 0.9, pairs=2, noise=0.02)
    slot1 = dict(recs[1])  # pair 0, slot 1 (B)
    excluded_late = dict(slot1, ms=50.0, excluded=True, flagged=True)
    remeasured = dict(slot1, ms=slot1["ms"] * 1.2)
    recs = [*recs, remeasured, excluded_late]
    pr = pair_ratios(recs)
    a = recs[0]["ms"] + recs[3]["ms"]
    b = remeasured["ms"] + recs[2]["ms"]
    assert pr[0].ratio == pytest.approx(b / a, rel=1e-15)
    assert not pr[0].flagged  # the flagged record was excluded, so it does not count


def test_excluded_or_missing_sample_drops_the_pair():
    rng = np.random.default_rng(4)
    recs = make_samples(rng, 0.95, pairs=5, noise=0.02)
    recs[2 * 4 + 3]["excluded"] = True  # pair 2, slot 3
    recs = [r for r in recs if not (r["pair"] == 4 and r["slot"] == 0)]  # pair 4, slot 0 lost
    pr = pair_ratios(recs)
    assert [p.pair for p in pr] == [0, 1, 3]
    assert set(pr.dropped) == {2, 4}
    assert "3" in pr.dropped[2] and "0" in pr.dropped[4]
    assert compare(pr).dropped == 2


def test_pair_ratios_rejects_mixed_comparisons_and_bad_arm_order():
    rng = np.random.default_rng(5)
    mixed = make_samples(rng, 1.0, pairs=1) + make_samples(rng, 1.0, pairs=1, cmp="w2/hot")
    with pytest.raises(BadArgument, match="one comparison"):
        pair_ratios(mixed)
    bad = make_samples(rng, 1.0, pairs=1)
    bad[1]["arm"], bad[3]["arm"] = "A", "B"  # AABB
    with pytest.raises(BadArgument, match="AABB"):
        pair_ratios(bad)


# ------------------------------------------------------------------------------ median CI


def test_median_ci_order_statistics_for_12():
    rng = np.random.default_rng(6)
    x = rng.lognormal(0, 0.1, 12)
    c = median_ci(x)
    s = np.sort(x)
    # Largest k with 1 - 2 P(Bin(12, 1/2) <= k-1) >= 0.95 is k = 3: [x_(3), x_(10)], 96.14 %.
    assert (c.low, c.high) == (s[2], s[9])
    assert c.coverage == pytest.approx(1 - 2 * sps.binom.cdf(2, 12, 0.5))
    assert c.median == pytest.approx(np.median(x))


def test_median_ci_small_n_is_unbounded():
    assert min_pairs(0.95) == 6 and min_pairs(0.99) == 8
    rng = np.random.default_rng(7)
    c5 = median_ci(rng.lognormal(0, 0.1, 5))
    assert c5.low == -math.inf and c5.high == math.inf
    c6 = median_ci(rng.lognormal(0, 0.1, 6))
    assert math.isfinite(c6.low) and math.isfinite(c6.high) and c6.coverage >= 0.95
    c0 = median_ci([])
    assert math.isnan(c0.median) and c0.n == 0
    with pytest.raises(BadArgument, match="conf"):
        median_ci([1.0, 2.0], conf=1.5)


@pytest.mark.parametrize("n", [6, 12, 30])
def test_median_ci_coverage_on_skewed_data(n):
    # Distribution-free: coverage holds on a skewed, heavy-tailed distribution whose median is known.
    rng = np.random.default_rng(100 + n)
    trials = 4000
    true_median = 1.0  # lognormal(mu=0) has median exp(0)
    x = rng.lognormal(0.0, 0.3, size=(trials, n))
    covered = 0
    for row in x:
        c = median_ci(row)
        covered += c.low <= true_median <= c.high
    exact = median_ci(x[0]).coverage
    rate = covered / trials
    sd = math.sqrt(exact * (1 - exact) / trials)
    assert exact >= 0.95
    assert abs(rate - exact) < 4 * sd, f"n={n}: coverage {rate:.4f}, exact {exact:.4f}"


# ------------------------------------------------------------------------------ verdicts


@pytest.mark.parametrize(
    ("true_ratio", "noise", "pairs", "expected"),
    [
        (0.95, 0.01, 12, "FASTER"),
        (1.05, 0.01, 12, "SLOWER"),
        (1.0, 0.001, 12, "SAME"),
        (0.92, 0.02, 24, "FASTER"),
        (1.0, 0.002, 40, "SAME"),
    ],
)
def test_known_effects(true_ratio, noise, pairs, expected):
    for seed in range(5):
        rng = np.random.default_rng(seed)
        v = compare(pair_ratios(make_samples(rng, true_ratio, pairs=pairs, noise=noise)))
        assert v.verdict == expected, reason(v)
        assert v.n == pairs
        assert v.ci_low <= v.median <= v.ci_high
        assert abs(v.median - true_ratio) < 5 * noise
        assert v.more_pairs is None


def test_verdict_numbers_and_reason():
    rng = np.random.default_rng(21)
    r = 0.95 * np.exp(rng.normal(0, 0.01, 12))
    v = compare(r)
    logs = np.log(r)
    assert v.wilcoxon_p == pytest.approx(sps.wilcoxon(logs).pvalue)
    assert v.k_faster == int(np.sum(r < 1)) == 12
    assert f"{v.median:.4f}" in reason(v) and f"{v.ci_low:.4f}" in reason(v)
    assert "12 of 12" in reason(v) and v.verdict == "FASTER"


def test_small_n_is_ambiguous_with_more_pairs():
    v = compare([0.90, 0.91, 0.92])
    assert v.verdict == "AMBIGUOUS" and v.wilcoxon_p is None
    assert v.ci_low == -math.inf and v.ci_high == math.inf
    assert v.more_pairs is not None and v.more_pairs >= min_pairs() - 3
    assert "only 3" in reason(v)


def test_no_pairs_at_all():
    pr = pair_ratios([])
    v = compare(pr)
    assert v.n == 0 and v.verdict == "AMBIGUOUS" and "no complete pairs" in reason(v)
    assert v.more_pairs == min_pairs() and "nan" not in reason(v)


def test_m_threshold_separates_faster_from_same_and_ambiguous():
    rng = np.random.default_rng(22)
    # A real 0.5 % effect measured precisely is smaller than m = 1 %: SAME at m = 1 %, but
    # FASTER once m = 0.2 %.
    r = 0.995 * np.exp(rng.normal(0, 0.0005, 20))
    assert compare(r, m=0.01).verdict == "SAME"
    assert compare(r, m=0.002).verdict == "FASTER"
    # 0.8 % with more noise: the CI excludes 1 but the median is above 1 - m and the CI leaves
    # the band, so neither FASTER nor SAME is proven.
    r = 0.992 * np.exp(rng.normal(0, 0.004, 16))
    v = compare(r, m=0.01)
    assert v.ci_high < 1 and v.median > 0.99 and v.ci_low < 0.99
    assert v.verdict == "AMBIGUOUS" and v.words == "FASTER~m"
    assert "the CI straddles 0.9900 (1 - m)" in reason(v)
    old = compare(r, m=0.01, rule=LEGACY_RULE)  # a session recorded before the interval rule
    assert old.verdict == "AMBIGUOUS" and "median is within m" in reason(old)
    with pytest.raises(BadArgument, match="m "):
        compare(r, m=-0.1)
    with pytest.raises(BadArgument, match="ratios"):
        compare([1.0, -2.0, 1.0])


def _expected_word(lo: float, hi: float, m: float) -> str:
    """docs/DESIGN.md §7.4's table, from where [lo, hi] lies against 1 - m, 1 and 1 + m."""
    a, b = 1 - m, 1 + m
    if hi < a:
        return "FASTER"
    if lo > b:
        return "SLOWER"
    if a <= lo and hi <= b:
        return "SAME" if lo <= 1 <= hi else ("FASTER<m" if hi < 1 else "SLOWER<m")
    if hi < 1:
        return "FASTER~m"
    if lo > 1:
        return "SLOWER~m"
    return "AMBIGUOUS"


@pytest.mark.parametrize("rule", [RULE, LEGACY_RULE])
def test_each_interval_reads_one_word(rule):
    """Under the interval rule an interval's word is where it lies, whatever its estimate; the
    estimate rule (sessions before it) is the planted mutant: the same interval across 1 + m or
    1 - m reads SLOWER or SLOWER~m by where its estimate falls, and the check catches it."""
    rng = np.random.default_rng(453)
    m = 0.01
    wrong = 0
    for _ in range(4000):
        lo, hi = np.sort(rng.uniform(0.975, 1.025, 2))
        med = rng.uniform(lo, hi)
        verdict, code = stats._decide(med, lo, hi, m, rule)
        assert code in stats.CODES
        words = stats.verdict_words(verdict, lo, hi)
        wrong += words != _expected_word(lo, hi, m)
        assert stats.decision_of(words) == verdict  # the verdict is what its word reads as
    if rule == RULE:
        assert wrong == 0
    else:
        assert wrong > 100, wrong


def test_more_pairs_estimate_is_useful():
    # True effect 3 % with 3 % noise: 8 pairs are often ambiguous; with the suggested number of
    # extra pairs (fresh data), most such runs should reach FASTER.
    settled = tried = 0
    for seed in range(300):
        rng = np.random.default_rng(seed)
        v = compare(0.97 * np.exp(rng.normal(0, 0.03, 8)))
        if v.verdict != "AMBIGUOUS" or v.more_pairs is None:
            continue
        tried += 1
        more = 0.97 * np.exp(rng.normal(0, 0.03, v.more_pairs))
        r2 = np.concatenate([0.97 * np.exp(rng.normal(0, 0.03, 8)), more])
        settled += compare(r2).verdict != "AMBIGUOUS"
    assert tried > 50
    assert settled / tried > 0.4, f"{settled}/{tried}"


def test_more_pairs_none_when_median_sits_on_boundary():
    r = 0.99 + 1e-7 + np.linspace(-0.01, 0.01, 13)  # median a hair inside the band edge
    v = compare(r)
    assert v.verdict == "AMBIGUOUS" and v.median == pytest.approx(0.99 + 1e-7)
    assert v.more_pairs is None and str(MAX_MORE_PAIRS) in reason(v)


def _aa_false_positive_rate(m, seeds=2000):
    hits = 0
    for seed in range(seeds):
        rng = np.random.default_rng(10_000 + seed)
        # realistic GPU noise: 0.8 % lognormal jitter, a clock drift, occasional +3 % spikes
        recs = make_samples(rng, 1.0, pairs=12, noise=0.008, drift=2e-4, spikes=0.05)
        hits += compare(pair_ratios(recs), m=m).verdict in ("FASTER", "SLOWER")
    return hits / seeds


def test_no_effect_rarely_gives_faster_or_slower():
    seeds = 1200
    slack = 3 * math.sqrt(0.05 * 0.95 / seeds)
    # m = 0 turns the verdict into the bare CI test: its false rate is exactly 1 - coverage
    # (3.86 % at n = 12), so a CI narrower than claimed would push it past 5 % + slack.
    rate0 = _aa_false_positive_rate(0.0, seeds)
    assert rate0 <= 0.05 + slack, f"false FASTER/SLOWER rate {rate0:.3f} with m = 0"
    assert rate0 > 0.02, (
        f"rate {rate0:.3f}: the CI is far more conservative than its coverage claims"
    )
    rate = _aa_false_positive_rate(0.01, 600)
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 600), f"rate {rate:.3f} with m = 1 %"


def test_verdict_dict_roundtrip_is_strict_json():
    v = compare([0.9, 0.95, 1.0])  # infinite CI
    d = v.to_dict()
    text = json.dumps(d, allow_nan=False)
    back = Verdict.from_dict(json.loads(text))
    assert back == v
    v2 = compare(np.random.default_rng(24).lognormal(-0.05, 0.01, 12))
    assert Verdict.from_dict(json.loads(json.dumps(v2.to_dict()))) == v2
    with pytest.raises(BadArgument, match="verdict"):
        Verdict.from_dict({"n": 3})


def test_ci_half_width_and_stopping_rule():
    rng = np.random.default_rng(25)
    r = 0.97 * np.exp(rng.normal(0, 0.01, 200))
    assert ci_half_width(r[:5]) == math.inf
    widths = [ci_half_width(r[:n]) for n in (12, 50, 200)]
    assert widths[0] > widths[1] > widths[2] > 0
    c = median_ci(r[:50])
    assert widths[1] == pytest.approx((c.high - c.low) / (2 * c.median))
    assert not should_stop(r[:12], target=0.001)
    assert should_stop(r[:200], target=0.005)
    prs = [PairRatio(i, x, (1.0, 1.0), (x, x), "ABBA") for i, x in enumerate(r[:50])]
    assert ci_half_width(prs) == widths[1]


def test_stats_imports_neither_torch_nor_textual():
    code = "import sys, workbench.core.stats; print([m for m in ('torch', 'textual') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
