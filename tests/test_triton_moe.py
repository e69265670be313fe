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

from workbench.core import defaults
from workbench.core.errors import BadArgument
from workbench.data import layouts
from workbench.data.shapes import PRESETS, Shape
from workbench.kernels.ops import make_bank, make_inputs
from workbench.kernels.specs import DEFAULT_TOLERANCE
from workbench.kernels.triton_moe import (
    Launch,
    TritonMoePeer,
    convert_bank,
    decode_meta_torch,
    load_table,
    table_config,
    table_key,
    unpack_int4_torch,
)

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

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


def _case(kernel, shape, block_n, block_k, dot, slots=0, **extra):
    """``slots`` > 0: W2's split form with that many slots per program."""
    cfg = {"BLOCK_N": block_n, "BLOCK_K": block_k, "DOT": dot, "num_warps": 4, "num_stages": 2,
           "SPLIT": slots > 0, "SLOTS": max(slots, 1)}  # fmt: skip
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
# W2's split form: one slot per program, and two (top_k 1 and 3 leave a padding slot in the last
# group); tl.dot; ragged N and K; invalid ids in a group with a valid one
CASES |= {f"w2-split{s}-top{t}-fma": _case("w2", Shape(128, 256, 6, t, 2, tp=4), 32, 64, False, s)
          for t in (1, 3, 6) for s in (1, 2)}  # fmt: skip
CASES |= {"w2-split2-top3-dot": _case("w2", Shape(128, 256, 6, 3, 2, tp=4), 32, 64, True, 2)}
CASES |= {f"w2-split2-ragged-{'dot' if d else 'fma'}": _case("w2", RAGGED, 128, 128, d, 2)
          for d in (False, True)}  # fmt: skip
CASES |= {"w2-split2-bad-ids": _case("w2", SMALL, 16, 32, False, 2,
                                     bad_ids={"0": SMALL.experts, "2": -1})}  # fmt: skip


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
    assert r["scratch_nan"] == 0, f"unwritten partial rows (seed {case['seed']})"
    assert r["rel_l2"] <= DEFAULT_TOLERANCE, f"{name} seed {case['seed']}: {r}"
    if "bad_ids" in case and case["kernel"] == "w13":
        assert r["zero_rows"] == [0, 2]  # the invalid slots' rows, and only those
    if "bad_ids" in case and case["config"]["SPLIT"]:
        assert r["zero_scratch_rows"] == [0, 2]  # their partials are written, as zeros
    elif case["config"]["SPLIT"]:
        assert r["zero_scratch_rows"] == []  # every slot's partial row was written


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


def _space(kernel, wide):
    from workbench.kernels.triton_moe_kernels import config_space

    return [Launch.from_triton(c, source="space") for c in config_space(wide, kernel)]


def test_table_covers_the_default_shape_with_configs_of_the_tuning_space():
    pytest.importorskip("triton")
    shape = PRESETS["qwen3.8-flash-next"]
    table = load_table()
    assert "NVIDIA H200" in table
    for kernel in ("w13", "w2"):
        K, N = shape.dims(kernel)
        entry = table["NVIDIA H200"][table_key(kernel, K, N)]
        assert isinstance(entry["measured"], bool)
        cfg = table_config("NVIDIA H200", kernel, K, N)
        assert cfg.meta(kernel) in [c.meta(kernel) for c in _space(kernel, wide=True)]
        assert cfg.source == ("table" if entry["measured"] else "table (not yet measured)")
    assert table_config("Some other GPU", "w13", 2560, 320) is None


def test_the_w2_space_holds_both_slot_forms_and_w13_none():
    pytest.importorskip("triton")
    for wide in (False, True):
        w2 = _space("w2", wide)
        assert len({str(c) for c in w2}) == len(w2)  # no config twice
        forms = {c.form for c in w2}
        assert forms == {"loop", "split"}, forms
        assert {c.DOT for c in w2 if c.SPLIT} == ({False, True} if wide else {False})
        assert all(not c.SPLIT and "SPLIT" not in c.meta("w13") for c in _space("w13", wide))
    assert {c.SLOTS for c in _space("w2", True) if c.SPLIT} == {1, 2}


