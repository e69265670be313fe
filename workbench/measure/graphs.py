"""CUDA-Graph timing units and the numerics gate (docs/DESIGN.md §5). Imports torch; needs a GPU.

One timed unit is one replay of a graph that holds ``calls`` kernel calls; a sample is the
median of ``replays`` timed replays, each between its own pair of CUDA events (``TIMINGS``: or
one pair around them all, the method check's "batch"). Graphs are
captured on a side stream after warm-up; inputs and outputs exist before capture and the
kernels allocate nothing (only Python arms' temporaries, the tinygemm peer's among them, come
from the graph's pool). Arms with several graphs (the rotating set below
5x L2) take them in turn from a ``Cycle`` shared by both arms of a comparison, so consecutive
replays, also across an A -> B boundary, never read the same experts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from workbench.core.errors import BadArgument

WARMUP_CALLS = 2  # untimed runs of a graph's calls before capture: loads modules, fills caches
BLOCK_FIRST_S = 0.5e-3  # GPU spin before a sample's first replay until the enqueue time is known
BLOCK_MAX_S = 20e-3  # never spin longer than this per sample


class Cycle:
    """Round-robin graph index shared by the arms of one comparison."""

    def __init__(self, n: int) -> None:
        self.n, self.i = n, 0

    def next(self) -> int:
        g = self.i % self.n
        self.i += 1
        return g


def capture(issue: Callable[[], None], warmup: int = WARMUP_CALLS) -> torch.cuda.CUDAGraph:
    """Warm ``issue`` (which launches the calls) up on a side stream, then capture it there."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            issue()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        issue()
    torch.cuda.synchronize()
    return graph


class GraphArm:
    """One arm of a comparison as captured graphs; ``measure()`` is what abba.run_abba times.

    ``issues[g]`` launches graph g's calls; ``outputs[g]`` lists the (name, tensor) outputs those
    calls write, for the numerics gate.
    """

    last: str | None = None  # the arm whose graphs ran or were captured last (a fault names it)

    def __init__(
        self,
        variant: str,
        issues: Sequence[Callable[[], None]],
        outputs: Sequence[Sequence[tuple[str, torch.Tensor]]],
        replays: int,
        cycle: Cycle,
        timing: str = "events",
    ) -> None:
        self.variant = variant
        self.timing = timing_method(timing)
        self.outputs = [list(o) for o in outputs]
        self.cycle = cycle
        GraphArm.last = variant
        self.graphs = [capture(f) for f in issues]
        # Events exist before timing starts: creating them per replay would time the host.
        self.events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(replays)
        ]
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self._cycles_per_s = (getattr(props, "clock_rate", 0) or 2_000_000) * 1000.0  # kHz
        self.block_cycles = int(BLOCK_FIRST_S * self._cycles_per_s)

    def _block(self) -> None:
        """Keep the GPU busy while the host enqueues the sample's replays (nvbench's "blocking
        kernel"): otherwise the first replays start as soon as they are queued, and the host's
        launch gap before each lands between its start event and its graph."""
        if self.block_cycles > 0 and hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(self.block_cycles)

    def measure(self) -> list[float]:
        """Time ``replays`` replays (graphs in cycle order) by the arm's timing method; ms per
        replay."""
        GraphArm.last = self.variant
        return self.timing(self)

    def run_once(self, poison: bool = True) -> None:
        """Replay every graph once (outputs first filled with NaN, so unwritten ones show)."""
        GraphArm.last = self.variant
        if poison:
            for outs in self.outputs:
                for _, t in outs:
                    t.fill_(float("nan"))
        for g in self.graphs:
            g.replay()
        torch.cuda.synchronize()

    def close(self) -> None:
        for g in self.graphs:
            g.reset()
        self.graphs = []


def _behind_block(arm: GraphArm, enqueue: Callable[[], Any]) -> None:
    """Run ``enqueue`` (the sample's replays and their events) behind the blocking kernel, wait
    for the last event, and size the next sample's blocking kernel from this enqueue time."""
    t0 = time.perf_counter()
    arm._block()
    enqueue()
    enqueue_s = time.perf_counter() - t0
    arm.events[-1][1].synchronize()  # stream order: every earlier event is complete too
    # Next time, block for a little longer than this enqueue took (bounded).
    arm.block_cycles = int(min(BLOCK_MAX_S, 1.5 * enqueue_s) * arm._cycles_per_s)


def per_replay_events(arm: GraphArm) -> list[float]:
    """Each replay between its own pair of CUDA events, the replays enqueued behind a blocking
    kernel (``GraphArm._block``); ms per replay."""

    def enqueue() -> None:
        for start, end in arm.events:
            graph = arm.graphs[arm.cycle.next()]
            start.record()
            graph.replay()
            end.record()

    _behind_block(arm, enqueue)
    return [start.elapsed_time(end) for start, end in arm.events]


def batch_events(arm: GraphArm) -> list[float]:
    """One pair of CUDA events around all of a sample's replays, enqueued behind the same
    blocking kernel: no event record between replays, and the span's mean instead of a median
    over replays (docs/DESIGN.md §5.11). ms per replay: the span over the replays, once per
    replay (the sample's median is that mean)."""
    n = len(arm.events)
    start, end = arm.events[0][0], arm.events[-1][1]

    def enqueue() -> None:
        start.record()
        for _ in range(n):
            arm.graphs[arm.cycle.next()].replay()
        end.record()

    _behind_block(arm, enqueue)
    return [start.elapsed_time(end) / n] * n


