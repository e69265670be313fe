"""Split-K builds against today's kernels, on one GPU in one process (issue 32, item 1).

A build with ``-DWB_W13_SPLITS=S`` / ``-DWB_W2_SPLITS=S`` (S > 1) spreads the warps of each CTA of
today's launch over up to S CTAs and adds their sums in the same warp order
(csrc/kernels/split_sum.cuh), so it promises the bits of the one-CTA build (S = 1, the default).
This script, for each kernel and each S, for b3-scalar and b3-coop:

1. checks: ``workbench.measure.check.check_kernel`` with the split builds as specs promising
   b3-scalar's bits (NaN-poisoned outputs fully written, graph replay = eager call, bit-identical
   to the one-CTA b3-scalar, relative L2 against float64 within the contract's 2e-3), on the
   preset and on a shape whose warps loop over several rounds and leave a split CTA with an idle
   warp; then ``--repeat`` eager calls of every build on one input, each bit-identical to the
   first (run to run);
2. times: every build hot and rotating with bench_kernels.py's method (its geometry, graphs and
   timed replays), ``--rounds`` times in turn, so a round compares all builds within seconds.

    python3 benchmarks/bench_splits.py [--splits-w13 1,2,3,4] [--splits-w2 1,2,3,4,5] [--out F.json]

Exit 0 when every check passes (the times are data, not a verdict), 5 when one fails (nothing is
timed then), 2 on a bad argument, 3 without a GPU, 4 when a build fails. The JSON holds the checks, every round's µs per call, the medians
and each split build's ratio to the one-CTA build of its reader.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from workbench.data.shapes import PRESETS, Shape
from workbench.kernels.specs import KernelSpec, builtin_dict, csrc_dir, spec_from_dict

READERS = ("b3-scalar", "b3-coop")
MACRO = {"w13": "WB_W13_SPLITS", "w2": "WB_W2_SPLITS"}
# Warps loop over several rounds (W13: 128 groups, 16 warps; W2: 256 units, 32 warps) and a split
# of W2's 32 warps into 3 leaves an idle warp: the paths the preset does not take.
LOOP_SHAPE = Shape(hidden=4096, inter=2048, experts=8, top_k=4, layers=2, tp=1)


def split_spec(kernel: str, arm: str, splits: int) -> KernelSpec:
    """The built-in ``arm`` of ``kernel`` compiled with ``splits`` CTAs per tile, as a spec that
    promises b3-scalar's bits (the sum order does not change)."""
    d = builtin_dict(kernel, arm)
    d.update(
        name=f"{arm}-splits{splits}",
        defines=[f"{MACRO[kernel]}={splits}"],
        promise={"identical_to": "b3-scalar"},
        description=f"{arm} with {splits} CTAs per tile (csrc/kernels/split_sum.cuh)",
    )
    return spec_from_dict(d, csrc_dir(), "benchmarks/bench_splits.py")


def expected_launch(kernel: str, shape: Shape, splits: int, max_warps: int, unroll: int) -> dict:
    """Grid and block a split build launches (csrc/kernels/split_sum.cuh split_count and the
    kernels' *_launch_shape; the compile tier holds the two together)."""
    k, n = shape.dims(kernel)
    items = k // 32 if kernel == "w13" else shape.top_k * (k // 32)
    warps = max(1, min(max_warps, math.ceil(items / unroll)))
    tiles = n // 32 * (shape.top_k if kernel == "w13" else 1)
    s = 1
    if splits > 1 and tiles <= 1 << 14 and tiles * warps * 32 <= 1 << 20:
        per = math.ceil(warps / min(splits, warps))
        s = math.ceil(warps / per)
    ctas = tiles * s
    return {
        "splits": s,
        "ctas": ctas,
        "threads": 32 * math.ceil(warps / s),
        "warps_per_tile": warps,
    }


