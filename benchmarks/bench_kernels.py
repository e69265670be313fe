"""Kernel speed on the current GPU (issue 3 item 5): µs per call of every variant, hot and rotating,
in graphs of `calls` calls, next to the tinygemm peer and the bandwidth formula of docs/DESIGN.md §5.9 (a lower
bound no real launch reaches: benchmarks/floor_probe.cu measures what this GPU's launch and
DRAM allow for the same bytes).

    python3 benchmarks/bench_kernels.py [--calls 48] [--replays 200] [--out FILE.json]
    python3 benchmarks/bench_kernels.py --kernel step     # W13 then W2 per call (a decode step)

Hot: every call uses the same top_k experts of one bank. Rotating: call l uses bank l and its own
experts; below 5x the L2, several graphs over disjoint experts alternate. The geometry is the run's
own (workbench.measure.plan.geometry, as `workbench ab` places its calls) and the timing is
workbench.measure.graphs' (capture on a side stream, CUDA events per replay). This is a plain benchmark
(median of timed replays), not the ABBA protocol of `workbench ab`. torch is imported inside the
functions that need a GPU, so the pure parts (bytes, routing) load on a CPU machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from workbench.core import defaults
from workbench.data.shapes import PRESETS, Shape
from workbench.kernels.variants import ARMS
from workbench.measure.plan import Geometry, bank_seed, expert_bytes, expert_ids, geometry

PEERS = ("tinygemm", "triton-moe")  # peer arms timed beside the kernels (docs/DESIGN.md §4.7)
WARMUP_REPLAYS = 3  # untimed replays of every graph before the timed ones


def call_bytes(shape: Shape, kernel: str, layout: str) -> int:
    """Weights + metadata one call of ``kernel`` reads: its top_k experts (workbench.data.capacity)."""
    return shape.top_k * expert_bytes(shape, (kernel,), layout)


def floor_us(shape: Shape, kernel: str) -> float:
    """The bandwidth formula of docs/DESIGN.md §5.9: one-CTA graph node + b3 bytes at 4.2 TB/s."""
    return 0.6 + call_bytes(shape, kernel, "b3") / 4.2e12 * 1e6


def routing(
    shape: Shape, kernel: str, set_name: str, calls: int, l2: int | None, seed: int = 0
) -> tuple[Geometry, list[list[tuple[int, list[int]]]]]:
    """The run's own geometry (workbench.measure.plan, as `workbench ab` places calls) and, per graph and
    call, (bank index, routed experts). Computed for the b3 layout, the smaller working set, so
    both layouts get the same graphs and routing."""
    geom = geometry(shape, kernel, set_name, calls, {"b4", "b3"}, l2)
    hot = set_name == "hot"
    slots = [
        [
            (geom.slot(g, c)[0], expert_ids(shape, seed, *geom.slot(g, c), hot=hot))
            for c in range(calls)
        ]
        for g in range(geom.graphs)
    ]
    return geom, slots


def time_issues(name: str, issues: list, replays: int) -> float:
    """Median ms per replay of graphs captured from ``issues``, alternating replay by replay:
    workbench.measure.graphs' capture and timed replays (one GraphArm), after a few untimed ones."""
    from workbench.measure.graphs import Cycle, GraphArm

    arm = GraphArm(name, issues, [[] for _ in issues], replays, Cycle(len(issues)))
    try:
        for _ in range(WARMUP_REPLAYS):
            arm.run_once(poison=False)
        return statistics.median(arm.measure())
    finally:
        arm.close()


def _ids(experts: list[int]) -> Any:
    import torch

    return torch.tensor(experts, dtype=torch.int32, device="cuda")


