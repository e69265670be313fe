"""Statistics of ABBA pair ratios, verdicts and the per-kernel recommendation (DESIGN §7).

NumPy and SciPy only: this module imports neither torch nor textual.

* A pair is four samples, ABBA (even pairs) or BAAB (odd pairs); its ratio is (B1+B2)/(A1+A2),
  which cancels any linear drift within the pair exactly. Ratio < 1 means B is faster.
* The 95 % confidence interval of the median ratio is distribution-free: the order statistics
  [x_(k), x_(n+1-k)] with the largest k whose exact binomial coverage 1 - 2·P(Bin(n, ½) ≤ k-1) is
  at least ``conf``. It assumes only that pair ratios are independent and identically distributed.
  Below ``min_pairs(conf)`` pairs (6 at 95 %) no such interval exists: the CI is (-inf, +inf),
  the Wilcoxon p is None and the verdict is AMBIGUOUS.
* Verdicts with minimum effect m (default 1 %): FASTER when the CI lies entirely below 1 and the
  median is at most 1-m; SLOWER the mirror image; SAME when the whole CI lies inside [1-m, 1+m];
  AMBIGUOUS otherwise, with an estimate of how many more pairs would likely settle it.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np
from scipy import stats as sps

from workbench.errors import BadArgument

DEFAULT_M = 0.01
DEFAULT_CONF = 0.95
DEFAULT_TARGET = 0.005  # adaptive mode stops when the CI half-width is at most 0.5 % of the median
MAX_MORE_PAIRS = 1000  # beyond this the estimate means "not with this protocol", not a number
VERDICTS = ("FASTER", "SLOWER", "SAME", "AMBIGUOUS")
_Z_SE_MEDIAN = math.sqrt(math.pi / 2)  # asymptotic s.e. of a normal median is 1.2533·σ/√n


@dataclass(frozen=True)
class PairRatio:
    """One complete ABBA/BAAB pair: ``a_ms``/``b_ms`` in slot order, ``t`` of its first sample."""

    pair: int
    ratio: float
    a_ms: tuple[float, float]
    b_ms: tuple[float, float]
    order: str
    t: float | None = None
    flagged: bool = False


class PairRatios(list):
    """List of PairRatio, pair order; ``dropped`` maps each dropped pair index to the reason."""

    def __init__(self, items: Iterable[PairRatio] = (), dropped: dict[int, str] | None = None):
        super().__init__(items)
        self.dropped: dict[int, str] = dropped or {}

    @property
    def values(self) -> list[float]:
        return [p.ratio for p in self]


def pair_ratios(samples: Iterable[Mapping[str, Any]]) -> PairRatios:
    """Pair ratios from the ``sample`` journal records of ONE comparison.

    For each (pair, slot) the last non-excluded record counts (a re-measured slot replaces the
    earlier one). A pair with a slot missing, only excluded records, or a non-positive time is
    dropped and listed in ``.dropped``. Arms must read ABBA or BAAB over slots 0..3.
    """
    samples = list(samples)
    cmps = {s.get("cmp") for s in samples}
    if len(cmps) > 1:
        raise BadArgument(
            f"samples: pair_ratios takes one comparison, got {sorted(map(str, cmps))}"
        )
    slots: dict[int, dict[int, Mapping[str, Any]]] = {}
    seen: set[int] = set()
    for s in samples:
        p, k = int(s["pair"]), int(s["slot"])
        seen.add(p)
        if not s.get("excluded", False):
            slots.setdefault(p, {})[k] = s  # later records overwrite: a re-measure wins
    out, dropped = [], {}
    for p in sorted(seen):
        got = slots.get(p, {})
        missing = [k for k in range(4) if k not in got]
        if missing:
            dropped[p] = f"slot(s) {', '.join(map(str, missing))} missing or excluded"
            continue
        recs = [got[k] for k in range(4)]
        order = "".join(str(r["arm"]) for r in recs)
        if order not in ("ABBA", "BAAB"):
            cmp_id = next(iter(cmps))
            raise BadArgument(
                f"samples: pair {p} of {cmp_id!r} has arms {order!r} (need ABBA or BAAB)"
            )
        ms = [float(r["ms"]) for r in recs]
        if not all(math.isfinite(x) and x > 0 for x in ms):
            dropped[p] = f"non-positive or non-finite time in {ms}"
            continue
        a = tuple(x for x, arm in zip(ms, order, strict=True) if arm == "A")
        b = tuple(x for x, arm in zip(ms, order, strict=True) if arm == "B")
        flagged = any(bool(r.get("flagged", False)) for r in recs)
        out.append(PairRatio(p, sum(b) / sum(a), a, b, order, recs[0].get("t"), flagged))
    return PairRatios(out, dropped)


def _check_conf(conf: float) -> None:
    if not 0.0 < conf < 1.0:
        raise BadArgument(f"conf must be in (0, 1), got {conf!r}")


def min_pairs(conf: float = DEFAULT_CONF) -> int:
    """Fewest values for which a distribution-free CI of the median exists at ``conf`` (6 at 95 %)."""
    _check_conf(conf)
    n = 1
    while 1.0 - 2.0 * 0.5**n < conf:
        n += 1
    return n


class MedianCI(NamedTuple):
    median: float
    low: float
    high: float
    coverage: float  # exact coverage of [low, high] for continuous i.i.d. data; >= conf
    n: int


def median_ci(values: Sequence[float], conf: float = DEFAULT_CONF) -> MedianCI:
    """Median and distribution-free CI [x_(k), x_(n+1-k)] (largest k with coverage >= conf).

    n < min_pairs(conf): low = -inf, high = +inf, coverage 1 (nothing can be said).
    n == 0: median is NaN as well.
    """
    _check_conf(conf)
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = int(x.size)
    if n == 0:
        return MedianCI(math.nan, -math.inf, math.inf, 1.0, 0)
    med = float(np.median(x))
    k, cov = _order_index(n, conf)
    if k == 0:
        return MedianCI(med, -math.inf, math.inf, 1.0, n)
    return MedianCI(med, float(x[k - 1]), float(x[n - k]), cov, n)


@functools.lru_cache(maxsize=1024)
def _order_index(n: int, conf: float) -> tuple[int, float]:
    """(k, coverage) of the CI [x_(k), x_(n+1-k)], 1-based; (0, 1.0) when none reaches conf."""
    # coverage(k) = P(k <= Bin(n, 1/2) <= n-k) = 1 - 2 P(Bin <= k-1), decreasing in k
    ks = np.arange(1, n // 2 + 1)
    cov = 1.0 - 2.0 * sps.binom.cdf(ks - 1, n, 0.5)
    ok = ks[cov >= conf]
    if ok.size == 0:
        return 0, 1.0
    k = int(ok.max())
    return k, float(cov[k - 1])


def ci_half_width(
    ratios: Sequence[float] | Sequence[PairRatio], conf: float = DEFAULT_CONF
) -> float:
    """Half the CI width relative to the median, (high - low) / (2·median); inf below min_pairs.

    The adaptive mode adds pairs until this is at most DEFAULT_TARGET (0.5 %).
    """
    c = median_ci(_as_values(ratios), conf)
    if not math.isfinite(c.low) or not math.isfinite(c.high):
        return math.inf
    return (c.high - c.low) / (2.0 * c.median)


def _as_values(ratios: Sequence[float] | Sequence[PairRatio]) -> list[float]:
    vals = [r.ratio if isinstance(r, PairRatio) else float(r) for r in ratios]
    bad = [v for v in vals if not (math.isfinite(v) and v > 0)]
    if bad:
        raise BadArgument(f"ratios must be positive and finite, got {bad[:3]}")
    return vals


@dataclass
class Verdict:
    """Result of comparing B against A from pair ratios B/A. Ratios < 1 favour B."""

    verdict: str
    n: int
    median: float
    ci_low: float
    ci_high: float
    coverage: float
    wilcoxon_p: float | None
    k_faster: int
    m: float
    conf: float
    reason: str
    more_pairs: int | None = None
    dropped: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: non-finite floats become None (from_dict restores them)."""
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = None
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Verdict:
        names = {f.name for f in fields(cls)}
        missing = [
            f.name
            for f in fields(cls)
            if f.name not in d and f.name not in ("more_pairs", "dropped")
        ]
        if missing:
            raise BadArgument(f"verdict dict lacks {', '.join(missing)}")
        kw = {k: v for k, v in d.items() if k in names}
        if kw["verdict"] not in VERDICTS:
            raise BadArgument(f"verdict {kw['verdict']!r} is not one of {VERDICTS}")
        kw["median"] = math.nan if kw["median"] is None else kw["median"]
        kw["ci_low"] = -math.inf if kw["ci_low"] is None else kw["ci_low"]
        kw["ci_high"] = math.inf if kw["ci_high"] is None else kw["ci_high"]
        return cls(**kw)


