"""benchmarks/bench_splits.py on a CPU: its split builds are specs that promise b3-scalar's bits
(so the gate holds them to the one-CTA build bit for bit), the launch it reports is today's at one
split, and bad arguments are one line (the GPU half is benchmarks/evidence.sh splits)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from workbench.data.shapes import PRESETS
from workbench.kernels.variants import Variant, parse_arm

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_splits.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_splits", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_splits"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("kernel", ["w13", "w2"])
def test_split_builds_share_b3_scalars_identity_and_differ_in_one_define(bench, kernel):
    for arm in bench.READERS:
        v = Variant.of_spec(bench.split_spec(kernel, arm, 3))
        base = parse_arm(kernel, arm)
        assert v.identity() == f"{kernel}:b3-scalar" == parse_arm(kernel, "b3-scalar").identity()
        assert v.name != base.name
        extra = set(v.defines()) - set(base.defines())
        assert extra == {f"-DWB_{kernel.upper()}_SPLITS=3"}, extra
        assert set(base.defines()) <= set(v.defines())  # same reader, layout and parameters


def test_reported_launch_is_todays_at_one_split_and_fills_the_gpu_with_more(bench):
    shape = PRESETS["qwen3.8-flash-next"]
    w13, w2 = bench._warp_params("w13"), bench._warp_params("w2")

    def ctas(kernel, s, params):
        r = bench.expected_launch(kernel, shape, s, *params)
        return r["ctas"], r["threads"]

    # today's grids (docs/KERNELS.md, the counters): W13 100 x 512, W2 80 x 800
    assert ctas("w13", 1, w13) == (100, 512) and ctas("w2", 1, w2) == (80, 800)
    assert ctas("w13", 2, w13) == (200, 256) and ctas("w13", 4, w13) == (400, 128)
    assert ctas("w13", 3, w13) == (300, 192)  # 6 + 6 + 4 of 16 warps: two idle warp slots
    assert ctas("w2", 4, w2) == (320, 224)  # 7 + 7 + 7 + 4 of 25
    # W2's 25 warps: 13 + 12, 9 + 9 + 7 (two idle warp slots), 5 x 5
    assert ctas("w2", 2, w2) == (160, 416) and ctas("w2", 3, w2) == (240, 288)
    assert ctas("w2", 5, w2) == (400, 160)
    assert bench.expected_launch("w2", shape, 64, *w2)["splits"] == 25  # never an empty CTA


def test_bad_arguments_are_one_line(bench, capsys):
    assert bench.parse_splits("4,2", "--splits-w13") == [1, 2, 4]
    with pytest.raises(ValueError, match="integers 1..32"):
        bench.parse_splits("0", "--splits-w13")
    for argv, line in (
        (["--kernel", "w3"], "bench_splits: --kernel 'w3': give w13, w2 or both"),
        (
            ["--splits-w2", "2,x"],
            "bench_splits: --splits-w2 '2,x': give integers 1..32 separated by commas",
        ),
        (["--rounds", "0"], "bench_splits: --calls, --replays, --rounds, --repeat must be >= 1"),
    ):
        assert bench.main(argv) == 2
        assert capsys.readouterr().err.strip().splitlines() == [line]
