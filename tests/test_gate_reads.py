"""The gate's reads of a block's outputs (workbench.measure.graphs): every output checked on the
device and read back at once, with the verdicts and the located difference of a read per output."""

from __future__ import annotations

import math
import types

import pytest
import torch

from workbench.measure import graphs
from workbench.measure.graphs import first_difference, loose_difference, unwritten


def _arm(seed: int, graphs_: int = 3, calls: int = 5):
    g = torch.Generator().manual_seed(seed)
    outs = [[(f"call{c}.inter", torch.randn(4, 16, generator=g).half()) for c in range(calls)]
            for _ in range(graphs_)]  # fmt: skip
    return types.SimpleNamespace(outputs=outs)


def _copy(arm):
    return types.SimpleNamespace(outputs=[[(n, t.clone()) for n, t in o] for o in arm.outputs])


def _one_by_one(ref, peer):
    """rel_l2 and the worst element as a read per output would find them (the spec)."""
    num = den = 0.0
    worst = (0.0, None)
    for g, (outs_r, outs_p) in enumerate(zip(ref.outputs, peer.outputs, strict=True)):
        for (name, tr), (_, tp) in zip(outs_r, outs_p, strict=True):
            d = (tp.double() - tr.double()).abs()
            num, den = num + float((d * d).sum()), den + float((tr.double() ** 2).sum())
            if not float(d.max()) <= worst[0]:
                worst = (float(d.max()), (g, name, int(torch.nan_to_num(d, nan=math.inf).argmax())))
    return num**0.5 / den**0.5, worst


@pytest.fixture
def reads(monkeypatch):
    """How many times the outputs were read back to the host through graphs._host."""
    count = {"n": 0}
    real = graphs._host

    def counted(flags):
        count["n"] += 1
        return real(flags)

    monkeypatch.setattr(graphs, "_host", counted)
    return count


def test_identical_outputs_pass_in_one_read(reads):
    a = _arm(1)
    assert first_difference(a, _copy(a)) is None and reads["n"] == 1
    assert not unwritten(a) and reads["n"] == 2


def test_the_first_difference_is_located_as_before(reads):
    a = _arm(2)
    b = _copy(a)
    b.outputs[1][3][1][2, 7] += 1  # graph 1, call 3
    b.outputs[2][0][1][0, 0] += 1  # a later one: not the first
    d = first_difference(a, b)
    assert (d["graph"], d["output"], d["index"], d["differing"]) == (1, "call3.inter", [2, 7], 1)
    assert d["unwritten"] is False and d["a"] == float(a.outputs[1][3][1][2, 7])
    a.outputs[0][4][1][1, 1] = float("nan")  # the poison left in A
    assert unwritten(a)
    d = first_difference(a, _copy(a))
    assert (d["graph"], d["output"], d["index"], d["unwritten"]) == (0, "call4.inter", [1, 1], True)


@pytest.mark.parametrize("nan", [False, True])
def test_loose_difference_is_the_sum_over_outputs_in_order(reads, nan):
    ref, noise = _arm(3), _arm(4)
    peer = _copy(ref)  # a peer close to the reference, one element far off
    for outs, outs_n in zip(peer.outputs, noise.outputs, strict=True):
        for (_, tp), (_, tn) in zip(outs, outs_n, strict=True):
            tp += 1e-3 * tn
    peer.outputs[2][1][1][3, 5] += 0.5
    if nan:
        peer.outputs[1][0][1][0, 2] = float("nan")
    got = loose_difference(ref, peer)
    rel, (m, (g, name, idx)) = _one_by_one(ref, peer)
    assert (got["graph"], got["output"], got["flat_index"]) == (g, name, idx)
    if nan:  # a NaN poisons the sum; the worst element is where the spec puts it
        assert math.isnan(got["rel_l2"]) and math.isnan(rel)
        assert got["max_abs_diff"] == m or math.isnan(m) and math.isnan(got["max_abs_diff"])
    else:
        assert got["rel_l2"] == rel and got["max_abs_diff"] == m
        assert (g, name, idx) == (2, "call1.inter", 3 * 16 + 5)
    assert reads["n"] == 1
