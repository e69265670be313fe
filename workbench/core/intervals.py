"""The intervals of a comparison (docs/DESIGN.md §7.2, §7.3): the distribution-free CI of the
median pair ratio, and the t-interval over worker processes (or over one process's blocks).
NumPy only; the verdicts built on them are workbench.core.stats.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from workbench.core import defaults
from workbench.core.distributions import binom_half_cdf, t_quantile
from workbench.core.errors import BadArgument
from workbench.core.pairs import PairRatio

DEFAULT_CONF = defaults.CONF


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


def median_of(v: Sequence[float]) -> float:
    """``float(np.median(v))`` of a short list, the same float (signed zeros included: NumPy's
    median is a mean, which starts from +0.0), without NumPy's per-call cost: a block's median
    is taken once per block and comparison, and again per block left out (block_diagnostic)."""
    s = sorted(v)
    n, h = len(s), len(s) // 2
    if n == 0:
        return math.nan
    return s[h] + 0.0 if n % 2 else (0.0 + s[h - 1] + s[h]) / 2


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
    cov = np.array([1.0 - 2.0 * binom_half_cdf(int(k) - 1, n) for k in ks])
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


class BlockCI(NamedTuple):
    """The interval of a comparison (docs/DESIGN.md §7.3): a t-interval over its units.

    ``unit`` is "worker" when the pairs come from two or more worker processes: each worker's
    summary is the mean of its blocks' median log-ratios and the t-interval runs over the
    workers (``units`` of them), so it carries the process-to-process variance that no block
    inside one process samples. Otherwise ``unit`` is "block": the t-interval over the blocks'
    median log-ratios of one process. ``center`` is the geometric mean of the unit summaries;
    ``between_sd`` their SD (log scale); ``blocks`` counts blocks over all workers."""

    center: float
    low: float
    high: float
    blocks: int
    between_sd: float
    within_sd: float | None
    k_blocks: int
    unit: str = "block"
    units: int = 0
    k_units: int = 0


def t_interval(y: Sequence[float], conf: float = DEFAULT_CONF) -> tuple[float, float]:
    """(mean, half-width) of the Student t-interval of the mean of ``y`` at ``conf``: the one
    t-interval of the package (blocks here, sessions in workbench.analysis.pool). Fewer than
    two values: (mean, inf)."""
    _check_conf(conf)
    y = np.asarray(y, dtype=np.float64)
    if y.size < 2:
        return (float(np.mean(y)) if y.size else math.nan), math.inf
    t = t_quantile(0.5 + conf / 2, y.size - 1)
    return float(np.mean(y)), t * float(np.std(y, ddof=1)) / math.sqrt(y.size)


def block_ci(ratios: Sequence[PairRatio], conf: float = DEFAULT_CONF) -> BlockCI | None:
    """The t-interval over blocks, or None with fewer than 2 blocks.

    Each block's summary is the log of its median pair ratio; the blocks are independent
    placements, so these summaries are i.i.d. draws of (placement effect + within-block noise)
    and a t-interval on their mean covers both sources of variance (one-way random effects, the
    block as the unit). The within-block spread enters through the block summaries' own scatter.
    """
    return _block_ci(ratios, conf)


def _block_ci(ratios: Sequence[PairRatio], conf: float, within: bool = True) -> BlockCI | None:
    """block_ci; ``within=False`` leaves out the within-block SD (None), which no verdict reads."""
    _check_conf(conf)
    by: dict[tuple[int, int], list[float]] = {}
    for r in ratios:
        if r.block is not None:
            key = (-1 if r.worker is None else r.worker, r.block)
            by.setdefault(key, []).append(math.log(r.ratio))
    workers: dict[int, list[float]] = {}
    for (wk, _), v in by.items():
        workers.setdefault(wk, []).append(median_of(v))
    if len(workers) >= 2:  # the worker process is the unit (docs/DESIGN.md §7.3)
        y = np.array([float(np.mean(v)) for v in workers.values()])
        unit = "worker"
    elif len(by) >= 2:
        y = np.array([median_of(v) for v in by.values()])
        unit = "block"
    else:
        return None
    blocks_y = np.array([median_of(v) for v in by.values()])
    nb = len(by)
    sd = float(np.std(y, ddof=1))
    center, half = t_interval(y, conf)
    w = None
    if within:
        resid = [x - float(np.mean(v)) for v in by.values() if len(v) > 1 for x in v]
        dof = sum(len(v) - 1 for v in by.values())
        w = math.sqrt(sum(r * r for r in resid) / dof) if dof > 0 else None
    k = int(np.sum(blocks_y < 0.0))
    return BlockCI(
        math.exp(center), math.exp(center - half), math.exp(center + half), nb, sd, w, k,
        unit, int(y.size), int(np.sum(y < 0.0)),
    )  # fmt: skip
