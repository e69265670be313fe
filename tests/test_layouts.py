"""Metadata records, dequantization and kernel int4 packing (docs/DESIGN.md §3, docs/ARCHITECTURE.md)."""

import math
import struct

import numpy as np
import pytest
import torch

from workbench.core.errors import BadArgument
from workbench.data.layouts import (
    NIBBLE_OF_ELEMENT,
    decode_metadata,
    dequantize,
    dequantize_records,
    encode_metadata,
    pack_int4,
    unpack_int4,
)


def bits(t: torch.Tensor) -> torch.Tensor:
    """fp16 bit patterns, so -0.0 != +0.0 and inf compare exactly."""
    return t.view(torch.int16)


def rand_meta(gen: torch.Generator, shape):
    scales = torch.exp(torch.empty(shape).uniform_(math.log(1e-3), math.log(1e-2), generator=gen))
    sign = torch.where(torch.rand(shape, generator=gen) < 0.2, -1.0, 1.0)
    zeros = torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8)
    return (scales * sign).half(), zeros


def edge_meta():
    """Scales and zeros covering 0/255 zeros, subnormal, negative, +-max finite, signed zeros."""
    scale_vals = [
        2.0**-24,  # smallest subnormal
        -(2.0**-24),
        6.1e-5,  # largest subnormal region
        -3.0e-6,
        65504.0,
        -65504.0,
        1.0,
        -0.0,
        0.0,
        1e-3,
        -7.5e-3,
        0.5,
    ]
    zero_vals = [0, 255, 1, 15, 128, 254]
    s = torch.tensor([[v for v in scale_vals for _ in zero_vals]], dtype=torch.float16)
    z = torch.tensor([[zv for _ in scale_vals for zv in zero_vals]], dtype=torch.uint8)
    # 72 columns; pad to two groups with a second, shuffled row
    perm = torch.randperm(s.shape[1], generator=torch.Generator().manual_seed(3))
    return torch.cat([s, s[:, perm]]), torch.cat([z, z[:, perm]])


def naive_bias(scale: float, zero: int) -> float:
    """fp16(fp16(-zero) * scale) with Python floats (exact product) and struct's fp16 rounding."""
    return to_fp16(float(-zero) * scale)


