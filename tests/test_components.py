"""Variance components per level (workbench/analysis/components.py, docs/DESIGN.md §5.10.1):
REML on nested random effects, computed by a recursion over the levels.

- the recursion's REML deviance equals the dense-matrix formula on a seeded unbalanced design
  (and a dense formula without one level does not: the comparison can fail);
- on seeded data of known components the fit lands near them, inside its intervals; a planted
  fit that leaves the block level out (blocks lumped into pairs) misses the pairs' true SD;
- on the nine default runs of 519ef2b committed under sessions/ the fit is the committed
  benchmarks/results/h200_head_519ef2b/components.json (the simulated device's noise model,
  tests/noise_model.py), whose SDs are the table of issue 45 (REML, balanced within runs, 4 runs
  on one board and 5 on the other), within rounding.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from workbench.analysis.components import (
    LEVELS,
    _codes,
    _Nested,
    _nested_labels,
    fit_components,
)

REPO = Path(__file__).resolve().parent.parent


def _design(rng, runs_per_board=(4, 5), workers=6, blocks=2, pairs=2):
    """Labels of a nested design: board, run, worker, block per pair."""
    out = {"board": [], "run": [], "worker": [], "block": []}
    run = 0
    for b, runs in enumerate(runs_per_board):
        for _ in range(runs):
            for w in range(workers):
                for k in range(blocks):
                    for _ in range(pairs):
                        for level, x in zip(out, (b, run, w, k), strict=True):
                            out[level].append(x)
            run += 1
    return out


def _simulate(rng, groups, sds):
    """Log ratios: one normal draw per group of each level (SD sds[level]) plus the pairs'."""
    n = len(groups["board"])
    y = np.full(n, 0.003) + rng.normal(0, sds["pair"], n)
    for level, labels in zip(groups, _nested_labels(list(groups.values())), strict=True):
        codes = _codes(labels)
        y += rng.normal(0, sds[level], int(codes.max()) + 1)[codes]
    return y


def _dense(y, groups, theta):
    """-2 REML log-likelihood (same constant) from the full covariance matrix."""
    n = y.size
    v = np.eye(n) * theta[-1] ** 2
    for labels, sd in zip(_nested_labels(list(groups.values())), theta, strict=False):
        c = _codes(labels)
        v += sd**2 * (c[:, None] == c[None, :])
    chol = np.linalg.cholesky(v)
    a = np.linalg.solve(chol, np.ones(n))
    b = np.linalg.solve(chol, y)
    r = b - (a @ b) / (a @ a) * a
    return 2 * np.sum(np.log(np.diag(chol))) + math.log(a @ a) + r @ r


def test_the_recursion_is_the_dense_reml_deviance():
    rng = np.random.default_rng(45)
    g = _design(rng, runs_per_board=(2, 3), workers=3, blocks=2, pairs=2)
    y = rng.normal(0, 0.5, len(g["board"]))
    model = _Nested(y, [_codes(x) for x in _nested_labels(list(g.values()))])
    for _ in range(5):
        theta = rng.uniform(0.05, 0.8, 5)
        assert model.deviance(theta)[0] == pytest.approx(_dense(y, g, theta), rel=1e-10)
    # a dense formula that leaves a level out gives another number: the check can fail
    without = {k: v for k, v in g.items() if k != "worker"}
    theta = np.array([0.3, 0.2, 0.4, 0.5, 0.1])
    assert model.deviance(theta)[0] != pytest.approx(_dense(y, without, theta[[0, 1, 3, 4]]))


@pytest.mark.slow  # two fits with profile intervals: about 7 s on the 2-core machine
def test_known_components_are_recovered_and_a_fit_without_blocks_is_not():
    rng = np.random.default_rng(4501)
    g = _design(rng, runs_per_board=(6, 6), workers=6, blocks=3, pairs=2)
    sds = {"board": 0.0, "run": 0.0, "worker": 0.1, "block": 0.3, "pair": 0.1}
    y = _simulate(rng, g, sds) / 100  # SDs in % of the log ratio, as on the H200
    fit = fit_components(y, g)
    for c in fit.components:
        assert c.low <= c.sd <= c.high
        if c.level in ("block", "pair"):  # enough groups to pin them down
            assert c.low <= sds[c.level] / 100 <= c.high, c
            assert c.sd == pytest.approx(sds[c.level] / 100, rel=0.2), c
    # plant: blocks lumped into the pairs; the pair SD absorbs the block SD and its interval
    # leaves the truth out
    lumped = fit_components(y, {k: v for k, v in g.items() if k != "block"}, intervals=True)
    pair = next(c for c in lumped.components if c.level == "pair")
    assert not pair.low <= sds["pair"] / 100 <= pair.high, pair


