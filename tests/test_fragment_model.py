"""The tensor-core fragment mapping (tests/fragment_model.py, mirrored by awq_meta.cuh) against
a plain dot product of the dequantized weights: packing, activations, quad records and lane results;
and the kernels' own quad_meta and acc_of_lane (run on the host by tests/warp_host.cpp) against the
model's quad_source and RESULT_SLOT."""

import shutil

import numpy as np
import pytest
import torch
from cuda_toolchain import KERNELS, run_warp, warp_host_skip_reason
from fragment_model import (
    RESULT_SLOT,
    dequant_word,
    lane_activations,
    quad_source,
    warp_group_sums,
)

from workbench.data.layouts import dequantize, encode_metadata, pack_int4


def _bank(seed: int, K: int = 64, N: int = 64):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 16, (K, N), generator=gen, dtype=torch.uint8)
    scales = (torch.rand(K // 32, N, generator=gen) * 9e-3 + 1e-3).to(torch.float16)
    zeros = torch.randint(0, 16, (K // 32, N), generator=gen, dtype=torch.uint8)
    x = torch.randn(K, generator=gen).to(torch.float16)
    return q, scales, zeros, x


def test_magic_number_dequantize_is_exact_and_single_rounding():
    q, scales, zeros, _ = _bank(1)
    words = pack_int4(q).numpy().view(np.uint32)
    recs = encode_metadata(scales, zeros, "b4").numpy().view(np.uint32)  # scale | bias << 16
    w_ref = dequantize(q, scales, zeros).numpy()
    for n in range(0, 64, 5):
        tile, lane = divmod(n, 32)
        qd, t = divmod(lane, 4)
        for c in range(4):
            col = 32 * tile + 4 * qd + c
            pairs = dequant_word(int(words[1, n, c]), int(recs[1, col]))
            for p, (lo, hi) in enumerate(pairs):
                k = 32 + 8 * t + 2 * p
                assert lo == float(w_ref[k, col]) and hi == float(w_ref[k + 1, col])


def test_warp_sums_equal_the_dot_product_of_dequantized_weights():
    for seed in (2, 3):
        q, scales, zeros, x = _bank(seed)
        words = pack_int4(q).numpy().view(np.uint32)
        recs = encode_metadata(scales, zeros, "b4").numpy().view(np.uint32)
        xs = lane_activations(x.numpy())
        w = dequantize(q, scales, zeros).numpy().astype(np.float64)
        for g in range(2):
            for tile in range(2):
                got = warp_group_sums(
                    words[g, 32 * tile : 32 * tile + 32], recs[g, 32 * tile : 32 * tile + 32], xs[g]
                )
                cols = slice(32 * tile, 32 * tile + 32)
                want = w[32 * g : 32 * g + 32, cols].T @ x.numpy()[32 * g : 32 * g + 32].astype(
                    np.float64
                )
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_a_wrong_lane_mapping_is_caught():
    # control: swapping two lanes' packed entries must break the sums (the model is not vacuous)
    q, scales, zeros, x = _bank(4)
    words = pack_int4(q).numpy().view(np.uint32).copy()
    recs = encode_metadata(scales, zeros, "b4").numpy().view(np.uint32)
    xs = lane_activations(x.numpy())
    good = warp_group_sums(words[0, :32], recs[0, :32], xs[0])
    words[0, [0, 1]] = words[0, [1, 0]]
    bad = warp_group_sums(words[0, :32], recs[0, :32], xs[0])
    assert not np.allclose(good, bad)


NO_WARP = warp_host_skip_reason()
needs_warp = pytest.mark.skipif(NO_WARP is not None, reason=NO_WARP or "")


def _quads_and_slots(kernels=KERNELS):
    buf = np.random.default_rng(21).integers(0, 256, 4 * 128, dtype=np.uint8)
    recs, quads, slots = run_warp("b4", "scalar", buf, [(0, 64), (256, 64)], kernels)
    want = np.array(
        [[recs[p, quad_source(lane, c)] for c in range(4)] for p in range(2) for lane in range(32)]
    )
    return quads.reshape(-1, 4), want, slots


@pytest.mark.compile
@needs_warp
def test_the_kernels_quad_records_and_result_slots_are_the_models():
    got, want, slots = _quads_and_slots()
    assert len(set(map(tuple, want))) > 8  # distinct records: a wrong source lane would show
    np.testing.assert_array_equal(got, want)
    assert slots == [RESULT_SLOT[lane % 4] for lane in range(32)]


@pytest.mark.compile
@needs_warp
def test_a_changed_quad_source_in_the_kernel_is_caught(tmp_path):
    kernels = tmp_path / "kernels"
    shutil.copytree(KERNELS, kernels)
    meta = kernels / "awq_meta.cuh"
    old = "__shfl_sync(kFullMask, rec, (lane & ~3) | cc)"
    assert old in meta.read_text()
    meta.write_text(
        meta.read_text().replace(old, "__shfl_sync(kFullMask, rec, (lane & ~3) | (cc ^ 1))")
    )
    got, want, _ = _quads_and_slots(kernels)
    assert (got != want).any()
