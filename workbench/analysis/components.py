"""Where the noise is: variance components of the log pair ratio per level (board, run, worker,
block, pair), fitted by REML to replicate sessions (docs/DESIGN.md §5.10.1, §7.6).

The model of one comparison over runs: ``log r = mu + b_board + u_run + v_worker + w_block + e``,
each a normal draw of its own SD, nested (a run on one board, a worker in one run, a block in one
worker, pairs in one block). REML (restricted maximum likelihood) fits the five SDs; each gets a
profile-likelihood interval: the SDs whose REML deviance, the others refitted, lies within the
chi-square(1) quantile of the minimum (a level at 0 gets a lower bound of 0).

Nesting makes the likelihood a recursion over the levels, O(pairs) per evaluation: a group's
covariance is its children's, block-diagonal, plus ``sd**2`` times the all-ones matrix, so its
log-determinant and the forms 1'V^-1 1, 1'V^-1 y and y'V^-1 y follow from its children's by the
Sherman-Morrison formula. Unbalanced designs (4 runs on one board, 5 on the other) need nothing
more.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from workbench.core.errors import BadArgument

LEVELS = ("board", "run", "worker", "block", "pair")
_SCALE = 100.0  # fit in percent of the log-ratio: SDs of order 0.1-1, a well-scaled problem


@dataclass(frozen=True)
class Component:
    """One level's SD of the log pair ratio (≈ relative SD), and its profile interval."""

    level: str
    sd: float
    low: float
    high: float


@dataclass(frozen=True)
class Fit:
    """The REML fit of one comparison: its components (LEVELS order), the mean log-ratio, the
    number of pairs and how many groups each level has."""

    components: tuple[Component, ...]
    mean: float
    pairs: int
    groups: tuple[int, ...]

    def sd(self, level: str) -> float | None:
        """The SD of ``level``; None where the fit left it out (not estimable)."""
        return next((c.sd for c in self.components if c.level == level), None)


def _codes(labels: Sequence[object]) -> np.ndarray:
    index: dict[object, int] = {}
    return np.array([index.setdefault(x, len(index)) for x in labels], dtype=np.int64)


class _Nested:
    """The REML deviance of a nested random-effects model (see the module docstring)."""

    def __init__(self, y: np.ndarray, groups: Sequence[np.ndarray]) -> None:
        self.y = y
        # per level above the pairs (outermost first): each child's parent group id
        self.parents: list[np.ndarray] = []
        child = np.arange(y.size)
        for g in reversed(groups):  # innermost level first
            parent = np.zeros(int(child.max()) + 1, dtype=np.int64)
            parent[child] = g
            self.parents.append(parent)
            child = g
        self.top = int(child.max()) + 1

    def deviance(self, theta: np.ndarray) -> tuple[float, float]:
        """(-2 REML log-likelihood up to a constant, the GLS mean) at SDs ``theta`` (outermost
        level first, the pairs' last)."""
        var_e = max(float(theta[-1]) ** 2, 1e-12)
        logdet = np.full(self.y.size, math.log(var_e))
        s = np.full(self.y.size, 1.0 / var_e)
        t = self.y / var_e
        q = self.y * self.y / var_e
        for parent, sd in zip(self.parents, theta[-2::-1], strict=True):
            n = int(parent.max()) + 1
            logdet, s, t, q = (np.bincount(parent, x, n) for x in (logdet, s, t, q))
            v = float(sd) ** 2
            d = 1.0 + v * s
            logdet = logdet + np.log(d)
            q = q - v * t * t / d
            s, t = s / d, t / d
        s_all, t_all = float(s.sum()), float(t.sum())
        dev = float(logdet.sum()) + math.log(s_all) + float(q.sum()) - t_all * t_all / s_all
        return dev, t_all / s_all


