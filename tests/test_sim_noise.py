"""The simulated device's default noise model is the fitted one (tests/noise_model.py, issue 45).

Seeded default-shaped runs of six workers on the simulated device (tests/serial_pool.py) are
pooled and fitted by REML (`workbench sessions pool`'s components): the fit lands on the
components the device was given (the worker, block and pair SDs of the four reader comparisons,
each inside its fit's 95 % profile interval but for at most two of the twelve: an honest device
misses about 0.6, and three or more with about 2 % chance), and on a planted device of the old
model (0.3 % per pair, 0.42 % per placement: the 0.3 % per call and per reader placement it
had) the same check fails.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest
import serial_pool
import sim_device
from noise_model import FITTED, Noise

from workbench import cli
from workbench.analysis.pool import pool_sessions
from workbench.store.session import load_session

pytestmark = pytest.mark.slow  # 4 runs of 6 workers per model: ~15 s each on the 2-core machine

SMALL = ["--hidden", "64", "--inter", "128", "--experts", "8", "--top-k", "2", "--tp", "1"]
RUN = ["--no-reference", "--no-confirm", "--no-plots", "--calls", "4", "--replays", "5",
       "--blocks", "2", "--pairs", "2", "--workers", "6", "--json"]  # fmt: skip
OLD = {cid: Noise(block=0.0042, pair=0.003) for cid in FITTED}
CHECKED = ("worker", "block", "pair")  # one board, no run effect: those are not estimable here
MISSES = 2  # of the 12 given SDs, outside their fit's 95 % interval (module docstring)


def fitted_components(tmp_path, seed: int, runs: int = 4) -> dict[str, dict]:
    sessions = []
    for i in range(runs):
        sim_device.reseed(seed + i)
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(io.StringIO()):
            code = cli.main(["ab", *SMALL, *RUN, "--sessions-dir", str(tmp_path)])
        assert code == 0
        sessions.append(load_session(json.loads(out.getvalue())["session"], nvml=False))
    pool = pool_sessions(sessions)
    # the main comparisons (a method check times their arms again, docs/DESIGN.md §5.11)
    return {
        r.id: {c.level: c for c in r.components().components} for r in pool.rows if r.role == "main"
    }


def misses(fits: dict[str, dict], model: dict[str, Noise]) -> list[str]:
    """The given SDs that lie outside their fit's interval."""
    out = []
    for cid, comps in fits.items():
        for level in CHECKED:
            c, given = comps[level], getattr(model[cid], level)
            if not c.low <= given <= c.high:
                out.append(f"{cid} {level}: given {given:.5f}, fit [{c.low:.5f}, {c.high:.5f}]")
    return out


@pytest.fixture
def device(monkeypatch):
    built = sim_device.install(monkeypatch)
    serial_pool.use(monkeypatch)
    return built


def test_the_default_device_has_the_fitted_components(device, tmp_path):
    fits = fitted_components(tmp_path, 4500)
    assert set(fits) == set(FITTED)
    assert len(misses(fits, FITTED)) <= MISSES, misses(fits, FITTED)


def test_a_device_of_the_old_model_fails_the_check(device, monkeypatch, tmp_path):
    monkeypatch.setattr(sim_device, "MODEL", OLD)
    fits = fitted_components(tmp_path, 4600)
    assert len(misses(fits, OLD)) <= MISSES  # the fit finds what this device was given...
    assert len(misses(fits, FITTED)) > 2 * MISSES  # ...which is not the H200's