def _wilcoxon_p(logs: np.ndarray, conf: float) -> float | None:
    """Two-sided Wilcoxon signed-rank p of log-ratios against 0; None when n < min_pairs(conf)
    (the exact test's smallest p, 2^(1-n), could not go below 1-conf anyway)."""
    if logs.size < min_pairs(conf):
        return None
    if not np.any(logs != 0.0):
        return 1.0  # all pairs exactly equal: no evidence either way
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # scipy warns about ties/zeros and switches to normal approx
        return float(sps.wilcoxon(logs).pvalue)


def _more_pairs(x: np.ndarray, c: MedianCI, m: float, conf: float) -> int | None:
    """Estimate of the extra pairs that would likely turn AMBIGUOUS into a verdict.

    Assumes the median stays where it is and each side of the CI shrinks like 1/√n. The side
    that matters: the upper one when the median is at most 1-m (aiming at FASTER), the lower one
    when at least 1+m (SLOWER), both when inside the band (SAME). Below min_pairs the sides come
    from the MAD (asymptotic CI of a median). None when the median sits on a boundary or the
    estimate exceeds MAX_MORE_PAIRS.
    """
    n, med = c.n, c.median
    nmin = min_pairs(conf)
    if n < nmin:
        if n < 2:
            return nmin - n
        sigma = 1.4826 * float(np.median(np.abs(x - med)))
        z = float(sps.norm.ppf(0.5 + conf / 2))
        lo_side = hi_side = z * _Z_SE_MEDIAN * sigma / math.sqrt(n)
    else:
        lo_side, hi_side = med - c.low, c.high - med
    if med <= 1 - m:
        factor = (hi_side / (1 - med)) ** 2
    elif med >= 1 + m:
        factor = (lo_side / (med - 1)) ** 2
    else:
        gap_lo, gap_hi = med - (1 - m), (1 + m) - med
        if gap_lo <= 0 or gap_hi <= 0:
            return None
        factor = max((lo_side / gap_lo) ** 2, (hi_side / gap_hi) ** 2)
    more = max(math.ceil(n * factor) - n, 1, nmin - n)
    return None if more > MAX_MORE_PAIRS else more


