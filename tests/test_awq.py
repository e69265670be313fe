"""AWQ checkpoint import: AutoAWQ nibble order, regrouping, and tensor-parallel slicing."""

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from workbench.core.errors import BadArgument
from workbench.data.awq import awq_pack, awq_unpack, load_awq_expert
from workbench.data.layouts import dequantize

PREFIX = "model.layers.3.mlp.experts.11"


def rand_linear(gen, k, n, group):
    q = torch.randint(0, 16, (k, n), generator=gen, dtype=torch.uint8)
    zeros = torch.randint(0, 16, (k // group, n), generator=gen, dtype=torch.uint8)
    scales = torch.empty(k // group, n).uniform_(1e-3, 1e-2, generator=gen).half()
    return q, zeros, scales


def autoawq_style_pack(w: torch.Tensor) -> torch.Tensor:
    """Independent restatement of AutoAWQ's packing loop: nibble i of word c <- column 8c+order[i]."""
    order = [0, 2, 4, 6, 1, 3, 5, 7]
    out = np.zeros((w.shape[0], w.shape[1] // 8), dtype=np.uint32)
    wn = w.numpy().astype(np.uint32)
    for c in range(w.shape[1] // 8):
        for i in range(8):
            out[:, c] |= wn[:, 8 * c + order[i]] << (4 * i)
    return torch.from_numpy(out.view(np.int32))


def test_pack_matches_autoawq_order_and_round_trips():
    gen = torch.Generator().manual_seed(17)
    q, z, s = rand_linear(gen, 64, 48, 32)
    qweight, qzeros, scales = awq_pack(q, z, s)
    assert qweight.dtype == torch.int32 and qweight.shape == (64, 6)
    assert qzeros.dtype == torch.int32 and qzeros.shape == (2, 6)
    assert torch.equal(qweight, autoawq_style_pack(q))
    assert torch.equal(qzeros, autoawq_style_pack(z))
    back = awq_unpack(qweight, qzeros, scales)
    assert torch.equal(back.q, q) and torch.equal(back.zeros, z) and torch.equal(back.scales, s)


def test_nibble_order_by_hand():
    # column j of each 8-column block holds value j: nibbles 7..0 read 7,5,3,1,6,4,2,0
    q = torch.arange(8, dtype=torch.uint8).repeat(32, 2)
    qweight, _, _ = awq_pack(q, q[:1], torch.ones(1, 16, dtype=torch.float16))
    assert (qweight == 0x75316420).all()
    # and unpacking a word built by hand gives the columns back in order
    word = torch.tensor([[0x75316420]], dtype=torch.int32)
    m = awq_unpack(word.expand(32, 1).contiguous(), word, torch.ones(1, 8, dtype=torch.float16))
    assert m.q[0].tolist() == list(range(8))


def test_dequantized_awq_matches_awq_formula():
    gen = torch.Generator().manual_seed(2)
    q, z, s = rand_linear(gen, 96, 16, 32)
    m = awq_unpack(*awq_pack(q, z, s))
    w = dequantize(m.q, m.scales, m.zeros).double()
    awq = (q.double() - z.double().repeat_interleave(32, 0)) * s.double().repeat_interleave(32, 0)
    assert torch.allclose(w, awq, rtol=2e-3, atol=1e-4)


def write_expert(path_or_dir, hidden, inter, group, seed, shard=False):
    """Write one AWQ expert (gate/up [H, I], down [I, H]); returns the unpacked originals."""
    gen = torch.Generator().manual_seed(seed)
    originals, tensors = {}, {}
    for proj, (k, n) in {
        "gate_proj": (hidden, inter),
        "up_proj": (hidden, inter),
        "down_proj": (inter, hidden),
    }.items():
        q, z, s = rand_linear(gen, k, n, group)
        originals[proj] = (q, z, s)
        qw, qz, sc = awq_pack(q, z, s)
        tensors.update(
            {
                f"{PREFIX}.{proj}.qweight": qw,
                f"{PREFIX}.{proj}.qzeros": qz,
                f"{PREFIX}.{proj}.scales": sc,
            }
        )
    if shard:
        gate = {k: v for k, v in tensors.items() if ".gate_proj." in k}
        rest = {k: v for k, v in tensors.items() if ".gate_proj." not in k}
        save_file(gate, str(path_or_dir / "model-00001-of-00002.safetensors"))
        save_file(rest, str(path_or_dir / "model-00002-of-00002.safetensors"))
    else:
        save_file(tensors, str(path_or_dir))
    return originals, tensors


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_load_w13_column_parallel(tmp_path, tp):
    hidden, inter = 64, 256
    orig, _ = write_expert(tmp_path / "expert.safetensors", hidden, inter, 32, seed=tp)
    w = inter // tp
    for rank in range(tp):
        m = load_awq_expert(tmp_path / "expert.safetensors", PREFIX, "w13", tp, rank)
        assert m.q.shape == (hidden, 2 * w) and m.zeros.shape == (hidden // 32, 2 * w)
        for i, part in enumerate((orig["gate_proj"], orig["up_proj"])):
            cols = slice(rank * w, (rank + 1) * w)
            half = slice(i * w, (i + 1) * w)
            assert torch.equal(m.q[:, half], part[0][:, cols])
            assert torch.equal(m.zeros[:, half], part[1][:, cols])
            assert torch.equal(m.scales[:, half], part[2][:, cols])


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_load_w2_row_parallel(tmp_path, tp):
    hidden, inter = 96, 256
    orig, _ = write_expert(tmp_path / "e.safetensors", hidden, inter, 32, seed=10 + tp)
    q, z, s = orig["down_proj"]
    rows = inter // tp
    pieces = [load_awq_expert(tmp_path / "e.safetensors", PREFIX, "w2", tp, r) for r in range(tp)]
    for r, m in enumerate(pieces):
        assert m.q.shape == (rows, hidden) and m.scales.shape == (rows // 32, hidden)
        assert torch.equal(m.q, q[r * rows : (r + 1) * rows])
    # the ranks' slices put back together are the whole matrix
    assert torch.equal(torch.cat([m.zeros for m in pieces]), z)
    assert torch.equal(torch.cat([m.scales for m in pieces]), s)


def test_group_128_checkpoint_is_regrouped_exactly(tmp_path):
    hidden, inter, tp = 256, 256, 4  # down_proj slice of 64 rows cuts a 128-row group in half
    orig, _ = write_expert(tmp_path / "g128.safetensors", hidden, inter, 128, seed=5)
    for kernel, proj in (("w2", "down_proj"), ("w13", "gate_proj")):
        q, z, s = orig[proj]
        full = dequantize(q, s.repeat_interleave(4, 0), z.repeat_interleave(4, 0))
        for rank in range(tp):
            m = load_awq_expert(tmp_path / "g128.safetensors", PREFIX, kernel, tp, rank)
            assert m.zeros.shape[0] == m.q.shape[0] // 32
            w = dequantize(m.q, m.scales, m.zeros)
            if kernel == "w2":
                want = full[rank * 64 : (rank + 1) * 64]
            else:
                want = full[:, rank * 64 : (rank + 1) * 64]
                w = w[:, :64]  # the gate half
            assert torch.equal(w.view(torch.int16), want.view(torch.int16))


def test_sharded_folder_and_dict_sources(tmp_path):
    orig, tensors = write_expert(tmp_path, 64, 128, 32, seed=8, shard=True)
    from_dir = load_awq_expert(tmp_path, PREFIX, "w13", 2, 1)
    from_dict = load_awq_expert(tensors, PREFIX + ".", "w13", 2, 1)
    for a, b in zip(from_dir, from_dict, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(from_dir.q[:, :64], orig["gate_proj"][0][:, 64:])


def test_errors_name_key_and_value(tmp_path):
    _, tensors = write_expert(tmp_path / "x.safetensors", 64, 128, 32, seed=1)
    f = tmp_path / "x.safetensors"
    with pytest.raises(
        BadArgument, match=r"missing tensor 'model.layers.3.mlp.experts.12.down_proj"
    ):
        load_awq_expert(f, "model.layers.3.mlp.experts.12", "w2", 1, 0)
    partial = {k: v for k, v in tensors.items() if not k.endswith("up_proj.scales")}
    with pytest.raises(BadArgument, match=r"missing tensor '.*up_proj.scales' in the given dict"):
        load_awq_expert(partial, PREFIX, "w13", 1, 0)
    with pytest.raises(BadArgument, match=r"rank=2 must be in 0..1 for tp=2"):
        load_awq_expert(f, PREFIX, "w13", 2, 2)
    with pytest.raises(BadArgument, match=r"inter=128 .* tp=3"):
        load_awq_expert(f, PREFIX, "w13", 3, 0)
    with pytest.raises(BadArgument, match=r"down_proj K=128 does not split into tp=8"):
        load_awq_expert(f, PREFIX, "w2", 8, 0)
    with pytest.raises(BadArgument, match=r"kernel='w4'"):
        load_awq_expert(f, PREFIX, "w4", 1, 0)
    with pytest.raises(BadArgument, match=r"checkpoint=.*nope.safetensors"):
        load_awq_expert(tmp_path / "nope.safetensors", PREFIX, "w2", 1, 0)


def test_unpack_and_pack_validation():
    qw = torch.ones(64, 4, dtype=torch.int32)
    qz = torch.ones(2, 4, dtype=torch.int32)
    sc = torch.ones(2, 32, dtype=torch.float16)
    with pytest.raises(BadArgument, match=r"qzeros shape \(1, 4\)"):
        awq_unpack(qw, qz[:1], sc)
    with pytest.raises(BadArgument, match=r"scales shape \(2, 16\)"):
        awq_unpack(qw, qz, sc[:, :16])
    with pytest.raises(BadArgument, match=r"qweight must be torch.int32, got torch.int64"):
        awq_unpack(qw.long(), qz, sc)
    with pytest.raises(BadArgument, match=r"K=64 is not a multiple of group=48"):
        awq_unpack(qw, qz, sc, group=48)
    q = torch.full((64, 32), 3, dtype=torch.uint8)
    with pytest.raises(BadArgument, match=r"zeros must hold int4 values 0..15, got 16"):
        awq_pack(q, torch.full((2, 32), 16, dtype=torch.uint8), sc)
    with pytest.raises(BadArgument, match=r"N % 8 == 0, got shape \(64, 12\)"):
        awq_pack(q[:, :12], torch.ones(2, 12, dtype=torch.uint8), sc[:, :12])