def parse_splits(text: str, opt: str) -> list[int]:
    """``"2,4"`` -> [1, 2, 4] (the one-CTA build is always the baseline); ValueError naming ``opt``."""
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        vals = []
    if not vals or any(v < 1 or v > 32 for v in vals):
        raise ValueError(f"{opt} {text!r}: give integers 1..32 separated by commas")
    return sorted(set(vals) | {1})


def _variants(kernel: str, splits: list[int]) -> list:
    from workbench.kernels.variants import Variant, parse_arm

    return [
        parse_arm(kernel, arm) if s == 1 else Variant.of_spec(split_spec(kernel, arm, s))
        for s in splits
        for arm in READERS
    ]


def run_checks(kernel: str, splits: list[int], shapes: list[Shape], repeat: int) -> list[dict]:
    import torch

    from workbench.kernels.ops import KernelOp, make_bank, make_inputs
    from workbench.measure.check import check_kernel

    specs = tuple(split_spec(kernel, arm, s) for s in splits if s > 1 for arm in READERS)
    rows = []
    for shape in shapes:
        for r in check_kernel(shape, kernel, banks=2, arms=READERS, specs=specs):
            rows.append({"check": "gate", **r.to_dict()})
        bank = make_bank(shape, kernel, "b3", seed=7)
        inputs = make_inputs(shape, kernel, seed=8)
        act = inputs["x"] if kernel == "w13" else inputs["inter"]
        for v in _variants(kernel, splits):
            op, first, same = KernelOp(v, shape), None, 0
            for _ in range(repeat):
                out = inputs["out"].clone()
                op(act, bank, inputs["ids"], out, rw=inputs["rw"])
                torch.cuda.synchronize()
                bits = out.view(torch.int16)
                first = bits.clone() if first is None else first
                same += bool(torch.equal(first, bits))
            rows.append({"check": "repeat", "shape": shape.name, "kernel": kernel, "arm": v.arm,
                         "calls": repeat, "identical": same, "ok": same == repeat})  # fmt: skip
    return rows


def run_timing(kernel: str, splits: list[int], shape: Shape, a) -> dict:
    """µs per call of every build, hot and rotating, ``a.rounds`` rounds of all builds in turn
    (the order reversed every other round)."""
    import bench_kernels as bk
    import torch

    from workbench.kernels.ops import make_bank, make_inputs
    from workbench.measure.graphs import l2_bytes
    from workbench.measure.plan import bank_seed

    l2 = l2_bytes(0)
    slots = {s: bk.routing(shape, kernel, s, a.calls, l2)[1] for s in ("hot", "rotating")}
    n_banks = 1 + max(b for graph in slots["rotating"] for b, _ in graph)
    inputs = [make_inputs(shape, kernel, seed=100 + c) for c in range(a.calls)]
    banks = [make_bank(shape, kernel, "b3", seed=bank_seed(0, i)) for i in range(n_banks)]
    variants = _variants(kernel, splits)
    times: dict[str, dict[str, list[float]]] = {
        v.arm: {"hot": [], "rotating": []} for v in variants
    }
    for r in range(a.rounds):
        for v in variants if r % 2 == 0 else variants[::-1]:  # no build always first or last
            row = bk.bench_arm(kernel, v.arm, shape, banks, inputs, slots, a.calls, a.replays, v)
            for s in ("hot", "rotating"):
                times[v.arm][s].append(row[s]["us_per_call"])
    banks.clear()
    torch.cuda.empty_cache()
    out = {}
    for v, n_splits in zip(variants, [s for s in splits for _ in READERS], strict=True):
        reader = f"{v.layout}-{v.reader}"  # its one-CTA build's arm name
        med = {s: statistics.median(t) for s, t in times[v.arm].items()}
        base = {s: statistics.median(t) for s, t in times[reader].items()}
        out[v.arm] = {
            "splits": n_splits,
            "reader": reader,
            "launch": expected_launch(kernel, shape, n_splits, *_warp_params(kernel)),
            "us_per_call": {s: round(m, 3) for s, m in med.items()},
            "rounds": times[v.arm],
            "vs_one_cta": {s: round(med[s] / base[s], 4) for s in med},
        }
    return out


