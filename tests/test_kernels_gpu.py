"""GPU tests of the kernels (marker gpu; skipped without a CUDA device)."""

from dataclasses import replace

import pytest

from workbench.data.shapes import PRESETS, valid_tps

pytestmark = pytest.mark.gpu

ALL_SHAPES = [replace(s, tp=tp) for s in PRESETS.values() for tp in valid_tps(s)]


@pytest.mark.parametrize("shape", ALL_SHAPES, ids=lambda s: f"{s.name}-tp{s.tp}")
@pytest.mark.parametrize("kernel", ["w13", "w2"])
def test_variants_identical_and_near_reference(shape, kernel):
    from workbench.measure.check import check_kernel

    rows = check_kernel(shape, kernel, seed=shape.tp, banks=2)
    assert len(rows) == 6
    for r in rows:
        assert r.fully_written, r
        assert r.graph_equal, r
        assert r.identical_to_first, r
        assert r.rel_l2 <= 2e-3, r
        assert r.rel_l2 > 0  # an fp16 output cannot equal a float64 reference exactly


@pytest.mark.parametrize("kernel", ["w13", "w2"])
def test_invalid_arguments_rejected_on_gpu(kernel):
    from workbench.kernels.build import build_variant
    from workbench.kernels.variants import parse_arm
    from workbench.measure.check import check_args

    for arm in ("b4-scalar", "b3-coop"):
        v = parse_arm(kernel, arm)
        res = check_args(kernel, v.layout, v.reader, build_variant(v).module)
        assert len(res) >= 36  # every case of argcases.cases + device_cases for this kernel
        bad = [r for r in res if not r[1]]
        assert not bad, bad


@pytest.mark.parametrize("arm", ["b3-scalar", "b3-coop"])
def test_out_of_range_ids_contribute_nothing(arm):
    """Policy: an id outside [0, E) is skipped by W2 and zeroes its W13 row."""
    import torch

    from workbench.kernels.ops import KernelOp, make_bank, make_inputs
    from workbench.kernels.variants import parse_arm

    shape = PRESETS["qwen3.8-flash-next"]
    for kernel in ("w13", "w2"):
        op = KernelOp(parse_arm(kernel, arm), shape)
        bank = make_bank(shape, kernel, "b3", seed=5)
        inp = make_inputs(shape, kernel, seed=6)
        act = inp["x"] if kernel == "w13" else inp["inter"]
        bad_ids = inp["ids"].clone()
        bad_ids[3] = shape.experts + 7
        out_bad = inp["out"].clone()
        op(act, bank, bad_ids, out_bad, rw=inp["rw"])
        if kernel == "w13":
            out_ok = inp["out"].clone()
            op(act, bank, inp["ids"], out_ok)
            assert torch.equal(out_bad[3], torch.zeros_like(out_bad[3]))
            keep = [j for j in range(shape.top_k) if j != 3]
            assert torch.equal(out_bad[keep], out_ok[keep])
        else:
            rw0 = inp["rw"].clone()
            rw0[3] = (
                0.0  # the same sum with that slot's weight zeroed: equal within fp32 order effects
            )
            out_ref = inp["out"].clone()
            op(act, bank, inp["ids"], out_ref, rw=rw0)
            assert not torch.isnan(out_bad).any()
            assert torch.allclose(out_bad.float(), out_ref.float(), rtol=2e-3, atol=1e-3)


def test_graph_replays_repeat_exactly():
    """W13 keeps no state between launches: many replays of one graph give an eager call's bits."""
    import torch

    from workbench.kernels.ops import KernelOp, make_bank, make_inputs
    from workbench.kernels.variants import parse_arm

    shape = PRESETS["qwen3.8-flash-next"]
    op = KernelOp(parse_arm("w13", "b3-coop"), shape)
    bank = make_bank(shape, "w13", "b3", seed=9)
    inp = make_inputs(shape, "w13", seed=10)
    op(inp["x"], bank, inp["ids"], inp["out"])
    first = inp["out"].clone()
    assert not torch.isnan(first).any()  # the eager call wrote all of the NaN-poisoned out
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(8):
            op(inp["x"], bank, inp["ids"], inp["out"])
    for _ in range(50):
        inp["out"].fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(inp["out"].view(torch.int16), first.view(torch.int16))
