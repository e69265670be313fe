"""The cooperative reader's index arithmetic against scalar byte reads (docs/DESIGN.md §1, §3), and the
kernels' own readers against the model (tests/coop_model.py): csrc/kernels/awq_meta.cuh's
read_meta2, unmodified, run on the host by tests/warp_host.cpp (compile tier: g++ and the CUDA
headers, seconds)."""

import shutil

import numpy as np
import pytest
import torch
from coop_model import (
    TILE_BYTES_B3,
    WARP,
    coop_indices,
    coop_read_b3,
    coop_table,
    funnelshift_r,
    make_meta,
    read_b4,
    scalar_read_b3,
    split_b3,
    split_b4,
    tile_offset,
    words_used,
)
from cuda_toolchain import KERNELS, run_warp, warp_host_skip_reason

from workbench.core.errors import BadArgument
from workbench.data.layouts import encode_metadata

RNG = np.random.default_rng(20240917)


def test_index_table_by_hand():
    # (lane, w0, w1, shift, hi_used): record byte 3*lane sits in word 3*lane//4 at offset 3*lane%4
    expected = [
        (0, 0, 1, 0, False),
        (1, 0, 1, 24, True),  # bytes 3,4,5: last byte of word 0, then two of word 1
        (2, 1, 2, 16, True),  # bytes 6,7,8
        (3, 2, 3, 8, False),  # bytes 9,10,11 all in word 2
        (29, 21, 22, 24, True),
        (30, 22, 23, 16, True),
        (31, 23, 24, 8, False),  # byte 93: word 23 only; lane 24 holds no word, never used
    ]
    for lane, *want in expected:
        assert tuple(coop_indices(lane)) == tuple(want), lane


def test_every_lane_uses_only_tile_words_it_shuffles_for():
    for lane in range(WARP):
        c = coop_indices(lane)
        used = words_used(lane)
        assert max(used) < 24, f"lane {lane} needs word {max(used)} beyond the tile"
        assert used == ({c.w0, c.w1} if c.hi_used else {c.w0}), lane
    assert words_used(31) == {23}


def test_funnelshift_by_hand():
    assert funnelshift_r(0x44332211, 0x88776655, 0) == 0x44332211
    assert funnelshift_r(0x44332211, 0x88776655, 8) == 0x55443322
    assert funnelshift_r(0x44332211, 0x88776655, 24) == 0x77665544
    assert funnelshift_r(0x44332211, 0x88776655, 32 + 16) == 0x66554433  # amount taken mod 32


@pytest.mark.parametrize("offset", [0, 4, 8, 12, 96, 100, 388, 1024 - TILE_BYTES_B3])
def test_coop_equals_scalar_at_several_offsets(offset):
    buf = RNG.integers(0, 256, 1024, dtype=np.uint8)
    want = scalar_read_b3(buf, offset).records
    # independent check of the scalar model itself, lane 31 = bytes 93..95 included
    for lane in (0, 1, 17, 31):
        b = buf[offset + 3 * lane : offset + 3 * lane + 3]
        assert want[lane] == int(b[0]) | int(b[1]) << 8 | int(b[2]) << 16
    for seed in range(4):
        got = coop_read_b3(buf, offset, seed=seed)
        np.testing.assert_array_equal(got.records, want)
    for fixed in (0, 0xFFFFFFFF):
        garbage = np.full(8, fixed, dtype=np.uint64)
        np.testing.assert_array_equal(coop_read_b3(buf, offset, garbage=garbage).records, want)


def test_loads_stay_inside_the_tile_and_bytes_outside_do_not_matter():
    buf = RNG.integers(0, 256, 512, dtype=np.uint8)
    off = 200
    read = coop_read_b3(buf, off, seed=1)
    assert len(read.loads) == 24
    assert all(lane < 24 and off <= a and a + n <= off + TILE_BYTES_B3 for lane, a, n in read.loads)
    poisoned = buf.copy()
    poisoned[:off] ^= 0xFF
    poisoned[off + TILE_BYTES_B3 :] ^= 0xFF
    np.testing.assert_array_equal(coop_read_b3(poisoned, off, seed=2).records, read.records)


def test_each_record_depends_exactly_on_its_words():
    buf = RNG.integers(0, 256, 96, dtype=np.uint8)
    base = coop_read_b3(buf, 0).records
    for w in range(24):
        changed = buf.copy()
        changed[4 * w : 4 * w + 4] ^= 0xFF
        rec = coop_read_b3(changed, 0).records
        for lane in range(WARP):
            assert (rec[lane] != base[lane]) == (w in words_used(lane)), (w, lane)