def compare(
    ratios: Sequence[float] | Sequence[PairRatio], m: float = DEFAULT_M, conf: float = DEFAULT_CONF
) -> Verdict:
    """Verdict on pair ratios B/A (see the module docstring for the rules)."""
    try:
        m = float(m)
    except (TypeError, ValueError):
        raise BadArgument(f"m (minimum effect) must be a number, got {m!r}") from None
    if not 0.0 <= m < 0.5:
        raise BadArgument(f"m (minimum effect) must be in [0, 0.5), got {m!r}")
    vals = _as_values(ratios)
    dropped = len(getattr(ratios, "dropped", {}))
    x = np.sort(np.asarray(vals, dtype=np.float64))
    c = median_ci(x, conf)
    n = c.n
    p = _wilcoxon_p(np.log(x), conf)
    k = int(np.sum(x < 1.0))
    lo_m, hi_m = 1.0 - m, 1.0 + m
    pct = f"{conf * 100:g} %"
    ci = (  # below min_pairs the CI is (-inf, inf): say so, never print "inf"
        f"[{c.low:.4f}, {c.high:.4f}] (exact coverage {c.coverage * 100:.1f} %)"
        if math.isfinite(c.low) and math.isfinite(c.high)
        else "n/a (too few pairs)"
    )
    facts = (
        f"median ratio B/A {c.median:.4f} ({(c.median - 1) * 100:+.2f} %), {pct} CI {ci}, "
        f"{k} of {n} pairs favour B, Wilcoxon p = {'n/a' if p is None else f'{p:.2g}'}"
        + (f", {dropped} pair(s) dropped" if dropped else "")
    )
    more = None
    if n == 0:
        verdict, why = "AMBIGUOUS", "no complete pairs"
        facts = f"{dropped} pair(s) dropped" if dropped else "no samples"
    elif n < min_pairs(conf):
        verdict = "AMBIGUOUS"
        why = f"only {n} pair(s): a distribution-free {pct} CI needs at least {min_pairs(conf)}"
    elif c.high < 1.0 and c.median <= lo_m:
        verdict, why = (
            "FASTER",
            f"B is faster: the CI lies entirely below 1 and the median is <= {lo_m:.4f} (1 - m)",
        )
    elif c.low > 1.0 and c.median >= hi_m:
        verdict, why = (
            "SLOWER",
            f"B is slower: the CI lies entirely above 1 and the median is >= {hi_m:.4f} (1 + m)",
        )
    elif c.low >= lo_m and c.high <= hi_m:
        verdict, why = (
            "SAME",
            f"no effect of m = {m * 100:g} % or more: the whole CI lies inside [{lo_m:.4f}, {hi_m:.4f}]",
        )
    else:
        verdict = "AMBIGUOUS"
        if c.low <= 1.0 <= c.high:
            why = "the CI contains 1"
        else:
            why = f"the CI excludes 1 but the median is within m = {m * 100:g} % of 1"
        why += f" and is not inside [{lo_m:.4f}, {hi_m:.4f}]"
    if verdict == "AMBIGUOUS":
        more = _more_pairs(x, c, m, conf)
        why += (
            f"; about {more} more pair(s) would likely settle it"
            if more is not None
            else f"; more than {MAX_MORE_PAIRS} more pairs would be needed (the median sits near a boundary)"
        )
    return Verdict(
        verdict,
        n,
        c.median,
        c.low,
        c.high,
        c.coverage,
        p,
        k,
        m,
        conf,
        f"{why}; {facts}",
        more,
        dropped,
    )