def bench_arm(
    kernel, arm, shape, banks, inputs, slots, n_calls, replays, variant=None
) -> dict | None:
    """Median µs per call of one arm on the hot set and on the rotating set; ``slots`` maps each
    set to its graphs' (bank, experts) per call, ``inputs[c]`` are call c's activations.
    ``variant``: the build to time under the name ``arm`` (default: the built-in ``arm``)."""
    import functools

    from workbench.kernels.ops import KernelOp
    from workbench.kernels.tinygemm import TinyGemmPeer
    from workbench.kernels.triton_moe import TritonMoePeer
    from workbench.kernels.variants import parse_arm

    if arm == "tinygemm":
        if not TinyGemmPeer.supported():
            return None
        peers: dict[tuple, TinyGemmPeer] = {}

        def fn_for(bank: int, experts: list[int]):
            key = (bank, tuple(experts))
            if key not in peers:  # experts are fixed per peer, as in a per-expert loop
                peers[key] = TinyGemmPeer(kernel, shape, banks[bank], experts)
            return peers[key]
    elif arm == "triton-moe":
        if not TritonMoePeer.supported():
            return None
        fused: dict[int, TritonMoePeer] = {}

        def fn_for(bank: int, experts: list[int]):
            if bank not in fused:  # ids are read on the device: one peer per bank
                fused[bank] = TritonMoePeer(kernel, shape, banks[bank])
            return fused[bank]
    else:
        op = KernelOp(variant or parse_arm(kernel, arm), shape)

        def fn_for(bank: int, experts: list[int]):
            return op

    row: dict[str, Any] = {"kernel": kernel, "arm": arm, "sets": len(slots["rotating"])}
    # triton-moe reads 4 bytes per (group, column) record (fp16 scale and bias), as b4 does
    layout = "b4" if arm.startswith("b4") or arm == "triton-moe" else "b3"
    for set_name in ("hot", "rotating"):
        issues = []
        for graph in slots[set_name]:
            fns = []
            for c, (bank, experts) in enumerate(graph):
                x = inputs[c]["x"] if kernel == "w13" else inputs[c]["inter"]
                fn = fn_for(bank, experts)
                fns.append(functools.partial(fn, x, banks[bank], _ids(experts), inputs[c]["out"],
                                             rw=inputs[c]["rw"]))  # fmt: skip
            issues.append(lambda fns=fns: [f() for f in fns])
        ms = time_issues(arm, issues, replays)
        us = ms * 1000 / n_calls
        gbs = call_bytes(shape, kernel, layout) / (us * 1e-6) / 1e9
        row[set_name] = {
            "ms_per_replay": round(ms, 5),
            "us_per_call": round(us, 3),
            "GB_s": round(gbs, 1),
        }
    return row


def bench_step(arm, shape, l2, n_calls, replays) -> dict:
    """Median µs per call of the decode step: each call is W13 (arm) and then W2 (arm) on W13's
    output, with the same routed ids; hot and rotating as for one kernel."""
    from workbench.kernels.ops import KernelOp, make_bank, make_inputs
    from workbench.kernels.variants import parse_arm

    layout = arm.split("-")[0]
    ops = {k: KernelOp(parse_arm(k, arm), shape) for k in ("w13", "w2")}
    slots = {s: routing(shape, "step", s, n_calls, l2)[1] for s in ("hot", "rotating")}
    n_banks = 1 + max(b for graph in slots["rotating"] for b, _ in graph)
    banks = {
        k: [make_bank(shape, k, layout, seed=bank_seed(0, i)) for i in range(n_banks)] for k in ops
    }
    ins = [make_inputs(shape, "w13", seed=100 + c) for c in range(n_calls)]
    outs = [make_inputs(shape, "w2", seed=300 + c) for c in range(n_calls)]
    row: dict[str, Any] = {"kernel": "step", "arm": arm, "sets": len(slots["rotating"])}
    for set_name in ("hot", "rotating"):
        issues = []
        for graph in slots[set_name]:
            calls = [(c, b, _ids(e)) for c, (b, e) in enumerate(graph)]

            def issue(calls=calls):
                for c, b, ids in calls:
                    x, inter = ins[c]["x"], ins[c]["out"]
                    ops["w13"](x, banks["w13"][b], ids, inter)
                    ops["w2"](inter, banks["w2"][b], ids, outs[c]["out"], rw=outs[c]["rw"])

            issues.append(issue)
        ms = time_issues(f"step {arm}", issues, replays)
        row[set_name] = {
            "ms_per_replay": round(ms, 5),
            "us_per_call": round(ms * 1000 / n_calls, 3),
        }
    return row


def weight_words(shape: Shape, kernel: str) -> int:
    """16-byte int4 weight words one call of ``kernel`` reads: one per (expert, group, column)."""
    k, n = shape.dims(kernel)
    return shape.top_k * (k // shape.group) * n


def _floor_rows(ext, shape: Shape, kernel: str, a, n_sets: int, results: dict) -> None:
    """The floor probe streaming this kernel's b3 bytes per call, timed here beside the kernels
    (benchmarks/floor_inproc.py), and each of the kernel's rows as a multiple of it. Then the same
    probe with its weight words through the kernels' dequantize and tensor-core products
    (floor+math): the bytes plus the arithmetic the numerics contract requires, in the probe's
    structure (the fastest of three); a yardstick, not a proven bound. Last, that arithmetic alone
    with no loads (arith-only): what the contract's per-weight work costs with nothing to wait for."""
    from floor_inproc import MATH_KINDS, time_floor

    words = weight_words(shape, kernel)
    for key, label, math16, kinds in (
        ("floor_probe", "floor-probe", 0, ()),
        ("floor_math", "floor+math ", words, MATH_KINDS),
        ("arith_only", "arith-only ", words, ("arith",)),
    ):
        fl = time_floor(
            ext, call_bytes(shape, kernel, "b3"), a.calls, n_sets, a.replays,
            lambda issues, replays, label=label: time_issues(label.strip(), issues, replays), math16, kinds,
        )  # fmt: skip
        results.setdefault(key, {})[kernel] = fl
        best = fl["best"]
        print(
            f"{kernel:>3} {label} hot {best['hot']:7.3f} us/call  rotating "
            f"{best['rotating']:7.3f} us/call (same process; best of {', '.join(fl['shapes'])})",
            flush=True,
        )
    for row in results["rows"]:
        if row["kernel"] != kernel:
            continue
        for key, col in (("floor_probe", "vs_floor"), ("floor_math", "vs_floor_math")):
            best = results[key][kernel]["best"]
            row[col] = {s: round(row[s]["us_per_call"] / best[s], 3) for s in best}
        print(
            f"{kernel:>3} {row['arm']:>9}  / floor: hot {row['vs_floor']['hot']:.2f}x  "
            f"rotating {row['vs_floor']['rotating']:.2f}x;  / floor+math: hot "
            f"{row['vs_floor_math']['hot']:.2f}x  rotating {row['vs_floor_math']['rotating']:.2f}x",
            flush=True,
        )


def measured_sources() -> dict[str, Any]:
    """What a result was measured on, as a session records it: the date, the commit (git, or
    WORKBENCH_COMMIT on a copy without .git), the SHA-256 of every kernel source under csrc/ and
    their digest, so a JSON can be tied to the kernels it timed (`workbench sessions list` shows
    the same digest for sessions)."""
    import datetime

    from workbench.kernels.sources import source_hashes
    from workbench.store.provenance import git_info, source_digest

    files = source_hashes()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git": git_info(),
        "source_digest": source_digest(files),
        "files": files,
    }