def test_readers_recover_encoded_metadata():
    # one expert, N = 64 columns (2 tiles per group), 3 groups: encode with layouts, read per tile
    gen = torch.Generator().manual_seed(4)
    n, groups = 64, 3
    scales = torch.empty(groups, n).uniform_(1e-3, 1e-2, generator=gen).half()
    zeros = torch.randint(0, 256, (groups, n), generator=gen, dtype=torch.uint8)
    b3 = encode_metadata(scales, zeros, "b3").numpy().reshape(-1)
    b4 = encode_metadata(scales, zeros, "b4").numpy().reshape(-1)
    sbits = scales.view(torch.int16).numpy().view(np.uint16)
    for g in range(groups):
        for t in range(n // WARP):
            cols = slice(t * WARP, (t + 1) * WARP)
            for read in (coop_read_b3, scalar_read_b3):
                s, z = split_b3(read(b3, tile_offset(g, t, n, "b3")).records)
                np.testing.assert_array_equal(s, sbits[g, cols])
                np.testing.assert_array_equal(z, zeros.numpy()[g, cols])
            s4, bias4 = split_b4(read_b4(b4, tile_offset(g, t, n, "b4")).records)
            np.testing.assert_array_equal(s4, sbits[g, cols])
            want_bias = (-zeros[g, cols].to(torch.int32)).half() * scales[g, cols]
            np.testing.assert_array_equal(
                bias4, want_bias.view(torch.int16).numpy().view(np.uint16)
            )


def test_table_prints_every_lane():
    table = coop_table().splitlines()
    assert len(table) == 1 + WARP
    assert table[-1].split()[:5] == ["31", "93", "23", "24", "8"]
    assert table[-1].endswith("[23]")


def test_errors():
    buf = np.zeros(200, dtype=np.uint8)
    with pytest.raises(BadArgument, match=r"offset=6 is not 4-byte aligned"):
        coop_read_b3(buf, 6)
    with pytest.raises(BadArgument, match=r"offset=108 \+ 96 bytes exceeds buffer of 200"):
        scalar_read_b3(buf, 108)
    with pytest.raises(BadArgument, match=r"lane=32"):
        coop_indices(32)
    with pytest.raises(BadArgument, match=r"n=48"):
        tile_offset(0, 0, 48, "b3")
    with pytest.raises(BadArgument, match=r"layout='b2'"):
        tile_offset(0, 0, 64, "b2")


NO_WARP = warp_host_skip_reason()
needs_warp = pytest.mark.skipif(NO_WARP is not None, reason=NO_WARP or "")
HALF_B3, HALF_B4 = TILE_BYTES_B3 // 2, 64  # 16 records


def _b3_buffer(seed: int, tiles: int = 24) -> np.ndarray:
    buf = np.random.default_rng(seed).integers(0, 256, tiles * TILE_BYTES_B3, dtype=np.uint8)
    buf[1::3] &= 0xBF  # scale's high byte: exponent below 31, so no scale is inf or NaN
    return buf


def _pairs(half: int, tiles: int) -> list[tuple[int, int]]:
    """Whole tiles (hi = lo + one half) and split ones (W13: half a gate tile, half an up tile)."""
    whole = [(t * 2 * half, t * 2 * half + half) for t in (0, 1, 7, tiles - 1)]
    split = [(3 * half, 40 * half), (40 * half, 5 * half), (9 * half, 9 * half)]
    return whole + split


def _model_b3(buf: np.ndarray, lo: int, hi: int) -> np.ndarray:
    tile = np.concatenate([buf[lo : lo + HALF_B3], buf[hi : hi + HALF_B3]])
    raw = coop_read_b3(tile, 0, seed=lo).records
    np.testing.assert_array_equal(raw, scalar_read_b3(tile, 0).records)
    return make_meta(raw)


@pytest.mark.compile
@needs_warp
@pytest.mark.parametrize("reader", ["coop", "scalar"])
def test_the_kernels_b3_readers_hand_each_lane_the_models_record(reader):
    buf = _b3_buffer(11)
    pairs = _pairs(HALF_B3, buf.size // TILE_BYTES_B3)
    recs, _, _ = run_warp("b3", reader, buf, pairs)
    for p, (lo, hi) in enumerate(pairs):
        np.testing.assert_array_equal(recs[p], _model_b3(buf, lo, hi), err_msg=f"halves {lo}, {hi}")


@pytest.mark.compile
@needs_warp
def test_the_kernels_b4_reader_hands_each_lane_the_models_record():
    buf = np.random.default_rng(12).integers(0, 256, 24 * 2 * HALF_B4, dtype=np.uint8)
    pairs = _pairs(HALF_B4, 24)
    recs, _, _ = run_warp("b4", "scalar", buf, pairs)
    for p, (lo, hi) in enumerate(pairs):
        tile = np.concatenate([buf[lo : lo + HALF_B4], buf[hi : hi + HALF_B4]])
        np.testing.assert_array_equal(recs[p], read_b4(tile, 0).records)


@pytest.mark.compile
@needs_warp
def test_a_changed_source_lane_in_the_kernel_is_caught(tmp_path):
    """The same comparison on a copy of the headers whose cooperative reader takes ``lo`` from the
    wrong lane must fail: the emulator really runs the header's code."""
    kernels = tmp_path / "kernels"
    shutil.copytree(KERNELS, kernels)
    meta = kernels / "awq_meta.cuh"
    text = meta.read_text()
    old = "const int w0 = (3 * lane) >> 2;"
    assert old in text
    meta.write_text(text.replace(old, "const int w0 = (3 * lane + 1) >> 2;"))
    buf = _b3_buffer(13)
    recs, _, _ = run_warp("b3", "coop", buf, [(0, HALF_B3)], kernels)
    wrong = recs[0] != _model_b3(buf, 0, HALF_B3)
    assert wrong[1] and not wrong[0]  # lane 1: (3 + 1) >> 2 = 1, the model's word is 0
