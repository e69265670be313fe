"""Users' kernel specs on a real GPU (marker ``gpu``): gated per their promise, timed in ABBA
blocks, recorded with their sources' hashes; a broken promise stops timing with exit 5
(docs/DESIGN.md §4.1). Small shapes keep it short; builds come from the cache after the first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench import cli
from workbench.core.errors import EXIT_NUMERICS_DIFFER
from workbench.kernels.specs import REPO

pytestmark = pytest.mark.gpu

EXAMPLE = REPO / "examples" / "w13_unroll4" / "variant.toml"
SMALL = ["--hidden", "256", "--inter", "512", "--experts", "32", "--top-k", "4", "--tp", "2"]
FAST = ["--calls", "8", "--replays", "10", "--pairs", "4", "--blocks", "2", "--workers", "2"]
GATES = 2 * 2  # one gate per counted block (--blocks) of each worker process (--workers)


def _session(root: Path) -> tuple[dict, list[dict]]:
    (folder,) = [p for p in root.iterdir() if p.is_dir()]
    meta = json.loads((folder / "session.json").read_text())
    journal = [json.loads(ln) for ln in (folder / "journal.jsonl").read_text().splitlines()]
    return meta, journal


def _spec(folder: Path, promise: str, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = EXAMPLE.read_text()
    text = text.replace('name = "w13-unroll4"', f'name = "{name}"')
    text = text.replace("tolerance = 2e-3", promise)
    for rel in ("w13_unroll4.cu", "../../csrc/binding.cpp", "../../csrc"):
        text = text.replace(f'"{rel}"', f'"{(EXAMPLE.parent / rel).resolve()}"')
    p = folder / "variant.toml"
    p.write_text(text)
    return p


def test_user_spec_is_gated_timed_and_recorded(tmp_path, capsys):
    code = cli.main(
        ["ab", *SMALL, *FAST, "--kernel", "w13", "--set", "hot", "--a", "b3-scalar",
         "--b", str(EXAMPLE), "--no-reference", "--no-confirm", "--sessions-dir",
         str(tmp_path), "--no-plots", "--json"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err[-3000:]
    meta, journal = _session(tmp_path)
    gates = [r for r in journal if r["type"] == "gate"]
    assert len(gates) == GATES and all(g["ok"] and g["gated"] for g in gates)
    assert all("float64 reference" in g["kind"] and 0 < g["rel_l2"] <= 2e-3 for g in gates)
    assert set(gates[0]["arms"]) == {"b3-scalar", "w13-unroll4"}
    samples = [r for r in journal if r["type"] == "sample"]
    assert {s["arm"] for s in samples} == {"A", "B"} and all(s["ms"] > 0 for s in samples)
    spec = meta["provenance"]["specs"]["w13:w13-unroll4"]
    assert spec["params"] == {"unroll": 4} and spec["promise"] == {"tolerance": 2e-3}
    assert len(spec["sources"]["examples/w13_unroll4/w13_unroll4.cu"]) == 64


def test_identity_promise_gates_bit_identity(tmp_path, capsys):
    # unroll 4 and 5 give the same warps at this shape's K (8 groups: 2 warps either way), so
    # the sums' order and bits are b3-scalar's: the promise holds and is checked bit for bit.
    p = _spec(tmp_path / "spec", 'identical_to = "b3-scalar"', "w13-same-bits")
    code = cli.main(
        ["ab", *SMALL, *FAST, "--kernel", "w13", "--set", "hot", "--a", "b3-coop", "--b", str(p),
         "--no-reference", "--no-confirm", "--sessions-dir", str(tmp_path / "s"), "--no-plots"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err[-3000:]
    _, journal = _session(tmp_path / "s")
    gates = [r for r in journal if r["type"] == "gate"]
    assert gates and all(g["kind"] == "bit-identical" and g["ok"] for g in gates)


def test_a_broken_promise_stops_timing_with_exit_5(tmp_path, capsys):
    # fp16 outputs cannot be within 1e-9 of the float64 reference: the promise fails
    p = _spec(tmp_path / "spec", "tolerance = 1e-9", "w13-too-tight")
    code = cli.main(
        ["ab", *SMALL, *FAST, "--kernel", "w13", "--set", "hot", "--a", "b3-scalar", "--b", str(p),
         "--no-reference", "--no-confirm", "--sessions-dir", str(tmp_path / "s"), "--no-plots"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == EXIT_NUMERICS_DIFFER, err[-3000:]
    assert "w13-too-tight misses its numerics promise" in err and "1e-09" in err
    _, journal = _session(tmp_path / "s")
    assert not [r for r in journal if r["type"] == "sample"], "timed despite a failed gate"


def test_check_holds_a_user_spec_to_its_promise(tmp_path, capsys):
    code = cli.main(["check", *SMALL, "--kernel", "w13", "--no-args", "--json", str(EXAMPLE)])
    out = json.loads(capsys.readouterr().out)
    rows = [r for r in out["numerics"] if r["arm"] == "w13-unroll4"]
    assert code == 0 and rows and all(r["ok"] and r["tolerance"] == 2e-3 for r in rows)
