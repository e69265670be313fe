"""`workbench ab` / `workbench calibrate` on CPU.

Two tiers: argument checking and the no-GPU exit on this machine (real), and the whole engine
(plan, banks, workloads, arms, gate, ABBA, statistics, recommendation, step confirmation,
session, tables, JSON) on a *simulated* device: torch.cuda's few entry points the engine uses
are replaced by CPU fakes whose kernels compute real outputs on CPU tensors and advance a fake
clock by a known cost per call, so the measured ratios are known in advance.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter

import numpy as np
import pytest
import sim_device
import sim_interrupt
import torch
from sim_device import FUSED_PEER_US, PEER_US, SM_MHZ, FakeFusedPeer, FakeKernelOp, FakePeer

from workbench import cli
from workbench.core.errors import BadArgument, BuildError
from workbench.core.vocab import KERNELS
from workbench.measure.abba import ProtocolConfig
from workbench.run import config, runner
from workbench.store.session import load_session

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

SMALL = ["--hidden", "64", "--inter", "128", "--experts", "8", "--top-k", "2", "--tp", "1"]
FAST = ["--calls", "4", "--replays", "5", "--blocks", "3", "--pairs", "2"]

# ------------------------------------------------------------------ argument errors (no GPU)


@pytest.fixture
def no_gpu_work(monkeypatch):
    """Any GPU step reached during argument checking fails the test loudly."""

    def boom(*a, **k):
        raise AssertionError("GPU work started before the arguments were checked")

    monkeypatch.setattr(runner, "require_gpu", boom)


@pytest.mark.parametrize(
    "argv, names",
    [
        (["--a", "b4-coop"], "--a 'b4-coop'"),
        (["--b", "b5-scalar"], "--b 'b5-scalar'"),
        (["--pairs", "0"], "--pairs 0"),
        (["--replays", "0"], "--replays 0"),
        (["--calls", "-3"], "--calls -3"),
        (["--kernel", "w5"], "--kernel 'w5'"),
        (["--set", "cold"], "--set 'cold'"),
        (["--kernel", ""], "--kernel ''"),
        (["--min-effect", "0.7"], "--min-effect 0.7"),
        (["--adaptive", "--target", "2"], "--target 2.0"),
        (["--budget", "-5"], "--budget -5.0"),
        (["--seed", "-1"], "--seed -1"),
        (["--hidden", "100"], "hidden"),
        (["--preset", "llama"], "preset='llama'"),
        (["--kernel", "step", "--a", "tinygemm"], "--a 'tinygemm'"),
        (["--kernel", "step", "--b", "w13=b3-coop"], "--b 'w13=b3-coop'"),
        (["--a", "w13=b3-coop,w3=b3-scalar"], "'w3=b3-scalar'"),
    ],
)
def test_bad_arguments_exit_2_naming_the_argument(no_gpu_work, capsys, argv, names):
    assert cli.main(["ab", *argv]) == 2
    err = capsys.readouterr().err
    assert names in err, err


@pytest.mark.parametrize(
    "argv, names",
    [
        (["--spins", "0"], "--spins '0'"),
        (["--spins", "a,b"], "--spins 'a,b'"),
        (["--spins=-5,10"], "--spins '-5,10'"),
        (["--kernel", "step"], "--kernel step"),
        (["--arm", "b4-coop"], "--arm 'b4-coop'"),
    ],
)
def test_calibrate_bad_arguments(no_gpu_work, capsys, argv, names):
    assert cli.main(["calibrate", *argv]) == 2
    assert names in capsys.readouterr().err


def test_no_gpu_here_exits_3_with_what_still_works(capsys, tmp_path):
    if torch.cuda.is_available():  # pragma: no cover - on the GPU machine
        pytest.skip("a GPU is present")
    assert cli.main(["ab", "--sessions-dir", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "no usable GPU" in err
    for works in ("capacity", "sessions", "plot", "report", "TUI", "browse", "tests"):
        assert works in err
    assert "Traceback" not in err
    assert not any(tmp_path.iterdir()), "no session is created without a GPU"
    assert cli.main(["calibrate", "--sessions-dir", str(tmp_path)]) == 3


@pytest.fixture
def device(monkeypatch):
    """The simulated GPU (tests/sim_device.py): returns the list of variants that were built."""
    return sim_device.install(monkeypatch)


# every reference, tinygemm too (the default leaves it out: docs/DESIGN.md §4.5)
ALL_REFS = ["--reference", "b4-scalar,tinygemm,triton-moe"]


def run_json(capsys, argv):
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, (json.loads(out.out) if out.out.strip() else None), out.err


def by_id(summary):
    return {c["id"]: c for c in summary["comparisons"]}


def test_default_ab_run_end_to_end(device, capsys, tmp_path):
    code, s, err = run_json(
        capsys,
        ["ab", *SMALL, *FAST, *ALL_REFS, "--sessions-dir", str(tmp_path), "--no-plots", "--json"],
    )
    assert code == 0, err
    cmps = by_id(s)
    # each main hot comparison is timed by a second method too (docs/DESIGN.md §5.11)
    expected = [f"{k}/{st}{r}" for k in ("w13", "w2") for st in ("hot", "rotating")
                for r in ("", *("/batch",) * (st == "hot"), "/b4-scalar", "/tinygemm", "/triton-moe")] + ["step/hot/confirm", "step/rotating/confirm"]  # fmt: skip
    assert list(cmps) == expected
    for k, ratio in (("w13", 0.95), ("w2", 1.10)):
        check = cmps[f"{k}/hot/batch"]
        assert (check["role"], check["a"], check["b"]) == ("method", "b3-scalar", "b3-coop")
        assert check["verdict"]["median"] == pytest.approx(ratio, abs=0.01)
    assert [c["id"] for c in s["method_checks"]] == ["w13/hot", "w2/hot"]
    # the simulated costs come back as ratios and verdicts
    for st in ("hot", "rotating"):
        w13, w2 = cmps[f"w13/{st}"], cmps[f"w2/{st}"]
        assert w13["verdict"]["median"] == pytest.approx(0.95, abs=0.01)
        assert w13["verdict"]["verdict"] == "FASTER"
        assert w2["verdict"]["median"] == pytest.approx(1.10, abs=0.01)
        assert w2["verdict"]["verdict"] == "SLOWER"
        assert w13["a_us_per_call"] == pytest.approx(2.0, rel=0.02)
        assert w13["b_us_per_call"] == pytest.approx(1.9, rel=0.02)
        conf = cmps[f"step/{st}/confirm"]
        assert conf["a"] == "w13=b3-scalar,w2=b3-scalar" and conf["b"] == "w13=b3-coop,w2=b3-scalar"
        assert conf["verdict"]["median"] == pytest.approx(3.4 / 3.5, abs=0.01)
        assert conf["verdict"]["verdict"] == "FASTER"
        ref = cmps[f"w13/{st}/b4-scalar"]
        assert (ref["role"], ref["a"], ref["b"]) == ("reference", "b4-scalar", "b3-coop")
        peer = cmps[f"w2/{st}/tinygemm"]
        assert peer["gate"]["gated"] is False and 0 < peer["gate"]["rel_l2"] < 2e-2
        # the peers are Python arms held to their promises against the float64 reference
        assert "float64 reference" in peer["gate"]["kind"]
        assert peer["gate"]["arms"]["tinygemm"]["gated"] is False
        assert peer["gate"]["arms"]["b3-coop"]["gated"] is True
        assert peer["verdict"]["median"] == pytest.approx(1.65 / PEER_US, rel=0.02)
        fused = cmps[f"w13/{st}/triton-moe"]
        assert (fused["role"], fused["a"], fused["b"]) == ("reference", "triton-moe", "b3-coop")
        assert fused["gate"]["gated"] is True and 0 < fused["gate"]["rel_l2"] < 4e-3
        assert fused["verdict"]["median"] == pytest.approx(1.9 / FUSED_PEER_US, rel=0.02)
    recs = s["recommendations"]
    assert recs["w13"]["decision"] == "cooperative" and recs["w13"]["arm"] == "b3-coop"
    assert recs["w2"]["decision"] == "scalar" and recs["w2"]["arm"] == "b3-scalar"
    assert "SLOWER nowhere" in " ".join(recs["w13"]["evidence"])
    # working set: rotating below 5x L2 is spread over several graphs, hot is one graph
    rot, hot = cmps["w13/rotating"], cmps["w13/hot"]
    assert hot["graphs"] == 1
    assert rot["graphs"] == 3 and rot["working_set_l2_ratio"] >= 5
    # memory: b3 and b4 banks per kernel, computed metadata saving of one byte per record
    mem = {(m["kernel"], m["layout"]): m for m in s["memory"]}
    assert set(mem) == {("w13", "b3"), ("w13", "b4"), ("w2", "b3"), ("w2", "b4")}
    m3, m4 = mem[("w13", "b3")], mem[("w13", "b4")]
    assert m4["computed"] - m3["computed"] == m3["banks"] * 8 * (64 // 32) * 256
    assert m3["used_before"] is None and "NVML unavailable" in s["nvml"]
    # the b4 banks are derived from their b3 twins (the same bytes as generating them, by
    # ops.derive_bank's test), not drawn again: each of the batch and the warm-up bank before it
    assert [mem[(k, "b4")]["derived"] for k in KERNELS] == [
        mem[(k, "b3")]["banks"] for k in KERNELS
    ]
    assert [mem[(k, "b3")]["derived"] for k in KERNELS] == [0, 0]
    derived = Counter((k, lay) for k, lay, _ in sim_device.DERIVED)
    assert derived == {(k, "b4"): mem[(k, "b3")]["banks"] + 1 for k in KERNELS}
    # session: complete, every comparison and sample journaled, summary saved
    sess = load_session(s["session"])
    assert sess.status == "complete" and sess.summary["recommendations"] == recs
    assert [c["id"] for c in sess.comparisons] == expected
    assert len(sess.samples) == len(expected) * 3 * 2 * 4
    assert all(g["ok"] for g in sess.gates)
    # blocks: every comparison in 3 blocks, each block a placement journaled with its padding;
    # the verdicts use the block-level interval
    assert all(
        c["verdict"]["method"] == "blocks" and c["verdict"]["blocks"] == 3 for c in cmps.values()
    )
    assert {x["block"] for x in sess.samples} == {0, 1, 2}
    seed = sess.config["protocol"]["placement_seed"]
    assert isinstance(seed, int) and all(b["placement_seed"] == seed for b in sess.blocks)
    placed = [b for b in sess.blocks if b["status"] == "placed"]
    assert len(placed) == 3 * 3  # w13, w2, step confirmation: 3 blocks each
    assert len({b["padding_bytes"] for b in placed}) == len(placed)
    assert all(1 <= b["padding_bytes"] <= 64 << 20 for b in placed)
    assert sess.config["m"] == 0.01 and sess.config["shape"]["hidden"] == 64
    assert sess.environment["gpu"]["name"] == "Simulated H200"
    assert sess.environment["gpu"]["l2_bytes"] == 40_000
    assert set(sess.provenance["builds"]) == {v.name for v in device}
    assert sess.provenance["files"], "kernel source hashes missing"
    # the human output went to stderr (stdout is pure JSON): the merged journal's analysis
    # through the renderer of `sessions show`, line for line
    assert "recommendation w13: cooperative (b3-coop)" in err and "step/hot/confirm" in err
    assert cli.main(["sessions", "show", s["session"]]) == 0
    shown = capsys.readouterr().out
    assert _results_block(err) == _results_block(shown)
    assert "WS/L2" in _results_block(err)[0]


def _results_block(text: str) -> list[str]:
    """The lines of the comparison table's header through the rule line."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("comparison "))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("rule: "))
    return lines[start : end + 1]


