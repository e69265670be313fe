"""Real AWQ checkpoints as bank sources (docs/DESIGN.md §3.8), on the CPU.

The checkpoints are written by tests/ckpt_fixture.py with its own restatement of AutoAWQ's
packing; the banks are decoded through layouts' decoders and compared with the fixture's
unpacked originals, bit for bit.
"""

from __future__ import annotations

import json
import pickle

import ckpt_fixture
import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from workbench.core.errors import BadArgument
from workbench.data.checkpoint import EXPERT_KEY, Checkpoint
from workbench.data.layouts import (
    bias_of,
    decode_metadata,
    dequantize,
    dequantize_records,
    unpack_int4,
)
from workbench.kernels.ops import upload_bank
from workbench.measure.banks import CheckpointBanks

DIMS = dict(hidden=128, inter=256, experts=4, top_k=2, layers=2)


def half_bits(t):
    return t.contiguous().view(torch.int16)


@pytest.mark.parametrize("layout", ["b3", "b4"])
@pytest.mark.parametrize("tp, rank, inter", [(1, 0, 256), (2, 1, 256), (4, 2, 256), (4, 1, 640), (4, 3, 640), (2, 1, 640)])  # fmt: skip
def test_bank_decodes_to_the_checkpoint_bit_exact(tmp_path, layout, tp, rank, inter):
    # group 128: at inter 256 and tp 4 W2's 64-row slices cut the checkpoint's groups in half;
    # at inter 640 (the default preset's) and tp 4 a 160-row slice starts inside one group and
    # ends inside another
    dims = dict(DIMS, inter=inter)
    folder, orig = ckpt_fixture.checkpoint(tmp_path / "c", **dims, group=128, seed=tp + rank)
    src = CheckpointBanks(Checkpoint(folder, tp=tp, rank=rank))
    for kernel in ("w13", "w2"):
        bank = src.make(kernel, layout, 1, device="cpu")  # bank 1 reads layer 1
        assert (bank.kernel, bank.layout, bank.experts) == (kernel, layout, 4)
        q = unpack_int4(bank.weights)
        scales, biases = decode_metadata(bank.meta, layout, bank.N)
        for e in range(4):
            wq, ws, wz = ckpt_fixture.expected(orig, 1, e, kernel, tp, rank, 128)
            assert torch.equal(q[e], wq)
            assert torch.equal(half_bits(scales[e]), half_bits(ws))
            want_bias = torch.from_numpy(bias_of(ws.numpy(), wz.numpy()))
            assert torch.equal(half_bits(biases[e]), half_bits(want_bias))
            if layout == "b3":  # the zero points themselves are stored
                zeros = bank.meta[e].reshape(bank.K // 32, bank.N, 3)[..., 2]
                assert torch.equal(zeros, wz)
            w = dequantize_records(q[e], scales[e], biases[e])
            assert torch.equal(half_bits(w), half_bits(dequantize(wq, ws, wz)))
            # and that is AWQ's (q - zero) * scale, up to the rounding of the bias (§3.2)
            awq = (
                wq.double() - wz.double().repeat_interleave(32, 0)
            ) * ws.double().repeat_interleave(32, 0)
            zs = wz.double().repeat_interleave(32, 0) * ws.double().repeat_interleave(32, 0)
            bound = 2.0**-11 * (w.double().abs() + zs) + 2.0**-24
            assert ((w.double() - awq).abs() <= bound).all()


def test_reference_reads_checkpoint_banks_like_synthetic_ones(tmp_path):
    from workbench.data.reference import w13_reference

    folder, orig = ckpt_fixture.checkpoint(tmp_path / "c", **DIMS, group=64, seed=4)
    src = CheckpointBanks(Checkpoint(folder, tp=2, rank=0))
    bank = src.make("w13", "b3", 0, device="cpu")
    ids = [3, 1]
    w = bank.dequantized(ids)  # what check's float64 reference is computed from
    want = np.stack(
        [dequantize(*ckpt_fixture.expected(orig, 0, e, "w13", 2, 0, 64)).numpy() for e in ids]
    )
    assert np.array_equal(w.view(np.int16), want.view(np.int16))
    x = np.random.default_rng(1).standard_normal(128).astype(np.float16)
    assert np.array_equal(w13_reference(x, w).inter_exact, w13_reference(x, want).inter_exact)


def test_an_open_checkpoint_reaches_a_worker_process(tmp_path):
    """ab's worker processes get the run's settings pickled: an open checkpoint goes as its file
    names (its open files do not pickle) and reads the same experts on the other side."""
    tensors, _ = ckpt_fixture.make_tensors(128, 256, 4, 2, 64, seed=5)
    cfg = ckpt_fixture.config(128, 256, 4, 2, 2, 64)
    for shards in (1, 2):
        ckpt = Checkpoint(ckpt_fixture.write(tmp_path / f"s{shards}", tensors, cfg, shards=shards),
                          tp=2, rank=1)  # fmt: skip
        sent = pickle.loads(pickle.dumps(ckpt))
        for kernel in ("w13", "w2"):
            for a, b in zip(
                ckpt.host_experts(kernel, 1), sent.host_experts(kernel, 1), strict=True
            ):
                assert torch.equal(a, b)
        assert sent.describe() == ckpt.describe()


def test_sharded_equals_unsharded_and_both_are_recorded(tmp_path):
    tensors, _ = ckpt_fixture.make_tensors(128, 256, 4, 3, 64, seed=9)
    cfg = ckpt_fixture.config(128, 256, 4, 2, 3, 64)
    one = Checkpoint(ckpt_fixture.write(tmp_path / "one", tensors, cfg), tp=2, rank=1)
    three = Checkpoint(ckpt_fixture.write(tmp_path / "three", tensors, cfg, shards=3), tp=2, rank=1)
    assert one.layers == three.layers == (0, 1, 2)
    for kernel in ("w13", "w2"):
        for layer in (0, 2):
            for a, b in zip(
                one.host_experts(kernel, layer), three.host_experts(kernel, layer), strict=True
            ):
                assert torch.equal(a, b)
    files = {f["name"] for f in three.describe()["files"]}
    assert files == {"config.json", "model.safetensors.index.json"} | {
        f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)
    }
    rec = one.describe()
    assert rec["tp"] == 2 and rec["rank"] == 1 and rec["group_size"] == 64
    assert all(len(f["sha256"]) == 64 and f["bytes"] > 0 for f in rec["files"])
    assert rec["key_pattern"] == EXPERT_KEY


