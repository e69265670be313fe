"""`ab --counters`' device side on a GPU (marker gpu): ncu profiles one launch of A and one of B
through workbench.measure.counters' own program, and the document holds what ncu measured."""

from __future__ import annotations

import pytest

from workbench.data.shapes import Shape
from workbench.measure import counters, ncu

pytestmark = pytest.mark.gpu

SHAPE = Shape(64, 128, 8, 2, 1, tp=1)


@pytest.mark.parametrize("set_name", ["hot", "rotating"])
def test_ncu_profiles_a_and_b_of_both_kernels(tmp_path, set_name):
    try:
        path = ncu.find_ncu()
    except ncu.CountersUnavailable as e:
        pytest.skip(str(e))
    items = [
        counters.Item(f"{k}/{set_name}", k, set_name, side, arm, arm)
        for k in ("w13", "w2")
        for side, arm in (("A", "b3-scalar"), ("B", "b3-coop"))
    ]
    doc = counters.collect(tmp_path, SHAPE, 0, items, path, say=lambda _: None)
    got = [(x["kernel"], x["side"], x["kernel_name"]) for x in doc["launches"]]
    # ncu names a launch with its parameter list: w13_kernel(W13Params)
    assert got == [
        (i.kernel, i.side, f"{i.kernel}_kernel({i.kernel.upper()}Params)") for i in items
    ]
    for x in doc["launches"]:
        m = x["metrics"]
        assert 1e-7 < m["duration_s"] < 1e-3, m  # a tiny launch: microseconds, in seconds
        assert m["grid"] >= 1 and m["block"] >= 32 and m["registers"] > 0, m
        assert 0 < m["occupancy_pct"] <= 100 and 0 < m["issue_pct"] <= 100, m
        assert m["l2_bytes"] > 0 and x["stalls"], x
    assert (tmp_path / "counters" / f"{set_name}.csv").exists()