def should_stop(
    ratios: Sequence[float] | Sequence[PairRatio],
    target: float = DEFAULT_TARGET,
    conf: float = DEFAULT_CONF,
) -> bool:
    """Adaptive-mode stopping rule: the CI half-width is at most ``target`` of the median."""
    return ci_half_width(ratios, conf) <= target


# ----------------------------------------------------------------------------- recommendation

DECISIONS = ("cooperative", "scalar", "inconclusive")


@dataclass
class Recommendation:
    """Per-kernel choice of reader. ``arm`` is the variant to use: B for "cooperative", A for
    "scalar", and A for "inconclusive" too (the status quo stays until measured better)."""

    kernel: str
    decision: str
    arm: str
    rule: str
    evidence: list[str] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Recommendation:
        try:
            return cls(**{f.name: d[f.name] for f in fields(cls)})
        except KeyError as e:
            raise BadArgument(f"recommendation dict lacks {e.args[0]!r}") from None


def rule_text(m: float = DEFAULT_M, conf: float = DEFAULT_CONF) -> str:
    return (
        "Take the cooperative reader (B) only if it is FASTER in at least one expert set and "
        "SLOWER in none; keep the scalar reader (A) if it is SLOWER in any set or SAME in every "
        "set; otherwise inconclusive (scalar stays; measure more pairs). Per set, on the pair "
        f"ratios B/A with m = {m * 100:g} %: FASTER = the distribution-free {conf * 100:g} % CI of "
        f"the median lies entirely below 1 and the median is <= {1 - m:.4f}; SLOWER = the CI lies "
        f"entirely above 1 and the median is >= {1 + m:.4f}; SAME = the CI lies inside "
        f"[{1 - m:.4f}, {1 + m:.4f}]; AMBIGUOUS otherwise."
    )


def recommend(
    kernel: str, verdicts: Mapping[str, Verdict], a: str = "b3-scalar", b: str = "b3-coop"
) -> Recommendation:
    """Combine one kernel's verdicts per expert set (e.g. {"hot": v, "rotating": v}).

    Conservative by construction: one SLOWER set vetoes the cooperative reader, and AMBIGUOUS
    sets never count as evidence for it (they are named as a caution when B wins elsewhere).
    """
    if not verdicts:
        raise BadArgument(f"verdicts for kernel {kernel!r} are empty: nothing to recommend from")
    vs = {name: v.verdict for name, v in verdicts.items()}
    ms = sorted({v.m for v in verdicts.values()})
    confs = sorted({v.conf for v in verdicts.values()})
    rule = rule_text(ms[0], confs[0])
    if len(ms) > 1 or len(confs) > 1:
        rule += f" (the sets used different thresholds: m in {ms}, conf in {confs})"
    evidence = [f"{name}: {v.verdict} ({v.reason})" for name, v in verdicts.items()]
    labels = list(vs.values())
    if "SLOWER" in labels:
        decision = "scalar"
        evidence.append(
            f"scalar: B is SLOWER in {', '.join(k for k, x in vs.items() if x == 'SLOWER')}"
        )
    elif "FASTER" in labels:
        decision = "cooperative"
        amb = [k for k, x in vs.items() if x == "AMBIGUOUS"]
        evidence.append(
            f"cooperative: B is FASTER in {', '.join(k for k, x in vs.items() if x == 'FASTER')} and SLOWER nowhere"
        )
        if amb:
            evidence.append(
                f"caution: {', '.join(amb)} AMBIGUOUS; a slowdown there is not ruled out"
            )
    elif all(x == "SAME" for x in labels):
        decision = "scalar"
        evidence.append("scalar: no set shows an effect of m or more (SAME everywhere)")
    else:
        decision = "inconclusive"
        amb = [k for k, x in vs.items() if x == "AMBIGUOUS"]
        evidence.append(
            f"inconclusive: {', '.join(amb)} AMBIGUOUS and no set FASTER or SLOWER; scalar stays"
        )
    return Recommendation(
        kernel, decision, b if decision == "cooperative" else a, rule, evidence, vs
    )
