"""The triton-moe peer (docs/DESIGN.md §4.7): its bank conversion (bit-exact to layouts), its
numerics against the float64 reference under Triton's CPU interpreter, its argument checks,
its config table; and, marker ``gpu``, the same on the H200 default shape, CUDA-Graph capture
with ids read on the device, autotuning and an `ab --b triton-moe` run."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from workbench import layouts
from workbench.check import REL_L2_MAX
from workbench.errors import BadArgument
from workbench.ops import make_bank, make_inputs
from workbench.shapes import PRESETS, Shape
from workbench.triton_moe import (
    Launch,
    TritonMoePeer,
    convert_bank,
    decode_meta_torch,
    load_table,
    table_config,
    table_key,
    unpack_int4_torch,
)

REPO = Path(__file__).resolve().parents[1]
SMALL = Shape(hidden=128, inter=256, experts=6, top_k=3, layers=2, tp=4)
# K and N are not multiples of the 128 blocks used on it: W13 K=96, N/2=192; W2 K=192, N=96.
RAGGED = Shape(hidden=96, inter=192, experts=7, top_k=3, layers=1, tp=1)


def _seed() -> int:
    return secrets.randbits(30)  # fresh inputs every run; printed with any failure


# ------------------------------------------------------------------ conversion (no triton)


@pytest.mark.parametrize("layout", ["b3", "b4"])
def test_conversion_matches_layouts(layout):
    seed = _seed()
    bank = make_bank(SMALL, "w13", layout, seed=seed, device="cpu")
    q = layouts.unpack_int4(bank.weights)
    assert torch.equal(unpack_int4_torch(bank.weights), q), seed
    scales, biases = layouts.decode_metadata(bank.meta, layout, bank.N)
    s, b = decode_meta_torch(bank.meta, layout, bank.N)
    assert torch.equal(s.view(torch.int16), scales.view(torch.int16)), seed
    assert torch.equal(b.view(torch.int16), biases.view(torch.int16)), seed
    qw, sc, bi = convert_bank(bank)
    assert qw.shape == (SMALL.experts, bank.K // 8, bank.N) and qw.dtype == torch.int32
    # word r of column n holds q[8r + j, n] at bits 4j
    nib = torch.stack([(qw >> (4 * j)) & 0xF for j in range(8)], dim=2)
    assert torch.equal(nib.reshape(q.shape).to(torch.uint8), q), seed
    assert torch.equal(sc, s) and torch.equal(bi.view(torch.int16), b.view(torch.int16))
    assert q.float().std() > 3  # real data, not zeros


# ------------------------------------------------------------------ interpreter numerics


def _case(kernel, shape, block_n, block_k, dot, **extra):
    cfg = {"BLOCK_N": block_n, "BLOCK_K": block_k, "DOT": dot, "num_warps": 4, "num_stages": 2}
    shp = {f: getattr(shape, f) for f in ("hidden", "inter", "experts", "top_k", "layers", "tp")}
    return {"kernel": kernel, "shape": shp, "seed": _seed(), "config": cfg, **extra}


CASES = {
    f"{k}-top{t}-{'dot' if d else 'fma'}": _case(k, Shape(128, 256, 6, t, 2, tp=4), 32, 64, d)
    for k in ("w13", "w2")
    for t in (1, 3, 6)
    for d in (False, True)
}
CASES |= {f"{k}-ragged-{'dot' if d else 'fma'}": _case(k, RAGGED, 128, 128, d)
          for k in ("w13", "w2") for d in (False, True)}  # fmt: skip
CASES |= {f"{k}-bad-ids": _case(k, SMALL, 16, 32, False, bad_ids={"0": SMALL.experts, "2": -1})
          for k in ("w13", "w2")}  # fmt: skip


@pytest.fixture(scope="module")
def interpreted():
    """Every case, run once in a child process under TRITON_INTERPRET=1."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "triton_interp_cases.py")],
        input=json.dumps(list(CASES.values())), capture_output=True, text=True, env=env,
        cwd=REPO, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(zip(CASES, json.loads(proc.stdout), strict=True))


@pytest.mark.parametrize("name", list(CASES))
def test_interpreter_numerics_match_the_float64_reference(interpreted, name):
    r, case = interpreted[name], CASES[name]
    assert r["want_norm"] > 0, "reference is all zeros: the case tests nothing"
    assert r["nan"] == 0, f"unwritten outputs (seed {case['seed']})"
    assert r["rel_l2"] <= REL_L2_MAX, f"{name} seed {case['seed']}: {r}"
    if "bad_ids" in case and case["kernel"] == "w13":
        assert r["zero_rows"] == [0, 2]  # the invalid slots' rows, and only those


