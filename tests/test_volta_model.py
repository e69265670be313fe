"""The sm_70 m8n8k4 dot product: the NumPy model (tests/volta_model.py) against a plain
dot product and the PTX fragment map, and the kernel's index arithmetic (csrc/kernels/mma_sm70.h,
compiled into a host program) against the model. The last test fails if the CUDA's arithmetic
changes without the model (or the other way round)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import volta_model as vm

from workbench.data.layouts import dequantize, encode_metadata, pack_int4

ROOT = Path(__file__).resolve().parents[1]
HEADER = ROOT / "csrc" / "kernels" / "mma_sm70.h"


def _bank(seed: int, K: int = 64, N: int = 64):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 16, (K, N), generator=gen, dtype=torch.uint8)
    log_s = torch.empty(K // 32, N).uniform_(np.log(1e-3), np.log(1e-2), generator=gen)
    scales = torch.exp(log_s).to(torch.float16)
    zeros = torch.randint(0, 16, (K // 32, N), generator=gen, dtype=torch.uint8)
    x = torch.randn(K, generator=gen).to(torch.float16).numpy()
    words = pack_int4(q).numpy().view(np.uint32)
    w = dequantize(q, scales, zeros).numpy().astype(np.float64)
    return words, scales, zeros, x, w


def _recs(scales, zeros, layout="b4"):
    if layout == "b4":
        return encode_metadata(scales, zeros, "b4").numpy().view(np.uint32)
    raw = encode_metadata(scales, zeros, "b3").numpy()  # what the b3 readers rebuild (make_meta)
    from workbench.data.layouts import bias_of

    s = raw[:, 0::3].astype(np.uint32) | (raw[:, 1::3].astype(np.uint32) << 8)
    b = bias_of(scales.numpy(), zeros.numpy()).view(np.uint16).astype(np.uint32)
    return s | (b << 16)


@pytest.mark.parametrize("layout", ["b4", "b3"])
def test_warp_sums_equal_the_dot_product_of_dequantized_weights(layout):
    for seed in (11, 12):
        words, scales, zeros, x, w = _bank(seed)
        recs = _recs(scales, zeros, layout)
        for g in range(2):
            for tile in range(2):
                cols = slice(32 * tile, 32 * tile + 32)
                got = vm.warp_group_sums(words[g, cols], recs[g, cols], x[32 * g : 32 * g + 32])
                want = w[32 * g : 32 * g + 32, cols].T @ x[32 * g : 32 * g + 32].astype(np.float64)
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_several_groups_accumulate_like_one_long_dot():
    words, scales, zeros, x, w = _bank(13, K=128, N=32)
    got = vm.warp_sums(words[:, :32], _recs(scales, zeros)[:, :32], x)
    np.testing.assert_allclose(got, w.T @ x.astype(np.float64), rtol=1e-12, atol=1e-12)


def test_the_slots_the_kernel_reads_are_where_the_ptx_map_puts_matching_k():
    # derived from d_position (the PTX ISA's accumulator layout) and the operands alone
    for lane in range(32):
        for col in range(4):
            holds = vm.b_active(lane, col)
            want = [(vm.slots(lane)[0], lane & 1), (vm.slots(lane)[1], (lane & 1) | 2)]
            assert vm.derived_slots(lane, col) == (want if holds else []), (lane, col)
    # every column of every quad is held after finish by the lane of that column
    for lane in range(32):
        col = lane & 3
        assert vm.b_active(lane, col) or vm.b_active(lane ^ vm.PAIR_XOR, col)
        assert {p.col for p in vm.SCHEDULE if p.set == vm.kept_set(lane)} >= {col}


def test_schedule_covers_each_column_and_half_once():
    assert sorted((p.col, p.half) for p in vm.SCHEDULE) == [
        (c, s) for c in range(4) for s in (0, 1)
    ]
    assert all(p.set == p.col & 1 for p in vm.SCHEDULE)


def test_sum_order_is_the_same_in_both_lanes_of_a_pair():
    for lane in range(32):
        a, b = vm.column_order(lane), vm.column_order(lane ^ 1)
        assert a == (b[1], b[0])  # (P0 + P2) + (P1 + P3) against (P1 + P3) + (P0 + P2)
        assert sorted(a[0] + a[1]) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "name,wrong",
    [
        ("x_word", lambda lane: lane & 3),  # the sm_80 word: B meets the wrong k
        ("b_active", lambda lane, col: True),  # no zeros: the set's two columns mix
        ("kept_set", lambda lane: (lane & 1) ^ 1),  # each lane keeps its neighbour's column
    ],
)
def test_a_wrong_index_breaks_the_sums(monkeypatch, name, wrong):
    words, scales, zeros, x, w = _bank(14)
    recs = _recs(scales, zeros)
    want = w[:32, :32].T @ x[:32].astype(np.float64)
    np.testing.assert_allclose(vm.warp_group_sums(words[0, :32], recs[0, :32], x[:32]), want)
    monkeypatch.setattr(vm, name, wrong)
    got = vm.warp_group_sums(words[0, :32], recs[0, :32], x[:32])
    assert not np.allclose(got, want, rtol=1e-3)


def test_fp32_steps_stay_far_inside_the_tolerance():
    # A W13 column over K = 640 split over 4 warps as the kernel splits it (warp w: groups w,
    # w + 4, ...), each HMMA step rounded to FP32 (nearest, or toward zero as V100 measurements
    # report), the warps added in order in FP32: far below the fp16 output rounding (2^-11).
    words, scales, zeros, x, w = _bank(15, K=640, N=32)
    recs = _recs(scales, zeros)
    exact = w.T @ x.astype(np.float64)
    G, warps = 20, 4
    for rounding, bound in (("rn32", 1e-6), ("rz32", 2e-6)):
        total = np.zeros(32, np.float32)
        for warp in range(warps):
            gs = list(range(warp, G, warps))
            xs = np.concatenate([x[32 * g : 32 * g + 32] for g in gs])
            total = total + vm.warp_sums(words[gs, :32], recs[gs, :32], xs, rounding).astype(
                np.float32
            )
        err = np.linalg.norm(total.astype(np.float64) - exact) / np.linalg.norm(exact)
        assert 0 < err < bound, (rounding, err)


def test_rounding_mode_is_checked():
    words, scales, zeros, x, _ = _bank(16)
    from workbench.core.errors import BadArgument

    with pytest.raises(BadArgument, match="rounding must be one of"):
        vm.warp_group_sums(words[0, :32], _recs(scales, zeros)[0, :32], x[:32], rounding="rn16")


HOST_PROGRAM = r"""
#include <cstdio>
#include "mma_sm70.h"
int main() {
  using namespace wb::sm70;
  std::printf("mmas %d pair_xor %d\n", static_cast<int>(kMmas), static_cast<int>(kPairXor));
  for (int i = 0; i < kMmas; ++i) std::printf("mma %d %d %d %d\n", i, mma_set(i), mma_half(i), mma_col(i));
  for (int lane = 0; lane < 32; ++lane) {
    std::printf("lane %d %d %d %d %d", lane, x_word(lane), slot_lo(lane), slot_hi(lane), kept_set(lane));
    for (int c = 0; c < 4; ++c) std::printf(" %d", b_active(lane, c) ? 1 : 0);
    std::printf("\n");
  }
  for (int v = 0; v < 8; ++v) std::printf("slot %d %d\n", v, slot_used(v) ? 1 : 0);
  return 0;
}
"""


def _host_compiler() -> str | None:
    return shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")


def _kernel_tables(tmp_path: Path, header: Path = HEADER) -> list[list[str]]:
    cxx = _host_compiler()
    if cxx is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no host C++ compiler (g++ or $CXX): the sm_70 index check cannot run")
        pytest.skip("no host C++ compiler (g++ or $CXX)")
    src, exe = tmp_path / "idx.cpp", tmp_path / "idx"
    src.write_text(HOST_PROGRAM)
    r = subprocess.run(
        [cxx, "-std=c++17", "-O1", f"-I{header.parent}", str(src), "-o", str(exe)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.splitlines()]


def _assert_tables_are_the_models(rows: list[list[str]]) -> None:
    assert rows[0] == ["mmas", str(vm.MMAS), "pair_xor", str(vm.PAIR_XOR)]
    mmas = [list(map(int, r[1:])) for r in rows if r[0] == "mma"]
    assert mmas == [[i, p.set, p.half, p.col] for i, p in enumerate(vm.SCHEDULE)]
    lanes = [list(map(int, r[1:])) for r in rows if r[0] == "lane"]
    assert lanes == [
        [lane, vm.x_word(lane), *vm.slots(lane), vm.kept_set(lane)]
        + [int(vm.b_active(lane, c)) for c in range(4)]
        for lane in range(32)
    ]
    used = [list(map(int, r[1:])) for r in rows if r[0] == "slot"]
    assert used == [[v, int(vm.slot_used(v))] for v in range(8)]


def test_the_kernels_index_arithmetic_is_the_models(tmp_path):
    _assert_tables_are_the_models(_kernel_tables(tmp_path))


@pytest.mark.parametrize(
    "old,new",
    [
        ("return (lane & 1) | ((lane >> 3) & 2);", "return lane & 3;"),  # the sm_80 word
        ("return ((i & 1) << 1) | (i >> 2);", "return ((i >> 1) & 1) | ((i & 1) << 1);"),
        ("return 6 | (lane & 1);", "return 4 | (lane & 1);"),
    ],
)
def test_the_index_check_fails_when_the_header_changes(tmp_path, old, new):
    # control: the same comparison on a copy of the header with one index changed
    text = HEADER.read_text()
    assert old in text
    changed = tmp_path / "src" / "mma_sm70.h"
    changed.parent.mkdir()
    changed.write_text(text.replace(old, new))
    with pytest.raises(AssertionError):
        _assert_tables_are_the_models(_kernel_tables(tmp_path, changed))


def test_the_kernel_uses_the_header_for_every_index():
    # the sm_70 branch of awq_meta.cuh takes its indices from mma_sm70.h, not from literals
    src = (ROOT / "csrc" / "kernels" / "awq_meta.cuh").read_text()
    for helper in (
        "x_word(lane)",
        "mma_col(i)",
        "mma_half(i)",
        "mma_set(i)",
        "b_active(lane, c)",
        "slot_lo(lane)",
        "slot_hi(lane)",
        "slot_used(v)",
        "kept_set(lane)",
        "kPairXor",
    ):
        assert f"sm70::{helper}" in src, helper
    for kernel in ("w13.cuh", "w2.cuh"):
        assert "x_word(lane)" in (ROOT / "csrc" / "kernels" / kernel).read_text(), kernel
