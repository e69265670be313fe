"""benchmarks/method_check.py on a CPU: --help without a GPU, its line fit, and its timers on the
simulated device (tests/sim_device.py), whose readers cost known µs per call and no replay
boundary."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sim_device

from workbench.data.shapes import Shape

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "method_check.py"


@pytest.fixture(scope="module")
def bench(request):
    sys.path.insert(0, str(SCRIPT.parent))  # as when run: it imports bench_kernels beside it
    request.addfinalizer(lambda: sys.path.remove(str(SCRIPT.parent)))
    spec = importlib.util.spec_from_file_location("method_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_help_runs_without_a_gpu_and_imports_no_torch():
    code = (
        f"import runpy, sys\nsys.argv = [{str(SCRIPT)!r}, '--help']\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{SCRIPT.parent}"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "do_bench_cudagraph" in out.stdout and "--fit-calls" in out.stdout


def test_the_line_fit_recovers_a_planted_boundary(bench):
    rng = np.random.default_rng(5403)
    per_call, boundary = rng.uniform(1, 5), rng.uniform(0.5, 3)  # µs
    xs = [24, 48, 96]
    ys = [(boundary + per_call * x) / 1000.0 for x in xs]  # ms per replay
    fit = bench.line_fit(xs, ys)
    assert fit["per_call_us"] == pytest.approx(per_call)
    assert fit["boundary_us"] == pytest.approx(boundary)


def test_every_timer_reads_the_simulated_ratio(monkeypatch, bench):
    """On the simulated device the per-replay and the batch events read the known per-call
    costs (w13: b3-coop 1.9 µs, b3-scalar 2.0 µs), and the fit finds no replay boundary."""
    import torch

    sim_device.install(monkeypatch)
    from workbench.kernels.ops import make_bank, make_inputs  # the simulated device's

    monkeypatch.setattr(bench, "_ids", lambda e: torch.tensor(e, dtype=torch.int32))
    monkeypatch.setattr(sim_device, "MODEL", {"w13/hot": sim_device_quiet()})
    sim_device.reseed(5404)
    shape = Shape(hidden=64, inter=128, experts=8, top_k=2, layers=4, tp=1)
    counts = [24, 48]
    banks = [make_bank(shape, "w13", "b3", seed=0)]
    inputs = [make_inputs(shape, "w13", seed=100 + c, device="cpu") for c in range(4)]
    cell = bench.Cell("w13", "hot", shape, banks, inputs, 40_000, 3, counts)
    try:
        got = bench.run_rounds(cell, ["events", "batch"], 4, counts)
    finally:
        cell.close()
    for m in ("events", "batch", "events@24"):
        s = got["methods"][m]
        assert s["rounds"] == 4 and s["ratio"] == pytest.approx(0.95, abs=0.003), m
        assert s["ci"][0] <= s["ratio"] <= s["ci"][1]
    fit = got["fit"]
    assert fit["b3-scalar"]["per_call_us"] == pytest.approx(2.0, rel=0.01)
    assert fit["b3-coop"]["per_call_us"] == pytest.approx(1.9, rel=0.01)
    assert abs(fit["b3-scalar"]["boundary_us"]) < 0.5
    assert fit["per_call_ratio"] == pytest.approx(0.95, abs=0.005)


def sim_device_quiet():
    from noise_model import Noise

    return Noise(pair=0.001)
