"""The tensor-core fragment mapping (tests/fragment_model.py, mirrored by awq_meta.cuh) against
a plain dot product of the dequantized weights: packing, activations, quad records and lane results."""

import numpy as np
import torch
from fragment_model import dequant_word, lane_activations, warp_group_sums

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