def test_k_tiles_past_k_are_pruned():
    pytest.importorskip("triton")
    from workbench.kernels.triton_moe_kernels import _drop_oversized_k, config_space

    space = config_space(True, "w2")
    kept = _drop_oversized_k(space, {"K": 160, "N": 2560})
    assert {c.kwargs["BLOCK_K"] for c in kept} == {32, 64, 128, 256}
    assert {c.kwargs["SPLIT"] for c in kept} == {False, True}
    assert _drop_oversized_k(space, {"K": 2560}) == space  # W13's K keeps every tile


def test_table_entries_name_their_slot_form(tmp_path):
    base = {"BLOCK_N": 16, "BLOCK_K": 256, "DOT": False, "num_warps": 4, "num_stages": 2}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"G": {
        table_key("w2", 160, 2560): {**base, "measured": True},  # a table from before the form
        table_key("w2", 160, 96): {**base, "SPLIT": True, "SLOTS": 2, "measured": False},
    }}))  # fmt: skip
    old = table_config("G", "w2", 160, 2560, path)
    assert (old.SPLIT, old.SLOTS, old.form, old.source) == (False, 1, "loop", "table")
    new = table_config("G", "w2", 160, 96, path)
    assert (new.SPLIT, new.SLOTS, new.form) == (True, 2, "split") and "split slots=2" in str(new)
    assert new.meta("w2")["SLOTS"] == 2 and set(new.meta("w13")) == set(base)


def test_the_split_form_is_w2s_and_its_scratch_is_allocated_once():
    bank = make_bank(SMALL, "w13", "b3", seed=_seed(), device="cpu")
    split = Launch(16, 64, False, 2, 2, "given", SPLIT=True, SLOTS=2)
    with pytest.raises(BadArgument, match="triton-moe w13: no split form with SLOTS=2"):
        TritonMoePeer("w13", SMALL, bank, config=split)
    w2 = make_bank(SMALL, "w2", "b3", seed=_seed(), device="cpu")
    with pytest.raises(BadArgument, match="no split form with SLOTS=0"):
        TritonMoePeer("w2", SMALL, w2, config=Launch(16, 64, False, 2, 2, "given", True, 0))
    peer = TritonMoePeer("w2", SMALL, w2, config=split)
    assert peer.scratch.shape == (SMALL.top_k, w2.N) and peer.scratch.dtype == torch.float32
    first = peer.scratch
    peer.relocate()
    assert peer.scratch.shape == first.shape and peer.scratch.data_ptr() != first.data_ptr()


# ------------------------------------------------------------------ on the GPU

DEFAULT = PRESETS["qwen3.8-flash-next"]


def _gpu_reference(kernel, bank, inp):
    from workbench.data.reference import w2_reference, w13_reference

    w = bank.dequantized(inp["ids"].tolist())
    if kernel == "w13":
        return w13_reference(inp["x"].cpu().numpy()[0], w).inter_exact
    return w2_reference(inp["inter"].cpu().numpy(), w, inp["rw"].cpu().numpy()).y[None]


FORCED = {
    "table": None,
    "fma": Launch(32, 128, False, 4, 2, "given"),
    "dot": Launch(32, 64, True, 4, 3, "given"),
    # W2's split form: one slot per program; two per program with tl.dot (top_k 10: 5 groups);
    # four per program (the last group of three holds two padding slots)
    "split": Launch(16, 256, False, 2, 2, "given", SPLIT=True, SLOTS=1),
    "split2-dot": Launch(32, 64, True, 4, 3, "given", SPLIT=True, SLOTS=2),
    "split4": Launch(8, 64, False, 1, 2, "given", SPLIT=True, SLOTS=4),
}
GPU_CONFIGS = [(k, c) for k in ("w13", "w2") for c in FORCED if k == "w2" or "split" not in c]


@pytest.mark.gpu
@pytest.mark.parametrize(("kernel", "config"), GPU_CONFIGS)
def test_gpu_numerics_on_the_default_shape(kernel, config):
    from workbench.data.reference import rel_l2

    seed = _seed()
    bank = make_bank(DEFAULT, kernel, "b3", seed=seed)
    forced = FORCED[config]
    peer = TritonMoePeer(kernel, DEFAULT, bank, config=forced)
    assert peer.config.source.startswith("table") or config != "table"
    inp = make_inputs(DEFAULT, kernel, seed=seed + 1)
    act = inp["x"] if kernel == "w13" else inp["inter"]
    peer(act, bank, inp["ids"], inp["out"], rw=inp["rw"])
    got = inp["out"].cpu().double().numpy()
    assert not inp["out"].isnan().any()
    assert rel_l2(got, _gpu_reference(kernel, bank, inp)) <= DEFAULT_TOLERANCE, seed


