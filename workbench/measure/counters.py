"""Hardware counters of A and B side by side (`workbench ab --counters`, docs/KERNELS.md).

After a run's timed blocks, Nsight Compute profiles one eager launch of arm A and one of arm B for
each main comparison of w13 and w2, in a fresh process of its own: ``python3 -m
workbench.measure.counters MANIFEST`` is the program ncu runs, and it launches nothing else that
ncu's kernel filter matches. Nothing here touches a timed sample, so no verdict can move.

One ncu run per expert set. ncu replays each launch some tens of times to read all its counters,
saving and restoring the process's device memory around every pass; so the program's banks hold
only the routed experts (``experts = top_k``: the same work per launch), which keeps all of its
device memory well inside the L2. hot: ncu leaves the caches alone, the program reads the routed
experts once more before each launch, and the launch finds them in L2 as the timed hot graphs do;
rotating: ncu flushes the caches before each pass, so it reads from DRAM like the timed rotating
calls. The DRAM bytes row shows which it was. One launch is not the graph of ``calls`` launches
the timing replays: these counters explain a ratio, they do not measure one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from workbench.core.contract import OPS
from workbench.core.vocab import KERNELS, SETS  # the counters' kernels: step is their sequence
from workbench.measure import ncu

TIMEOUT_S = 900  # one ncu run (four launches, about 40 replay passes each)


@dataclass(frozen=True)
class Item:
    """One profiled launch: side A or B of a main comparison, ``arm`` as given on the command line
    (a built-in arm or a kernel spec file)."""

    cmp: str
    kernel: str
    set: str
    side: str
    arm: str
    variant: str  # the arm's name in the session (its comparison record's a or b)


def plan(comparisons, a_text: str, b_text: str) -> tuple[list[Item], list[str]]:
    """The launches to profile for a run's comparisons, and a note per comparison left out
    (Python arms launch their own kernels, which ncu's filter does not match)."""
    items, notes = [], []
    for c in comparisons:
        if c.role != "main" or c.kernel not in KERNELS:
            continue
        if c.a.python is not None or c.b.python is not None:
            notes.append(f"{c.id}: no counters for a Python arm ({c.a.name} vs {c.b.name})")
            continue
        for side, arm, text in (("A", c.a, a_text), ("B", c.b, b_text)):
            items.append(Item(c.id, c.kernel, c.set, side, text, arm.name))
    return items, notes


def collect(
    session_path: Path, shape, seed: int, items: list[Item], ncu_path: str, say=print
) -> dict:
    """Run ncu over ``items`` (one run per set), keep its CSV beside the session and return the
    counters document (workbench/store/counters.py writes and reads it). Raises
    ncu.CountersUnavailable (no permission: exit 3) or ncu.CountersFailed."""
    folder = Path(session_path) / "counters"
    folder.mkdir(exist_ok=True)
    launches, commands = [], []
    for set_name in sorted({i.set for i in items}, key=SETS.index):
        todo = [i for i in items if i.set == set_name]
        manifest = folder / f"{set_name}.json"
        manifest.write_text(
            json.dumps(
                {"shape": shape.to_dict(), "seed": seed, "set": set_name,
                 "items": [[i.kernel, i.arm] for i in todo]}
            )
        )  # fmt: skip
        log = folder / f"{set_name}.csv"
        target = [sys.executable, "-m", "workbench.measure.counters", str(manifest)]
        cmd = ncu.command(ncu_path, str(log), set_name == "hot", target)
        say(f"counters: ncu on {len(todo)} launches of the {set_name} set")
        t0 = time.monotonic()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ncu.CountersFailed(f"ncu ran past {TIMEOUT_S} s on the {set_name} set") from None
        text = log.read_text() if log.exists() else ""
        said = (done.stderr.strip().splitlines() or ["nothing"])[-1]  # the program's last word
        try:
            ncu.check_log(text + done.stdout + done.stderr, done.returncode)
        except ncu.CountersFailed as e:
            raise ncu.CountersFailed(
                f"{str(e).rstrip('.')} on the {set_name} set (the program said: {said})"
            ) from None
        got = ncu.parse_csv(text if '"ID","Process ID"' in text else done.stdout)
        if len(got) != len(todo):
            raise ncu.CountersFailed(
                f"ncu profiled {len(got)} launches of the {set_name} set, expected {len(todo)} "
                f"(the program said: {said})"
            )
        for item, launch in zip(todo, got, strict=True):
            if not launch.kernel_name.startswith(f"{item.kernel}_kernel"):
                raise ncu.CountersFailed(
                    f"launch {launch.kernel_name!r} profiled where {item.kernel} was expected"
                )
            launches.append(record(item, launch))
        commands.append({"set": set_name, "seconds": round(time.monotonic() - t0, 1),
                         "argv": cmd[1:]})  # fmt: skip
    return {"ncu": ncu_version(ncu_path), "runs": commands, "launches": launches}


def record(item: Item, launch: ncu.Launch) -> dict:
    """The counters document's entry of one launch."""
    return {
        "cmp": item.cmp,
        "kernel": item.kernel,
        "set": item.set,
        "side": item.side,
        "arm": item.variant,
        "kernel_name": launch.kernel_name,
        "block": launch.block,
        "grid": launch.grid,
        "metrics": launch.metrics,
        "stalls": launch.stalls,
    }


def ncu_version(ncu_path: str) -> str:
    try:
        out = subprocess.run([ncu_path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({type(e).__name__})"
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "unknown"


def _target(manifest_path: str) -> int:
    """The program ncu profiles: per manifest item, one eager launch on fresh synthetic inputs
    (bank 0 of the run's seed, its experts cut to the routed ones), all builds and inputs made
    before the first launch."""
    import dataclasses

    import torch

    from workbench.data.shapes import Shape
    from workbench.kernels.ops import KernelOp, make_bank, make_inputs
    from workbench.measure.plan import bank_seed, parse_arm_spec

    m = json.loads(Path(manifest_path).read_text())
    full = Shape(**m["shape"])
    shape = dataclasses.replace(full, experts=full.top_k)  # every expert is routed: small banks
    prepared = []
    for kernel, arm in m["items"]:
        variant = parse_arm_spec(kernel, arm).variant(kernel)
        bank = make_bank(shape, kernel, variant.layout, seed=bank_seed(m["seed"], 0))
        inputs = make_inputs(shape, kernel, seed=m["seed"] * 1000 + 500)
        prepared.append((KernelOp(variant, shape), bank, inputs))
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # what ncu saves and restores is what the process holds
    for op, bank, inputs in prepared:
        act = inputs[OPS[op.kernel].reads[0]]
        if m["set"] == "hot":  # the routed experts' bytes into L2, by kernels ncu does not match
            rows = inputs["ids"].long()
            _ = (bank.weights.index_select(0, rows), bank.meta.index_select(0, rows), act + 0)
        torch.cuda.synchronize()
        op(act, bank, inputs["ids"], inputs["out"], rw=inputs["rw"])
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(_target(sys.argv[1]))
