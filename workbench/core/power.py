"""The power of the block-level interval (docs/DESIGN.md §7.3, §5.8): the smallest effect a run
of B blocks detects, given how much its block summaries scatter. The calibration reports it
beside the smallest effect that clears m; `stats.compare` records it with every verdict.

Standard library only (the noncentral t comes from workbench.core.distributions).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from workbench.core import defaults
from workbench.core.distributions import nct_sf, t_quantile


def detectable_effect(
    between_sd: float | None, blocks: int, conf: float = defaults.CONF, power: float = 0.95
) -> float | None:
    """Smallest relative effect whose block-level interval (§7.3) excludes 1 in at least
    ``power`` of runs, for a run of ``blocks`` blocks whose block summaries scatter with SD
    ``between_sd`` (log scale).

    The interval excludes 1 on the effect's side when ``ȳ / (s/√B) > t_{B-1}``; with a true
    effect δ that statistic is noncentral t with B-1 degrees of freedom and noncentrality
    δ√B/σ, so δ is where its survival at the critical value reaches ``power`` (nct_sf;
    the far tail is ignored). σ is taken to be the observed SD. None below two blocks or
    without a spread."""
    if between_sd is None or not math.isfinite(between_sd) or blocks < 2 or between_sd <= 0:
        return None
    dof = blocks - 1
    crit = t_quantile(0.5 + conf / 2, dof)

    def short(d: float) -> float:  # power missing at noncentrality d (falls as d grows)
        return power - nct_sf(crit, dof, d)

    # bracket around the normal approximation crit + z_power, then Illinois regula falsi
    guess = crit + NormalDist().inv_cdf(power)
    lo, hi = max(0.0, guess - 2.0), guess + 2.0
    f_lo, f_hi = short(lo), short(hi)
    while f_hi > 0 and hi < 1e3:
        lo, f_lo, hi = hi, f_hi, hi * 2.0
        f_hi = short(hi)
    side = 0
    nc = hi
    for _ in range(100):
        nc = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        f = short(nc)
        if abs(f) < 1e-12 or hi - lo < 1e-12:
            break
        if f > 0:
            lo, f_lo = nc, f
            if side == -1:
                f_hi /= 2.0
            side = -1
        else:
            hi, f_hi = nc, f
            if side == 1:
                f_lo /= 2.0
            side = 1
    return math.expm1(nc * between_sd / math.sqrt(blocks))
