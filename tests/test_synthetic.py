"""Synthetic data: realistic ranges, never zeros, reproducible per seed and different across seeds."""

import numpy as np
import pytest

from workbench.core.errors import BadArgument
from workbench.data.synthetic import activations, expert_weights, routing


def test_expert_weights_ranges_and_shapes():
    w = expert_weights(seed=11, K=128, N=64, experts=4)
    assert w.q.dtype == np.uint8 and w.q.shape == (4, 128, 64)
    assert w.scales.dtype == np.float16 and w.scales.shape == (4, 4, 64)
    assert w.zeros.dtype == np.uint8 and w.zeros.shape == (4, 4, 64)
    assert w.q.max() == 15 and w.q.min() == 0 and len(np.unique(w.q)) == 16
    assert w.zeros.max() == 15 and len(np.unique(w.zeros)) == 16
    s = w.scales.astype(np.float64)
    assert s.min() >= 1e-3 * 0.999 and s.max() <= 1e-2 * 1.001
    # log-uniform: about half the scales lie below the geometric mean sqrt(1e-3 * 1e-2)
    assert 0.4 < np.mean(s < np.sqrt(1e-5)) < 0.6
    # independent draws: q and zeros are not the same stream
    assert not np.array_equal(w.q[:, :4, :], w.zeros)


def test_same_seed_same_data_different_seed_differs():
    a, b, c = (expert_weights(seed, 64, 32, 2) for seed in (5, 5, 6))
    for field in ("q", "scales", "zeros"):
        assert np.array_equal(getattr(a, field), getattr(b, field))
        assert not np.array_equal(getattr(a, field), getattr(c, field))
    assert np.array_equal(activations(3, 256), activations(3, 256))
    assert not np.array_equal(activations(3, 256), activations(4, 256))
    r1, r2, r3 = routing(9, 512, 10), routing(9, 512, 10), routing(10, 512, 10)
    assert np.array_equal(r1.ids, r2.ids) and np.array_equal(r1.rw, r2.rw)
    assert not (np.array_equal(r1.ids, r3.ids) and np.array_equal(r1.rw, r3.rw))


def test_activations_are_standard_normal_fp16():
    x = activations(1, 4096)
    assert x.dtype == np.float16 and x.shape == (4096,)
    assert abs(float(x.astype(np.float64).mean())) < 0.1
    assert 0.9 < float(x.astype(np.float64).std()) < 1.1
    assert np.count_nonzero(x) > 4000


def test_routing_distinct_ids_and_softmax_weights():
    for seed in range(20):
        r = routing(seed, experts=16, top_k=10)
        assert r.ids.dtype == np.int32 and r.ids.shape == (10,)
        assert len(set(r.ids.tolist())) == 10
        assert r.ids.min() >= 0 and r.ids.max() < 16
        assert r.rw.dtype == np.float32 and (r.rw > 0).all()
        assert abs(float(r.rw.astype(np.float64).sum()) - 1.0) < 1e-6
        assert len(np.unique(r.rw)) > 1, "weights come from random logits, not uniform"


def test_tiny_shapes_are_never_all_zero():
    for seed in range(50):
        w = expert_weights(seed, K=32, N=1, experts=1)
        assert w.q.any() and w.zeros.any()
        assert activations(seed, 1).any()


def test_streams_are_independent_of_each_other():
    # the same seed feeds weights, activations and routing from separate streams
    x = activations(7, 64).astype(np.float64)
    q = expert_weights(7, 64, 1, 1).q[0, :, 0].astype(np.float64)
    assert abs(np.corrcoef(x, q)[0, 1]) < 0.5


@pytest.mark.parametrize(
    "call,pattern",
    [
        (lambda: expert_weights(1, 48, 32, 2), r"K=48 is not a multiple of group=32"),
        (lambda: expert_weights(1, 64, 0, 2), r"N=0"),
        (lambda: expert_weights(-1, 64, 32, 2), r"seed=-1"),
        (lambda: activations(1, -4), r"K=-4"),
        (lambda: routing(1, 8, 9), r"top_k=9 exceeds experts=8"),
        (lambda: routing(1.5, 8, 2), r"seed=1.5"),
    ],
)
def test_errors_name_argument_and_value(call, pattern):
    with pytest.raises(BadArgument, match=pattern):
        call()