def test_layers_are_the_ones_with_experts_and_banks_repeat_them(tmp_path):
    # a model whose layers 0 and 2 are dense: only 1 and 3 hold experts
    tensors, orig = ckpt_fixture.make_tensors(64, 128, 8, 4, 32, seed=2, moe_layers=[1, 3])
    folder = ckpt_fixture.write(tmp_path / "c", tensors, ckpt_fixture.config(64, 128, 8, 2, 4, 32))
    ckpt = Checkpoint(folder, tp=1)
    assert ckpt.layers == (1, 3) and ckpt.shape.layers == 4
    src = CheckpointBanks(ckpt)
    assert [src.layer_of(i) for i in range(5)] == [1, 3, 1, 3, 1]
    assert src.note("w13", 2) is None
    note = src.note("w13", 5)
    assert "5 banks from 2 checkpoint layers" in note and "3 times" in note
    first, again = src.make("w2", "b4", 0, "cpu"), src.make("w2", "b4", 2, "cpu")
    assert torch.equal(first.weights, again.weights) and torch.equal(first.meta, again.meta)
    assert first.weights.data_ptr() != again.weights.data_ptr()  # distinct copies
    q = unpack_int4(again.weights)
    assert torch.equal(q[5], orig[(1, 5, "down_proj")][0])
    rec = src.describe({"w13": 5, "w2": 1})
    assert rec["repeats"] == {"w13": 2, "w2": 0}
    assert rec["layers_used"] == {"w13": [1, 3], "w2": [1]}
    assert rec["checkpoint"]["layers"] == [1, 3]


def test_upload_bank_checks_its_tensors():
    w = torch.randint(-(2**31), 2**31 - 1, (2, 2, 32, 4), dtype=torch.int32)
    with pytest.raises(BadArgument, match=r"meta shape \(2, 2, 64\) does not fit"):
        upload_bank("w2", "b3", w, torch.ones(2, 2, 64, dtype=torch.uint8), seed=0, device="cpu")
    with pytest.raises(BadArgument, match="layout='b5'"):
        upload_bank("w2", "b5", w, torch.ones(2, 2, 96, dtype=torch.uint8), seed=0, device="cpu")


# ------------------------------------------------------------------ errors


def _rewrite(folder, change):
    f = folder / "model.safetensors"
    tensors = load_file(str(f))
    change(tensors)
    save_file(tensors, str(f))


