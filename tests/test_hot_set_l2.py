"""The hot set is checked against each GPU's L2 (docs/DESIGN.md §5.3): a set that cannot plainly
stay resident is named for what it is, on screen, in the session and in the report."""

from __future__ import annotations

import pytest
import sim_device

from workbench import cli
from workbench.data.shapes import resolve_shape
from workbench.measure.plan import HOT_RESIDENT_FRACTION, geometry, hot_residency, set_label

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

MIB = 1 << 20
# L2 sizes from the vendors' public specs (the H200's also measured: docs/DESIGN.md §5.3)
L2 = {"V100": 6 * MIB, "A100": 40 * MIB, "H100": 50 * MIB, "H200": 60 * MIB}


@pytest.mark.parametrize("gpu", list(L2))
def test_default_shape_hot_sets_per_gpu(gpu):
    shape = resolve_shape()  # qwen3.8-flash-next, tp 4
    got = {}
    for k in ("w13", "w2", "step"):
        g = geometry(shape, k, "hot", 48, {"b3", "b4"}, L2[gpu])
        got[k] = (g.residency, g.label, g.notes)
    if gpu == "V100":
        # W13: 10 experts x (2560 x 1280 int4 + 80 x 1280 4-byte records) = 5.12 MB = 0.81x 6 MiB
        assert got["w13"][0] == "marginal"
        assert got["w13"][1] == "hot (0.81× L2, may not stay resident)"
        assert "5.12 MB" in got["w13"][2][0] and "6 MiB" in got["w13"][2][0]
        # W2 reads half as much: 0.41x, resident
        assert got["w2"][:2] == ("resident", "hot") and got["w2"][2] == ()
        # the step (W13 + W2) reads 7.68 MB in b4: more than the whole L2
        assert got["step"][0] == "partly resident"
        assert got["step"][1] == "hot (1.22× L2, partly resident)"
        assert "from DRAM" in got["step"][2][0]
    else:
        for k in got:
            assert got[k] == ("resident", "hot", ()), (gpu, k)


def test_residency_is_judged_on_the_largest_layout_of_the_arms():
    shape = resolve_shape()
    b3 = geometry(shape, "w13", "hot", 48, {"b3"}, L2["V100"])
    both = geometry(shape, "w13", "hot", 48, {"b3", "b4"}, L2["V100"])
    assert b3.ws_replay == both.ws_replay == 4_864_000  # the graph geometry keeps the smallest
    assert b3.label == "hot (0.77× L2, may not stay resident)"
    assert both.label == "hot (0.81× L2, may not stay resident)"


def test_thresholds_and_unknown_l2():
    l2 = 1000
    assert hot_residency(int(HOT_RESIDENT_FRACTION * l2), l2) == "resident"
    assert hot_residency(int(HOT_RESIDENT_FRACTION * l2) + 1, l2) == "marginal"
    assert hot_residency(l2, l2) == "marginal"
    assert hot_residency(l2 + 1, l2) == "partly resident"
    assert hot_residency(10, None) == "unknown"
    assert set_label("rotating", 10**12, l2) == "rotating"  # rotating sets are meant to miss
    g = geometry(resolve_shape(), "w13", "hot", 48, {"b3"}, None)
    assert g.residency == "unknown" and g.label == "hot"
    assert g.notes == ("L2 size unknown: hot set not checked against L2",)
    rec = geometry(resolve_shape(), "step", "hot", 48, {"b3"}, L2["V100"]).to_record()
    assert rec["residency"] == "partly resident" and rec["set_label"].startswith("hot (1.16×")
    assert (
        "residency"
        not in geometry(resolve_shape(), "w13", "rotating", 48, {"b3"}, L2["V100"]).to_record()
    )


def test_a_run_whose_hot_sets_outgrow_the_l2_says_so_on_screen_in_the_session_and_report(
    monkeypatch, capsys, tmp_path
):
    """The simulated device with an L2 sized as the V100's is to the default shape: a small shape
    whose W13 hot set is 0.82x the L2 in b4 and whose step reads 1.23x it."""
    sim_device.install(monkeypatch)
    from workbench.measure import engine
    from workbench.report.markdown import render_report
    from workbench.store.session import load_session

    monkeypatch.setattr(engine, "l2_bytes", lambda d=0: 25_000)
    small = ["--hidden", "64", "--inter", "128", "--experts", "8", "--top-k", "2", "--tp", "1"]
    argv = ["ab", *small, "--calls", "4", "--replays", "5", "--blocks", "3", "--pairs", "2",
            "--set", "hot", "--sessions-dir", str(tmp_path), "--no-plots"]  # fmt: skip
    code = cli.main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    screen = out.out + out.err
    assert "hot (0.82× L2, may not stay resident)" in screen, screen
    assert "partly resident" in screen and "from DRAM" in screen
    (sdir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    s = load_session(sdir)
    notes = s.summary["notes"]
    assert any("w13/hot: hot set of 0.02 MB" in n and "may not stay" in n for n in notes), notes
    assert any(n.startswith("step/hot/confirm:") and "partly" in n for n in notes), notes
    cmp = {c["id"]: c for c in s.comparisons}
    assert cmp["w13/hot"]["residency"] == "marginal"
    assert cmp["w2/hot"]["residency"] == "resident"
    assert cmp["step/hot/confirm"]["residency"] == "partly resident"
    md = render_report(sdir)
    assert "Hot sets that may not stay in the L2" in md
    assert "w13 / hot (0.82× L2, may not stay resident)" in md
    assert "step / hot (1.17× L2, partly resident)" in md


def test_report_of_a_session_recorded_before_the_check_judges_its_bytes(tmp_path):
    """Sessions recorded no label before: the report judges their recorded bytes and L2."""
    from workbench.report.markdown import render_report

    md = render_report("sessions/20261130T201628Z_default-r1")  # an H200 session: all resident
    assert "Hot sets that may not stay in the L2" not in md
    assert "| w13 / hot |" in md