# ------------------------------------------------------------------ argument checks, table


def _cpu_peer(kernel="w2"):
    bank = make_bank(SMALL, kernel, "b3", seed=_seed(), device="cpu")
    peer = TritonMoePeer(kernel, SMALL, bank, config=Launch(16, 64, False, 2, 2, "given"))
    return peer, bank, make_inputs(SMALL, kernel, seed=_seed(), device="cpu")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(inp=d["inp"].float()), "inp must be a contiguous torch.float16"),
        (lambda d: d.update(inp=d["inp"][:2]), r"inp must be .* \[3, 64\], got .* \[2, 64\]"),
        (lambda d: d.update(ids=d["ids"].long()), "ids must be a contiguous torch.int32"),
        (lambda d: d.update(out=d["out"].t()), "out must be"),
        (lambda d: d.update(rw=None), "w2 needs router weights rw"),
        (lambda d: d.update(rw=d["rw"][:1]), "rw must be a contiguous torch.float32 \\[3\\]"),
        (lambda d: d.update(inp="x"), "inp must be a torch.Tensor, got str"),
    ],
)
def test_bad_arguments_are_named(mutate, message):
    peer, bank, inp = _cpu_peer()
    d = {"inp": inp["inter"], "ids": inp["ids"], "out": inp["out"], "rw": inp["rw"]}
    mutate(d)
    with pytest.raises(BadArgument, match=message):
        peer(d["inp"], bank, d["ids"], d["out"], rw=d["rw"])


def test_a_bank_other_than_the_converted_one_is_refused():
    peer, bank, inp = _cpu_peer()
    other = make_bank(SMALL, "w2", "b3", seed=bank.seed + 1, device="cpu")
    with pytest.raises(BadArgument, match=f"seed {other.seed} but this triton-moe peer"):
        peer(inp["inter"], other, inp["ids"], inp["out"], rw=inp["rw"])
    with pytest.raises(BadArgument, match="does not match bank 'w2'"):
        TritonMoePeer("w13", SMALL, bank, config=peer.config)


def test_relocate_copies_the_converted_experts():
    peer, _, _ = _cpu_peer()
    before = peer.qweight
    peer.relocate()
    assert peer.qweight.data_ptr() != before.data_ptr() and torch.equal(peer.qweight, before)


def test_table_covers_the_default_shape_with_configs_of_the_tuning_space():
    pytest.importorskip("triton")
    from workbench.triton_moe_kernels import config_space

    shape = PRESETS["qwen3.8-flash-next"]
    space = {(c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.kwargs["DOT"], c.num_warps,
              c.num_stages) for c in config_space(wide=True)}  # fmt: skip
    table = load_table()
    assert "NVIDIA H200" in table
    for kernel in ("w13", "w2"):
        K, N = shape.dims(kernel)
        entry = table["NVIDIA H200"][table_key(kernel, K, N)]
        assert isinstance(entry["measured"], bool)
        cfg = table_config("NVIDIA H200", kernel, K, N)
        assert (cfg.BLOCK_N, cfg.BLOCK_K, cfg.DOT, cfg.num_warps, cfg.num_stages) in space
        assert cfg.source == ("table" if entry["measured"] else "table (not yet measured)")
    assert table_config("Some other GPU", "w13", 2560, 320) is None


# ------------------------------------------------------------------ on the GPU

DEFAULT = PRESETS["qwen3.8-flash-next"]


