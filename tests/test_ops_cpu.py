"""ops' device-side bank generation is the torch twin of layouts (the §3 contract): held bit-exact
to layouts.pack_int4 / encode_metadata here, on the CPU device."""

import pytest
import torch

from workbench.core.errors import BadArgument
from workbench.data import layouts
from workbench.data.shapes import Shape
from workbench.kernels.ops import derive_bank, make_bank, make_inputs, pack_int4_torch

SMALL = Shape(hidden=128, inter=256, experts=6, top_k=3, layers=2, tp=4)


@pytest.mark.parametrize("kernel", ["w13", "w2"])
def test_bank_matches_layouts(kernel):
    b3 = make_bank(SMALL, kernel, "b3", seed=11, device="cpu")
    b4 = make_bank(SMALL, kernel, "b4", seed=11, device="cpu")
    experts = list(range(SMALL.experts))
    q, scales, _ = b3.expert_arrays(experts)
    zeros = b3.meta.reshape(*b3.meta.shape[:2], -1, 3)[..., 2].contiguous()
    assert int(q.max()) == 15 and int(q.min()) == 0 and q.float().std() > 3  # real, not zeros
    assert torch.equal(layouts.pack_int4(q), b3.weights)
    assert torch.equal(b3.weights, b4.weights)
    assert torch.equal(layouts.encode_metadata(scales, zeros, "b3"), b3.meta)
    assert torch.equal(layouts.encode_metadata(scales, zeros, "b4"), b4.meta)
    # both layouts decode to the same weights
    assert (b3.dequantized(experts[:2]).view("u2") == b4.dequantized(experts[:2]).view("u2")).all()
    s = scales.float()
    assert s.min() >= 1e-3 * 0.999 and s.max() <= 1e-2 * 1.001


@pytest.mark.parametrize("shape", [(64, 32), (3, 96, 64), (2, 2, 32, 160)])
def test_torch_packing_is_the_layouts_packing(shape):
    # every nibble value at every position of a word: the byte-wise packing must give the same
    # int32 words as the reference, sign bit included
    q = torch.randint(0, 16, shape, generator=torch.Generator().manual_seed(5), dtype=torch.uint8)
    words = pack_int4_torch(q)
    assert words.dtype == torch.int32 and words.is_contiguous()
    assert torch.equal(words, layouts.pack_int4(q))
    assert bool((words < 0).any())


@pytest.mark.parametrize("kernel", ["w13", "w2"])
@pytest.mark.parametrize("layout", ["b4", "b3"])
def test_a_derived_bank_is_the_bank_todays_generator_makes(kernel, layout):
    # more experts than one chunk of the encoding (ops._EXPERT_CHUNK), so every chunk is seen
    shape = Shape(hidden=64, inter=128, experts=70, top_k=3, layers=2, tp=4)
    b3 = make_bank(shape, kernel, "b3", seed=23, device="cpu")
    want = make_bank(shape, kernel, layout, seed=23, device="cpu")
    got = derive_bank(b3, layout)
    assert (got.kernel, got.layout, got.K, got.N, got.experts, got.seed) == (
        want.kernel, want.layout, want.K, want.N, want.experts, want.seed
    )  # fmt: skip
    assert torch.equal(got.weights, want.weights) and torch.equal(got.meta, want.meta)
    # fresh memory, not views of the b3 bank's
    assert got.weights.data_ptr() != b3.weights.data_ptr()
    assert got.meta.data_ptr() != b3.meta.data_ptr()


def test_only_a_b3_bank_derives():
    b4 = make_bank(SMALL, "w2", "b4", seed=1, device="cpu")
    with pytest.raises(BadArgument, match="bank.layout='b4'"):
        derive_bank(b4, "b3")
    with pytest.raises(BadArgument, match="layout='b5'"):
        derive_bank(make_bank(SMALL, "w2", "b3", seed=1, device="cpu"), "b5")


def test_bank_seed_changes_content():
    a = make_bank(SMALL, "w2", "b3", seed=1, device="cpu")
    b = make_bank(SMALL, "w2", "b3", seed=2, device="cpu")
    assert not torch.equal(a.weights, b.weights)


def test_bank_rejects_unknown_layout():
    with pytest.raises(BadArgument, match="layout='b5'"):
        make_bank(SMALL, "w13", "b5", seed=1, device="cpu")


def test_inputs_are_fresh_and_poisoned():
    a = make_inputs(SMALL, "w2", seed=3, device="cpu")
    b = make_inputs(SMALL, "w2", seed=4, device="cpu")
    assert a["inter"].shape == (SMALL.top_k, SMALL.w2_k) and a["out"].isnan().all()
    assert not torch.equal(a["inter"], b["inter"]) and a["inter"].abs().sum() > 0
    assert len(set(a["ids"].tolist())) == SMALL.top_k
    assert abs(float(a["rw"].sum()) - 1) < 1e-6
