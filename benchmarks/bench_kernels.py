"""Kernel speed on the current GPU (issue 3 item 5): µs per call of every variant, hot and rotating,
in graphs of `calls` calls, next to the tinygemm and triton-moe peers and the bandwidth formula of docs/DESIGN.md §5.9 (a lower
bound no real launch reaches: benchmarks/floor_probe.cu measures what this GPU's launch and
DRAM allow for the same bytes).

    python3 benchmarks/bench_kernels.py [--calls 48] [--replays 200] [--out FILE.json]
    python3 benchmarks/bench_kernels.py --kernel step     # W13 then W2 per call (a decode step)

Hot: every call uses the same top_k experts of one bank. Rotating: call l uses bank l and its own
experts; several graphs over disjoint banks alternate so that the working set is >= 5x the L2.
This is a plain benchmark (median of CUDA-event-timed replays), not the ABBA protocol of `workbench ab`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

from workbench.ops import KernelOp, TinyGemmPeer, make_bank, make_inputs
from workbench.shapes import PRESETS
from workbench.triton_moe import TritonMoePeer
from workbench.variants import ARMS, RECORD_BYTES, parse_arm

PEERS = ("tinygemm", "triton-moe")


def call_bytes(shape, kernel: str, layout: str) -> int:
    K, N = shape.dims(kernel)
    return shape.top_k * (K * N // 2 + (K // 32) * N * RECORD_BYTES[layout])


def time_graphs(graphs: list, replays: int) -> float:
    """Median ms per replay, alternating graphs replay by replay."""
    for g in graphs:  # warm-up
        for _ in range(3):
            g.replay()
    torch.cuda.synchronize()
    ev = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(replays)
    ]
    for i, (a, b) in enumerate(ev):
        a.record()
        graphs[i % len(graphs)].replay()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev)


def capture(fns: list, calls: list[tuple]) -> torch.cuda.CUDAGraph:
    """One graph of len(calls) calls; call i runs fns[i] (a KernelOp or a tinygemm peer)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for fn, c in zip(fns, calls, strict=True):  # eager warm-up on the side stream
            fn(*c[:4], rw=c[4])
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for fn, c in zip(fns, calls, strict=True):
            fn(*c[:4], rw=c[4])
    return g


def bench_arm(kernel, arm, shape, banks, inputs, n_sets, n_calls, replays) -> dict | None:
    """Median µs per call of one arm on the hot set and on the rotating sets."""
    if arm == "tinygemm":
        if not TinyGemmPeer.supported():
            return None
        peers: dict[int, TinyGemmPeer] = {}

        def fn_for(i: int):
            if i not in peers:  # experts are fixed per peer, as in a per-expert loop
                peers[i] = TinyGemmPeer(kernel, shape, banks[i], inputs[i]["ids"].tolist())
            return peers[i]
    elif arm == "triton-moe":
        if not TritonMoePeer.supported():
            return None
        fused: dict[int, TritonMoePeer] = {}

        def fn_for(i: int):
            if id(banks[i]) not in fused:  # ids are read on the device: one peer per bank
                fused[id(banks[i])] = TritonMoePeer(kernel, shape, banks[i])
            return fused[id(banks[i])]
    else:
        op = KernelOp(parse_arm(kernel, arm), shape)

        def fn_for(i: int):
            return op

    row = {"kernel": kernel, "arm": arm, "sets": n_sets}
    for set_name in ("hot", "rotating"):
        graphs = []
        for s in range(n_sets if set_name == "rotating" else 1):
            idx = [s * n_calls + c if set_name == "rotating" else 0 for c in range(n_calls)]
            calls = []
            for i in idx:
                act = inputs[i]["x"] if kernel == "w13" else inputs[i]["inter"]
                calls.append((act, banks[i], inputs[i]["ids"], inputs[i]["out"], inputs[i]["rw"]))
            graphs.append(capture([fn_for(i) for i in idx], calls))
        ms = time_graphs(graphs, replays)
        us = ms * 1000 / n_calls
        # triton-moe reads 4 bytes per (group, column) record (fp16 scale and bias), as b4 does
        layout = "b4" if arm.startswith("b4") or arm == "triton-moe" else "b3"
        gbs = call_bytes(shape, kernel, layout) / (us * 1e-6) / 1e9
        row[set_name] = {
            "ms_per_replay": round(ms, 5),
            "us_per_call": round(us, 3),
            "GB_s": round(gbs, 1),
        }
    return row


