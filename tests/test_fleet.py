"""The product's word for a GPU model (workbench/analysis/fleet.py; docs/DESIGN.md §7.6, issue 48
item 5): a pool of runs from several boards, the board the unit.

On seeded pools with the H200's spread (boards 0.13 % apart, runs 0.03 %) the model's verdict,
the rule of §7.4 on the t-interval over boards, claims an effect that is not there at most 5 % of
the time and finds a 1 % one; the planted wrong method, the same rule on a t-interval over the
runs as if they were independent, claims one in most pools. The F test of the boards keeps its
1 % false alarms whether the runs' own intervals are honest or too narrow; the planted test that
reads those intervals alarms in most pools of identical boards. Then the committed H200 runs
(slow: they read 9 and 13 sessions).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats as sps

from workbench import cli
from workbench.analysis.fleet import board_level, fleet
from workbench.analysis.pool import PooledComparison, pool_sessions
from workbench.core.stats import unit_verdict
from workbench.store.session import load_session

BOARD_SD, RUN_SD = 0.0013, 0.0003  # W13 rotating on the H200 (issue 48)
M, CONF = 0.0005, 0.95  # a small m: a claim is an interval that excludes 1
POOLS = 2000


def _pool(rng, true_log=0.0, board_sd=BOARD_SD, boards=3, runs=3, ci_scale=1.0):
    """One seeded pool: each board offset by N(0, board_sd), each run by N(0, RUN_SD) around its
    board; each run's own interval +-2 RUN_SD, times ``ci_scale`` (below 1: too narrow)."""
    offset = np.repeat(rng.normal(0.0, board_sd, boards), runs)
    y = true_log + offset + rng.normal(0.0, RUN_SD, boards * runs)
    h = 2 * RUN_SD * ci_scale
    cis = [(math.exp(v - h), math.exp(v + h)) for v in y]
    keys = [f"GPU-{b}" for b in range(boards) for _ in range(runs)]
    return PooledComparison("w13/rotating", "w13", "rotating", "main", list(np.exp(y)), [], "",
                            cis, [100] * y.size, boards=keys)  # fmt: skip


def _claims(verdicts) -> float:
    """The share of intervals that exclude 1: a direction claimed, under either rule's words."""
    return float(np.mean([v.ci_high < 1.0 or v.ci_low > 1.0 for v in verdicts]))


def test_the_models_verdict_claims_no_effect_that_is_not_there_and_finds_one_that_is():
    rng = np.random.default_rng(48)
    pools = [_pool(rng) for _ in range(POOLS)]
    model = [board_level(pc, M, CONF)[0] for pc in pools]
    assert _claims(model) <= 0.06  # at most 5 % (2.5 % a side), within sampling error
    # the planted wrong interval: the runs as the unit, their boards ignored
    planted = [unit_verdict(np.log(pc.medians), M, CONF, method="boards") for pc in pools]
    assert _claims(planted) > 0.2
    real = [board_level(_pool(rng, true_log=math.log(0.99)), M, CONF)[0] for _ in range(500)]
    assert np.mean([v.verdict == "FASTER" for v in real]) > 0.95


def test_the_interval_is_scipys_t_interval_over_the_boards_and_the_pools():
    rng = np.random.default_rng(7)
    pc = _pool(rng, boards=4, runs=2)
    v = board_level(pc, M, CONF)[0]
    means = np.log(pc.medians).reshape(4, 2).mean(axis=1)
    lo, hi = sps.t.interval(CONF, 3, loc=means.mean(), scale=sps.sem(means))
    assert (v.ci_low, v.ci_high) == pytest.approx((math.exp(lo), math.exp(hi)), rel=1e-9)
    assert (v.ci_low, v.ci_high) == pytest.approx(pc.interval, rel=1e-12)  # pool's, the same
    assert v.median == pytest.approx(pc.estimate, rel=1e-12) and v.method == "boards"


def _chi2_on_claimed_intervals(pc: PooledComparison) -> float:
    """The planted wrong test of the boards: board means judged by the runs' own intervals
    (half-width / 1.96 as each run's SE), not by how the runs of a board scatter."""
    groups = pc.board_groups()
    logs = np.log(pc.medians)
    se = np.array([(math.log(hi) - math.log(lo)) / 2 / 1.96 for lo, hi in pc.cis])
    means = np.array([logs[i].mean() for i in groups.values()])
    var = np.array([np.sum(se[i] ** 2) / len(i) ** 2 for i in groups.values()])
    w = 1 / var
    grand = np.sum(w * means) / np.sum(w)
    return float(sps.chi2.sf(np.sum(w * (means - grand) ** 2), len(means) - 1))


