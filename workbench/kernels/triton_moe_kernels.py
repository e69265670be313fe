"""Triton kernels of the fused-MoE W4A16 peer (docs/DESIGN.md §4.7); imported only by
workbench.kernels.triton_moe, lazily, because importing triton costs ~1 s and needs no GPU.

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

W2 has two slot forms, chosen by ``SPLIT`` (the tuner measures both, docs/DESIGN.md §4.7): one
launch over N tiles that loops over the routed slots, or a launch over (N tile, slot group)
writing each slot's FP32 partial to a scratch row plus a small launch summing the rows in slot
order (w2_reduce_kernel). Both are deterministic and graph-capturable.

A routed id outside ``[0, E)`` contributes nothing (loads masked to zero), as in our kernels and
workbench.data.reference: W13 writes a zero row, W2 skips the slot (the split form writes its row as
zeros).
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
def _w2_slot(
    inter_ptr, qw_ptr, sc_ptr, bi_ptr, ids_ptr, rw_ptr, j, cols, K, N, E, TOP_K,
    GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """``rw[j] * (inter[j] @ W_ids[j])[cols]`` in FP32: zero where slot j is past TOP_K (a split
    program's padding slot) or routes an id outside [0, E) (no load leaves the bank)."""
    e = tl.load(ids_ptr + j, mask=j < TOP_K, other=-1)
    valid = (j < TOP_K) & (e >= 0) & (e < E)
    e = tl.where(valid, e, 0).to(tl.int64)
    col_ok = (cols < N) & valid
    acc = _zero_acc(BLOCK_N, BLOCK_K, DOT)
    for k0 in range(0, K, BLOCK_K):
        acc = _partial_dot(inter_ptr + j * K, qw_ptr + e * (K // PACK) * N,
                           sc_ptr + e * (K // GROUP) * N, bi_ptr + e * (K // GROUP) * N,
                           cols, col_ok, k0, K, N, GROUP, BLOCK_N, BLOCK_K, DOT, acc)  # fmt: skip
    rw = tl.load(rw_ptr + j, mask=valid, other=0.0)
    return tl.sum(acc, axis=0) * rw


@triton.jit
def w2_kernel(
    inter_ptr, qw_ptr, sc_ptr, bi_ptr, ids_ptr, rw_ptr, out_ptr, scratch_ptr, K, N, E, TOP_K,
    GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DOT: tl.constexpr,
    SPLIT: tl.constexpr, SLOTS: tl.constexpr,
):  # fmt: skip
    """Columns [t*BLOCK_N, ..) of ``y = sum_j rw[j] * inter[j] @ W_ids[j]``, t = program_id(0).
    inter fp16 [top_k, K]; rw fp32 [top_k]; out fp16 [1, N]; scratch fp32 [top_k, N].

    ``SPLIT = False`` (one launch, grid (N tiles,)): the program loops over the routed slots in
    order and sums their products from zero in FP32, rounded once to fp16 into ``out``.
    ``SPLIT = True`` (grid (N tiles, ceil(TOP_K / SLOTS))): program (t, g) computes slots
    g*SLOTS .. g*SLOTS+SLOTS-1 (unrolled, so their loads are in flight together) and writes each
    slot's router-weighted FP32 partial to ``scratch[j, cols]``, every slot's row written (zeros
    for an invalid id); w2_reduce_kernel then sums the rows in slot order into ``out``."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    if SPLIT:
        for s in tl.static_range(SLOTS):
            j = tl.program_id(1) * SLOTS + s
            part = _w2_slot(inter_ptr, qw_ptr, sc_ptr, bi_ptr, ids_ptr, rw_ptr, j, cols, K, N, E,
                            TOP_K, GROUP, BLOCK_N, BLOCK_K, DOT)  # fmt: skip
            tl.store(scratch_ptr + j * N + cols, part, mask=(cols < N) & (j < TOP_K))
    else:
        y = tl.zeros((BLOCK_N,), dtype=tl.float32)
        for j in range(0, TOP_K):
            y += _w2_slot(inter_ptr, qw_ptr, sc_ptr, bi_ptr, ids_ptr, rw_ptr, j, cols, K, N, E,
                          TOP_K, GROUP, BLOCK_N, BLOCK_K, DOT)  # fmt: skip
        tl.store(out_ptr + cols, y.to(tl.float16), mask=cols < N)


REDUCE_BLOCK = 256  # columns per program of the sum: N = 2560 gives 10 programs
REDUCE_WARPS = 2


@triton.jit
def w2_reduce_kernel(scratch_ptr, out_ptr, N, TOP_K: tl.constexpr, BLOCK: tl.constexpr):
    """``out[cols] = fp16(((0 + scratch[0]) + scratch[1]) + ...)``: the split form's second
    launch. TOP_K is a constexpr so the slot loop unrolls: every row's load is issued before the
    first add, and the adds keep slot order (the same order as the loop form's, deterministic)."""
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < N
    y = tl.zeros((BLOCK,), dtype=tl.float32)
    for j in tl.static_range(TOP_K):
        y += tl.load(scratch_ptr + j * N + cols, mask=ok, other=0.0)
    tl.store(out_ptr + cols, y.to(tl.float16), mask=ok)


def launch_reduce(scratch, out, N: int, top_k: int) -> None:
    """The split form's sum over slots (stream-ordered after the partials' launch)."""
    grid = (triton.cdiv(N, REDUCE_BLOCK),)
    w2_reduce_kernel[grid](scratch, out, N, TOP_K=top_k, BLOCK=REDUCE_BLOCK,
                           num_warps=REDUCE_WARPS)  # fmt: skip


def _reduce_after(nargs: dict, exception: BaseException | None = None) -> None:
    """triton.autotune post_hook: inside the timed call of a split config, launch the sum too, so
    that autotune ranks both forms on whole calls (both launches)."""
    if exception is None and nargs.get("SPLIT"):
        launch_reduce(nargs["scratch_ptr"], nargs["out_ptr"], nargs["N"], nargs["TOP_K"])


def _drop_oversized_k(configs, named_args, **kwargs):
    """triton.autotune early_config_prune: a K tile past the next power of two of K does the same
    loads as that tile with more masked lanes (W2's K is 160: 512 and 1024 go)."""
    cap = triton.next_power_of_2(named_args["K"])
    kept = [c for c in configs if c.kwargs["BLOCK_K"] <= cap]
    return kept or configs


def config_space(wide: bool = False, kernel: str = "w2") -> list[triton.Config]:
    """The M = 1 search space of ``kernel``: tile widths, K tiles, both dot forms, warps, and for
    tl.dot the pipeline depth (the FMA form's loads feed no dot, which is what Triton's pipeliner
    overlaps, so its num_stages stays 2); for W2 also both slot forms (``SPLIT``, and the slots
    per split program ``SLOTS``). ``wide`` is what benchmarks/tune_triton_moe.py sweeps for the
    table: a first H200 sweep over 44 configs picked its narrowest tile and longest K tile, the
    corner of that space, so the wide space goes one step past both; the narrow list is what a
    peer autotunes at construction where the table has no entry. tl.dot needs 16 or more on
    every side."""
    out = []
    form = {} if kernel == "w13" else {"SPLIT": False, "SLOTS": 1}
    for bn in (4, 8, 16, 32, 64) if wide else (16, 32, 64):
        for bk in (32, 64, 128, 256, 512, 1024) if wide else (128, 256):
            for warps in (2, 4, 8) if wide else (2, 4):
                meta = {"BLOCK_N": bn, "BLOCK_K": bk, "DOT": False, **form}
                out.append(triton.Config(meta, num_warps=warps, num_stages=2))
    for bn in (16, 32, 64) if wide else (16, 32):
        for bk in (64, 128):
            for stages in (3, 4) if wide else (3,):
                meta = {"BLOCK_N": bn, "BLOCK_K": bk, "DOT": True, **form}
                out.append(triton.Config(meta, num_warps=4, num_stages=stages))
    if kernel == "w2":
        out += _split_space(wide)
    return out


def _split_space(wide: bool) -> list[triton.Config]:
    """W2's split form: a program is one slot (or SLOTS of them) of one column tile, so it has
    little work; narrower warps than the loop form's are worth trying."""
    out = []
    for bn in (8, 16, 32, 64) if wide else (16, 32):
        for bk in (64, 128, 256) if wide else (128, 256):
            for warps in (1, 2, 4) if wide else (2, 4):
                for slots in (1, 2) if wide else (1,):
                    meta = {"BLOCK_N": bn, "BLOCK_K": bk, "DOT": False, "SPLIT": True,
                            "SLOTS": slots}  # fmt: skip
                    out.append(triton.Config(meta, num_warps=warps, num_stages=2))
    for bn in (16, 32) if wide else ():
        for bk in (64, 128):
            meta = {"BLOCK_N": bn, "BLOCK_K": bk, "DOT": True, "SPLIT": True, "SLOTS": 1}
            out.append(triton.Config(meta, num_warps=4, num_stages=3))
    return out


def autotuned(kernel: str, wide: bool = False):
    """``kernel``'s jit function wrapped in triton.autotune over config_space(wide, kernel), keyed
    on (N, K), K tiles past K pruned; for W2 a split config's timed call includes its sum launch
    (``_reduce_after``). The peer runs it once per (kernel, K, N) and process, at construction
    and never inside a capture, when the committed table has no entry for this GPU and shape;
    it then launches the chosen config directly (the tuner's own last launch of a split config
    leaves the sum undone: its output is discarded)."""
    fn = w13_kernel if kernel == "w13" else w2_kernel
    hook = _reduce_after if kernel == "w2" else None
    return triton.autotune(configs=config_space(wide, kernel), key=["N", "K"],
                           prune_configs_by={"early_config_prune": _drop_oversized_k},
                           post_hook=hook)(fn)  # fmt: skip