def _minimise(
    model: _Nested, x0: np.ndarray, fixed: tuple[int, float] | None
) -> tuple[float, np.ndarray]:
    from scipy.optimize import minimize

    free = [k for k in range(x0.size) if fixed is None or k != fixed[0]]

    def full(z: np.ndarray) -> np.ndarray:
        x = np.empty(x0.size)
        x[free] = z
        if fixed is not None:
            x[fixed[0]] = fixed[1]
        return x

    bounds = [(0.0, None)] * (x0.size - 1) + [(1e-6, None)]
    best = None
    starts = [x0[free]]
    if fixed is None:  # the global fit: a few starts (a level may sit at 0); a profile: warm
        starts += [np.full(len(free), 0.1), np.r_[np.full(len(free) - 1, 0.02), 0.2]]
    for z0 in starts:
        res = minimize(
            lambda z: model.deviance(full(z))[0],
            np.maximum(z0, 1e-3),
            method="L-BFGS-B",
            bounds=[bounds[k] for k in free],
        )
        if best is None or res.fun < best[0]:
            best = (float(res.fun), full(res.x))
    assert best is not None
    return best


def fit_components(
    y: Sequence[float],
    groups: Mapping[str, Sequence[object]],
    conf: float = 0.95,
    intervals: bool = True,
) -> Fit:
    """REML components of log pair ratios ``y``. ``groups``: {level: labels} for the levels above
    the pairs, outermost first (a subset of LEVELS' order), each list as long as ``y``; a label
    need only be unique within its parent group. A level without replication (one board, or
    one run per board) cannot be told from the level above it and is left out of the fit
    (``Fit.components`` lacks it). SDs come back on the log scale of ``y``; ``intervals=False``
    leaves the intervals NaN (a quicker fit).

    A fit is a pure function of its inputs and takes 50-100 ms (two dozen L-BFGS-B runs for the
    profiles): the last fits are kept, so that one process that pools the same sessions again
    (the TUI's compare and pool views, a script over replicates) fits each once."""
    key = (
        tuple(float(v) for v in y),
        tuple((str(k), tuple(v)) for k, v in groups.items()),
        float(conf),
        bool(intervals),
    )
    return _fit_cached(key)  # labels are hashable: _codes indexes them by a dict


def _fit(key: tuple) -> Fit:
    y, group_items, conf, intervals = key
    groups = dict(group_items)
    yv = np.asarray(y, dtype=np.float64) * _SCALE
    if yv.size < 3:
        raise BadArgument(f"variance components need at least 3 pairs, got {yv.size}")
    names, codes, above = [], [], 1
    for name, labels in zip(groups, _nested_labels(list(groups.values())), strict=True):
        c = _codes(labels)
        n = int(c.max()) + 1
        if n > above:  # else confounded with the level above: not estimable
            names.append(name)
            codes.append(c)
            above = n
    names.append("pair")
    model = _Nested(yv, codes)
    k = len(names)
    dev0, x = _minimise(model, np.full(k, 0.1), None)
    mean = model.deviance(x)[1] / _SCALE
    cut = NormalDist().inv_cdf(0.5 + conf / 2) ** 2  # the chi-square(1) quantile at conf

    def excess(j: int, v: float) -> float:
        start = x.copy()
        start[j] = v
        return _minimise(model, start, (j, v))[0] - dev0 - cut

    comps = []
    for j, level in enumerate(names):
        low = high = math.nan
        if intervals:
            floor = 1e-6 if level == "pair" else 0.0
            low = floor if excess(j, floor) <= 0 else _root(excess, j, floor, x[j])
            hi = max(x[j], 0.05) * 2
            while excess(j, hi) < 0 and hi < 1e3:
                hi *= 2
            high = _root(excess, j, x[j], hi) if hi < 1e3 else math.inf
        comps.append(Component(level, x[j] / _SCALE, low / _SCALE, high / _SCALE))
    sizes = tuple(int(c.max()) + 1 for c in codes) + (yv.size,)
    return Fit(tuple(comps), mean, int(yv.size), sizes)


_fit_cached = functools.lru_cache(maxsize=32)(_fit)


def _nested_labels(groups: Sequence[Sequence[object]]) -> list[list[tuple]]:
    """Each level's labels made unique within their parents: (outer label, ..., own label)."""
    return [
        [tuple(g[i] for g in groups[: k + 1]) for i in range(len(groups[k]))]
        for k in range(len(groups))
    ]


def _root(f, j: int, lo: float, hi: float) -> float:
    from scipy.optimize import brentq

    return float(brentq(lambda v: f(j, v), lo, hi, xtol=1e-4))
