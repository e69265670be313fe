"""Triton kernels of the fused-MoE W4A16 peer (docs/DESIGN.md §4.7); imported only by
workbench.triton_moe, lazily, because importing triton costs ~1 s and needs no GPU.

Weight format (the peer's own, converted from our banks by triton_moe.convert_bank), per expert:
``qweight`` int32 ``[K/8, N]``, word (r, n) holding ``q[8r + j, n]`` at bits ``4j .. 4j+3``
(packed along K, as GPTQ does, so a row of words is contiguous along N and one load gives a
thread 8 consecutive k of one column); ``scales`` and ``biases`` fp16 ``[K/G, N]`` with
``bias = fp16(-zero * scale)``, so the dequantize is one multiply-add, ``w = q * s + b``.

Both kernels read the routed expert ids from the device (no host loop, graph-capturable) and
accumulate in FP32. Two dot forms, chosen per configuration by ``DOT`` (the tuner measures both):
* ``DOT = False``: FP32 multiply-adds into a ``[BLOCK_K/8, BLOCK_N]`` accumulator, one nibble of
  every word at a time, and one reduction after the K loop: no shared memory, no tensor cores,
  no layout change; at M = 1 the tensor cores compute 15 padding rows and need the weights moved
  into their operand layout.
* ``DOT = True``: ``tl.dot`` with the activation padded to 16 rows (rows 1..15 zero, so summing
  the 16 output rows is exact).

A routed id outside ``[0, E)`` contributes nothing (loads masked to zero), as in our kernels and
workbench.reference: W13 writes a zero row, W2 skips the slot.
"""

from __future__ import annotations

import triton
import triton.language as tl

PACK = tl.constexpr(8)  # int4 values per int32 word (a constexpr: jit code reads it)