KEY = "model.layers.1.mlp.experts.3.up_proj"


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda t: t.pop(f"{KEY}.qzeros"),
         rf"missing tensor '{KEY}.qzeros' in .*c \(not in model.safetensors\)"),
        (lambda t: t.update({f"{KEY}.scales": t[f"{KEY}.scales"][:, :-8].clone()}),
         rf"tensor '{KEY}.scales' in .*model.safetensors has shape \[2, 248\]; expected \[2, 256\]"),
        (lambda t: t.update({f"{KEY}.scales": t[f"{KEY}.scales"].float()}),
         rf"tensor '{KEY}.scales' in .*model.safetensors is float32 \[2, 256\]; an AWQ scales is a 2-D float16"),
        (lambda t: t.update({f"{KEY}.qweight": t[f"{KEY}.qweight"].view(torch.float32)}),
         rf"tensor '{KEY}.qweight' in .*model.safetensors is float32"),
        (lambda t: t.update({f"{KEY}.qzeros": t[f"{KEY}.qzeros"][:1].clone(),
                             f"{KEY}.scales": t[f"{KEY}.scales"][:1].clone()}),
         r"up_proj: group size 128 \(from its qzeros\) differs from config.json's .*group_size=64"),
        (lambda t: [t.pop(k) for k in list(t)] and t.update({"lm_head.weight": torch.ones(2, 2)}),
         r"no expert tensors named like 'model.layers.\{layer\}.mlp.experts"),
    ],
    ids=["missing", "shape", "dtype", "qweight-dtype", "group", "no-experts"],
)  # fmt: skip
def test_bad_tensors_name_the_key_and_the_file(tmp_path, change, message):
    folder, _ = ckpt_fixture.checkpoint(tmp_path / "c", **DIMS, group=64)
    _rewrite(folder, change)
    with pytest.raises(BadArgument, match=message):
        Checkpoint(folder, tp=2)


def test_sharded_checkpoint_errors(tmp_path):
    tensors, _ = ckpt_fixture.make_tensors(64, 128, 2, 2, 32, seed=1)
    folder = ckpt_fixture.write(
        tmp_path / "c", tensors, ckpt_fixture.config(64, 128, 2, 2, 2, 32), 2
    )
    index = folder / "model.safetensors.index.json"
    good = json.loads(index.read_text())
    key = "model.layers.1.mlp.experts.0.down_proj.scales"
    bad = {"weight_map": {k: v for k, v in good["weight_map"].items() if k != key}}
    index.write_text(json.dumps(bad))
    with pytest.raises(
        BadArgument, match=rf"missing tensor '{key}' .*index.json lists no such key"
    ):
        Checkpoint(folder, tp=1)
    wrong = dict(good["weight_map"], **{key: "model-00001-of-00002.safetensors"})
    index.write_text(json.dumps({"weight_map": wrong}))
    with pytest.raises(BadArgument, match=rf"tensor '{key}' cannot be read from .*00001-of-00002"):
        Checkpoint(folder, tp=1)
    index.write_text(
        json.dumps({"weight_map": dict(good["weight_map"], **{key: "gone.safetensors"})})
    )
    with pytest.raises(BadArgument, match=r"shard 'gone.safetensors' .* is not a file here"):
        Checkpoint(folder, tp=1)
    index.write_text("{not json")
    with pytest.raises(BadArgument, match=r"index.json: not a readable index"):
        Checkpoint(folder, tp=1)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c.pop("num_experts"), r"config.json: no 'num_experts' \(needed: hidden_size"),
        (lambda c: c.update(hidden_size=0), r"hidden_size=0 must be a positive integer"),
        (lambda c: c.update(num_experts_per_tok="2"), r"num_experts_per_tok='2' must be a positive"),
        (lambda c: c.pop("quantization_config"), r"no 'quantization_config' object: not an AWQ"),
        (lambda c: c["quantization_config"].update(quant_method="gptq"), r"quant_method='gptq', must be 'awq'"),
        (lambda c: c["quantization_config"].update(bits=8), r"quantization_config.bits=8, must be 4"),
        (lambda c: c["quantization_config"].update(version="gemv"), r"version='gemv', must be 'gemm'"),
        (lambda c: c["quantization_config"].update(zero_point=False), r"zero_point=False, must be true"),
        (lambda c: c["quantization_config"].update(group_size=16), r"group_size=16 is not a positive multiple of 32"),
        (lambda c: c["quantization_config"].update(group_size=-1), r"group_size=-1 is not a positive multiple"),
        (lambda c: c["quantization_config"].update(group_size=96), r"hidden=128 is not a multiple of group 96"),
        (lambda c: c.update(moe_intermediate_size=64), r"has shape \[128, 32\]; expected \[128, 8\]"),
    ],
    ids=["field", "zero", "type", "no-quant", "method", "bits", "version", "zero-point",
         "group16", "group-1", "group96", "dims"],
)  # fmt: skip
def test_bad_config_is_one_clear_error(tmp_path, edit, message):
    folder, _ = ckpt_fixture.checkpoint(tmp_path / "c", **DIMS, group=64)
    cfg = json.loads((folder / "config.json").read_text())
    edit(cfg)
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(BadArgument, match=message):
        Checkpoint(folder, tp=2)


def test_shape_and_rank_are_checked_against_the_tp(tmp_path):
    folder, _ = ckpt_fixture.checkpoint(tmp_path / "c", **DIMS, group=64)
    with pytest.raises(BadArgument, match=r"W13 N/2 \(inter/tp, gate and up halves\)=16 is not"):
        Checkpoint(folder, tp=16)
    with pytest.raises(BadArgument, match=r"--rank 2 must be in 0..1 for tp=2"):
        Checkpoint(folder, tp=2, rank=2)
