"""Sessions of several boards pooled with the board as the unit (workbench/analysis/pool.py):
a run samples its own board only, so the interval for the GPU model is a t-interval over the
boards' estimates, and a run's interval is judged against the runs of its own board."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.analysis.pool import PooledComparison, session_board

BOARDS, RUNS = 3, 3  # a pool: 3 boards of 3 runs each


def _pool(rng, board_sd: float, run_sd: float, boards: bool) -> PooledComparison:
    """One seeded pool around a true log-ratio of 0: each board offset by N(0, board_sd), each
    run by N(0, run_sd) around its board, each run's own interval +-2 run_sd."""
    offset = np.repeat(rng.normal(0.0, board_sd, BOARDS), RUNS)
    y = offset + rng.normal(0.0, run_sd, BOARDS * RUNS)
    cis = [(math.exp(v - 2 * run_sd), math.exp(v + 2 * run_sd)) for v in y]
    keys = [f"GPU-{b}" for b in range(BOARDS) for _ in range(RUNS)] if boards else []
    return PooledComparison("w13/rotating", "w13", "rotating", "main", list(np.exp(y)), [], "",
                            cis, boards=keys)  # fmt: skip


def _coverage(boards: bool, pools: int = 1000) -> float:
    rng = np.random.default_rng(41)
    held = 0
    for _ in range(pools):
        lo, hi = _pool(rng, 0.0013, 0.0003, boards).interval
        held += lo <= 1.0 <= hi
    return held / pools


def test_the_interval_over_boards_covers_the_models_ratio():
    """1,000 seeded pools with the H200's board spread (W13 rotating: boards 0.13 % apart, runs
    0.03 %): over boards the interval holds the model's true ratio 93-97 % of the time; taken
    over the nine runs as if they were independent (the mutant: no boards recorded), far less."""
    assert 0.93 <= _coverage(boards=True) <= 0.97
    assert _coverage(boards=False) < 0.85


def test_runs_are_judged_against_their_own_board_and_the_boards_named():
    rng = np.random.default_rng(5)
    pc = _pool(rng, 0.0013, 0.0003, boards=True)
    agreeing, judged, _ = pc.coverage()
    assert judged == BOARDS * RUNS and agreeing >= 8  # within a board the runs' intervals hold
    rows, p = pc.board_spread()
    assert [r[0] for r in rows] == ["GPU-0", "GPU-1", "GPU-2"] and [r[2] for r in rows] == [3] * 3
    assert p < 0.01
    assert pc.board_note().startswith("w13/rotating: the boards differ (GPU-0 ")
    assert pc.estimate == pytest.approx(math.exp(np.mean(np.log([r[1] for r in rows]))))
    one = _pool(rng, 0.0, 0.0003, boards=False)  # one board: as before, the run the unit
    assert one.board_spread() is None and one.board_note() is None
    assert one.coverage()[1] == BOARDS * RUNS


def _S(workers, gpu):
    """A loaded session with only workers and environment.gpu (the real dataclass: the board
    helpers read it through its accessors)."""
    from pathlib import Path

    from workbench.store.session import Session

    return Session(Path("s"), {"environment": {"gpu": gpu}}, "complete", workers=workers)


def test_a_sessions_board_is_its_workers_gpus_else_its_own():
    assert session_board(_S([{"uuid": "GPU-b"}, {"uuid": "GPU-a"}, {"uuid": "GPU-b"}], {})) == (
        "GPU-a+GPU-b"
    )
    assert session_board(_S([], {"uuid": "GPU-c"})) == "GPU-c"
    assert session_board(_S([{"uuid": None}], None)) == "?"
    assert session_board(_S([], "NVIDIA H200")) == "?"  # an older session's bare-string gpu


def test_a_session_says_how_many_boards_its_workers_sampled():
    from workbench.analysis.words import boards_text

    main = [{"round": "main", "uuid": "GPU-712d216e-9dbf"} for _ in range(6)]
    confirm = [{"round": "confirm", "uuid": "GPU-712d216e-9dbf"} for _ in range(3)]
    one = boards_text(_S(main + confirm, {}))
    assert one.startswith("6 main and 3 confirm worker processes on 1 board (GPU-712d216e)")
    assert "hold for this board" in one
    two = boards_text(
        _S([{"round": "main", "uuid": "GPU-a"}, {"round": "main", "uuid": "GPU-b"}], {})
    )
    assert two == "2 main worker processes on 2 boards (GPU-a, GPU-b)"
    assert boards_text(_S([], {"uuid": "GPU-c"})) is None  # one process: no workers to count