def _warp_params(kernel: str) -> tuple[int, int]:
    """(max_warps, unroll) defaults of the built-in spec (specs.BUILTIN_PARAMS)."""
    from workbench.kernels.specs import BUILTIN_PARAMS

    p = BUILTIN_PARAMS[kernel]
    return p["max_warps"]["default"], p["unroll"]["default"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="qwen3.8-flash-next", choices=sorted(PRESETS))
    ap.add_argument("--kernel", default="w13,w2")
    ap.add_argument("--splits-w13", default="1,2,3,4")
    ap.add_argument("--splits-w2", default="1,2,3,4,5")
    ap.add_argument("--calls", type=int, default=48)
    ap.add_argument("--replays", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20, help="eager calls per build, run to run")
    ap.add_argument("--check-only", action="store_true", help="the checks, no timing")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    kernels = [k for k in a.kernel.split(",") if k]
    if not kernels or any(k not in MACRO for k in kernels):
        print(f"bench_splits: --kernel {a.kernel!r}: give w13, w2 or both", file=sys.stderr)
        return 2
    if min(a.calls, a.replays, a.rounds, a.repeat) < 1:
        print("bench_splits: --calls, --replays, --rounds, --repeat must be >= 1", file=sys.stderr)
        return 2
    try:
        splits = {"w13": parse_splits(a.splits_w13, "--splits-w13"),
                  "w2": parse_splits(a.splits_w2, "--splits-w2")}  # fmt: skip
    except ValueError as e:
        print(f"bench_splits: {e}", file=sys.stderr)
        return 2
    import torch

    from workbench.core.errors import BuildError
    from workbench.kernels.build import build_many

    if not torch.cuda.is_available():
        print("bench_splits: needs a CUDA GPU (torch sees none)", file=sys.stderr)
        return 3
    shape = PRESETS[a.preset]
    import datetime

    from workbench.kernels.sources import source_hashes
    from workbench.store.provenance import source_digest

    files = source_hashes()  # the kernel sources measured, as a session records them
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "gpu": torch.cuda.get_device_name(0), "source_digest": source_digest(files),
              "files": files, "shape": shape.to_dict(), "calls": a.calls, "replays": a.replays,
              "rounds": a.rounds, "checks": [], "timing": {}}  # fmt: skip
    try:  # every build at once, in parallel (the checks and timings load them from the cache)
        builds = build_many([v for k in kernels for v in _variants(k, splits[k])], load=False)
    except BuildError as e:
        print(f"bench_splits: {str(e).splitlines()[0]}", file=sys.stderr)
        return 4
    result["builds"] = {b.variant.name: {"name": b.name, "arch": b.arch, **b.ptxas} for b in builds}
    for k in kernels:
        result["checks"] += run_checks(k, splits[k], [shape, LOOP_SHAPE], a.repeat)
    bad = [r for r in result["checks"] if not r["ok"]]
    for r in result["checks"]:
        what = (
            f"rel L2 {r['rel_l2']:.2e}"
            if r["check"] == "gate"
            else f"{r['identical']}/{r['calls']}"
        )
        print(f"check {r['check']:<6} {r['kernel']:>3} {r['shape']:<24} {r['arm']:<18} {what}"
              f"  {'ok' if r['ok'] else 'FAILED'}", flush=True)  # fmt: skip
    if not bad and not a.check_only:
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_kernels, beside this file
        for k in kernels:
            result["timing"][k] = rows = run_timing(k, splits[k], shape, a)
            for arm, r in rows.items():
                us, rel, ln = r["us_per_call"], r["vs_one_cta"], r["launch"]
                print(f"{k:>3} {arm:<18} {ln['ctas']:>4} CTAs x {ln['threads']:>4}  hot {us['hot']:6.3f}"
                      f" us/call ({rel['hot']:.3f}x)  rotating {us['rotating']:6.3f} us/call"
                      f" ({rel['rotating']:.3f}x)", flush=True)  # fmt: skip
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    return 5 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
