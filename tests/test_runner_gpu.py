"""The measurement engine on a real GPU (marker ``gpu``: skipped without a CUDA device).

Small shapes keep the builds' run time short; the builds themselves come from the cache after
the first run (workbench.kernels.build).
"""

from __future__ import annotations

import json
import math

import pytest

pytestmark = pytest.mark.gpu

SMALL = ["--hidden", "256", "--inter", "512", "--experts", "32", "--top-k", "4", "--tp", "2"]
FAST = ["--calls", "8", "--replays", "10", "--pairs", "6"]


@pytest.fixture
def torch():
    import torch

    return torch


def test_graph_arm_times_replays_and_alternates(torch):
    from workbench.measure.graphs import Cycle, GraphArm

    src = [torch.randn(1 << 20, device="cuda") for _ in range(3)]
    dst = [torch.empty_like(s) for s in src]
    issued = []

    def issuer(g):
        def issue():
            issued.append(g)
            dst[g].copy_(src[g])

        return issue

    arm = GraphArm("copy", [issuer(g) for g in range(3)], [[("dst", d)] for d in dst], 7, Cycle(3))
    n_captured = len(issued)
    ms = arm.measure()
    assert len(ms) == 7 and all(0 < x < 100 for x in ms)
    assert len(issued) == n_captured, "replays must not call back into Python"
    assert arm.cycle.i == 7  # graphs taken in turn
    arm.run_once()
    for s, d in zip(src, dst, strict=True):
        assert torch.equal(s, d)
    arm.close()


def test_first_difference_finds_the_flipped_bit_and_unwritten_outputs(torch):
    from workbench.measure.graphs import Cycle, GraphArm, first_difference

    x = torch.randn(64, 32, device="cuda").half()
    outs = [torch.empty_like(x) for _ in range(3)]

    def writer(i, flip=False, skip=False):
        def issue():
            if skip:
                return
            outs[i].copy_(x)
            if flip:
                outs[i].view(torch.int16)[5, 7] ^= 1

        return issue

    a = GraphArm("a", [writer(0)], [[("o", outs[0])]], 2, Cycle(1))
    b = GraphArm("b", [writer(1, flip=True)], [[("o", outs[1])]], 2, Cycle(1))
    c = GraphArm("c", [writer(2, skip=True)], [[("o", outs[2])]], 2, Cycle(1))
    for arm in (a, b, c):
        arm.run_once()
    d = first_difference(a, b)
    assert d["index"] == [5, 7] and d["differing"] == 1 and not d["unwritten"]
    assert first_difference(a, c)["unwritten"]
    assert first_difference(a, a) is None


def test_l2_size_from_properties_and_cudart_agree(torch):
    from workbench.measure.graphs import _l2_from_cudart, l2_bytes

    props = torch.cuda.get_device_properties(0)
    assert l2_bytes(0) == props.L2_cache_size > 0
    assert _l2_from_cudart(0) == props.L2_cache_size


def test_monitor_reads_the_gpu():
    import time

    from workbench.measure.monitor import Monitor

    with Monitor(interval=0.01) as m:
        if not m.available:
            pytest.skip(m.reason)
        time.sleep(0.1)
        r = m.latest()
        assert r.mem_total > 0 and r.sm_mhz > 0 and r.temp_c > 0
        w = m.window(time.time() - 0.05, time.time())
        assert w.readings >= 1 and w.sm_mhz_min <= w.sm_mhz_max
        assert m.memory_used() > 0
        assert m.device_info()["uuid"]


def test_ab_end_to_end(tmp_path, capsys):
    from workbench import cli
    from workbench.store.session import load_session

    code = cli.main(
        ["ab", *SMALL, *FAST, "--sessions-dir", str(tmp_path / "s"), "--plots-dir",
         str(tmp_path / "p"), "--json"]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    s = json.loads(out.out)
    ids = [c["id"] for c in s["comparisons"]]
    assert ids[0] == "w13/hot" and "w13/hot/b4-scalar" in ids and "w2/rotating" in ids
    for c in s["comparisons"]:
        assert c["pairs"] >= 1
        assert c["a_ms"] > 0 and c["b_ms"] > 0
        assert math.isfinite(c["verdict"]["median"])
        if c["gate"]["gated"]:
            assert c["gate"]["ok"]
        if c["set"] == "rotating":
            assert c["working_set_l2_ratio"] >= 5 or c["graphs"] == 16
    assert set(s["recommendations"]) == {"w13", "w2"}
    sess = load_session(s["session"])
    assert sess.status == "complete"
    assert sess.environment["gpu"]["l2_bytes"] > 0
    assert sess.provenance["builds"]
    mem = {(m["kernel"], m["layout"]): m for m in s["memory"]}
    # the b4 banks cost more than the b3 ones: by the allocator's exact count (NVML's window,
    # below, sees whole driver pages and segments reserved before it: at this small shape it
    # read b4 50 MiB against b3 64.25 MiB on an H100, so it only has to see the banks at all)
    assert mem[("w13", "b4")]["torch_allocated"] >= mem[("w13", "b3")]["torch_allocated"] > 0
    assert mem[("w13", "b4")]["bank_nbytes"] > mem[("w13", "b3")]["bank_nbytes"]
    # NVML's used memory is the device's: in the GPU tier other tests' processes allocate and
    # free beside this one, so a reading is held to seeing the banks only where no other
    # process changed its memory meanwhile, and a reading that does not see them must say why
    for m in mem.values():
        assert "others" in m
        if m["measured"] is not None:
            assert m["measured"] > 0 or m["others"], m
    assert len(sess.nvml) > 0 or "unavailable" in s["nvml"]


def test_aa_is_centred_on_one(tmp_path, capsys):
    from workbench import cli

    code = cli.main(
        ["ab", *SMALL, *FAST, "--a", "b3-coop", "--b", "b3-coop", "--no-reference",
         "--kernel", "w13", "--sessions-dir", str(tmp_path), "--no-plots", "--json"]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    for c in json.loads(out.out)["comparisons"]:
        assert c["role"] == "aa"
        # 5 % is 100x the H200's A/A spread; not tightened without a GPU run to confirm the new
        # bound (issue 23): the CPU A/A test in test_ab_cli.py holds its estimate within 0.3 %
        assert abs(c["verdict"]["median"] - 1) < 0.05


def test_calibrate_detects_a_large_injected_delay(tmp_path, capsys):
    from workbench import cli

    code = cli.main(
        ["calibrate", *SMALL, *FAST, "--spins", "0,20000", "--sessions-dir", str(tmp_path),
         "--no-plots", "--json"]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    cal = json.loads(out.out)["calibration"]
    big = [r for r in cal["rungs"] if r["spin_cycles"] == 20000][0]
    assert big["verdict"] == "SLOWER"
    # 20000 cycles are ~10 µs per CTA wave at ~2 GHz: at least most of it must show up per call
    assert big["measured_us_per_call"] >= 0.5 * big["injected_us_per_cta"]
    assert cal["resolution"]["spin_cycles"] == 20000