@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_the_boards_test_keeps_its_level_whatever_the_runs_intervals_say():
    rng = np.random.default_rng(4805)
    same = [_pool(rng, board_sd=0.0, ci_scale=0.3) for _ in range(POOLS)]  # too narrow CIs
    alarms = np.mean([board_level(pc, M, CONF)[1].differ for pc in same])
    assert alarms <= 0.02  # the F test's 1 %: it reads the runs' scatter, not their intervals
    assert np.mean([_chi2_on_claimed_intervals(pc) < 0.01 for pc in same]) > 0.3  # the plant
    honest = [_pool(rng, board_sd=0.0) for _ in range(POOLS)]
    assert np.mean([board_level(pc, M, CONF)[1].differ for pc in honest]) <= 0.02
    differ = [board_level(_pool(rng), M, CONF)[1] for _ in range(500)]
    assert np.mean([b.differ for b in differ]) > 0.75  # the H200's boards: told apart in most
    pc = _pool(rng)  # the F test is scipy's one-way ANOVA
    groups = [np.log(pc.medians)[i] for i in pc.board_groups().values()]
    assert board_level(pc, M, CONF)[1].p == pytest.approx(sps.f_oneway(*groups).pvalue, rel=1e-6)


def test_boards_of_one_run_each_are_pooled_but_not_tested():
    rng = np.random.default_rng(3)
    v, b = board_level(_pool(rng, boards=3, runs=1), M, CONF)
    assert b.p is None and b.differ is None and len(b.boards) == 3 and b.runs == 3
    assert "the boards untested (no board has two runs)" in b.text(v)
    pc = _pool(rng)
    pc.medians[0] = math.nan  # a run without pairs: its board drops out, nothing is tested
    v, b = board_level(pc, M, CONF)
    assert b.p is None and v.ci_low == pytest.approx(
        math.exp(sps.t.interval(CONF, 1, *_mean_sem(np.log(pc.medians[3:]).reshape(2, 3)))[0])
    )


def _mean_sem(logs_by_board):
    means = logs_by_board.mean(axis=1)
    return means.mean(), sps.sem(means)


# ------------------------------------------------------------------------ committed sessions

SESSIONS = Path(__file__).resolve().parents[1] / "sessions"
# The nine default runs of 519ef2b: r1 (default-plots) to r4 on one H200, r6 to r10 on another.
NINE = ["20261204T034323Z_default-plots", "20261204T034541Z_default-r2",
        "20261204T034742Z_default-r3", "20261204T034943Z_default-r4",
        "20261204T035642Z_default-r6", "20261204T035812Z_default-r7",
        "20261204T035946Z_default-r8", "20261204T040114Z_default-r9",
        "20261204T040236Z_default-r10"]  # fmt: skip
# With the four of 9935dcf and cb0c04f (the same kernel sources): thirteen runs on four boards.
THIRTEEN = ["20261204T015049Z_default-plots", "20261204T015231Z_default-r2",
            "20261204T015357Z_default-r3", "20261204T024942Z_default-plots", *NINE]  # fmt: skip


def _committed(names):
    paths = [SESSIONS / n for n in names]
    if not all(p.is_dir() for p in paths):
        pytest.skip("the committed H200 sessions are not here")
    return [load_session(p, nvml=False) for p in paths]


@pytest.fixture(scope="module")
def nine():
    pool = pool_sessions(_committed(NINE))
    return pool, fleet(pool)


# id: (estimate, low, high, verdict words, boards differ, runs' intervals holding the estimate)
NINE_ROWS = {
    "w13/hot": (0.9892, 0.9882, 0.9903, "FASTER", False, 9),
    "w13/rotating": (0.9160, 0.9079, 0.9242, "FASTER", True, 4),
    "w2/hot": (1.0047, 0.9910, 1.0187, "AMBIGUOUS", False, 9),
    "w2/rotating": (1.0114, 1.0102, 1.0126, "SLOWER", False, 9),
}


@pytest.mark.slow
def test_the_nine_runs_of_519ef2b_speak_for_the_h200_over_two_boards(nine):
    pool, model = nine
    assert model.model == "NVIDIA_H200"
    assert [(k[:12], len(v)) for k, v in model.boards.items()] == [
        ("GPU-dbafddd4", 4), ("GPU-712d216e", 5)
    ]  # fmt: skip
    rows, checks = {r.id: r for r in model.results}, model.checks
    for cid, (est, lo, hi, said, differ, held) in NINE_ROWS.items():
        v = rows[cid].verdict
        assert (round(v.median, 4), round(v.ci_low, 4), round(v.ci_high, 4)) == (est, lo, hi), cid
        assert (v.words, checks[cid].differ, checks[cid].held) == (said, differ, held), cid
    assert checks["w13/rotating"].p < 1e-5  # the F test p = 1.9e-6
    # issue 48: on w13/rotating no run's interval holds the other board's estimate
    board = dict(zip(NINE, pool.rows[0].boards, strict=True))
    other = {k: e for k, e, _ in checks["w13/rotating"].boards}
    cis = next(r for r in pool.rows if r.id == "w13/rotating").cis
    for name, (lo, hi) in zip(NINE, cis, strict=True):
        (not_mine,) = [e for k, e in other.items() if k != board[name]]
        assert not lo <= not_mine <= hi, name
    recs = {r.kernel: r.decision for r in model.recommendations}
    assert recs == {"w13": "cooperative", "w2": "scalar"}