FORMS = [("w13", "table"), ("w2", "table"), ("w2", "split"), ("w2", "split4")]


@pytest.mark.gpu
@pytest.mark.parametrize(("kernel", "config"), FORMS)
def test_gpu_out_of_range_ids_contribute_nothing(kernel, config):
    seed = _seed()
    bank = make_bank(DEFAULT, kernel, "b3", seed=seed)
    peer = TritonMoePeer(kernel, DEFAULT, bank, config=FORCED[config])
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
@pytest.mark.parametrize(("kernel", "config"), FORMS)
def test_gpu_graph_capture_reads_the_ids_on_the_device(kernel, config):
    from workbench.measure.graphs import capture

    seed = _seed()
    bank = make_bank(DEFAULT, kernel, "b3", seed=seed)
    peer = TritonMoePeer(kernel, DEFAULT, bank, config=FORCED[config])
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
    from workbench.data.reference import rel_l2
    from workbench.kernels import triton_moe

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
    assert rel_l2(got, _gpu_reference("w2", bank, inp)) <= DEFAULT_TOLERANCE


@pytest.mark.gpu
def test_gpu_autotune_times_a_split_config_with_its_sum():
    """autotuned("w2")'s post_hook launches the sum inside each timed call of a split config: the
    output (written by nothing else here) is the whole call's result after autotuning."""
    import triton

    from workbench.data.reference import rel_l2
    from workbench.kernels import triton_moe_kernels as k

    seed = _seed()
    bank = make_bank(DEFAULT, "w2", "b3", seed=seed)
    peer = TritonMoePeer("w2", DEFAULT, bank, config=FORCED["split"])
    configs = [c for c in k.config_space(False, "w2") if c.kwargs["SPLIT"]][:2]
    tuner = triton.autotune(configs=configs, key=["N", "K"], post_hook=k._reduce_after)(k.w2_kernel)
    inp = make_inputs(DEFAULT, "w2", seed=seed + 1)
    peer._launch(tuner, inp["inter"], inp["ids"], inp["out"], inp["rw"], {})
    torch.cuda.synchronize()
    assert Launch.from_triton(tuner.best_config).SPLIT
    assert not inp["out"].isnan().any(), "the sum never ran: autotune timed half a call"
    got = inp["out"].cpu().double().numpy()
    assert rel_l2(got, _gpu_reference("w2", bank, inp)) <= DEFAULT_TOLERANCE, seed


@pytest.mark.gpu
def test_gpu_ab_with_the_triton_peer(tmp_path, capsys):
    from workbench import cli

    code = cli.main(
        ["ab", "--kernel", "w13,w2", "--set", "hot", "--a", "b3-scalar", "--b", "triton-moe",
         "--calls", "8", "--replays", "10", "--blocks", "2", "--pairs", "2", "--workers", "2",
         "--no-confirm", "--sessions-dir", str(tmp_path), "--no-plots", "--json"]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    every = {c["id"]: c for c in json.loads(out.out)["comparisons"]}
    # each main comparison and its method check (docs/DESIGN.md §5.11), timed on its arms
    check = defaults.CHECK_TIMING
    assert set(every) == {"w13/hot", "w2/hot", f"w13/hot/{check}", f"w2/hot/{check}"}
    for k in ("w13", "w2"):
        c = every[f"{k}/hot/{check}"]
        assert c["role"] == "method" and c["b"] == "triton-moe"
        assert c["a_ms"] > 0 and c["b_ms"] > 0
    cmps = {cid: c for cid, c in every.items() if c["role"] == "main"}
    assert set(cmps) == {"w13/hot", "w2/hot"}
    for c in cmps.values():
        assert c["b"] == "triton-moe" and c["gate"]["gated"] and c["gate"]["ok"]
        # one gate per counted block of each worker: 2 blocks x 2 workers
        assert c["gate"]["rel_l2"] < 4e-3 and c["gate"]["blocks"] == 2 * 2
        assert c["a_ms"] > 0 and c["b_ms"] > 0
