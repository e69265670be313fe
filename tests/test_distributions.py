"""workbench.core.distributions against scipy.stats, over seeded inputs: the same numbers."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from workbench.core import distributions as dist


@pytest.mark.parametrize("df", [*range(1, 41), 57, 99, 100, 250, 1001])
@pytest.mark.parametrize("p", [0.5, 0.6, 0.8, 0.9, 0.95, 0.975, 0.995, 0.9995, 0.05, 0.0005])
def test_t_quantile_matches_scipy(p: float, df: int) -> None:
    want = float(sps.t.ppf(p, df))
    assert dist.t_quantile(p, df) == pytest.approx(want, rel=1e-10, abs=1e-12)


def test_t_quantile_refuses_what_it_cannot_do() -> None:
    for p, df in ((0.0, 3), (1.0, 3), (0.9, 0), (0.9, 2.5)):
        with pytest.raises(ValueError, match="t_quantile"):
            dist.t_quantile(p, df)


@pytest.mark.parametrize("n", [0, 1, 2, 5, 6, 17, 64, 333, 1000])
def test_binom_half_cdf_matches_scipy(n: int) -> None:
    for k in range(-1, n + 2):
        want = float(sps.binom.cdf(k, n, 0.5))
        assert dist.binom_half_cdf(k, n) == pytest.approx(want, rel=1e-9, abs=1e-300)


def _scipy_p(d: np.ndarray) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(sps.wilcoxon(d).pvalue)


def _cases() -> list[np.ndarray]:
    """Every branch of scipy's "auto" method: exact, sign flips (ties, zeros), normal."""
    rng = np.random.default_rng(20261201)
    out = []
    for n in (1, 2, 3, 5, 8, 12, 13, 14, 20, 37, 50, 51, 80, 400):
        for shift in (0.0, 0.3, -1.2):
            x = rng.normal(shift, 1.0, n)
            out.append(x)
            if n >= 3:
                tied = np.round(x, 1)  # ties, and some zeros
                out.append(tied)
                z = x.copy()
                z[: n // 3] = 0.0  # zeros without ties
                out.append(z)
    return out


@pytest.mark.parametrize("i", range(len(_cases())))
@pytest.mark.slow  # 14 s of the fast lane on the 2-core machine
def test_wilcoxon_p_matches_scipy(i: int) -> None:
    d = _cases()[i]
    want = _scipy_p(d)
    got = dist.wilcoxon_p(d)
    if math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(want, rel=1e-9, abs=1e-15)


def test_wilcoxon_p_is_not_the_uncorrected_normal() -> None:
    """A small sample without ties takes the exact null, whose p differs from the normal one."""
    d = np.array([0.11, -0.02, 0.35, 0.27, 0.19, -0.08, 0.41, 0.05])
    exact = dist.wilcoxon_p(d)
    normal = float(sps.wilcoxon(d, method="asymptotic").pvalue)
    assert exact == pytest.approx(_scipy_p(d), rel=1e-12)
    assert abs(exact - normal) > 1e-3


# the block diagnostic's tails and the detectable effect's noncentral t (docs/DESIGN.md §7.8)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 9, 30])
def test_t_sf_matches_scipy(df):
    for t in (-7.5, -1.2, 0.0, 0.4, 1.9, 3.3, 12.0):
        assert dist.t_sf(t, df) == pytest.approx(sps.t.sf(t, df), rel=1e-9, abs=1e-14)


@pytest.mark.parametrize(("d1", "d2"), [(1, 1), (1, 5), (2, 2), (5, 6), (5, 66), (11, 120)])
def test_f_sf_matches_scipy(d1, d2):
    for f in (0.0, 0.05, 0.7, 1.0, 2.4, 9.0, 80.0):
        assert dist.f_sf(f, d1, d2) == pytest.approx(sps.f.sf(f, d1, d2), rel=1e-9, abs=1e-14)


@pytest.mark.parametrize("df", [1, 2, 3, 5, 8, 20])
def test_nct_sf_matches_scipy(df):
    rng = np.random.default_rng(df)
    for t, nc in zip(rng.uniform(0, 8, 12), rng.uniform(-2, 12, 12), strict=True):
        assert dist.nct_sf(float(t), df, float(nc)) == pytest.approx(
            sps.nct.sf(t, df, nc), abs=1e-7
        )


def test_tails_refuse_bad_degrees_of_freedom():
    with pytest.raises(ValueError, match="df"):
        dist.t_sf(1.0, 0)
    with pytest.raises(ValueError, match="degrees"):
        dist.f_sf(1.0, 0, 3)
    with pytest.raises(ValueError, match="df"):
        dist.nct_sf(1.0, 2.5, 0.0)


@pytest.mark.parametrize("b", [1, 2, 3, 5, 6, 7, 12])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 6, 15, 40, 120])
def test_binom_tail_matches_scipy(n, b):
    # P(Bin(n, 1/b) >= k) is scipy's binom.sf(k - 1, n, 1/b) (the pooled same-block check)
    for k in range(-1, n + 3):
        want = float(sps.binom.sf(k - 1, n, 1.0 / b))
        assert dist.binom_tail(k, n, b) == pytest.approx(want, rel=1e-12, abs=1e-300)
    assert dist.binom_tail(n, n, 6) == 6.0**-n  # exact: every session in the same block
    with pytest.raises(ValueError, match="binom_tail"):
        dist.binom_tail(1, 3, 0)


@pytest.mark.parametrize("q", [0.0, 0.05, 0.5, 0.95, 1.0])
@pytest.mark.parametrize("n", [0, 1, 3, 6, 10, 39])
def test_binom_cdf_matches_scipy(n, q):
    # P(Bin(n, q) <= k) is scipy's binom.cdf(k, n, q) (the pooled coverage test, q = 0.95)
    for k in range(-1, n + 2):
        want = float(sps.binom.cdf(k, n, q))
        assert dist.binom_cdf(k, n, q) == pytest.approx(want, rel=1e-12, abs=1e-15)
    with pytest.raises(ValueError, match="binom_cdf"):
        dist.binom_cdf(1, 3, 1.5)