def test_tinygemm_peers_repack_each_routing_once(device, capsys, tmp_path):
    code, s, _ = run_json(
        capsys, ["ab", *SMALL, *FAST, *ALL_REFS, "--kernel", "w13", "--set", "rotating",
                 "--sessions-dir", str(tmp_path), "--no-plots", "--json"],
    )  # fmt: skip
    assert code == 0
    g = by_id(s)["w13/rotating"]["graphs"]
    assert len(FakePeer.made) == len(set(FakePeer.made)) == 4 * g  # calls x graphs routings
    # the peers are made before the group's first placement (docs/DESIGN.md §5.5), so every
    # placement moves them: the warm-up blocks and the 3 blocks
    places = ProtocolConfig().warmup_blocks + 3
    assert FakePeer.relocated == places * 4 * g
    assert "step/rotating/confirm" not in by_id(s)  # one kernel: no confirmation
    # the fused peer reads the routed ids on the device: one peer per bank, not per routing
    banks = by_id(s)["w13/rotating"]["banks"]
    assert len(FakeFusedPeer.made) == len(set(FakeFusedPeer.made)) == banks
    assert FakeFusedPeer.relocated == places * banks


def test_fused_peer_outside_its_tolerance_exits_5_and_times_nothing(device, capsys, tmp_path):
    FakeFusedPeer.broken = True
    code, _, err = run_json(
        capsys, ["ab", *SMALL, *FAST, "--kernel", "w2", "--set", "hot",
                 "--sessions-dir", str(tmp_path), "--no-plots", "--json"],
    )  # fmt: skip
    assert code == 5
    # a Python arm held to its promise: 2e-3 against the float64 reference (docs/DESIGN.md §4.7)
    assert "w2/hot/triton-moe: triton-moe misses its numerics promise" in err
    assert "above its tolerance 0.002" in err
    sess = load_session(next(tmp_path.iterdir()))
    assert sess.status == "failed" and not sess.samples_for("w2/hot/triton-moe")


