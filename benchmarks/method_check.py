"""Which timer says what on the hot sets (issue 54.3, docs/DESIGN.md §5.11): b3-coop against
b3-scalar on the workbench's own builds, banks, routing and graphs, timed by

  events   per-replay CUDA events, the sample their median (`workbench ab`'s default);
  batch    one event pair around a sample's replays, their mean (`ab`'s method check);
  triton   triton.testing.do_bench_cudagraph of one replay's calls (where triton imports);
  fit      per-replay events at several calls per graph (default 24, 48, 96): a least-squares
           line per arm, ms per replay = boundary + calls x per-call, separates the per-call
           time from a per-replay boundary;

each in ABBA / BAAB order over --rounds rounds (the arms' graphs captured once, round-robin over
the rotating set's graphs as `ab` does). Per method: the ratio B/A of each round, their geometric
mean and a t-interval over rounds. Needs a GPU; --help does not:

    python3 benchmarks/method_check.py [--rounds 10] [--out method_check.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
from typing import Any

from bench_kernels import _ids, measured_sources, routing

from workbench.core import defaults
from workbench.core.intervals import t_interval
from workbench.data.shapes import PRESETS

ARMS = ("b3-scalar", "b3-coop")  # A, B
ORDERS = (("A", "B", "B", "A"), ("B", "A", "A", "B"))  # round r takes ORDERS[r % 2]
FIT_CALLS = (24, 48, 96)
WARMUP = 3  # untimed replays of every graph before the rounds


def ratio_summary(ratios: list[float], conf: float = 0.95) -> dict[str, Any]:
    """Geometric mean of the rounds' ratios B/A and its t-interval over rounds."""
    logs = [math.log(r) for r in ratios]
    mean, hw = t_interval(logs, conf)
    return {"ratio": math.exp(mean), "ci": [math.exp(mean - hw), math.exp(mean + hw)],
            "rounds": len(ratios), "ratios": ratios}  # fmt: skip


def line_fit(xs: list[int], ys: list[float]) -> dict[str, float]:
    """Least-squares ys = boundary + slope * xs (ms per replay against calls per graph): the
    slope in µs per call, the intercept in µs per replay."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return {"per_call_us": slope * 1000.0, "boundary_us": (my - slope * mx) * 1000.0}


class Cell:
    """One (kernel, set): both arms' graphs at each calls-per-graph count, and their timers."""

    def __init__(self, kernel, set_name, shape, banks, inputs, l2, replays, counts) -> None:
        from workbench.kernels.ops import KernelOp
        from workbench.kernels.variants import parse_arm
        from workbench.measure.graphs import Cycle, GraphArm

        ops = {arm: KernelOp(parse_arm(kernel, arm), shape) for arm in ARMS}
        self.kernel, self.set = kernel, set_name
        self.arms: dict[int, dict[str, Any]] = {}
        self.issues: dict[str, list] = {}
        for n in counts:
            slots = routing(shape, kernel, set_name, n, l2)[1]
            cycle = Cycle(len(slots))  # both arms take graphs in turn from one cycle, as in ab
            self.arms[n] = {}
            for side, arm in zip("AB", ARMS, strict=True):
                issues = [_issue(ops[arm], kernel, banks, inputs, graph) for graph in slots]
                self.arms[n][side] = GraphArm(arm, issues, [[] for _ in issues], replays, cycle)
                if n == defaults.CALLS:
                    self.issues[side] = issues
                for _ in range(WARMUP):
                    self.arms[n][side].run_once(poison=False)

    def sample(self, method: str, side: str, n: int = defaults.CALLS) -> float:
        """ms per replay of one sample of ``side`` by ``method``."""
        from workbench.measure.graphs import Retimed

        arm = self.arms[n][side]
        if method == "triton":
            import torch
            from triton.testing import do_bench_cudagraph

            issues = self.issues[side]  # one "replay": every graph of the cycle once
            with torch.cuda.stream(torch.cuda.Stream()):
                return do_bench_cudagraph(lambda: [f() for f in issues]) / len(issues)
        if method == "batch":
            return Retimed(arm, "batch").measure()[0]
        return statistics.median(arm.measure())

    def close(self) -> None:
        for by_side in self.arms.values():
            for arm in by_side.values():
                arm.close()


def _issue(op, kernel, banks, inputs, graph) -> Any:
    """One graph's calls: call c reads bank b with its routed experts, as bench_kernels does."""
    fns = []
    for c, (bank, experts) in enumerate(graph):
        inp = inputs[c % len(inputs)]
        x = inp["x"] if kernel == "w13" else inp["inter"]
        fns.append(functools.partial(op, x, banks[bank], _ids(experts), inp["out"], rw=inp["rw"]))
    return lambda: [f() for f in fns]


