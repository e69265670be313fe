"""`workbench ab` with a user's kernel spec on the simulated device (tests/sim_device.py): the
spec's arm is built from its file, gated per its promise, timed in ABBA blocks and recorded with
its sources' hashes; a broken promise stops timing with exit 5 (docs/DESIGN.md §4.1, §5.6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sim_device
import torch

from workbench import cli
from workbench.core.errors import EXIT_NUMERICS_DIFFER
from workbench.kernels.specs import csrc_dir
from workbench.store.session import load_session

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

SMALL = ["--hidden", "64", "--inter", "128", "--experts", "8", "--top-k", "2", "--tp", "1"]
FAST = ["--calls", "4", "--replays", "5", "--blocks", "2", "--pairs", "2"]


@pytest.fixture
def device(monkeypatch):
    built = sim_device.install(monkeypatch)

    # the fake banks hold decoded float32 weights; the reference takes them rounded to fp16, as
    # a real bank's dequantized weights are (an error of ~3e-4 against the fake's fp32 sums)
    def dequantized(self, experts):
        return self.weights[torch.tensor(experts)].half().numpy()

    monkeypatch.setattr(sim_device.FakeBank, "dequantized", dequantized, raising=False)
    return built


def _spec(folder: Path, promise: str, name: str = "mine") -> Path:
    folder.mkdir(parents=True)
    (folder / "mine.cu").write_text('#include "w13.cu"\n')
    p = folder / "variant.toml"
    p.write_text(
        f'name = "{name}"\nkernel = "w13"\nlayout = "b3"\nreader = "scalar"\n'
        f'sources = ["mine.cu", "{csrc_dir() / "binding.cpp"}"]\ninclude_dirs = ["{csrc_dir()}"]\n'
        f"[promise]\n{promise}\n"
    )
    return p


def _ab(capsys, tmp_path, b: str, a: str = "b3-scalar") -> tuple[int, dict | None, str]:
    code = cli.main(
        ["ab", *SMALL, *FAST, "--kernel", "w13", "--set", "hot", "--a", a, "--b", b,
         "--no-confirm", "--sessions-dir", str(tmp_path / "s"), "--no-plots", "--json"]
    )  # fmt: skip
    out = capsys.readouterr()
    return code, (json.loads(out.out) if out.out.strip() else None), out.err


def test_tolerance_spec_is_gated_against_float64_and_timed(device, capsys, tmp_path):
    spec = _spec(tmp_path / "v", "tolerance = 2e-3")
    code, s, err = _ab(capsys, tmp_path, str(spec))
    assert code == 0, err
    assert "w13:mine" in {v.name for v in device}
    sess = load_session(s["session"])
    main = [g for g in sess.gates if g["cmp"] == "w13/hot"]
    assert len(main) == 2 and all(g["ok"] and g["gated"] for g in main)
    assert all("float64 reference" in g["kind"] for g in main)
    assert set(main[0]["arms"]) == {"b3-scalar", "mine"}
    assert 0 < main[0]["arms"]["mine"]["rel_l2"] < 2e-3
    # the b4-scalar reference arm has another identity too: gated the same way
    ref = [g for g in sess.gates if g["cmp"] == "w13/hot/b4-scalar"]
    assert ref and all("float64 reference" in g["kind"] and g["ok"] for g in ref)
    samples = [r for r in sess.samples if r["cmp"] == "w13/hot"]
    assert {r["arm"] for r in samples} == {"A", "B"}
    rec = sess.provenance["specs"]["w13:mine"]
    assert rec["promise"] == {"tolerance": 2e-3} and rec["origin"] == str(spec.resolve())
    assert any(k.endswith("mine.cu") for k in rec["sources"])


def test_identity_spec_is_gated_bit_for_bit(device, capsys, tmp_path):
    spec = _spec(tmp_path / "v", 'identical_to = "b3-scalar"')
    code, s, err = _ab(capsys, tmp_path, str(spec), a="b3-coop")
    assert code == 0, err
    gates = [g for g in load_session(s["session"]).gates if g["cmp"] == "w13/hot"]
    assert gates and all(g["kind"] == "bit-identical" and g["ok"] for g in gates)
    # and a flipped bit in the user's kernel is caught as it is for the built-ins
    sim_device.FakeKernelOp.broken = {"w13:mine"}
    code, _, err = _ab(capsys, tmp_path / "again", str(spec), a="b3-coop")
    assert code == EXIT_NUMERICS_DIFFER and "not bit-identical" in err


def test_a_broken_promise_stops_timing_with_exit_5(device, capsys, tmp_path):
    spec = _spec(tmp_path / "v", "tolerance = 1e-9", name="too-tight")
    code, _, err = _ab(capsys, tmp_path, str(spec))
    assert code == EXIT_NUMERICS_DIFFER, err
    assert "too-tight misses its numerics promise" in err and "1e-09" in err
    (folder,) = (tmp_path / "s").iterdir()
    journal = [json.loads(x) for x in (folder / "journal.jsonl").read_text().splitlines()]
    assert not [r for r in journal if r["type"] == "sample"], "timed despite a failed gate"
    assert [r["ok"] for r in journal if r["type"] == "gate"] == [False]


def test_calibrate_runs_its_ladder_on_a_spec_arm(device, capsys, tmp_path):
    """`calibrate --arm SPEC.toml`: the user's kernel gets its calibration build (the spin of
    docs/DESIGN.md §5.8 lives in the project's headers it includes) and the ladder runs on it."""
    spec = _spec(tmp_path / "v", "tolerance = 2e-3")
    sim_device.reseed(113)
    code = cli.main(
        ["calibrate", *SMALL, *FAST, "--kernel", "w13", "--set", "hot", "--arm", str(spec),
         "--spins", "0,80,400", "--sessions-dir", str(tmp_path / "s"), "--no-plots", "--json",
         "--blocks", "4"]  # the fitted model's W13 hot blocks (0.19 %): 2 blocks cannot resolve 2 %
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    s = json.loads(out.out)
    assert {r["spin_cycles"] for r in s["calibration"]["rungs"]} == {0, 80, 400}
    assert s["calibration"]["resolution"]["spin_cycles"] == 80
    assert "w13:mine+calib" in {v.name for v in device}
    sess = load_session(s["session"])
    assert (
        sess.comparisons[1]["a"] == "mine+spin=256" and sess.comparisons[1]["b"] == "mine+spin=336"
    )
    assert "w13:mine+calib" in sess.provenance["specs"]  # its sources hashed, as in ab