@pytest.mark.slow
def test_thirteen_runs_on_four_boards():
    model = fleet(pool_sessions(_committed(THIRTEEN)))
    assert [len(v) for v in model.boards.values()] == [3, 1, 4, 5]
    c = model.checks
    got = {
        r.id: (round(r.verdict.median, 4), round(r.verdict.ci_low, 4), round(r.verdict.ci_high, 4),
               r.verdict.words, c[r.id].differ, c[r.id].held)
        for r in model.results if r.id in NINE_ROWS
    }  # fmt: skip
    assert got == {
        "w13/hot": (0.9905, 0.9852, 0.996, "FASTER~m", True, 6),
        "w13/rotating": (0.9164, 0.9147, 0.918, "FASTER", True, 8),
        "w2/hot": (1.0058, 1.0026, 1.009, "SLOWER<m", False, 13),
        "w2/rotating": (1.0113, 1.0111, 1.0115, "SLOWER", False, 12),
    }
    recs = {r.kernel: r.decision for r in model.recommendations}
    assert recs == {"w13": "cooperative", "w2": "scalar"}


@pytest.mark.slow
def test_pool_and_export_say_it_and_refuse_one_board_for_the_model(nine, capsys, tmp_path):
    names = [str(SESSIONS / n) for n in NINE]
    assert cli.main(["sessions", "pool", *names]) == 0
    out = capsys.readouterr().out
    assert (
        "for the model NVIDIA_H200: 2 boards (GPU-dbafddd4: 4 runs; GPU-712d216e: 5 runs); it "
        "holds for 2 boards of NVIDIA_H200 (the board the unit)" in out
    )
    line = next(x for x in out.splitlines() if x.startswith("w13/rotating ") and "DIFFER" in x)
    assert "0.9160 [0.9079, 0.9242]" in line and line.split()[-1] == "4/9"
    assert "recommendation for the model NVIDIA_H200, w13: cooperative (b3-coop)" in out
    assert cli.main(["sessions", "pool", "--json", *names]) == 0
    said = json.loads(capsys.readouterr().out)["model"]
    assert said["model"] == "NVIDIA_H200" and [len(v) for v in said["boards"].values()] == [4, 5]
    rot = next(c for c in said["comparisons"] if c["id"] == "w13/rotating")
    assert (rot["boards_differ"], rot["runs_holding_estimate"], rot["df"]) == (True, 4, 1)
    assert rot["board_sd"]["low"] > 0  # the REML board SD's interval excludes 0 here
    out_file = tmp_path / "d.json"
    assert cli.main(["export", "--model", "--out", str(out_file), *names]) == 0
    (e,) = json.loads(out_file.read_text())["devices"]["NVIDIA_H200"]["shapes"].values()
    assert e["scope"] == "model"
    assert [(b["board"][:12], len(b["sessions"])) for b in e["boards"]] == [
        ("GPU-dbafddd4", 4), ("GPU-712d216e", 5)
    ]  # fmt: skip
    rot = e["layouts"]["b3"]["w13"]["sets"]["rotating"]
    assert rot["ci"] == list(nine[0].rows[3].interval) and rot["boards_differ"] is True
    capsys.readouterr()
    assert cli.main(["export", "--model", *names[:4]]) == 2  # one board's four runs
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "rests on one board (GPU-dbafddd4, 4 session(s))" in err


@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_no_word_for_a_model_from_one_board_or_from_two_models(tmp_path, capsys):
    from fixtures_sessions import write_session

    def run(seed, uuid, name="NVIDIA H200"):
        p = write_session(tmp_path / f"s{seed}", seed=seed, slug=f"fx{seed}", pairs=8, nvml=False)
        meta = json.loads((p / "session.json").read_text())
        meta["environment"]["gpu"].update(uuid=uuid, name=name)
        (p / "session.json").write_text(json.dumps(meta))
        return p

    one = [run(1, "GPU-a"), run(2, "GPU-a")]
    assert fleet(pool_sessions([load_session(p) for p in one])) is None
    mixed = [run(3, "GPU-b", "NVIDIA H100 80GB HBM3"), run(4, "GPU-c")]
    assert fleet(pool_sessions([load_session(p) for p in mixed])) is None
    assert cli.main(["sessions", "pool", *map(str, mixed)]) == 0
    assert (
        "no word for a GPU model: the sessions ran on NVIDIA_H100_80GB_HBM3, NVIDIA_H200"
        in capsys.readouterr().out
    )
    two = [run(5, "GPU-d"), run(6, "GPU-e", "NVIDIA H200 NVL")]  # one model as an engine keys it
    model = fleet(pool_sessions([load_session(p) for p in two]))
    assert model.model == "NVIDIA_H200" and list(model.boards) == ["GPU-d", "GPU-e"]