def _gpu_reference(kernel, bank, inp):
    from workbench.reference import w2_reference, w13_reference

    w = bank.dequantized(inp["ids"].tolist())
    if kernel == "w13":
        return w13_reference(inp["x"].cpu().numpy()[0], w).inter_exact
    return w2_reference(inp["inter"].cpu().numpy(), w, inp["rw"].cpu().numpy()).y[None]


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["w13", "w2"])
@pytest.mark.parametrize("config", ["table", "fma", "dot"])
def test_gpu_numerics_on_the_default_shape(kernel, config):
    from workbench.reference import rel_l2

    seed = _seed()
    bank = make_bank(DEFAULT, kernel, "b3", seed=seed)
    forced = {"table": None, "fma": Launch(32, 128, False, 4, 2, "given"),
              "dot": Launch(32, 64, True, 4, 3, "given")}[config]  # fmt: skip
    peer = TritonMoePeer(kernel, DEFAULT, bank, config=forced)
    assert peer.config.source.startswith("table") or config != "table"
    inp = make_inputs(DEFAULT, kernel, seed=seed + 1)
    act = inp["x"] if kernel == "w13" else inp["inter"]
    peer(act, bank, inp["ids"], inp["out"], rw=inp["rw"])
    got = inp["out"].cpu().double().numpy()
    assert not inp["out"].isnan().any()
    assert rel_l2(got, _gpu_reference(kernel, bank, inp)) <= REL_L2_MAX, seed


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["w13", "w2"])
def test_gpu_out_of_range_ids_contribute_nothing(kernel):
    seed = _seed()
    bank = make_bank(DEFAULT, kernel, "b3", seed=seed)
    peer = TritonMoePeer(kernel, DEFAULT, bank)
    inp = make_inputs(DEFAULT, kernel, seed=seed + 1)
    act = inp["x"] if kernel == "w13" else inp["inter"]
    ids = inp["ids"].clone()
    ids[0], ids[3] = DEFAULT.experts, -7  # no fault, no contribution
    peer(act, bank, ids, inp["out"], rw=inp["rw"])
    want = torch.full_like(inp["out"], float("nan"))
    if kernel == "w13":
        keep = [j for j in range(DEFAULT.top_k) if j not in (0, 3)]
        peer(act, bank, inp["ids"], want, rw=inp["rw"])
        want[[0, 3]] = 0
    else:
        rw = inp["rw"].clone()
        rw[[0, 3]] = 0  # a skipped slot is a slot with router weight 0
        peer(act, bank, inp["ids"], want, rw=rw)
        keep = [0]
    torch.cuda.synchronize()
    assert not inp["out"].isnan().any() and inp["out"][keep].abs().sum() > 0
    assert torch.equal(inp["out"].view(torch.int16), want.view(torch.int16)), seed


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["w13", "w2"])
def test_gpu_graph_capture_reads_the_ids_on_the_device(kernel):
    from workbench.graphs import capture

    seed = _seed()
    bank = make_bank(DEFAULT, kernel, "b3", seed=seed)
    peer = TritonMoePeer(kernel, DEFAULT, bank)
    a, b = make_inputs(DEFAULT, kernel, seed=seed + 1), make_inputs(DEFAULT, kernel, seed=seed + 2)
    key = "x" if kernel == "w13" else "inter"
    ids = a["ids"].clone()
    graph = capture(lambda: peer(a[key], bank, ids, a["out"], rw=a["rw"]))
    ids.copy_(b["ids"])  # new routing, same graph: the kernel must read it from the device
    a["out"].fill_(float("nan"))
    graph.replay()
    eager = torch.full_like(a["out"], float("nan"))
    peer(a[key], bank, b["ids"], eager, rw=a["rw"])
    torch.cuda.synchronize()
    assert not eager.isnan().any()
    assert torch.equal(a["out"].view(torch.int16), eager.view(torch.int16))  # deterministic


@pytest.mark.gpu
def test_gpu_autotunes_once_where_the_table_has_no_entry():
    from workbench import triton_moe
    from workbench.reference import rel_l2

    shape = Shape(hidden=256, inter=512, experts=16, top_k=4, layers=1, tp=2)
    bank = make_bank(shape, "w2", "b3", seed=_seed())
    peer = TritonMoePeer("w2", shape, bank)
    assert peer.config.source == "autotuned"
    again = TritonMoePeer("w2", shape, make_bank(shape, "w2", "b3", seed=_seed()))
    assert again.config is peer.config  # once per (gpu, kernel, K, N) and process
    assert len([k for k in triton_moe._TUNED if k[1:] == ("w2", 256, 256)]) == 1
    inp = make_inputs(shape, "w2", seed=_seed())
    peer(inp["inter"], bank, inp["ids"], inp["out"], rw=inp["rw"])
    got = inp["out"].cpu().double().numpy()
    assert rel_l2(got, _gpu_reference("w2", bank, inp)) <= REL_L2_MAX


@pytest.mark.gpu
def test_gpu_ab_with_the_triton_peer(tmp_path, capsys):
    from workbench import cli

    code = cli.main(
        ["ab", "--kernel", "w13,w2", "--set", "hot", "--a", "b3-scalar", "--b", "triton-moe",
         "--calls", "8", "--replays", "10", "--blocks", "2", "--pairs", "2", "--no-confirm",
         "--sessions-dir", str(tmp_path), "--no-plots", "--json"]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    cmps = {c["id"]: c for c in json.loads(out.out)["comparisons"]}
    assert set(cmps) == {"w13/hot", "w2/hot"}
    for c in cmps.values():
        assert c["b"] == "triton-moe" and c["gate"]["gated"] and c["gate"]["ok"]
        assert c["gate"]["rel_l2"] < 4e-3 and c["gate"]["blocks"] == 2
        assert c["a_ms"] > 0 and c["b_ms"] > 0
