"""Tune the triton-moe peer's M = 1 launch configs on this GPU and write its table
(docs/DESIGN.md §4.7): workbench/kernels/triton_moe_configs.json, which the peer reads so that a timed
run never autotunes.

    python3 benchmarks/tune_triton_moe.py [--preset qwen3.8-flash-next] [--out FILE.json]
        [--kernel w13,w2] [--report FILE.json] [--top 6] [--calls 48] [--replays 100]

Two stages per kernel (W13, W2) of the shape:
1. triton.autotune over the wide config space (triton_moe_kernels.config_space(wide=True,
   kernel)), keyed on (N, K), K tiles past K pruned: triton's do_bench times single calls after
   flushing the L2, so it ranks configs on weights read from DRAM; a call of W2's split form is
   both its launches (the partials and their sum, launched by the autotuner's post_hook);
2. the ``--top`` best of each form (W13: its one form; W2: the slot loop and the split form),
   re-timed the way `workbench ab` and bench_kernels time a call: a CUDA Graph of ``--calls``
   calls, hot (the same routed experts every call) and rotating (each call its own disjoint
   experts of the bank: >= 4x the H200's L2 at the default shape). The winner has the lowest
   geometric mean of the hot and rotating µs per call; its table entry names its form.

``--out`` writes the table (the committed file's other entries kept, this GPU's entries for this
shape replaced, marked measured); copy it to workbench/kernels/triton_moe_configs.json.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import torch

from workbench.data.shapes import PRESETS
from workbench.kernels.ops import make_bank, make_inputs
from workbench.kernels.triton_moe import TABLE, Launch, TritonMoePeer, load_table, table_key
from workbench.measure.graphs import capture


def graph_us(peer, bank, inputs, id_rows, replays: int) -> float:
    """Median µs per call of one graph that calls the peer once per row of ``id_rows``."""
    act = inputs["x"] if peer.kernel == "w13" else inputs["inter"]
    outs = [torch.empty_like(inputs["out"]) for _ in id_rows]

    def issue():
        for ids, out in zip(id_rows, outs, strict=True):
            peer(act, bank, ids, out, rw=inputs["rw"])

    g = capture(issue)
    for _ in range(5):
        g.replay()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(replays)]  # fmt: skip
    for a, b in ev:
        a.record()
        g.replay()
        b.record()
    torch.cuda.synchronize()
    ms = statistics.median(a.elapsed_time(b) for a, b in ev)
    g.reset()
    return ms * 1000 / len(id_rows)


def tune(kernel: str, shape, top: int, calls: int, replays: int) -> dict:
    K, N = shape.dims(kernel)
    bank = make_bank(shape, kernel, "b3", seed=1)
    inputs = make_inputs(shape, kernel, seed=2)
    peer = TritonMoePeer(kernel, shape, bank, config=Launch(16, 64, False, 4, 2, "given"))
    tuner = peer.k.autotuned(kernel, wide=True)
    peer.autotune_with(tuner)
    timings = getattr(tuner, "configs_timings", None) or {}

    def first_ms(t):
        return t[0] if isinstance(t, (list, tuple)) else t

    ranked = sorted(timings.items(), key=lambda kv: first_ms(kv[1]))
    if not ranked:  # a triton without configs_timings: re-time every config in graphs
        ranked, top = [(c, float("nan")) for c in tuner.configs], len(tuner.configs)
    print(f"{kernel} K={K} N={N}: triton.autotune, {len(ranked)} configs (cold L2, µs):")
    chosen = []  # the best `top` of each form: one form must not crowd the other out
    for form in ("loop", "split") if kernel == "w2" else ("loop",):
        of_form = [(c, t) for c, t in ranked if Launch.from_triton(c).form == form]
        for cfg, t in of_form[: max(top, 10)]:
            print(f"  {Launch.from_triton(cfg, source='autotune')}  {first_ms(t) * 1000:8.2f}",
                  flush=True)  # fmt: skip
        chosen += of_form[:top]
    gen = torch.Generator(device="cpu").manual_seed(3)
    perm = torch.randperm(shape.experts, generator=gen)
    k = shape.top_k
    slices = [perm[i * k : (i + 1) * k] for i in range(shape.experts // k)]
    hot = [slices[0].to(torch.int32).cuda()] * calls
    rotating = [slices[i % len(slices)].to(torch.int32).cuda() for i in range(calls)]
    rows = []
    for cfg, t in chosen:
        peer.config = Launch.from_triton(cfg, source="table")
        h = graph_us(peer, bank, inputs, hot, replays)
        r = graph_us(peer, bank, inputs, rotating, replays)
        rows.append({**peer.config.meta(kernel), "form": peer.config.form,
                     "autotune_us": first_ms(t) * 1000, "hot_us": h, "rotating_us": r,
                     "score_us": math.sqrt(h * r)})  # fmt: skip
        print(f"  graph: {peer.config}  hot {h:6.2f}  rotating {r:6.2f} µs/call",
              flush=True)  # fmt: skip
    best = min(rows, key=lambda x: x["score_us"])
    per_form = {f: min((x for x in rows if x["form"] == f), key=lambda x: x["score_us"])
                for f in {x["form"] for x in rows}}  # fmt: skip
    return {"kernel": kernel, "K": K, "N": N, "best": best, "best_per_form": per_form,
            "candidates": rows, "rotating_distinct_calls": min(calls, len(slices))}  # fmt: skip


def launch_of(row: dict, source: str) -> Launch:
    return Launch(**{k: row[k] for k in Launch.__dataclass_fields__ if k in row}, source=source)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="qwen3.8-flash-next", choices=sorted(PRESETS))
    ap.add_argument("--kernel", default="w13,w2", help="w13, w2 or both (one at a time: faster)")
    ap.add_argument("--top", type=int, default=6, help="autotune's best N re-timed in graphs")
    ap.add_argument("--calls", type=int, default=48)
    ap.add_argument("--replays", type=int, default=100)
    ap.add_argument("--out", default=None, help="write the table here (the committed one kept)")
    ap.add_argument("--report", default=None, help="every timing as JSON")
    a = ap.parse_args()
    if not TritonMoePeer.supported():
        print("needs a CUDA GPU (sm_75+) and triton", file=sys.stderr)
        return 3
    import triton

    shape = PRESETS[a.preset]
    gpu = torch.cuda.get_device_name()
    kernels = [k for k in a.kernel.split(",") if k]
    if not kernels or set(kernels) - {"w13", "w2"}:
        print(f"--kernel {a.kernel!r}: choose from w13, w2", file=sys.stderr)
        return 2
    results = [tune(k, shape, a.top, a.calls, a.replays) for k in kernels]
    table = load_table(TABLE)
    entries = table.setdefault(gpu, {})
    for r in results:
        b = r["best"]
        entries[table_key(r["kernel"], r["K"], r["N"])] = {
            **launch_of(b, "graphs").meta(r["kernel"]),
            **({"form": b["form"]} if r["kernel"] == "w2" else {}),  # W13 has one form
            "measured": True,
            "hot_us": round(b["hot_us"], 3),
            "rotating_us": round(b["rotating_us"], 3),
            "triton": triton.__version__,
        }
        for form, f in sorted(r["best_per_form"].items()):
            label = f"{r['kernel']} {form}" if r["kernel"] == "w2" else r["kernel"]
            print(f"best {label}: {launch_of(f, 'graphs')}  hot {f['hot_us']:.2f}  "
                  f"rotating {f['rotating_us']:.2f} µs/call")  # fmt: skip
        if r["kernel"] == "w2":
            print(f"best w2: the {b['form']} form")
    text = json.dumps(table, indent=1) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text)
    if a.report:
        Path(a.report).write_text(json.dumps({"gpu": gpu, "shape": shape.to_dict(),
                                              "results": results}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