def main() -> int:
    import torch

    from workbench.kernels.ops import make_bank, make_inputs
    from workbench.measure.graphs import l2_bytes

    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="qwen3.8-flash-next")
    ap.add_argument("--calls", type=int, default=defaults.CALLS)
    ap.add_argument("--replays", type=int, default=defaults.BENCH_REPLAYS)
    ap.add_argument("--out", default=None)
    ap.add_argument("--kernel", default=",".join(defaults.KERNELS))
    ap.add_argument("--arms", default=",".join([*ARMS, *PEERS]))
    ap.add_argument(
        "--no-floor",
        action="store_true",
        help="skip the floor probe timed in this process (benchmarks/floor_inproc.py)",
    )
    a = ap.parse_args()
    floor_ext = None
    if not a.no_floor:
        from floor_inproc import load_probe

        floor_ext = load_probe()
    shape = PRESETS[a.preset]
    props = torch.cuda.get_device_properties(0)
    l2 = l2_bytes(0)
    results = {
        **measured_sources(),
        "gpu": props.name,
        "shape": shape.to_dict(),
        "calls": a.calls,
        "replays": a.replays,
        "rows": [],
    }
    for kernel in a.kernel.split(","):
        if kernel == "step":
            for arm in [x for x in ARMS if x in a.arms.split(",")]:
                row = bench_step(arm, shape, l2, a.calls, a.replays)
                results["rows"].append(row)
                print(
                    f"step {arm:>9}  hot {row['hot']['us_per_call']:7.3f} us/call  rotating "
                    f"{row['rotating']['us_per_call']:7.3f} us/call ({row['sets']} graph sets)",
                    flush=True,
                )
                torch.cuda.empty_cache()
            continue
        slots = {s: routing(shape, kernel, s, a.calls, l2)[1] for s in ("hot", "rotating")}
        n_banks = 1 + max(b for graph in slots["rotating"] for b, _ in graph)
        n_sets = len(slots["rotating"])
        inputs = [make_inputs(shape, kernel, seed=100 + c) for c in range(a.calls)]
        for layout in ("b4", "b3"):
            wanted = a.arms.split(",")
            arms = [x for x in ARMS if x in wanted and x.startswith(layout)] + (
                [p for p in PEERS if p in wanted] if layout == "b3" else []
            )
            if not arms:
                continue
            banks = [make_bank(shape, kernel, layout, seed=bank_seed(0, i)) for i in range(n_banks)]
            for arm in arms:
                row = bench_arm(kernel, arm, shape, banks, inputs, slots, a.calls, a.replays)
                if row is None:
                    continue
                results["rows"].append(row)
                hot, rot = row["hot"], row["rotating"]
                print(
                    f"{kernel:>3} {arm:>9}  hot {hot['us_per_call']:7.3f} us/call  rotating "
                    f"{rot['us_per_call']:7.3f} us/call ({rot['GB_s']:.0f} GB/s, {n_sets} graph sets)",
                    flush=True,
                )
            banks.clear()
            torch.cuda.empty_cache()
        if floor_ext is not None:
            _floor_rows(floor_ext, shape, kernel, a, n_sets, results)
        fl = floor_us(shape, kernel)
        results.setdefault("floor_us_per_call", {})[kernel] = round(fl, 3)
        print(
            f"{kernel:>3} formula floor ~{fl:.2f} us/call (docs/DESIGN.md §5.9: 0.6 us one-CTA graph node +"
            " b3 bytes at 4.2 TB/s; benchmarks/floor_probe.cu measures the real one)",
            flush=True,
        )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
