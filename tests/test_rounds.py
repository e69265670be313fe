"""The order of work is data the runner walks (runner.Round), each round on the one pool, whose
outcomes come back immutable; the runner analyses the session once per round and reads that
analysis for its result (docs/DESIGN.md §5.10). On the simulated device, in this process."""

from __future__ import annotations

import dataclasses

import pytest
import sim_device

import workbench.analysis
from workbench.data.shapes import resolve_shape
from workbench.measure.abba import ProtocolConfig
from workbench.run import config, runner
from workbench.run.pool import Outcome

SHAPE = dict(hidden=64, inter=128, experts=8, top_k=2, tp=1)


def _cfg(tmp_path, **kw):
    return config.make_config(
        resolve_shape(**SHAPE), reference=False, calls=2, replays=3,
        protocol=ProtocolConfig(pairs=2, blocks=2), sessions_dir=str(tmp_path), workers=1, **kw,
    )  # fmt: skip


@pytest.fixture
def analyses(monkeypatch):
    sim_device.install(monkeypatch)
    calls = []
    real = workbench.analysis.analyse

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(workbench.analysis, "analyse", counted)
    return calls


def test_ab_walks_main_then_confirm_and_analyses_each_round_once(analyses, tmp_path):
    r = runner.Runner(_cfg(tmp_path))
    res = r.run()
    assert res.status == "complete"
    assert [o.job.round for o in r.outcomes] == ["main", "confirm"]  # one inline worker each
    assert len(analyses) == 2  # after main (the recommendation), after confirm (the result)
    assert set(res.summary["recommendations"]) == {"w13", "w2"}
    assert list(res.summary["timeline"]) == ["start", "built", "main", "analysed", "confirm", "end"]
    o = r.outcomes[0]
    assert isinstance(o, Outcome) and o.inline and o.records
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.status = "failed"  # handed back, never written into


def test_a_round_that_plans_nothing_is_passed_over(analyses, tmp_path):
    r = runner.Runner(_cfg(tmp_path, confirm=False))  # no step confirmation: nothing to plan
    res = r.run()
    assert res.status == "complete" and [o.job.round for o in r.outcomes] == ["main"]
    assert len(analyses) == 1
    assert not [c for c in res.summary["comparisons"] if c["id"].startswith("step/")]