def test_a_level_without_replication_is_left_out():
    rng = np.random.default_rng(7)
    g = _design(rng, runs_per_board=(5,), workers=4, blocks=2, pairs=2)
    y = _simulate(rng, g, {"board": 0, "run": 0.1, "worker": 0.1, "block": 0.2, "pair": 0.1})
    fit = fit_components(y / 100, g, intervals=False)
    assert [c.level for c in fit.components] == ["run", "worker", "block", "pair"]
    assert fit.sd("board") is None


NINE = [
    "20261204T034323Z_default-plots", "20261204T034541Z_default-r2", "20261204T034742Z_default-r3",
    "20261204T034943Z_default-r4", "20261204T035642Z_default-r6", "20261204T035812Z_default-r7",
    "20261204T035946Z_default-r8", "20261204T040114Z_default-r9", "20261204T040236Z_default-r10",
]  # fmt: skip
# issue 45's table: SDs of the log ratio in %, board, run, worker, block, pair
ISSUE = {
    "w13/hot": (0, 0, 0, 0.185, 0.067),
    "w13/rotating": (0.098, 0, 0, 0.095, 0.075),
    "w2/hot": (0.125, 0, 0.110, 0.601, 0.265),
    "w2/rotating": (0, 0, 0, 0.099, 0.095),
}


def _committed() -> dict:
    """The components the noise model reads (benchmarks/results/h200_head_519ef2b)."""
    from noise_model import COMPONENTS_JSON

    return json.loads(COMPONENTS_JSON.read_text())


def test_the_committed_components_are_the_issues_table():
    doc = _committed()
    assert [Path(p).name for p in doc["sessions"]] == NINE
    for cid, want in ISSUE.items():
        got = tuple(round(doc["components"][cid][lv]["sd"] * 100, 3) for lv in LEVELS)
        assert got == pytest.approx(want, abs=0.0011), cid


@pytest.mark.slow  # nine sessions analysed, pooled and fitted with intervals: about 25 s
@pytest.mark.skipif(
    not all((REPO / "sessions" / n).is_dir() for n in NINE), reason="committed sessions"
)
def test_the_nine_default_runs_give_the_committed_components():
    """The fit of the nine is the committed file the noise model reads (SDs and intervals),
    and so the issue's table."""
    from workbench.analysis.pool import pool_sessions
    from workbench.store.session import load_session

    pool = pool_sessions([load_session(REPO / "sessions" / n, nvml=False) for n in NINE])
    rows = {r.id: r for r in pool.rows}
    kept = _committed()["components"]
    assert set(kept) == {r.id for r in pool.rows if r.role == "main"} == set(ISSUE)
    for cid in ISSUE:
        fit = rows[cid].components()
        assert fit.groups == (2, 9, 54, 108, 216)
        for c in fit.components:
            for key in ("sd", "low", "high"):
                assert getattr(c, key) == pytest.approx(kept[cid][c.level][key], abs=1e-5), (
                    cid, c.level, key,
                )  # fmt: skip
    w2r = {c.level: c for c in rows["w2/rotating"].components().components}
    assert w2r["worker"].low == 0 and 0.04 < w2r["worker"].high * 100 < 0.07


def test_a_fit_is_kept_for_the_same_pairs_and_redone_for_others(monkeypatch):
    """One process that pools the same sessions again fits them once (fit_components' cache);
    a changed ratio, label or level is another fit, and the kept one equals a fresh one."""
    from workbench.analysis import components

    rng = np.random.default_rng(55)
    g = _design(rng, runs_per_board=(3,), workers=2, blocks=2, pairs=2)
    y = list(_simulate(rng, g, {"board": 0, "run": 0.1, "worker": 0.1, "block": 0.2, "pair": 0.1}))
    calls = []
    real = components._fit
    monkeypatch.setattr(components, "_fit_cached", components.functools.lru_cache(8)(
        lambda key: calls.append(key) or real(key)))  # fmt: skip
    first = fit_components(y, g, intervals=False)
    again = fit_components(list(y), {k: list(v) for k, v in g.items()}, intervals=False)
    assert again is first and len(calls) == 1  # equal inputs: no second fit

    def sds(fit):  # without intervals low and high are NaN, which equals nothing
        return [(c.level, c.sd) for c in fit.components], fit.mean, fit.groups

    assert sds(first) == sds(real(calls[0]))  # what is kept is what a fit gives
    other = fit_components([y[0] * 1.5, *y[1:]], g, intervals=False)
    relabelled = fit_components(y, {**g, "block": [b + 1 for b in g["block"]]}, intervals=False)
    fewer = fit_components(y, {k: v for k, v in g.items() if k != "block"}, intervals=False)
    assert len(calls) == 4 and sds(other) != sds(first) and sds(fewer) != sds(first)
    assert sds(relabelled) == sds(first)  # a relabelling is a new key, the same fit
    # the interval's level and whether there are intervals are part of the key too
    wide, narrow = (fit_components(y, g, conf=c) for c in (0.95, 0.5))
    assert len(calls) == 6 and all(
        math.isfinite(c.high) or c.high == math.inf for c in wide.components
    )
    assert [c.high for c in narrow.components] != [c.high for c in wide.components]
