"""float64 reference against an independent naive computation (plain Python loops, exact sums)."""

import math

import numpy as np
import pytest
import torch

from workbench.core.errors import BadArgument
from workbench.data.reference import (
    rel_l2,
    w2_reference,
    w13_reference,
    worst_element,
)

TOP_K, K, N = 3, 64, 48


def fresh(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(K).astype(np.float16)
    w13 = (rng.standard_normal((TOP_K, K, N)) * 0.05).astype(np.float16)
    w2 = (rng.standard_normal((TOP_K, N // 2, 40)) * 0.05).astype(np.float16)
    logits = rng.standard_normal(TOP_K)
    rw = (np.exp(logits) / np.exp(logits).sum()).astype(np.float32)
    return x, w13, w2, rw


def naive_w13(x, w):
    gate, up, inter = [], [], []
    for j in range(w.shape[0]):
        gj, uj, ij = [], [], []
        for c in range(w.shape[2] // 2):
            g = math.fsum(float(w[j, k, c]) * float(x[k]) for k in range(len(x)))
            u = math.fsum(float(w[j, k, c + w.shape[2] // 2]) * float(x[k]) for k in range(len(x)))
            gj.append(g)
            uj.append(u)
            ij.append(g / (1.0 + math.exp(-g)) * u)
        gate.append(gj)
        up.append(uj)
        inter.append(ij)
    return np.array(gate), np.array(up), np.array(inter)


def naive_w2(inter, w, rw):
    y = []
    for n in range(w.shape[2]):
        terms = []
        for j in range(w.shape[0]):
            s = math.fsum(float(w[j, k, n]) * float(inter[j, k]) for k in range(w.shape[1]))
            terms.append(float(rw[j]) * s)
        y.append(math.fsum(terms))
    return np.array(y)


@pytest.mark.parametrize("seed", [1, 2])
def test_w13_matches_naive(seed):
    x, w13, _, _ = fresh(seed)
    r = w13_reference(x, w13)
    gate, up, inter = naive_w13(x, w13)
    np.testing.assert_allclose(r.gate, gate, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(r.up, up, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(r.inter_exact, inter, rtol=1e-12, atol=1e-15)
    assert r.inter_fp16.dtype == np.float16 and r.inter_fp16.shape == (TOP_K, N // 2)
    # one rounding of the exact value; the naive value rounds to the same FP16 number
    np.testing.assert_array_equal(r.inter_fp16, inter.astype(np.float16))
    assert np.abs(r.inter_exact).max() > 1e-3, "data should not be degenerate"


@pytest.mark.parametrize("seed", [3, 4])
def test_w2_matches_naive(seed):
    x, w13, w2, rw = fresh(seed)
    inter = w13_reference(x, w13).inter_fp16
    r = w2_reference(inter, w2, rw)
    y = naive_w2(inter, w2, rw)
    np.testing.assert_allclose(r.y, y, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(r.y_fp16, y.astype(np.float16))
    assert r.y.shape == (40,) and r.y_fp16.dtype == np.float16


def test_accepts_cpu_torch_tensors():
    x, w13, _, _ = fresh(6)
    r1 = w13_reference(torch.from_numpy(x), torch.from_numpy(w13))
    r2 = w13_reference(x, w13)
    np.testing.assert_array_equal(r1.inter_exact, r2.inter_exact)


def test_rel_l2_and_worst_element():
    rng = np.random.default_rng(7)
    want = rng.standard_normal((4, 5))
    got = want.copy()
    got[2, 3] += 0.5
    got[0, 1] -= 0.1
    assert rel_l2(got, want) == pytest.approx(math.hypot(0.5, 0.1) / np.linalg.norm(want))
    w = worst_element(got, want)
    assert w.index == (2, 3) and w.got == got[2, 3] and w.want == want[2, 3]
    assert w.abs_err == pytest.approx(0.5)
    idx, g, r, err = w  # unpacks as the tuple (index, got, want, abs err)
    assert idx == (2, 3)
    got[1, 1] = np.nan
    assert worst_element(got, want).index == (1, 1)
    assert worst_element(got, want).abs_err == math.inf
    assert rel_l2(np.zeros(3), np.zeros(3)) == 0.0
    assert rel_l2(np.ones(3), np.zeros(3)) == math.inf
    assert rel_l2(want, want) == 0.0


def test_errors_name_argument_and_value():
    x, w13, w2, rw = fresh(8)
    with pytest.raises(BadArgument, match=r"x must be float16, got float32"):
        w13_reference(x.astype(np.float32), w13)
    with pytest.raises(BadArgument, match=r"w K=64 does not match x K=32"):
        w13_reference(x[:32], w13)
    with pytest.raises(BadArgument, match=r"w N=47 must be even"):
        w13_reference(x, w13[:, :, :47])
    with pytest.raises(BadArgument, match=r"w must have 3 dims, got shape \(64, 48\)"):
        w13_reference(x, w13[0])
    inter = w13_reference(x, w13).inter_fp16
    with pytest.raises(BadArgument, match=r"rw must be float32, got float64"):
        w2_reference(inter, w2, rw.astype(np.float64))
    with pytest.raises(BadArgument, match=r"rw length 2 != top_k=3"):
        w2_reference(inter, w2, rw[:2])
    with pytest.raises(BadArgument, match=r"w shape \(3, 20, 40\) does not match inter shape"):
        w2_reference(inter, w2[:, :20], rw)
    with pytest.raises(BadArgument, match=r"got shape \(3,\) != want shape \(4,\)"):
        rel_l2(np.ones(3), np.ones(4))


def test_pipeline_from_synthetic_weights():
    # synthetic -> layouts.dequantize -> reference: realistic data gives finite, non-zero outputs
    from workbench.data.layouts import dequantize
    from workbench.data.synthetic import activations, expert_weights, routing

    r = routing(1, experts=6, top_k=3)
    deq = {}
    for name, (k, n) in {"w13": (128, 64), "w2": (32, 96)}.items():
        w = expert_weights(2 if name == "w13" else 3, k, n, experts=6)
        full = dequantize(*(torch.from_numpy(a) for a in (w.q, w.scales, w.zeros))).numpy()
        deq[name] = full[r.ids]
    first = w13_reference(activations(4, 128), deq["w13"])
    second = w2_reference(first.inter_fp16, deq["w2"], r.rw)
    assert np.isfinite(first.inter_fp16).all() and np.count_nonzero(first.inter_fp16) > 90
    assert np.isfinite(second.y_fp16).all() and np.count_nonzero(second.y_fp16) > 90
    assert rel_l2(second.y_fp16, second.y) < 2e-3