def test_aa_run(device, capsys, tmp_path):
    code, s, _ = run_json(
        capsys, ["ab", *SMALL, *FAST, "--a", "b3-coop", "--b", "b3-coop", "--no-reference",
                 "--set", "rotating", "--sessions-dir", str(tmp_path), "--no-plots", "--json"],
    )  # fmt: skip
    assert code == 0
    cmps = s["comparisons"]
    assert [c["role"] for c in cmps] == ["aa"] * 2
    for c in cmps:
        # the simulated device's fitted model (tests/noise_model.py): a rotating set's block SD
        # about 0.1 %, its pair SD under 0.1 %, so three blocks' estimate scatters by about
        # 0.07 % and its interval (t, 2 dof) reaches about 0.3 %: the estimate must lie within
        # 0.3 % and the interval inside the m band, so SAME (the hot sets' blocks, 0.2-0.6 %,
        # need more blocks than this run's three for that)
        assert c["verdict"]["verdict"] == "SAME", c["verdict"]
        assert abs(c["verdict"]["median"] - 1) < 0.003
        assert c["verdict"]["half_width"] < 0.008
    assert s["recommendations"] == {}  # A/A recommends nothing and confirms nothing
    assert "_aa" in s["session"]


def test_step_kernel_with_mixed_arms(device, capsys, tmp_path):
    code, s, _ = run_json(
        capsys, ["ab", *SMALL, *FAST, "--kernel", "step", "--set", "hot",
                 "--a", "b3-scalar", "--b", "w13=b3-coop,w2=b3-scalar",
                 "--sessions-dir", str(tmp_path), "--no-plots", "--json"],
    )  # fmt: skip
    assert code == 0
    (c,) = s["comparisons"]
    assert (c["id"], c["a"], c["b"]) == (
        "step/hot",
        "w13=b3-scalar,w2=b3-scalar",
        "w13=b3-coop,w2=b3-scalar",
    )
    assert c["verdict"]["median"] == pytest.approx(3.4 / 3.5, abs=0.01)
    assert c["gate"]["outputs"] == 8  # inter and y of 4 calls


