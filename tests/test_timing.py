"""A timing method is a field of the comparison (ComparisonSpec.timing) and a function of
workbench.measure.graphs.TIMINGS: a comparison that names another method has its replays timed
by it, and its comparison record says which (docs/ARCHITECTURE.md, measure/graphs.py)."""

from __future__ import annotations

import dataclasses

import pytest
import sim_device

from workbench.core.errors import BadArgument
from workbench.data.shapes import resolve_shape
from workbench.measure import graphs
from workbench.measure.abba import ProtocolConfig
from workbench.run import config, runner
from workbench.store.session import load_session

SHAPE = dict(hidden=64, inter=128, experts=8, top_k=2, tp=1)


def _run(tmp_path, timing=None):
    cfg = config.make_config(
        resolve_shape(**SHAPE), kernels=("w13",), sets=("hot",), reference=False,
        confirm=False, calls=2, replays=3, protocol=ProtocolConfig(pairs=1, blocks=1),
        sessions_dir=str(tmp_path), workers=1,
    )  # fmt: skip
    if timing is not None:
        cfg.comparisons = [dataclasses.replace(c, timing=timing) for c in cfg.comparisons]
    return load_session(runner.Runner(cfg).run().session_path)


def test_a_comparison_is_timed_by_the_method_it_names(monkeypatch, tmp_path):
    sim_device.install(monkeypatch)
    timed = []

    def constant(arm):  # a second method, as a plug-in would add one
        timed.append(arm.variant)
        return [0.25 + 0.25 * i for i in range(len(arm.events))]

    monkeypatch.setitem(graphs.TIMINGS, "constant", constant)
    sess = _run(tmp_path / "plugged", "constant")
    assert set(timed) == {"b3-scalar", "b3-coop"}
    assert sess.samples and all(s["replay_ms"] == [0.25, 0.5, 0.75] for s in sess.samples)
    assert sess.comparison("w13/hot")["timing"] == "constant"
    # the default method is per-replay CUDA events, and the record leaves it unsaid
    timed.clear()
    sess = _run(tmp_path / "default")
    assert timed == [] and "timing" not in sess.comparison("w13/hot")
    assert any(s["replay_ms"] != [0.25, 0.5, 0.75] for s in sess.samples)


def test_an_unknown_timing_method_is_refused_by_name(monkeypatch):
    sim_device.install(monkeypatch)
    with pytest.raises(BadArgument, match=r"timing 'cupti' is not one of events"):
        graphs.GraphArm("b3-scalar", [lambda: None], [[]], 3, graphs.Cycle(1), timing="cupti")
