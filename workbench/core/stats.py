"""Statistics of ABBA pair ratios and verdicts (docs/DESIGN.md §7); the reader recommendation
built on them lives in workbench.analysis.recommend.

NumPy and SciPy only: this module imports neither torch nor textual.

* A pair is four samples, ABBA (even pairs) or BAAB (odd pairs); its ratio is (B1+B2)/(A1+A2),
  which cancels any linear drift within the pair exactly. Ratio < 1 means B is faster.
* Workers and blocks (§5.5, §7.3): a run splits each comparison's pairs over fresh worker
  processes, and each worker's over blocks, each with its banks at a fresh memory placement.
  Both move the ratio (placement up to ~1 % on the H200; a fresh process by an SD of ~0.06-0.09
  %, which no block inside one process samples), so the worker is the unit of replication: the
  interval is a t-interval over the workers' mean block log-ratios (``block_ci``), centred on
  their mean. A run of one process falls back to the t-interval over its blocks (``method``
  "blocks": its words say that it ignores process variance).
* Without blocks (legacy sessions) or with one block, the interval is the distribution-free
  CI of the median pair ratio, [x_(k), x_(n+1-k)] with the largest k whose exact binomial
  coverage is at least ``conf``; it assumes i.i.d. pair ratios, which holds within one placement
  only, so it is narrower than run-to-run reality (``method`` "pairs"). Below
  ``min_pairs(conf)`` pairs (6 at 95 %) no such interval exists and the verdict is AMBIGUOUS.
* Verdicts with minimum effect m (default 1 %), by the interval rule (``RULE``): FASTER when the
  CI lies entirely below 1-m; SLOWER the mirror image; SAME when the whole CI lies inside
  [1-m, 1+m]; AMBIGUOUS otherwise, with an estimate of how many more blocks (or pairs) would
  likely settle it. Sessions recorded before it keep the estimate rule (``LEGACY_RULE``):
  FASTER when the CI lies below 1 and the estimate is at most 1-m, SLOWER the mirror image.
* Verdict words (``Verdict.words``, what every renderer prints; ``label_of``): a CI that
  excludes 1 is a resolved direction, never "cannot tell": SAME with the CI on one side of 1
  reads FASTER<m / SLOWER<m ("B is faster / slower, by less than m"), AMBIGUOUS with the CI on
  one side of 1 reads FASTER~m / SLOWER~m ("B is faster / slower; whether by m or more is not
  resolved"). AMBIGUOUS is left for a CI that contains 1 and reaches past 1 - m or 1 + m. Under
  the interval rule each interval reads one word, by where it lies alone (docs/DESIGN.md §7.4),
  and the verdict is what that word reads as (``decision_of``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from statistics import NormalDist
from typing import Any

import numpy as np

from workbench.core import defaults
from workbench.core.distributions import wilcoxon_p
from workbench.core.errors import BadArgument

# the pairs and the intervals, split out by concern and read through here as before
from workbench.core.intervals import (  # noqa: F401
    BlockCI,
    MedianCI,
    _as_values,
    _block_ci,
    block_ci,
    ci_half_width,
    median_ci,
    median_of,
    min_pairs,
    t_interval,
)
from workbench.core.pairs import PairRatio, PairRatios, pair_ratios  # noqa: F401
from workbench.core.power import detectable_effect

DEFAULT_M = defaults.M
DEFAULT_CONF = defaults.CONF
DEFAULT_TARGET = defaults.TARGET  # adaptive stop: CI half-width at most 0.5 % of the estimate
MAX_MORE_PAIRS = 1000  # beyond this the estimate means "not with this protocol", not a number
VERDICTS = ("FASTER", "SLOWER", "SAME", "AMBIGUOUS")
# How an interval becomes a verdict (docs/DESIGN.md §7.4). "interval" (the rule of every session
# recorded since, its config's "labels"): where the interval lies against 1 - m, 1 and 1 + m,
# nothing else, so each interval reads one word. "estimate" (sessions recorded before, which
# keep their words): FASTER and SLOWER also asked the estimate to clear m, so an interval across
# 1 + m read SLOWER or SLOWER~m by the side its estimate fell.
RULE = "interval"
LEGACY_RULE = "estimate"
RULES = (RULE, LEGACY_RULE)
# Why a verdict is what it is: the branch of the rule that decided (docs/DESIGN.md §7.4). A
# Verdict holds numbers and one of these; workbench.analysis.words turns them into sentences.
CODES = (
    "faster",  # the CI lies below 1 - m ("estimate": below 1, the estimate at most 1 - m)
    "slower",  # the CI lies above 1 + m ("estimate": above 1, the estimate at least 1 + m)
    "inside",  # the whole CI lies inside [1 - m, 1 + m]
    "one-side",  # the CI excludes 1 but is not inside the band, the estimate within m
    "contains-1",  # the CI contains 1 and is not inside the band
    "too-few-pairs",  # fewer pairs than a distribution-free CI needs, and no blocks
    "no-pairs",  # no complete pair
)
_Z_SE_MEDIAN = math.sqrt(math.pi / 2)  # asymptotic s.e. of a normal median is 1.2533·σ/√n


@dataclass
class Verdict:
    """Result of comparing B against A from pair ratios B/A. Ratios < 1 favour B.

    ``method`` says where the interval comes from: "workers" (a t-interval over the worker
    processes' mean block log-ratios: docs/DESIGN.md §7.3, the default), "blocks" (a t-interval
    over the blocks' median log-ratios of one process, which ignores process variance), or "pairs" (the distribution-free interval over
    pairs of one placement: a legacy session, or a run of one block; it does not cover
    placement, so it is narrower than run-to-run reality), or "boards" (a pool's t-interval
    over boards, ``unit_verdict``: the GPU model's). ``median`` is the point estimate of that
    method: the geometric mean of the block medians (of the boards'), or the median pair ratio.
    """

    verdict: str
    n: int  # complete pairs
    median: float
    ci_low: float
    ci_high: float
    coverage: float
    wilcoxon_p: float | None
    k_faster: int
    m: float
    conf: float
    code: str  # why (CODES): the branch of the rule that decided
    # more pairs ("pairs"), blocks ("blocks") or worker processes ("workers") to settle it
    more_pairs: int | None = None
    dropped: int = 0
    method: str = "pairs"
    blocks: int = 0  # blocks with at least one complete pair
    workers: int = 0  # worker processes the interval runs over ("workers"; 0 otherwise)
    k_workers: int | None = None  # workers whose mean block log-ratio favours B ("workers")
    k_blocks: int | None = None  # blocks whose median favours B
    between_sd: float | None = None  # SD of the blocks' median log-ratios (≈ relative SD)
    within_sd: float | None = None  # pooled SD of pair log-ratios around their block's mean
    half_width: float | None = None  # (high - low) / (2 · median)
    resolution: float | None = None  # smallest effect this run could call: max(m, half_width)
    # smallest effect whose interval would exclude 1 in 95 % of runs like this one (block spread)
    detectable: float | None = None
    rule: str = LEGACY_RULE  # RULES: how the interval became the verdict (a stored one: as then)

    @property
    def words(self) -> str:
        """The verdict as printed (module docstring): FASTER/SLOWER/SAME/AMBIGUOUS, or, where
        the CI lies on one side of 1 without clearing m, FASTER<m, SLOWER<m (CI inside the m band)
        or FASTER~m, SLOWER~m (CI reaching past it). Computed from the recorded fields, so a
        stored verdict of any age reads the same way."""
        return verdict_words(self.verdict, self.ci_low, self.ci_high)

    @property
    def label(self) -> str:
        """The one word this verdict is compared by (a pool's agreement): its words under the
        interval rule; under the estimate rule (sessions before it), its verdict, as those
        sessions were read. What is printed is ``words``, everywhere."""
        return self.words if self.rule == RULE else self.verdict

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: non-finite floats become None (from_dict restores them). The rule
        only where it is not the estimate rule: a session before it reads as it did."""
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = None
        if d["rule"] == LEGACY_RULE:
            del d["rule"]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Verdict:
        names = {f.name for f in fields(cls)}
        optional = {f.name for f in fields(cls) if f.default is not dataclasses.MISSING}
        optional.add("code")  # absent from verdicts stored before it: derived below
        missing = [f.name for f in fields(cls) if f.name not in d and f.name not in optional]
        if missing:
            raise BadArgument(f"verdict dict lacks {', '.join(missing)}")
        kw = {k: v for k, v in d.items() if k in names}
        # a verdict stored before the code (its words in "reason", which nothing reads now)
        kw.setdefault("code", _code_of(kw["verdict"], kw.get("ci_low"), kw.get("ci_high")))
        if kw["verdict"] not in VERDICTS:
            raise BadArgument(f"verdict {kw['verdict']!r} is not one of {VERDICTS}")
        if kw.get("rule", LEGACY_RULE) not in RULES:
            raise BadArgument(f"verdict rule {kw['rule']!r} is not one of {RULES}")
        kw["median"] = math.nan if kw["median"] is None else kw["median"]
        kw["ci_low"] = -math.inf if kw["ci_low"] is None else kw["ci_low"]
        kw["ci_high"] = math.inf if kw["ci_high"] is None else kw["ci_high"]
        return cls(**kw)


def verdict_words(verdict: str, ci_low: float | None, ci_high: float | None) -> str:
    """``Verdict.words`` from a verdict label and its interval (None bounds: unbounded)."""
    if verdict not in ("SAME", "AMBIGUOUS") or ci_low is None or ci_high is None:
        return verdict
    side = "FASTER" if ci_high < 1.0 else "SLOWER" if ci_low > 1.0 else None
    if side is None:
        return verdict
    return side + ("<m" if verdict == "SAME" else "~m")


def label_of(center: float, low: float, high: float, m: float, rule: str = RULE) -> str:
    """The one word (``Verdict.words``) of an interval [low, high] around ``center`` under
    ``rule``: what ``compare`` words a verdict with this interval (the interval rule reads
    ``center`` not at all)."""
    return verdict_words(_decide(center, low, high, m, rule)[0], low, high)


def decision_of(label: str) -> str:
    """The verdict (VERDICTS) a label reads as: FASTER<m and SLOWER<m are SAME, the words of
    an unresolved interval (FASTER~m, SLOWER~m) AMBIGUOUS."""
    if label in VERDICTS:
        return label
    return "SAME" if label.endswith("<m") else "AMBIGUOUS"


def _code_of(verdict: str, ci_low: float | None, ci_high: float | None) -> str:
    """The code of a verdict stored before codes, from its label and interval."""
    if verdict in ("FASTER", "SLOWER"):
        return verdict.lower()
    if verdict == "SAME":
        return "inside"
    return "one-side" if verdict_words(verdict, ci_low, ci_high) != verdict else "contains-1"


def _wilcoxon_p(logs: np.ndarray, conf: float) -> float | None:
    """Two-sided Wilcoxon signed-rank p of log-ratios against 0; None when n < min_pairs(conf)
    (the exact test's smallest p, 2^(1-n), could not go below 1-conf anyway)."""
    if logs.size < min_pairs(conf):
        return None
    if not np.any(logs != 0.0):
        return 1.0  # all pairs exactly equal: no evidence either way
    return wilcoxon_p(logs)  # scipy.stats.wilcoxon's number, without importing scipy.stats


def _more(
    n: int, med: float, lo_side: float, hi_side: float, m: float, floor: int, rule: str = RULE
) -> int | None:
    """Extra units (pairs or blocks) that would likely turn AMBIGUOUS into a verdict.

    Assumes the estimate stays where it is and each side of the CI shrinks like 1/√n. The side
    that matters: the upper one when the estimate is at most 1-m (aiming at FASTER: the CI below
    1 - m, or below 1 under the estimate rule), the lower one when at least 1+m (SLOWER), both
    when inside the band (SAME). None when the estimate sits on a boundary or the number
    exceeds MAX_MORE_PAIRS.
    """
    edge = m if rule == RULE else 0.0  # the threshold FASTER's or SLOWER's CI must clear
    if med <= 1 - m:
        gap = (1 - edge) - med
        factor = (hi_side / gap) ** 2 if gap > 0 else math.inf
    elif med >= 1 + m:
        gap = med - (1 + edge)
        factor = (lo_side / gap) ** 2 if gap > 0 else math.inf
    else:
        gap_lo, gap_hi = med - (1 - m), (1 + m) - med
        if gap_lo <= 0 or gap_hi <= 0:
            return None
        factor = max((lo_side / gap_lo) ** 2, (hi_side / gap_hi) ** 2)
    if not math.isfinite(factor):
        return None
    more = max(math.ceil(n * factor) - n, 1, floor - n)
    return None if more > MAX_MORE_PAIRS else more


def _more_pairs(x: np.ndarray, c: MedianCI, m: float, conf: float, rule: str) -> int | None:
    """_more for the pair interval; below min_pairs the sides come from the MAD (asymptotic CI
    of a median)."""
    n, med = c.n, c.median
    nmin = min_pairs(conf)
    if n < nmin:
        if n < 2:
            return nmin - n
        sigma = 1.4826 * float(np.median(np.abs(x - med)))
        z = NormalDist().inv_cdf(0.5 + conf / 2)
        lo_side = hi_side = z * _Z_SE_MEDIAN * sigma / math.sqrt(n)
    else:
        lo_side, hi_side = med - c.low, c.high - med
    return _more(n, med, lo_side, hi_side, m, nmin, rule)


def _check_m(m: Any) -> float:
    # the library also takes m = 0 (the bare CI test, which the A/A tests use); the commands
    # take only (0, 0.5) (workbench.core.limits.check_min_effect)
    try:
        m = float(m)
    except (TypeError, ValueError):
        raise BadArgument(f"m (minimum effect) must be a number, got {m!r}") from None
    if not 0.0 <= m < 0.5:
        raise BadArgument(f"m (minimum effect) must be in [0, 0.5), got {m!r}")
    return m


def _decide(med: float, low: float, high: float, m: float, rule: str = RULE) -> tuple[str, str]:
    """(verdict, code) of ``rule`` (§7.4) on an estimate and its interval."""
    lo_m, hi_m = 1.0 - m, 1.0 + m
    if rule == RULE:
        if high < lo_m:
            return "FASTER", "faster"
        if low > hi_m:
            return "SLOWER", "slower"
    elif high < 1.0 and med <= lo_m:
        return "FASTER", "faster"
    elif low > 1.0 and med >= hi_m:
        return "SLOWER", "slower"
    if low >= lo_m and high <= hi_m:
        return "SAME", "inside"
    return "AMBIGUOUS", "one-side" if high < 1.0 or low > 1.0 else "contains-1"


def decide(
    ratios: Sequence[float] | Sequence[PairRatio],
    m: float = DEFAULT_M,
    conf: float = DEFAULT_CONF,
    rule: str = RULE,
) -> tuple[str, str]:
    """``(verdict, words)`` of ``compare(ratios, m, conf)``: the same rule on the same interval,
    without what only the Verdict's other fields need (the Wilcoxon p, the detectable effect,
    the within-block SD). The leave-one-block-out of
    workbench.core.block_diagnostic re-decides each comparison once per block and reads these
    two alone (tests/test_block_diagnostic.py checks them against ``compare``)."""
    m = _check_m(m)
    vals = _as_values(ratios)
    prs = [r for r in ratios if isinstance(r, PairRatio)]
    bc = _block_ci(prs, conf, within=False) if len(prs) == len(vals) else None
    if bc is not None:  # two or more blocks of complete pairs: n > 0
        low, high = bc.low, bc.high
        verdict = _decide(bc.center, low, high, m, rule)[0]
    else:
        c = median_ci(vals, conf)
        low, high = c.low, c.high
        if c.n == 0 or c.n < min_pairs(conf):
            verdict = "AMBIGUOUS"
        else:
            verdict = _decide(c.median, low, high, m, rule)[0]
    return verdict, verdict_words(verdict, low, high)


def compare(
    ratios: Sequence[float] | Sequence[PairRatio],
    m: float = DEFAULT_M,
    conf: float = DEFAULT_CONF,
    *,
    detectable: bool = True,
    rule: str = RULE,
) -> Verdict:
    """Verdict on pair ratios B/A (see the module docstring for the rules).

    PairRatios that carry blocks (two or more) get the block-level interval (``block_ci``);
    plain values, a legacy session, or a single block get the distribution-free interval over
    pairs (``method`` "pairs": its words say that it does not cover memory placement).
    The Verdict holds numbers and a ``code``; workbench.analysis.words words them.

    ``detectable=False`` leaves ``Verdict.detectable`` None (the noncentral t root search of
    ``detectable_effect`` is most of a verdict's cost; `sessions pool` shows none). ``rule``:
    RULES (a session's analysis passes the rule it was recorded under).
    """
    m = _check_m(m)
    if rule not in RULES:
        raise BadArgument(f"rule {rule!r} is not one of {RULES}")
    vals = _as_values(ratios)
    dropped = len(getattr(ratios, "dropped", {}))
    x = np.sort(np.asarray(vals, dtype=np.float64))
    c = median_ci(x, conf)
    n = c.n
    p = _wilcoxon_p(np.log(x), conf)
    k = int(np.sum(x < 1.0))
    prs = [r for r in ratios if isinstance(r, PairRatio)]
    nblocks = len({r.block for r in prs if r.block is not None})
    bc = block_ci(prs, conf) if len(prs) == len(vals) else None
    if bc is not None:
        med, low, high, cov = bc.center, bc.low, bc.high, conf
    else:
        med, low, high, cov = c.median, c.low, c.high, c.coverage
    more = None
    if n == 0:
        verdict, code = "AMBIGUOUS", "no-pairs"
    elif bc is None and n < min_pairs(conf):
        verdict, code = "AMBIGUOUS", "too-few-pairs"
    else:
        verdict, code = _decide(med, low, high, m, rule)
    if verdict == "AMBIGUOUS":
        if bc is not None:
            more = _more(bc.units, med, med - low, high - med, m, 2, rule)
        else:
            more = _more_pairs(x, c, m, conf, rule)
    hw = (high - low) / (2 * med) if n and math.isfinite(low) and math.isfinite(high) else None
    workers = bc is not None and bc.unit == "worker"
    return Verdict(
        verdict, n, med, low, high, cov, p, k, m, conf, code, more, dropped,
        method="pairs" if bc is None else "workers" if workers else "blocks",
        blocks=bc.blocks if bc is not None else nblocks,
        workers=bc.units if workers else 0,
        k_workers=bc.k_units if workers else None,
        k_blocks=None if bc is None else bc.k_blocks,
        between_sd=None if bc is None else bc.between_sd,
        within_sd=None if bc is None else bc.within_sd,
        half_width=hw,
        resolution=None if hw is None else max(m, hw),
        detectable=(
            detectable_effect(bc.between_sd, bc.units, conf)
            if bc is not None and detectable
            else None
        ),
        rule=rule,
    )  # fmt: skip


def unit_verdict(
    logs: Sequence[float],
    m: float = DEFAULT_M,
    conf: float = DEFAULT_CONF,
    *,
    method: str = "boards",
    pairs: int = 0,
    rule: str = RULE,
) -> Verdict:
    """The rule (§7.4) on the t-interval over units of a pool, one mean log-ratio B/A per unit
    in ``logs`` (the boards of `sessions pool`: workbench.analysis.fleet), ``pairs`` the complete
    pairs behind them. The estimate is the geometric mean, ``k_faster`` the units favouring B and
    ``more_pairs`` the units that would likely settle an AMBIGUOUS verdict. Fewer than two
    finite units: AMBIGUOUS ("no-pairs"). ``rule``: the sessions' rule (RULES), as they were read.
    """
    m = _check_m(m)
    y = np.asarray(logs, dtype=np.float64)
    y = y[np.isfinite(y)]
    if y.size < 2:
        est = math.exp(float(y[0])) if y.size else math.nan
        return Verdict("AMBIGUOUS", pairs, est, -math.inf, math.inf, conf, None, 0, m, conf,
                       "no-pairs", None, method=method)  # fmt: skip
    mean, half = t_interval(y, conf)
    med, low, high = math.exp(mean), math.exp(mean - half), math.exp(mean + half)
    verdict, code = _decide(med, low, high, m, rule)
    more = _more(y.size, med, med - low, high - med, m, 2) if verdict == "AMBIGUOUS" else None
    hw = (high - low) / (2 * med)
    return Verdict(
        verdict, pairs, med, low, high, conf, None, int(np.sum(y < 0.0)), m, conf, code, more,
        method=method, between_sd=float(np.std(y, ddof=1)), half_width=hw,
        resolution=max(m, hw), rule=rule,
    )  # fmt: skip


def should_stop(
    ratios: Sequence[float] | Sequence[PairRatio] = (),
    target: float = DEFAULT_TARGET,
    conf: float = DEFAULT_CONF,
    *,
    half_width: float | None = None,
    n: int | None = None,
    min_n: int = 0,
) -> bool:
    """The adaptive criterion of the stopping rule (docs/DESIGN.md §5.4, §5.5), whose one home is
    ``workbench.measure.abba.stop_reason``, its one caller: stop once at least ``min_n`` units
    are measured and the 95 % CI half-width relative to the estimate is at most ``target``.

    ``half_width`` is the block-level interval's (§7.3) and ``n`` the blocks run; without
    ``half_width`` it is ``ci_half_width(ratios, conf)`` of the pair ratios ``ratios`` (``n``
    their number). A half-width that is None or not finite (too few units for an interval)
    never stops.
    """
    count = len(ratios) if n is None else n
    if count < min_n:
        return False
    hw = ci_half_width(ratios, conf) if half_width is None else half_width
    return hw is not None and math.isfinite(hw) and hw <= target