def to_fp16(v: float) -> float:
    try:
        return struct.unpack("<e", struct.pack("<e", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


# ---------------------------------------------------------------- metadata


@pytest.mark.parametrize("layout", ["b4", "b3"])
def test_metadata_round_trip_random(layout):
    gen = torch.Generator().manual_seed(1234)
    s, z = rand_meta(gen, (3, 5, 96))  # experts, groups, columns
    meta = encode_metadata(s, z, layout)
    r = 4 if layout == "b4" else 3
    assert meta.dtype == torch.uint8 and meta.shape == (3, 5, 96 * r)
    scales, biases = decode_metadata(meta, layout, 96)
    assert torch.equal(bits(scales), bits(s))
    want = [naive_bias(float(sv), int(zv)) for sv, zv in zip(s.flatten(), z.flatten(), strict=True)]
    want = torch.tensor(want, dtype=torch.float16).reshape(s.shape)
    assert torch.equal(bits(biases), bits(want))


@pytest.mark.parametrize("layout", ["b4", "b3"])
def test_metadata_round_trip_edge_values(layout):
    s, z = edge_meta()
    scales, biases = decode_metadata(encode_metadata(s, z, layout), layout, s.shape[1])
    assert torch.equal(bits(scales), bits(s))
    # independent: torch's CPU half multiply (exact fp32 product, one rounding to fp16)
    want = (-z.to(torch.int32)).half() * s
    assert torch.equal(bits(biases), bits(want))
    assert torch.isinf(biases).any(), "edge set should overflow the bias for 255 * 65504"
    assert not torch.isnan(biases).any()


def test_b4_and_b3_decode_identically():
    gen = torch.Generator().manual_seed(99)
    s, z = rand_meta(gen, (4, 64))
    es, ez = edge_meta()
    for scales, zeros in ((s, z), (es, ez)):
        n = scales.shape[1]
        d4 = decode_metadata(encode_metadata(scales, zeros, "b4"), "b4", n)
        d3 = decode_metadata(encode_metadata(scales, zeros, "b3"), "b3", n)
        assert torch.equal(bits(d4[0]), bits(d3[0]))
        assert torch.equal(bits(d4[1]), bits(d3[1]))


def test_record_bytes_by_hand():
    s = torch.tensor([[0.0078125, -2.5]], dtype=torch.float16)  # 0x2000, 0xC100
    z = torch.tensor([[7, 3]], dtype=torch.uint8)
    b3 = encode_metadata(s, z, "b3")[0].tolist()
    assert b3 == [0x00, 0x20, 7, 0x00, 0xC1, 3]
    b4 = bytes(encode_metadata(s, z, "b4")[0].tolist())
    # bias = -7 * 0.0078125 = -0.0546875 (0xAB00); -3 * -2.5 = 7.5 (0x4780)
    assert b4 == struct.pack("<HHHH", 0x2000, 0xAB00, 0xC100, 0x4780)


def test_zero_zero_gives_positive_zero_bias():
    # fp16(-zero) is the integer -0 = 0 converted (+0.0), as the kernel's __int2half_rn(-(int)z)
    s = torch.tensor([[0.25, -0.25]], dtype=torch.float16)
    z = torch.zeros((1, 2), dtype=torch.uint8)
    _, biases = decode_metadata(encode_metadata(s, z, "b3"), "b3", 2)
    assert bits(biases).tolist() == [[0x0000, -0x8000]]  # +0 * 0.25 = +0; +0 * -0.25 = -0


# ---------------------------------------------------------------- dequantize


def naive_dequant(q, s, z):
    K, N = q.shape
    out = torch.empty(K, N, dtype=torch.float16)
    for k in range(K):
        for n in range(N):
            sv, zv = float(s[k // 32, n]), int(z[k // 32, n])
            out[k, n] = to_fp16(int(q[k, n]) * sv + naive_bias(sv, zv))
    return out


def test_dequantize_matches_naive_single_rounding():
    gen = torch.Generator().manual_seed(7)
    q = torch.randint(0, 16, (64, 24), generator=gen, dtype=torch.uint8)
    s, z = rand_meta(gen, (2, 24))
    w = dequantize(q, s, z)
    assert w.dtype == torch.float16 and w.shape == (64, 24)
    assert torch.equal(bits(w), bits(naive_dequant(q, s, z)))
    # and it is close to AWQ's (q - z) * s, which rounds differently
    awq = (q.double() - z.double().repeat_interleave(32, 0)) * s.double().repeat_interleave(32, 0)
    assert torch.allclose(w.double(), awq, rtol=2e-3, atol=1e-4)


def test_dequantize_edge_values_match_naive_and_decoded_records():
    s, z = edge_meta()
    gen = torch.Generator().manual_seed(11)
    q = torch.randint(0, 16, (64, s.shape[1]), generator=gen, dtype=torch.uint8)
    w = dequantize(q, s, z)
    assert torch.equal(bits(w), bits(naive_dequant(q, s, z)))
    for layout in ("b4", "b3"):
        scales, biases = decode_metadata(encode_metadata(s, z, layout), layout, s.shape[1])
        assert torch.equal(bits(dequantize_records(q, scales, biases)), bits(w))


def test_dequantize_batched_equals_per_expert():
    gen = torch.Generator().manual_seed(5)
    q = torch.randint(0, 16, (3, 96, 32), generator=gen, dtype=torch.uint8)
    s, z = rand_meta(gen, (3, 3, 32))
    w = dequantize(q, s, z)
    for e in range(3):
        assert torch.equal(bits(w[e]), bits(dequantize(q[e], s[e], z[e])))


# ---------------------------------------------------------------- int4 packing


def test_pack_round_trip_random():
    gen = torch.Generator().manual_seed(21)
    for shape in [(32, 32), (96, 64), (2, 64, 32), (2, 3, 64, 96)]:
        q = torch.randint(0, 16, shape, generator=gen, dtype=torch.uint8)
        p = pack_int4(q)
        assert p.dtype == torch.int32
        assert p.shape == (*shape[:-2], shape[-2] // 32, shape[-1], 4)
        assert torch.equal(unpack_int4(p), q)


def test_pack_nibble_order_by_hand():
    # lane 0 (t = 0), word c = column c: elements k = 0..7 (k = 2p + e) at nibbles 0,4,1,5,..
    # Give element (p, e) of column 0 the value 2p + e: nibbles 7..0 read 7,5,3,1,6,4,2,0.
    q = torch.zeros(32, 32, dtype=torch.uint8)
    for p in range(4):
        for e in range(2):
            q[2 * p + e, 0] = 2 * p + e
    w = pack_int4(q).numpy().view(np.uint32)
    assert w[0, 0, 0] == 0x75316420
    assert NIBBLE_OF_ELEMENT == (0, 4, 1, 5, 2, 6, 3, 7)


def test_pack_matches_mma_fragments_and_kernel_half2_extraction():
    """Entry (g, 32T + L) word c is what lane L = 4qd + t feeds to the m16n8k16 A fragment for
    column 32T + 4qd + c: k = 8t + 2p + e; (word >> 4p) & 0x000F000F is the half2 of pair p."""
    gen = torch.Generator().manual_seed(8)
    K, N = 64, 64
    q = torch.randint(0, 16, (K, N), generator=gen, dtype=torch.uint8)
    words = pack_int4(q).numpy().view(np.uint32)
    for g in range(K // 32):
        for n in range(N):
            tile, lane = divmod(n, 32)
            qd, t = divmod(lane, 4)
            for c in range(4):
                col = 32 * tile + 4 * qd + c
                word = int(words[g, n, c])
                for p in range(4):
                    pair = (word >> (4 * p)) & 0x000F000F
                    k0 = 32 * g + 8 * t + 2 * p
                    assert pair & 0xFFFF == int(q[k0, col])
                    assert pair >> 16 == int(q[k0 + 1, col])


def test_pack_n_must_fill_tiles():
    with pytest.raises(BadArgument, match=r"N=40 is not a multiple of the 32-column tile"):
        pack_int4(torch.zeros(32, 40, dtype=torch.uint8))
    with pytest.raises(BadArgument, match=r"N=8 is not a multiple of the 32-column tile"):
        unpack_int4(torch.zeros(1, 8, 4, dtype=torch.int32))


# ---------------------------------------------------------------- validation


Q = torch.randint(0, 16, (64, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
S = torch.full((2, 32), 0.01, dtype=torch.float16)
Z = torch.full((2, 32), 3, dtype=torch.uint8)
BYTES96 = torch.ones(2, 96, dtype=torch.uint8)
ERROR_CASES = {
    "scales dtype": (
        lambda: encode_metadata(S.float(), Z, "b4"),
        r"scales must be torch.float16, got torch.float32",
    ),
    "zeros dtype": (
        lambda: encode_metadata(S, Z.int(), "b3"),
        r"zeros must be torch.uint8, got torch.int32",
    ),
    "layout name": (lambda: encode_metadata(S, Z, "b5"), r"layout='b5'"),
    "zeros shape": (lambda: encode_metadata(S, Z[:1], "b4"), r"zeros shape \(1, 32\)"),
    "not a tensor": (
        lambda: encode_metadata(S.numpy(), Z, "b4"),
        r"scales must be a torch.Tensor, got ndarray",
    ),
    "1-D scales": (lambda: encode_metadata(S[0], Z[0], "b4"), r"scales must have at least 2 dims"),
    "inf scale": (
        lambda: encode_metadata(S.clone().index_fill_(1, torch.tensor([7]), math.inf), Z, "b4"),
        r"scales must be finite, got inf at index \(0, 7\)",
    ),
    "meta width": (lambda: decode_metadata(BYTES96, "b4", 32), r"meta last dim 96 != n\*4 = 128"),
    "n": (lambda: decode_metadata(BYTES96, "b3", 0), r"n=0"),
    "dequantize K": (lambda: dequantize(Q[:48], S, Z), r"K=48"),
    "dequantize scales shape": (lambda: dequantize(Q, S[:1], Z[:1]), r"scales shape \(1, 32\)"),
    "q range": (
        lambda: pack_int4(Q.clone().index_fill_(0, torch.tensor([5]), 16)),
        r"got 16 at index \(5, 0\)",
    ),
    "pack K": (lambda: pack_int4(Q[:40]), r"K=40"),
    "packed words": (
        lambda: unpack_int4(torch.ones(2, 32, 3, dtype=torch.int32)),
        r"last dim must be 4 words, got shape \(2, 32, 3\)",
    ),
    "packed dtype": (
        lambda: unpack_int4(torch.ones(2, 32, 4, dtype=torch.int64)),
        r"packed must be torch.int32, got torch.int64",
    ),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_errors_name_argument_and_value(case):
    fn, pattern = ERROR_CASES[case]
    with pytest.raises(BadArgument, match=pattern):
        fn()