@triton.jit
def _partial_dot(
    x_row_ptr, w_base, s_base, b_base, cols, col_ok, k0, K, N,
    GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DOT: tl.constexpr,
    acc,
):  # fmt: skip
    """``acc`` plus the products of one K tile of one expert's columns ``cols`` (dequantized in
    registers) with the activation row at ``x_row_ptr``."""
    rows = k0 // PACK + tl.arange(0, BLOCK_K // PACK)  # word rows of this K tile
    ok = (rows < K // PACK)[:, None] & col_ok[None, :]
    words = tl.load(w_base + rows[:, None] * N + cols[None, :], mask=ok, other=0)
    grp = (rows * PACK) // GROUP  # a group holds GROUP/8 word rows: repeated loads hit L1
    s = tl.load(s_base + grp[:, None] * N + cols[None, :], mask=ok, other=0.0)
    b = tl.load(b_base + grp[:, None] * N + cols[None, :], mask=ok, other=0.0)
    if DOT:
        shifts = tl.arange(0, PACK) * 4
        q = (words[:, None, :] >> shifts[None, :, None]) & 0xF  # [BLOCK_K/8, 8, BLOCK_N]
        w = q.to(tl.float16) * s[:, None, :] + b[:, None, :]
        ks = k0 + tl.arange(0, BLOCK_K)
        m = tl.arange(0, 16)
        xa = tl.load(x_row_ptr + m[:, None] * 0 + ks[None, :],
                     mask=(m[:, None] == 0) & (ks[None, :] < K), other=0.0)  # fmt: skip
        acc = tl.dot(xa, tl.reshape(w, (BLOCK_K, BLOCK_N)), acc)
    else:
        # nibble j of every word: 2-D tiles in the words' own layout, so no reduction or layout
        # change inside the loop; x[8r + j] is a strided [BLOCK_K/8] load from L1
        for j in tl.static_range(PACK):
            w = ((words >> (4 * j)) & 0xF).to(tl.float16) * s + b
            kj = rows * PACK + j
            xj = tl.load(x_row_ptr + kj, mask=kj < K, other=0.0)
            acc += w.to(tl.float32) * xj.to(tl.float32)[:, None]
    return acc


@triton.jit
def _zero_acc(BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DOT: tl.constexpr):
    if DOT:
        acc = tl.zeros((16, BLOCK_N), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_K // PACK, BLOCK_N), dtype=tl.float32)
    return acc


@triton.jit
def w13_kernel(
    x_ptr, qw_ptr, sc_ptr, bi_ptr, ids_ptr, out_ptr, K, N, E,
    GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """Program (slot, t): gate columns [t*BLOCK_N, ..) and the up columns N/2 further of the
    expert routed in ``slot``, over all of K; writes ``out[slot, cols] = fp16(silu(gate) * up)``.
    x fp16 [K]; qw int32 [E, K/8, N]; sc, bi fp16 [E, K/G, N]; ids int32 [top_k];
    out fp16 [top_k, N/2]."""
    slot = tl.program_id(0)
    half = N // 2
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    e = tl.load(ids_ptr + slot)
    valid = (e >= 0) & (e < E)
    e = tl.where(valid, e, 0).to(tl.int64)
    col_ok = (cols < half) & valid
    w_base = qw_ptr + e * (K // PACK) * N
    s_base = sc_ptr + e * (K // GROUP) * N
    b_base = bi_ptr + e * (K // GROUP) * N
    gate = _zero_acc(BLOCK_N, BLOCK_K, DOT)
    up = _zero_acc(BLOCK_N, BLOCK_K, DOT)
    for k0 in range(0, K, BLOCK_K):
        gate = _partial_dot(x_ptr, w_base, s_base, b_base, cols, col_ok, k0, K, N,
                            GROUP, BLOCK_N, BLOCK_K, DOT, gate)  # fmt: skip
        up = _partial_dot(x_ptr, w_base, s_base, b_base, cols + half, col_ok, k0, K, N,
                          GROUP, BLOCK_N, BLOCK_K, DOT, up)  # fmt: skip
    # the column sums: over the word rows (FMA form) or the 16 rows, 1..15 exact zeros (DOT)
    g = tl.sum(gate, axis=0)
    u = tl.sum(up, axis=0)
    inter = g / (1.0 + tl.exp(-g)) * u  # silu(gate) * up in FP32, rounded once below
    tl.store(out_ptr + slot * half + cols, inter.to(tl.float16), mask=cols < half)


@triton.jit
def w2_kernel(
    inter_ptr, qw_ptr, sc_ptr, bi_ptr, ids_ptr, rw_ptr, out_ptr, K, N, E, TOP_K,
    GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """Program t: columns [t*BLOCK_N, ..) of ``y = sum_j rw[j] * inter[j] @ W_ids[j]``, the routed
    slots summed in order inside the program (deterministic, no atomics, no scratch), rounded
    once to fp16. inter fp16 [top_k, K]; rw fp32 [top_k]; out fp16 [1, N]."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    y = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for j in range(0, TOP_K):
        e = tl.load(ids_ptr + j)
        valid = (e >= 0) & (e < E)
        e = tl.where(valid, e, 0).to(tl.int64)
        col_ok = (cols < N) & valid
        acc = _zero_acc(BLOCK_N, BLOCK_K, DOT)
        for k0 in range(0, K, BLOCK_K):
            acc = _partial_dot(inter_ptr + j * K, qw_ptr + e * (K // PACK) * N,
                               sc_ptr + e * (K // GROUP) * N, bi_ptr + e * (K // GROUP) * N,
                               cols, col_ok, k0, K, N, GROUP, BLOCK_N, BLOCK_K, DOT, acc)  # fmt: skip
        rw = tl.where(valid, tl.load(rw_ptr + j), 0.0)
        y += tl.sum(acc, axis=0) * rw
    tl.store(out_ptr + cols, y.to(tl.float16), mask=cols < N)


def config_space(wide: bool = False) -> list[triton.Config]:
    """The M = 1 search space: tile widths, K tiles, both dot forms, warps, and for tl.dot the
    pipeline depth (the FMA form's loads feed no dot, which is what Triton's pipeliner overlaps,
    so its num_stages stays 2). ``wide`` (102 configs) is what benchmarks/tune_triton_moe.py
    sweeps for the table: a first H200 sweep over 44 picked its narrowest tile and longest K tile
    (BLOCK_N 8, BLOCK_K 256), the corner of that space, so the wide space goes one step past both; the narrow list (16) is what a peer autotunes at construction where
    the table has no entry. tl.dot needs 16 or more on every side."""
    out = []
    for bn in (4, 8, 16, 32, 64) if wide else (16, 32, 64):
        for bk in (32, 64, 128, 256, 512, 1024) if wide else (128, 256):
            for warps in (2, 4, 8) if wide else (2, 4):
                meta = {"BLOCK_N": bn, "BLOCK_K": bk, "DOT": False}
                out.append(triton.Config(meta, num_warps=warps, num_stages=2))
    for bn in (16, 32, 64) if wide else (16, 32):
        for bk in (64, 128):
            for stages in (3, 4) if wide else (3,):
                meta = {"BLOCK_N": bn, "BLOCK_K": bk, "DOT": True}
                out.append(triton.Config(meta, num_warps=4, num_stages=stages))
    return out


def autotuned(kernel: str, wide: bool = False):
    """``kernel``'s jit function wrapped in triton.autotune over config_space(wide), keyed on
    (N, K). The peer runs it once per (kernel, K, N) and process, at construction and never
    inside a capture, when the committed table has no entry for this GPU and shape; it then
    launches the chosen config directly."""
    fn = w13_kernel if kernel == "w13" else w2_kernel
    return triton.autotune(configs=config_space(wide), key=["N", "K"])(fn)