def bench_step(arm, shape, n_sets, n_calls, replays) -> dict:
    """Median µs per call of the decode step: each call is W13 (arm) and then W2 (arm) on W13's
    output, with the same routed ids; hot and rotating as for one kernel."""
    layout = arm.split("-")[0]
    ops = {k: KernelOp(parse_arm(k, arm), shape) for k in ("w13", "w2")}
    n = n_calls * n_sets
    banks = {k: [make_bank(shape, k, layout, seed=i) for i in range(n)] for k in ops}
    ins = [make_inputs(shape, "w13", seed=100 + i) for i in range(n)]
    outs = [make_inputs(shape, "w2", seed=300 + i) for i in range(n)]
    row = {"kernel": "step", "arm": arm, "sets": n_sets}
    for set_name in ("hot", "rotating"):
        graphs = []
        for s in range(n_sets if set_name == "rotating" else 1):
            idx = [s * n_calls + c if set_name == "rotating" else 0 for c in range(n_calls)]

            def issue(idx=idx):
                for i in idx:
                    x, ids, inter = ins[i]["x"], ins[i]["ids"], ins[i]["out"]
                    ops["w13"](x, banks["w13"][i], ids, inter)
                    ops["w2"](inter, banks["w2"][i], ids, outs[i]["out"], rw=outs[i]["rw"])

            st = torch.cuda.Stream()
            st.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(st):
                issue()  # eager warm-up on the side stream
            torch.cuda.current_stream().wait_stream(st)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                issue()
            graphs.append(g)
        ms = time_graphs(graphs, replays)
        row[set_name] = {
            "ms_per_replay": round(ms, 5),
            "us_per_call": round(ms * 1000 / n_calls, 3),
        }
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="qwen3.8-flash-next")
    ap.add_argument("--calls", type=int, default=48)
    ap.add_argument("--replays", type=int, default=200)
    ap.add_argument("--out", default=None)
    ap.add_argument("--kernel", default="w13,w2")
    ap.add_argument("--arms", default=",".join([*ARMS, *PEERS]))
    ap.add_argument(
        "--no-floor",
        action="store_true",
        help="skip the floor probe timed in this process (benchmarks/floor_inproc.py)",
    )
    a = ap.parse_args()
    floor_ext = None
    if not a.no_floor:
        from floor_inproc import load_extension

        floor_ext = load_extension()
    shape = PRESETS[a.preset]
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 60 * 2**20)
    results = {
        "gpu": props.name,
        "shape": shape.to_dict(),
        "calls": a.calls,
        "replays": a.replays,
        "rows": [],
    }
    for kernel in a.kernel.split(","):
        if kernel == "step":
            per_graph = a.calls * (call_bytes(shape, "w13", "b3") + call_bytes(shape, "w2", "b3"))
            n_sets = max(1, -(-5 * l2 // per_graph))
            for arm in [x for x in ARMS if x in a.arms.split(",")]:
                row = bench_step(arm, shape, n_sets, a.calls, a.replays)
                results["rows"].append(row)
                print(
                    f"step {arm:>9}  hot {row['hot']['us_per_call']:7.3f} us/call  rotating "
                    f"{row['rotating']['us_per_call']:7.3f} us/call ({n_sets} graph sets)",
                    flush=True,
                )
                torch.cuda.empty_cache()
            continue
        K, N = shape.dims(kernel)
        per_graph = a.calls * call_bytes(shape, kernel, "b3")
        n_sets = max(1, -(-5 * l2 // per_graph))  # graphs over disjoint banks: >= 5x L2 in rotation
        inputs = [make_inputs(shape, kernel, seed=100 + i) for i in range(a.calls * n_sets)]
        for layout in ("b4", "b3"):
            banks = [make_bank(shape, kernel, layout, seed=i) for i in range(a.calls * n_sets)]
            wanted = a.arms.split(",")
            arms = [x for x in ARMS if x in wanted and x.startswith(layout)] + (
                [p for p in PEERS if p in wanted] if layout == "b3" else []  # from the b3 banks
            )
            if not arms:
                continue
            for arm in arms:
                row = bench_arm(kernel, arm, shape, banks, inputs, n_sets, a.calls, a.replays)
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
            from floor_inproc import time_floor

            fl = time_floor(
                floor_ext, call_bytes(shape, kernel, "b3"), a.calls, n_sets, a.replays, time_graphs
            )
            results.setdefault("floor_probe", {})[kernel] = fl
            best = fl["best"]
            print(
                f"{kernel:>3} floor-probe hot {best['hot']:7.3f} us/call  rotating "
                f"{best['rotating']:7.3f} us/call (same process; best of {', '.join(fl['shapes'])})",
                flush=True,
            )
            for row in results["rows"]:
                if row["kernel"] == kernel:
                    row["vs_floor"] = {
                        s: round(row[s]["us_per_call"] / best[s], 3) for s in ("hot", "rotating")
                    }
                    print(
                        f"{kernel:>3} {row['arm']:>9}  / floor: hot {row['vs_floor']['hot']:.2f}x  "
                        f"rotating {row['vs_floor']['rotating']:.2f}x",
                        flush=True,
                    )
        floor_us = 0.6 + call_bytes(shape, kernel, "b3") / 4.2e12 * 1e6
        results.setdefault("floor_us_per_call", {})[kernel] = round(floor_us, 3)
        print(
            f"{kernel:>3} formula floor ~{floor_us:.2f} us/call (docs/DESIGN.md §5.9: 0.6 us one-CTA graph node +"
            " b3 bytes at 4.2 TB/s; benchmarks/floor_probe.cu measures the real one)",
            flush=True,
        )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