def test_numerics_differ_exits_5_and_times_nothing(device, capsys, tmp_path):
    FakeKernelOp.broken = {"w13:b3-coop"}
    code = cli.main(["ab", *SMALL, *FAST, "--kernel", "w13", "--set", "hot", "--no-plots",
                     "--sessions-dir", str(tmp_path)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 5, err
    assert "not bit-identical" in err and "call0.inter" in err and "(0x" in err
    (path,) = list(tmp_path.iterdir())
    sess = load_session(path)
    assert sess.status == "failed" and sess.samples == []
    (gate,) = sess.gates
    assert gate["ok"] is False and gate["first_difference"]["index"] == [0, 3]


def test_build_failure_exits_4_with_the_log(device, monkeypatch, capsys, tmp_path):
    from workbench.kernels import build

    log = "\n".join([f"line {i}" for i in range(100)] + ["w13.cu(12): error: expected a ';'"])

    def failing(variants, max_jobs=None, load=True):
        raise BuildError(
            "build of w13:b3-coop failed (sm_90):\nw13.cu(12): error: expected a ';'", log
        )

    monkeypatch.setattr(build, "build_many", failing)
    code = cli.main(["ab", *SMALL, "--sessions-dir", str(tmp_path), "--no-plots"])
    err = capsys.readouterr().err
    assert code == 4
    assert "build failed" in err and "expected a ';'" in err and "compiler log" in err
    assert "line 99" in err and "line 10\n" not in err  # the tail of the log, not all of it
    assert "Traceback" not in err


def test_cancel_keeps_the_session_as_interrupted(device, tmp_path):
    from workbench.data.shapes import resolve_shape
    from workbench.measure.abba import ProtocolConfig

    shape = resolve_shape(hidden=64, inter=128, experts=8, top_k=2, tp=1)
    cfg = config.make_config(
        shape, calls=4, replays=5, protocol=ProtocolConfig(pairs=6), sessions_dir=str(tmp_path)
    )
    cancel = threading.Event()

    def progress(p):
        if p.cmp == "w13/rotating" and p.complete == 2:
            cancel.set()

    result = runner.Runner(cfg, progress=progress, cancel=cancel).run()
    assert result.status == "interrupted"
    sess = load_session(result.session_path)
    assert sess.status == "interrupted"
    ids = [c["id"] for c in result.summary["comparisons"]]
    assert ids == [
        "w13/hot", "w13/hot/batch", "w13/hot/b4-scalar", "w13/hot/triton-moe", "w13/rotating"
    ]  # fmt: skip
    assert result.summary["comparisons"][-1]["pairs"] == 2
    assert len(sess.samples_for("w13/rotating")) == 8
    assert sess.summary["status"] == "interrupted"


def test_keyboard_interrupt_keeps_the_session(device, monkeypatch, capsys, tmp_path):
    argv = ["ab", *SMALL, *FAST, "--no-plots"]
    whole = tmp_path / "whole"
    sim_interrupt.interrupt_late(
        monkeypatch, lambda: cli.main([*argv, "--sessions-dir", str(whole)])
    )
    capsys.readouterr()
    code = cli.main([*argv, "--sessions-dir", str(tmp_path / "cut")])
    assert code == 130
    assert "interrupted" in capsys.readouterr().err
    (path,) = list((tmp_path / "cut").iterdir())
    sess = load_session(path)
    assert sess.status == "interrupted" and len(sess.samples) > 0


def test_calibrate_end_to_end(device, capsys, tmp_path):
    # the fitted model's W13 hot blocks (0.19 %, tests/noise_model.py): four blocks keep the
    # 2 % rung's interval clear of 1 + m (three, with t at 2 dof, sometimes did not)
    sim_device.reseed(364)
    code, s, err = run_json(
        capsys, ["calibrate", *SMALL, *FAST, "--spins", "0,4,80,400", "--blocks", "4",
                 "--sessions-dir", str(tmp_path), "--no-plots", "--json"],
    )  # fmt: skip
    assert code == 0, err
    cal = s["calibration"]
    rungs = {r["spin_cycles"]: r for r in cal["rungs"]}
    assert set(rungs) == {0, 4, 80, 400}
    assert rungs[0]["verdict"] in ("SAME", "AMBIGUOUS")
    for spin in (80, 400):  # 2 % and 10 % of the 2 µs call
        assert rungs[spin]["measured_us_per_call"] == pytest.approx(
            spin / SM_MHZ, rel=0.2, abs=0.004
        )
        assert rungs[spin]["verdict"] == "SLOWER"
    assert rungs[4]["verdict"] in ("SAME", "AMBIGUOUS")  # 0.1 %: below the 1 % minimum effect
    assert cal["resolution"]["spin_cycles"] == 80
    assert cal["resolution"]["effect_pct"] == pytest.approx(80 / SM_MHZ / 2.0 * 100, rel=0.2)
    sess = load_session(s["session"])
    assert {c["role"] for c in sess.comparisons} == {"calibration"}
    # both arms spin (default base 256 cycles), so they run the same code; the record says what B adds
    assert sess.comparisons[1]["a"] == "b3-scalar+spin=256"
    assert sess.comparisons[1]["b"] == "b3-scalar+spin=260" and sess.comparisons[1]["spin"] == 4
    assert all(not math.isnan(x["ms"]) for x in sess.samples)
    assert "resolution" in err


def test_calibrate_base_spin_zero_keeps_a_without_spin():
    from workbench.commands.calibrate import plan_calibration

    plan = plan_calibration(["w2"], ["hot"], "b3-scalar", (0, 40), base_spin=0)
    assert [(c.a.name, c.b.name) for c in plan] == [
        ("b3-scalar+spin=0", "b3-scalar+spin=0"),
        ("b3-scalar+spin=0", "b3-scalar+spin=40"),
    ]
    with pytest.raises(BadArgument, match="--base-spin -1"):
        plan_calibration(["w2"], ["hot"], "b3-scalar", (0, 40), base_spin=-1)


def test_plots_are_drawn_and_a_failure_is_not_fatal(device, monkeypatch, capsys, tmp_path):
    plots = tmp_path / "plots"
    code = cli.main(["ab", *SMALL, *FAST, "--kernel", "w13", "--set", "hot", "--no-reference",
                     "--sessions-dir", str(tmp_path / "s"), "--plots-dir", str(plots)])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    assert any(p.suffix == ".png" for p in plots.iterdir())
    assert "B/A" in out.out and "FASTER" in out.out  # the table is on stdout without --json
    # the answer first, then the plots with their progress line (--json: all of it on stderr)
    code = cli.main(["ab", *SMALL, *FAST, "--kernel", "w13", "--set", "hot", "--no-reference",
                     "--sessions-dir", str(tmp_path / "s1"), "--plots-dir", str(tmp_path / "p1"),
                     "--json"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    drawn = sorted(str(p) for p in (tmp_path / "p1").iterdir())
    assert sorted(json.loads(out.out)["plots"]) == drawn
    err = out.err
    order = [err.rindex(x) for x in ("FASTER", "session: ", "plots: drawing", "file(s) in")]
    assert order == sorted(order)
    assert f"plots: {len(drawn)} file(s) in" in err

    import workbench.plots

    def broken(*a, **k):
        raise RuntimeError("no fonts")

    monkeypatch.setattr(workbench.plots, "plot_session", broken)
    code = cli.main(["ab", *SMALL, *FAST, "--kernel", "w13", "--set", "hot", "--no-reference",
                     "--sessions-dir", str(tmp_path / "s2"), "--plots-dir", str(plots)])  # fmt: skip
    assert code == 0
    assert "plots skipped" in capsys.readouterr().err


def test_tui_entry_point(device, tmp_path):
    events = []
    path = runner.run_session(
        {"hidden": 64, "inter": 128, "experts": 8, "top_k": 2, "tp": 1, "kernels": ("w13",),
         "sets": ("hot",), "a": "b3-scalar", "b": "b3-coop", "pairs": 2, "blocks": 3,
         "calls": 4, "replays": 5},
        root=tmp_path, progress=events.append,
    )  # fmt: skip
    assert load_session(path).status == "complete"
    main = [e for e in events if e.cmp_id == "w13/hot"]
    # main, its method check and the two default references
    assert (main[-1].step, main[-1].steps) == (1, 4)
    assert (main[-1].pair, main[-1].pairs) == (6, 6)  # 3 blocks x 2 pairs
    assert main[-1].ratio == pytest.approx(0.95, abs=0.01)
    stop = threading.Event()
    path2 = runner.run_session(
        {"hidden": 64, "inter": 128, "experts": 8, "top_k": 2, "tp": 1, "kernels": ("w13",),
         "sets": ("hot",), "pairs": 6, "calls": 4, "replays": 5},
        root=tmp_path, progress=lambda e: stop.set() if e.samples >= 5 else None,
        cancelled=stop.is_set,
    )  # fmt: skip
    assert load_session(path2).status == "interrupted"


# ------------------------------------------------------------------ planning (torch-free)


def test_rotating_geometry_of_the_default_shape_on_an_h200():
    from workbench.data.shapes import resolve_shape
    from workbench.measure.plan import geometry

    shape, l2 = resolve_shape(), 62_914_560  # the H200's L2, 60 MiB (docs/DESIGN.md §5.3)
    w13 = geometry(shape, "w13", "rotating", 48, {"b3", "b4"}, l2)
    # 48 calls x 10 experts x (409,600 + 76,800) B = 233 MB per replay: 3.7x L2 -> 2 graphs
    assert w13.ws_replay == 48 * 10 * (2560 * 320 // 2 + 80 * 320 * 3) and w13.layout == "b3"
    assert (w13.graphs, w13.banks) == (2, 48) and w13.ws_ratio >= 5
    w2 = geometry(shape, "w2", "rotating", 48, {"b3"}, l2)
    assert round(w2.ws_replay / l2, 1) == 1.9 and w2.graphs == 3  # ~1.9x L2: docs/DESIGN.md §5.3
    step = geometry(shape, "step", "rotating", 48, {"b3"}, l2)
    assert step.graphs == 1 and step.ws_ratio >= 5
    hot = geometry(shape, "w13", "hot", 48, {"b3"}, l2)
    assert (hot.graphs, hot.banks) == (1, 1) and hot.ws_ratio < 1
    assert {w13.slot(g, l) for g in range(2) for l in range(48)} == {  # noqa: E741
        (l, g)
        for g in range(2)
        for l in range(48)  # noqa: E741
    }
    unknown = geometry(shape, "w13", "rotating", 48, {"b3"}, None)
    assert unknown.graphs == 1 and unknown.ws_ratio is None and "unknown" in unknown.notes[0]


def test_tiny_shapes_cap_graphs_and_add_banks_beyond_the_slices():
    from workbench.data.shapes import resolve_shape
    from workbench.measure.plan import MAX_GRAPHS, geometry

    shape = resolve_shape(hidden=64, inter=128, experts=8, top_k=2, tp=1)
    g = geometry(shape, "w2", "rotating", 4, {"b3"}, 60 << 20)
    assert g.graphs == MAX_GRAPHS and "capped" in g.notes[0]
    # 8 experts / top_k 2 = 4 disjoint routings per bank: 16 graphs need 4 banks per call
    assert g.slices_per_bank == 4 and g.banks == 4 * 4
    slots = {g.slot(i, c) for i in range(g.graphs) for c in range(4)}
    assert len(slots) == g.graphs * 4  # every (graph, call) reads its own (bank, routing)


def test_expert_ids_are_disjoint_slices_and_seeded():
    from workbench.data.shapes import resolve_shape
    from workbench.measure.plan import expert_ids

    shape = resolve_shape()
    seed = int(np.random.SeedSequence().entropy % 1000)
    slices = [expert_ids(shape, seed, 3, s) for s in range(shape.experts // shape.top_k)]
    flat = [e for s in slices for e in s]
    assert len(flat) == len(set(flat)) == 51 * 10 and all(0 <= e < 512 for e in flat)
    assert expert_ids(shape, seed, 3, 0) == slices[0]
    assert expert_ids(shape, seed, 4, 0) != slices[0]
    assert expert_ids(shape, seed, 3, 0, hot=True) != slices[0]


def test_plan_roles_and_references():
    from workbench.measure.plan import parse_arm_spec, plan_ab

    cmps = plan_ab(("w13", "step"), ("hot",), "b4-scalar", "b3-coop")
    assert [(c.id, c.role) for c in cmps] == [
        ("w13/hot", "main"),
        ("w13/hot/batch", "method"),  # the method check (docs/DESIGN.md §5.11)
        ("w13/hot/triton-moe", "reference"),  # b4-scalar is already arm A; tinygemm is opt-in
        ("step/hot", "main"),  # no references on step
    ]
    every = plan_ab(("w13",), ("hot",), "b3-scalar", "b3-coop", reference=("tinygemm",))
    assert [c.id for c in every] == ["w13/hot", "w13/hot/batch", "w13/hot/tinygemm"]
    with pytest.raises(BadArgument, match="nosuch"):
        plan_ab(("w13",), ("hot",), "b3-scalar", "b3-coop", reference=("nosuch",))
    assert cmps[3].a.name == "w13=b4-scalar,w2=b4-scalar"
    aa = plan_ab(("w2",), ("rotating",), "b3-coop", "b3-coop", reference=False)
    assert [(c.id, c.role, c.gated) for c in aa] == [("w2/rotating", "aa", True)]
    for name in ("tinygemm", "triton-moe"):
        peer = parse_arm_spec("w13", name)
        assert peer.peer == name and peer.layouts == {"b3"}
    per_kernel = parse_arm_spec("w2", "w13=b3-coop,w2=b4-scalar")
    assert per_kernel.name == "b4-scalar"


def test_calibration_summary_per_group_and_overall():
    from workbench.analysis import calibration_summary

    def cmp(kernel, spin, median, verdict, a_us=2.0, mhz=None):
        return {
            "id": f"{kernel}/hot/spin={spin}", "kernel": kernel, "set": "hot",
            "role": "calibration", "spin": spin, "a_us_per_call": a_us,
            "b_us_per_call": a_us * median, "sm_mhz": mhz, "pairs": 12,
            "verdict": {"median": median, "verdict": verdict},
        }  # fmt: skip

    comps = [
        cmp("w13", 0, 1.0, "SAME"), cmp("w13", 20, 1.005, "AMBIGUOUS"),
        cmp("w13", 40, 1.02, "SLOWER"), cmp("w13", 80, 1.04, "SLOWER"),
        cmp("w2", 0, 1.0, "SAME"), cmp("w2", 20, 1.03, "SLOWER"),
        cmp("w2", 40, 1.005, "AMBIGUOUS"), cmp("w2", 80, 1.08, "SLOWER"),
    ]  # fmt: skip
    cal = calibration_summary(comps, 0.01, fallback_mhz=2000.0)
    assert cal["groups"]["w13/hot"]["resolution"]["spin_cycles"] == 40
    # w2: 20 cycles was SLOWER but 40 was not: not reliable; 80 is the resolution
    assert cal["groups"]["w2/hot"]["resolution"]["spin_cycles"] == 80
    assert cal["resolution"]["group"] == "w2/hot"  # the coarser of the two
    r40 = next(r for r in cal["rungs"] if r["id"] == "w13/hot/spin=40")
    assert r40["injected_us_per_cta"] == pytest.approx(0.02)  # 40 cycles at 2000 MHz
    assert r40["injected_pct"] == pytest.approx(1.0)
    assert r40["measured_us_per_call"] == pytest.approx(0.04)
    assert r40["effect_pct"] == pytest.approx(2.0)
    assert cal["control_verdicts"] == ["SAME", "SAME"]
    none = calibration_summary(comps[:2], 0.01)
    assert none["resolution"] is None and none["rungs"][1]["injected_us_per_cta"] is None


def test_triton_peer_as_arm_b(device, capsys, tmp_path):
    code, s, err = run_json(
        capsys, ["ab", *SMALL, *FAST, "--a", "b3-scalar", "--b", "triton-moe", "--set", "hot",
                 "--sessions-dir", str(tmp_path), "--no-plots", "--json"],
    )  # fmt: skip
    assert code == 0, err
    cmps = by_id(s)
    # no references, no confirmation for a peer B; each main hot comparison's method check
    assert list(cmps) == ["w13/hot", "w13/hot/batch", "w2/hot", "w2/hot/batch"]
    for kernel, us in (("w13", 2.0), ("w2", 1.5)):
        c = cmps[f"{kernel}/hot"]
        assert (c["a"], c["b"], c["role"]) == ("b3-scalar", "triton-moe", "main")
        assert c["gate"]["gated"] is True and c["gate"]["ok"]
        assert c["verdict"]["median"] == pytest.approx(FUSED_PEER_US / us, rel=0.02)
    assert "triton-moe w13: BLOCK_N=16 (simulated)" in err  # the peer's config is noted