def run_rounds(cell: Cell, methods: list[str], rounds: int, counts: list[int]) -> dict[str, Any]:
    """ABBA / BAAB rounds of every method on ``cell``; per method its ratio summary, and the
    line fit of the per-replay events over ``counts``."""
    ratios: dict[str, list[float]] = {m: [] for m in methods}
    at: dict[tuple[int, str], list[float]] = {}  # (calls, side) -> events ms per replay
    for r in range(rounds):
        order = ORDERS[r % 2]
        for m in methods:
            n_list = counts if m == "events" else [defaults.CALLS]
            for n in n_list:
                got = {s: [] for s in "AB"}
                for side in order:
                    got[side].append(cell.sample(m, side, n))
                if m == "events":
                    for side in "AB":
                        at.setdefault((n, side), []).extend(got[side])
                if n == defaults.CALLS:
                    ratios[m].append(sum(got["B"]) / sum(got["A"]))
                else:
                    ratios.setdefault(f"events@{n}", []).append(sum(got["B"]) / sum(got["A"]))
    out: dict[str, Any] = {"methods": {m: ratio_summary(v) for m, v in ratios.items() if v}}
    if len(counts) >= 2:
        fits = {}
        for side, arm in zip("AB", ARMS, strict=True):
            ys = [statistics.median(at[(n, side)]) for n in counts]
            fits[arm] = line_fit(counts, ys)
        fits["per_call_ratio"] = fits[ARMS[1]]["per_call_us"] / fits[ARMS[0]]["per_call_us"]
        out["fit"] = {"calls": counts, **fits}
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--preset", default="qwen3.8-flash-next", choices=sorted(PRESETS))
    ap.add_argument("--kernel", default=",".join(defaults.KERNELS), help="w13,w2 (default both)")
    ap.add_argument("--sets", default=",".join(defaults.SETS), help="hot,rotating (default both)")
    ap.add_argument("--rounds", type=int, default=10, help="ABBA rounds per method (default 10)")
    ap.add_argument("--replays", type=int, default=defaults.REPLAYS, help="replays per sample")
    ap.add_argument("--fit-calls", default=",".join(map(str, FIT_CALLS)),
                    help="calls per graph of the line fit (default 24,48,96; must hold 48)")  # fmt: skip
    ap.add_argument("--no-triton", action="store_true", help="leave do_bench_cudagraph out")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    a = ap.parse_args(argv)
    a.fit_calls = sorted({int(x) for x in a.fit_calls.split(",")} | {defaults.CALLS})
    if a.rounds < 2:
        ap.error(f"--rounds {a.rounds}: a t-interval over rounds needs at least 2")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    import torch

    from workbench.kernels.ops import make_bank, make_inputs
    from workbench.measure.graphs import l2_bytes
    from workbench.measure.plan import bank_seed

    methods = ["events", "batch"]
    if not a.no_triton:
        try:
            import triton.testing  # noqa: F401

            methods.append("triton")
        except ImportError as e:
            print(f"triton does not import ({e}): do_bench_cudagraph left out", file=sys.stderr)
    shape, l2 = PRESETS[a.preset], l2_bytes(0)
    results: dict[str, Any] = {
        **measured_sources(), "gpu": torch.cuda.get_device_properties(0).name,
        "shape": shape.to_dict(), "arms": {"A": ARMS[0], "B": ARMS[1]}, "rounds": a.rounds,
        "replays": a.replays, "methods": methods, "cells": {},
    }  # fmt: skip
    for kernel in a.kernel.split(","):
        need = max(1 + b for s in a.sets.split(",") for n in a.fit_calls
                   for g in routing(shape, kernel, s, n, l2)[1] for b, _ in g)  # fmt: skip
        banks = [make_bank(shape, kernel, "b3", seed=bank_seed(0, i)) for i in range(need)]
        inputs = [make_inputs(shape, kernel, seed=100 + c) for c in range(defaults.CALLS)]
        for set_name in a.sets.split(","):
            cell = Cell(kernel, set_name, shape, banks, inputs, l2, a.replays, a.fit_calls)
            try:
                got = run_rounds(cell, methods, a.rounds, a.fit_calls)
            finally:
                cell.close()
            results["cells"][f"{kernel}/{set_name}"] = got
            said = "  ".join(
                f"{m} {v['ratio']:.4f} [{v['ci'][0]:.4f}, {v['ci'][1]:.4f}]"
                for m, v in got["methods"].items()
            )
            print(f"{kernel}/{set_name}: {said}", flush=True)
            if "fit" in got:
                f = got["fit"]
                print("  fit: " + "  ".join(
                    f"{arm} {f[arm]['per_call_us']:.3f} us/call + {f[arm]['boundary_us']:.2f} us/replay"
                    for arm in ARMS) + f"  per-call ratio {f['per_call_ratio']:.4f}", flush=True)  # fmt: skip
        banks.clear()
        torch.cuda.empty_cache()
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
