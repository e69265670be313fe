"""benchmarks/bench_kernels.py on a CPU: its byte count and routing come from the workbench's own
arithmetic (capacity, plan geometry), and it imports torch only where a GPU is needed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench.data.shapes import PRESETS, Shape
from workbench.measure.plan import L2_FACTOR, MAX_GRAPHS, expert_bytes

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench_kernels.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_kernels", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _shape(rng) -> Shape:
    top_k = int(rng.integers(1, 9))
    return Shape(
        hidden=64 * int(rng.integers(1, 41)), inter=64 * int(rng.integers(1, 21)),
        experts=top_k * int(rng.integers(2, 65)), top_k=top_k, layers=int(rng.integers(1, 61)),
        tp=1,
    )  # fmt: skip


def test_call_bytes_is_the_old_formula(bench):
    """The benchmark's own formula before it used workbench.data.capacity: the committed GB/s hold."""
    rng = np.random.default_rng()
    for shape in [_shape(rng) for _ in range(20)] + list(PRESETS.values()):
        for kernel in ("w13", "w2"):
            K, N = shape.dims(kernel)
            for layout, rec in (("b4", 4), ("b3", 3)):
                old = shape.top_k * (K * N // 2 + (K // 32) * N * rec)
                assert bench.call_bytes(shape, kernel, layout) == old


def test_rotating_routing_spans_the_l2_and_never_repeats_in_a_row(bench):
    rng = np.random.default_rng()
    for _ in range(20):
        shape, calls = _shape(rng), int(rng.integers(2, 49))
        kernel = str(rng.choice(["w13", "w2", "step"]))
        ws = (
            calls
            * shape.top_k
            * expert_bytes(shape, ("w13", "w2") if kernel == "step" else (kernel,), "b3")
        )
        l2 = int(ws * rng.uniform(0.05, 3.0))
        geom, slots = bench.routing(
            shape, kernel, "rotating", calls, l2, seed=int(rng.integers(99))
        )
        assert len(slots) == geom.graphs and all(len(g) == calls for g in slots)
        assert geom.graphs == MAX_GRAPHS or ws * geom.graphs >= L2_FACTOR * l2
        for g in range(geom.graphs):
            nxt = slots[(g + 1) % geom.graphs]
            if geom.graphs > 1:  # consecutive replays read disjoint (bank, expert) pairs
                here = {(b, e) for b, es in slots[g] for e in es}
                assert not here & {(b, e) for b, es in nxt for e in es}
            for b, experts in slots[g]:
                assert 0 <= b < geom.banks and len(set(experts)) == shape.top_k
                assert all(0 <= e < shape.experts for e in experts)


def test_hot_routing_is_one_routing(bench):
    shape = PRESETS["qwen3.8-flash-next"]
    geom, slots = bench.routing(shape, "w13", "hot", 48, 60 << 20)
    assert geom.graphs == 1 and len({(b, tuple(e)) for b, e in slots[0]}) == 1


def test_graph_count_is_the_old_rule_where_no_cap_applies(bench):
    """The benchmark's own rule before it used workbench.measure.plan: graphs = ceil(5 x L2 / bytes of one
    graph), at least 1; the committed H200 results (2 graph sets for the default shape) hold."""
    rng = np.random.default_rng()
    cases = [(PRESETS["qwen3.8-flash-next"], 48, 62_914_560)]
    cases += [
        (_shape(rng), int(rng.integers(2, 49)), int(rng.integers(1 << 20, 64 << 20)))
        for _ in range(30)
    ]
    for shape, calls, l2 in cases:
        for kernel in ("w13", "w2", "step"):
            ks = ("w13", "w2") if kernel == "step" else (kernel,)
            per_graph = calls * sum(bench.call_bytes(shape, k, "b3") for k in ks)
            old = max(1, -(-5 * l2 // per_graph))
            geom, _ = bench.routing(shape, kernel, "rotating", calls, l2)
            assert geom.graphs == min(old, MAX_GRAPHS)
    geom, _ = bench.routing(PRESETS["qwen3.8-flash-next"], "w13", "rotating", 48, 62_914_560)
    assert geom.graphs == 2


def test_loads_without_torch():
    code = (
        "import importlib.util, sys\n"
        f"s = importlib.util.spec_from_file_location('b', {str(BENCH)!r})\n"
        "m = importlib.util.module_from_spec(s); s.loader.exec_module(m)\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT)  # fmt: skip
    assert out.stdout.strip() == "False"


@pytest.mark.gpu
def test_runs_on_the_gpu_in_the_committed_format(tmp_path):
    """`python3 benchmarks/bench_kernels.py` with PYTHONPATH=. as the lead runs it: the output
    lines and the JSON keys of benchmarks/results/h200_bench_kernels.* come back."""
    import json
    import os

    out = tmp_path / "bench.json"
    # the checkout first, then whatever this interpreter was given (a device's carried packages)
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    args = ["--kernel", "w13,w2", "--arms", "b4-scalar,b3-scalar,b3-coop", "--replays", "20"]
    proc = subprocess.run(
        [sys.executable, str(BENCH), *args, "--out", str(out)], cwd=ROOT, capture_output=True,
        text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *path])},
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    timed = [x for x in proc.stdout.splitlines() if "us/call  rotating" in x]
    probes = ("floor-probe", "floor+math", "arith-only")
    lines = [x for x in timed if not any(p in x for p in probes)]
    assert len(lines) == 6 and all("graph sets)" in x and "GB/s" in x for x in lines)
    # the floor probe is timed in the same process, one line per kernel: plain, with arithmetic (the
    # fastest of its three structures), and the arithmetic alone
    for probe in probes:
        floor = [x for x in timed if probe in x]
        assert len(floor) == 2 and all("same process" in x for x in floor), probe
    assert all(
        all(f" {k}" in x for k in ("u8", "u4x2", "u2x2")) for x in timed if "floor+math" in x
    )
    res = json.loads(out.read_text())
    assert set(res) >= {
        "gpu",
        "shape",
        "calls",
        "replays",
        "rows",
        "floor_us_per_call",
        "arith_only",
    }
    for kernel, arith in res["arith_only"].items():
        # no loads: hot and rotating time the same work (within noise), and it is faster than the
        # same structure (arith is u2x2 without its loads) streaming its bytes from DRAM
        assert abs(arith["best"]["hot"] / arith["best"]["rotating"] - 1) < 0.1, arith
        for shape, us in arith["shapes"].items():
            with_loads = res["floor_math"][kernel]["shapes"][shape.replace("arith", "u2x2")]
            assert us["rotating"] < with_loads["rotating"], (shape, us, with_loads)
    for row in res["rows"]:
        # vs_floor(_math): the arm's µs per call over the in-process floor probe's, per set
        assert set(row) == {"kernel", "arm", "sets", "hot", "rotating", "vs_floor", "vs_floor_math"}
        for st in ("hot", "rotating"):
            assert set(row[st]) == {"ms_per_replay", "us_per_call", "GB_s"}
            assert 0 < row[st]["us_per_call"] < 1000
            assert 1 < row["vs_floor"][st] < 100  # no kernel here streams faster than the probe
            # against the probe that also does the arithmetic every weight needs: a ratio, not
            # a bound (a structure that overlaps its arithmetic better might come under it)
            assert 0.5 < row["vs_floor_math"][st] < 100


def test_time_floor_refuses_arithmetic_without_a_structure(monkeypatch):
    """floor_inproc.time_floor with weight words to compute on and no structure to do it in says
    so before it allocates or launches anything (no GPU needed to reach the check)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import floor_inproc

    with pytest.raises(ValueError, match="math16 > 0 needs at least one structure in kinds"):
        floor_inproc.time_floor(None, 4096, 48, 1, 10, lambda issues, replays: 0.0, 32, ())


def test_result_names_the_kernels_it_timed(bench, monkeypatch):
    """The JSON ties a result to its kernel sources (issue 43 item 4): every csrc/ file's SHA-256
    as a session records it, their digest, the commit and the date. A result whose digest did not
    follow the sources (here: one kernel header's hash changed) would fail the last assert."""
    from workbench.kernels import sources
    from workbench.store.provenance import source_digest

    rec = bench.measured_sources()
    assert rec["files"] == sources.source_hashes()
    assert rec["files"] and all(k.startswith("csrc/") for k in rec["files"])
    assert rec["source_digest"] == source_digest(rec["files"])
    assert set(rec["git"]) >= {"commit", "dirty"} and rec["date"].startswith("20")
    edited = dict(rec["files"])
    edited["csrc/kernels/w13.cuh"] = "0" * 64
    monkeypatch.setattr(sources, "source_hashes", lambda: edited)
    assert bench.measured_sources()["source_digest"] != rec["source_digest"]