# The timing methods a comparison may name (ComparisonSpec.timing): another one (CUPTI's kernel
# durations) is a function here taking the arm and returning ms per replay, and an entry.
TIMINGS: dict[str, Callable[[GraphArm], list[float]]] = {
    "events": per_replay_events,
    "batch": batch_events,
}


def timing_method(name: str) -> Callable[[GraphArm], list[float]]:
    """The function of TIMINGS named ``name``; BadArgument names an unknown one."""
    if name not in TIMINGS:
        raise BadArgument(f"timing {name!r} is not one of {', '.join(TIMINGS)}")
    return TIMINGS[name]


class Retimed:
    """A captured arm timed by another method of TIMINGS (a method check, docs/DESIGN.md §5.11):
    its graphs, cycle, events and blocking kernel, no capture of its own."""

    def __init__(self, arm: GraphArm, timing: str) -> None:
        self.arm, self.variant, self.timing = arm, arm.variant, timing_method(timing)

    def measure(self) -> list[float]:
        GraphArm.last = self.variant
        return self.timing(self.arm)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int16) if t.element_size() == 2 else t.view(torch.int32)


def _pairs(a: GraphArm, b: GraphArm) -> list[tuple[int, str, torch.Tensor, torch.Tensor]]:
    """Every output of ``a`` beside ``b``'s: (graph, name, a's tensor, b's tensor), in order."""
    return [(g, name, ta, tb)
            for g, (outs_a, outs_b) in enumerate(zip(a.outputs, b.outputs, strict=True))
            for (name, ta), (_, tb) in zip(outs_a, outs_b, strict=True)]  # fmt: skip


def _host(flags: list[torch.Tensor]) -> list:
    """Per-output results made on the device, read back with one synchronization for all (a
    gate reads hundreds of outputs; one read each cost a round trip each)."""
    return torch.stack(flags).tolist() if flags else []


def unwritten(arm: GraphArm) -> bool:
    """Whether any output of ``arm`` still holds NaN from the poison (run_once)."""
    return any(_host([torch.isnan(t).any() for outs in arm.outputs for _, t in outs]))


def first_difference(a: GraphArm, b: GraphArm) -> dict[str, Any] | None:
    """None when every output of ``a`` and ``b`` is bit-identical and written (no NaN left from
    the poison); else where the first difference is: graph, call output, index, both values."""
    pairs = _pairs(a, b)
    differs = _host([((_bits(ta) != _bits(tb)) | torch.isnan(ta)).any() for _, _, ta, tb in pairs])
    for (g, name, ta, tb), bad_any in zip(pairs, differs, strict=True):
        if not bad_any:
            continue
        nan_a = torch.isnan(ta)
        bad = (_bits(ta) != _bits(tb)) | nan_a | torch.isnan(tb)
        idx = tuple(int(i) for i in bad.nonzero()[0].tolist())
        va, vb = float(ta[idx]), float(tb[idx])
        return {
            "graph": g,
            "output": name,
            "index": list(idx),
            "a": va,
            "b": vb,
            "a_bits": int(_bits(ta)[idx]),
            "b_bits": int(_bits(tb)[idx]),
            "differing": int(bad.sum()),
            "elements": int(ta.numel()),
            "unwritten": bool(nan_a[idx]) or bool(torch.isnan(tb)[idx]),
        }
    return None


def loose_difference(ref: GraphArm, peer: GraphArm) -> dict[str, Any]:
    """Relative L2 error and worst element of ``peer`` against ``ref`` over every output (a
    bf16 peer cannot be bit-identical; this is recorded, not gated). Each output's sums are
    made on the device and read back at once, then added in output order."""
    pairs = _pairs(ref, peer)
    parts = []
    for _, _, tr, tp in pairs:
        r, p = tr.double(), tp.double()
        d = (p - r).abs()
        m = d.max() if d.numel() else d.new_zeros(())
        parts.append(torch.stack(((d * d).sum(), (r * r).sum(), m)))
    num = den = 0.0
    worst: dict[str, Any] = {"max_abs_diff": 0.0}
    at = None
    for (g, name, tr, tp), (dd, rr, m) in zip(pairs, _host(parts), strict=True):
        num += dd
        den += rr
        if not m <= worst["max_abs_diff"]:  # also catches NaN
            worst, at = {"max_abs_diff": m, "graph": g, "output": name}, (tr, tp)
    if at is not None:  # where in that output: one more read
        d = (at[1].double() - at[0].double()).abs()
        worst["flat_index"] = int(torch.nan_to_num(d, nan=float("inf")).argmax())
    rel = (num**0.5) / (den**0.5) if den > 0 else float("inf")
    return {"rel_l2": rel, **worst}


def l2_bytes(device: int = 0) -> int | None:
    """L2 size of ``device`` from torch's device properties, else cudaDeviceGetAttribute."""
    props = torch.cuda.get_device_properties(device)
    v = getattr(props, "L2_cache_size", None)
    if v:
        return int(v)
    return _l2_from_cudart(device)


def _l2_from_cudart(device: int) -> int | None:
    import ctypes

    attr_l2 = 38  # cudaDevAttrL2CacheSize in cuda_runtime_api.h (enum cudaDeviceAttr)
    # torch has loaded libcudart already; dlopen by soname returns that copy.
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        value = ctypes.c_int(0)
        if lib.cudaDeviceGetAttribute(ctypes.byref(value), attr_l2, device) == 0 and value.value:
            return int(value.value)
    return None
