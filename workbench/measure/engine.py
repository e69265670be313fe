"""The device side of a run (imports torch): builds, banks, calls, gate, timing.

A worker of the run's pool (workbench.run.worker_proc) drives it; it writes only through its
sink, and the runner owns the session and the results. Engine does the CUDA work:

* banks: one bank per layer per layout, allocated per kernel once, b3 before b4, with NVML used
  memory read before and after each batch (the ``memory`` record): workbench.measure.bankstore;
* calls: workloads, each call's outputs and launchers, an arm's graphs (``graphs.GraphArm``),
  Python arms' launchers (the peers, users' ``kind = "python"`` specs):
  workbench.measure.calls;
* gate: bit-identical outputs for arms of one identity, else each arm within its promised
  tolerance against float64 (NumericsError, exit 5), recorded-only for calibration arms;
* timing: ``abba.run_abba`` with the monitor's window and the session's journal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.core import stats
from workbench.core.errors import (
    BadArgument,
    GPUFault,
    NumericsError,
    WorkbenchError,
    fault_line,
    is_sticky_cuda_error,
)
from workbench.kernels.pyarm import PythonSpec
from workbench.measure.abba import Outcome, run_abba, stop_reason
from workbench.measure.bankstore import DEVICE, BankStore
from workbench.measure.calls import Calls
from workbench.measure.gate import numerics_gate
from workbench.measure.graphs import Cycle, GraphArm, Retimed, l2_bytes
from workbench.measure.plan import (
    ComparisonSpec,
    Geometry,
    geometry,
    kernels_of,
    placement_padding,
)


@dataclass
class _CmpState:
    """One comparison across its blocks."""

    spec: ComparisonSpec
    geom: Geometry
    outcome: Outcome
    record: dict[str, Any]  # the comparison record as journaled
    gates: list[dict[str, Any]] = field(default_factory=list)
    failed: int = 0
    done: bool = False
    # method checks (docs/DESIGN.md §5.11): the comparisons that time this one's captured arms
    # again in its blocks, and for such a check the comparison it rides on
    checks: list[_CmpState] = field(default_factory=list)
    host: _CmpState | None = None


def plan_groups(plan: list[ComparisonSpec]) -> list[list[ComparisonSpec]]:
    """The plan's runs of comparisons of one kernel and group: they share their blocks'
    placements (docs/DESIGN.md §5.5), in the plan's order."""
    groups: list[list[ComparisonSpec]] = []
    for c in plan:
        if groups and (groups[-1][0].kernel, groups[-1][0].group) == (c.kernel, c.group):
            groups[-1].append(c)
        else:
            groups.append([c])
    return groups


def _attach_checks(states: list[_CmpState]) -> None:
    """Each method check rides on its host comparison of the same group (docs/DESIGN.md
    §5.11); a check whose host is not in the group runs as a comparison of its own."""
    by_id = {s.spec.id: s for s in states}
    for s in states:
        host = by_id.get(s.spec.of) if s.spec.of else None
        if host is not None and host.host is None:
            s.host = host
            host.checks.append(s)


def raise_if_fault(e: BaseException, cmp: str | None) -> None:
    """A sticky CUDA error becomes GPUFault naming the comparison and the arm that ran last:
    the context is lost, so no later block could run (docs/DESIGN.md §9)."""
    if isinstance(e, GPUFault):
        raise e
    if is_sticky_cuda_error(e):
        arm = GraphArm.last
        raise GPUFault(fault_line(cmp, arm, f"{type(e).__name__}: {e}"), cmp, arm) from e


class Engine:
    """The device work of one process. It holds the run's config, the NVML ``monitor`` of its
    GPU and a ``sink`` (workbench.run.sink.Sink) that takes every record, note, event and result:
    no reference to whoever runs it, and no say in the order of work (the runner's, §8)."""

    def __init__(self, cfg: Any, sink: Any, monitor: Any) -> None:
        self.cfg = cfg
        self.sink = sink
        self.monitor = monitor
        self.shape = cfg.shape
        self.clock_mhz: float | None = None  # the GPU's rated SM clock (torch), for calibration
        # seconds per phase of this process's work (docs/DESIGN.md §5.10)
        self.phases: dict[str, float] = {}
        self.references: dict[tuple[Any, ...], Any] = {}  # float64 outputs the gate compares to
        self.l2 = l2_bytes(torch.cuda.current_device())
        self.store = BankStore(self)
        self.calls = Calls(self)  # workloads, kernel ops, Python arms: what one call launches
        self.padding: torch.Tensor | None = None  # the current block's placement padding

    # ------------------------------------------------------------------ builds, facts

    def build(self) -> list[Any]:
        from workbench.kernels.build import build_many

        variants = {v for c in self.cfg.comparisons for arm in (c.a, c.b) for v in arm.variants}
        results = build_many(sorted(variants, key=lambda v: v.name)) if variants else []
        self.sink.emit("builds", [b.summary() for b in results])
        return results

    def clock_from_device(self) -> int | None:
        """The GPU's rated SM clock from torch (kHz; ``clock_mhz`` is set from it)."""
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        khz = getattr(props, "clock_rate", None)
        if khz:
            self.clock_mhz = khz / 1000.0
        return khz

    def environment(self, builds: list[Any]) -> dict[str, Any]:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        mon = self.monitor
        info = mon.device_info()
        start = mon.read()
        clocks = dict(start.to_dict()) if start is not None else {}
        clocks["sm_mhz_max"] = info.get("sm_mhz_max")
        clocks["torch_clock_rate_khz"] = self.clock_from_device()
        gpu = {
            "name": props.name,
            "uuid": info.get("uuid") or str(getattr(props, "uuid", "")),
            "driver": info.get("driver"),
            "cuda": torch.version.cuda,
            "cuda_driver": info.get("cuda_driver"),
            "torch": torch.__version__,
            "sm": f"{props.major}.{props.minor}",
            "multiprocessors": props.multi_processor_count,
            "total_memory": props.total_memory,
            "l2_bytes": self.l2,
            "power_limit_w": info.get("power_limit_w"),
            "clocks": clocks,
        }
        return {
            "gpu": gpu,
            "nvml": mon.reason or "available",
            "builds": {
                b.variant.name: {k: v for k, v in b.summary().items() if k != "log"} for b in builds
            },
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }

    def provenance(self, builds: list[Any]) -> dict[str, Any]:
        from workbench.kernels.build import source_hashes
        from workbench.store import provenance

        prov = provenance.collect()
        # "csrc/<path>" -> sha256, wherever the sources are (a checkout or the installed package)
        prov["files"] = source_hashes()
        prov["builds"] = {b.variant.name: b.lib_sha256 for b in builds}
        prov["banks"] = self.store.source.describe(self.planned_banks())
        # every spec built, with a user kernel's sources and their sha256 (docs/DESIGN.md §4.1)
        prov["specs"] = {
            b.variant.name: b.variant.kernel_spec.to_record(dict(b.variant.params)) for b in builds
        }
        # and every Python arm, with the SHA-256 of its entry's file and further sources (§4.8)
        for sp, k in self._python_arms():
            prov["specs"][f"{k}:{sp.name}"] = sp.to_record(k)
        return prov

    def _python_arms(self) -> list[tuple[PythonSpec, str]]:
        arms = {(arm.python, k) for c in self.cfg.comparisons for arm in (c.a, c.b)
                if arm.python is not None for k in kernels_of(c.kernel)}  # fmt: skip
        return sorted(arms, key=lambda t: (t[0].name, t[1]))

    def planned_banks(self) -> dict[str, int]:
        """Banks per kernel the plan reads (the step confirmation reads no more than its
        kernels' own comparisons: its working set per replay is larger, so it needs fewer)."""
        need: dict[str, int] = {}
        for c in self.cfg.comparisons:
            g = self._geometry(c)
            for k in kernels_of(c.kernel):
                need[k] = max(need.get(k, 0), g.banks)
        return need

    # ------------------------------------------------------------------ plan

    @contextlib.contextmanager
    def timed(self, phase: str):
        """Add the seconds of the ``with`` body to ``phases[phase]``."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.phases[phase] = self.phases.get(phase, 0.0) + time.monotonic() - t0

    def run_plan(
        self,
        comparisons: list[ComparisonSpec],
        keep: frozenset[tuple[str, str]] | set[tuple[str, str]] = frozenset(),
        first_group: int = 0,
    ) -> int:
        """The comparisons given, kernel by kernel, in blocks (docs/DESIGN.md §5.5); returns
        the next group number. The runner decides what comes next (the recommendation, the step
        confirmation); ``keep`` names the banks (kernel, layout) it still needs afterwards, and
        groups are numbered from ``first_group`` (their placements differ by group)."""
        plan = self._drop_unsupported(list(comparisons))
        groups = plan_groups(plan)
        # Every bank of the run first, b3 before b4 per kernel, before any graph or release: the
        # NVML memory records then measure the banks alone.
        with self.timed("banks"):
            self._prepare_banks(plan)
        for i, cmps in enumerate(groups):
            with self.timed("banks"):
                self._prepare_banks(cmps)
            self.run_group(first_group + i, cmps)
            if self.sink.cancel.is_set():
                break
            later = [c for g in groups[i + 1 :] for c in g]
            with self.timed("release"):
                self.calls.clear()  # Python arms' converted experts: not needed by later kernels
                self.store.release(self.banks_needed(later) | set(keep))
        return first_group + len(groups)

    def run_group(self, group: int, cmps: list[ComparisonSpec]) -> None:
        """The blocks of comparisons that share banks. Each block places those banks anew behind
        a padding drawn from the placement seed, then runs ``pairs`` ABBA pairs of every
        comparison still going. Before the first counted block the group makes its neighbours,
        primes its placement and runs its warm-up blocks (``_before_blocks``, §5.5). A block that
        fails is journaled and costs only itself (a numerics failure still stops the run: exit 5)."""
        r, proto = self.sink, self.cfg.protocol
        states = [self._start(c) for c in cmps]
        _attach_checks(states)
        self._before_blocks(group, states)
        t0 = time.monotonic()
        ok_blocks = 0
        for b in range(proto.block_goal):
            active = [s for s in states if not s.done]
            if not active or r.cancel.is_set():
                break
            rec = self._placement(group, b, "block", active)
            if rec is None:
                continue
            for s in active:
                if r.cancel.is_set():
                    break
                if s.host is not None:
                    continue  # a method check: timed in its host's block, on its graphs
                try:
                    self._run_block(s, b, rec)
                except (NumericsError, BadArgument):
                    raise
                except (WorkbenchError, RuntimeError) as e:
                    for x in (s, *(c for c in s.checks if not c.done)):
                        self._block_failed(x, b, e, rec)
            ok_blocks += 1
            elapsed = time.monotonic() - t0
            for s in active:  # the stopping rule decides for a host; its checks stop with it
                if s.host is None:
                    s.done = s.done or self._settled(s, b + 1, elapsed)
            for s in active:
                if s.host is not None and s.host.done and not s.done:
                    s.done, s.outcome.stop = True, s.host.outcome.stop
        with self.timed("results"):
            for s in states:
                if s.outcome.samples or s.gates:
                    if r.cancel.is_set():
                        s.outcome.stop = "cancelled"
                    r.result(s.record, s.outcome.samples, s.gates, self.cfg.m)
        if ok_blocks == 0 and not r.cancel.is_set():
            raise WorkbenchError(
                f"every block of {', '.join(c.id for c in cmps)} failed: see the notes"
            )

    def _block_failed(self, s: _CmpState, b: int, e: BaseException, rec: dict[str, Any]) -> None:
        """Journal block ``b`` of ``s`` as failed and left out (a sticky fault raises instead)."""
        raise_if_fault(e, s.spec.id)
        s.failed += 1
        self.sink.record("block", status="failed", cmp=s.spec.id,
                         error=f"{type(e).__name__}: {e}", **rec)  # fmt: skip
        self.sink.note(f"{s.spec.id}: block {b} failed and is left out: {e}")

    def _placement(
        self, group: int, b: int, kind: str, active: list[_CmpState]
    ) -> dict[str, Any] | None:
        """Place the banks of ``active`` for block ``b`` of ``kind`` (a counted "block" or a
        "warmup" block) and journal it; None when the placement failed
        (journaled and noted)."""
        r, proto = self.sink, self.cfg.protocol
        pad = placement_padding(proto.placement_seed or 0, group, b, kind)
        rec = {"block": b, "group": group, "placement_seed": proto.placement_seed,
               "padding_bytes": pad, "comparisons": [s.spec.id for s in active]}  # fmt: skip
        what = {"block": "block", "warmup": "warm-up block"}[kind]
        try:
            with self.timed("banks"):
                self._place(active, pad)
        except (WorkbenchError, RuntimeError) as e:
            raise_if_fault(e, ", ".join(rec["comparisons"]))
            r.record("block", status="failed", error=f"{type(e).__name__}: {e}", **rec,
                     **({} if kind == "block" else {"kind": kind}))  # fmt: skip
            r.note(f"{what} {b} of {', '.join(rec['comparisons'])}: placement failed: {e}")
            return None
        if kind != "warmup":  # a warm-up block is journaled once it has run, with its timings
            r.record("block", status="placed" if kind == "block" else kind, **rec)
        if kind == "block":
            r.emit("block", rec)
        return rec

    def _before_blocks(self, group: int, states: list[_CmpState]) -> None:
        """Make block 0 the same kind of draw as every later block (docs/DESIGN.md §5.5): the
        peers and kernel ops exist before the first placement (later blocks are placed beside
        them), then ``warmup_blocks`` whole blocks run, journaled but not counted."""
        r, proto = self.sink, self.cfg.protocol
        with self.timed("peers"):
            self._make_neighbours(states)
        for w in range(proto.warmup_blocks):
            if r.cancel.is_set():
                return
            rec = self._placement(group, w, "warmup", states)
            if rec is None:
                continue
            for s in states:
                if r.cancel.is_set():
                    return
                if s.host is not None:
                    continue  # a method check times counted blocks only
                if proto.warmup_sets and s.spec.set not in proto.warmup_sets:
                    continue  # placed with the others, not run (ab --warmup-sets)
                try:
                    with self.timed("warmup"):
                        out = self._warmup_block(s)
                except (WorkbenchError, RuntimeError) as e:
                    raise_if_fault(e, s.spec.id)
                    r.note(f"{s.spec.id}: warm-up block {w} failed (not counted anyway): {e}")
                    continue
                r.record(
                    "block", status="warmup", cmp=s.spec.id, ratios=out.ratios,
                    median_ms={"A": out.median_ms("A"), "B": out.median_ms("B")}, **rec,
                )  # fmt: skip

    def _make_neighbours(self, states: list[_CmpState]) -> None:
        """Every peer and kernel op the group's comparisons use, made now: a peer holds device
        memory of its own (converted experts), so later blocks were placed beside it while block
        0 was placed without it (it was made when its comparison first ran)."""
        for s in states:
            for arm in (s.spec.a, s.spec.b):
                self.calls.make_ahead(arm, s.spec, s.geom)

    def _warmup_block(self, s: _CmpState) -> Outcome:
        """One comparison's warm-up block: captured, replayed once as the gate does, and timed
        like a counted block but with ``warmup_pairs`` pairs, its samples going to no outcome
        (the caller journals a summary)."""
        c, r = s.spec, self.sink
        cycle = Cycle(s.geom.graphs)
        arm_a = arm_b = None
        try:
            arm_a = self._block_arm(s, "a", cycle)
            arm_b = self._block_arm(s, "b", cycle)
            arm_a.run_once()
            arm_b.run_once()
            window = self.monitor.window if self.monitor.available else None
            proto = self.cfg.protocol
            proto = dataclasses.replace(proto, pairs=proto.warmup_pairs)  # defaults: why fewer
            return run_abba(c.id, arm_a, arm_b, proto, window=window, cancel=r.cancel)
        finally:
            for arm in (arm_a, arm_b):
                if arm is not None:
                    arm.close()

    def _settled(self, s: _CmpState, blocks_done: int, elapsed_s: float) -> bool:
        """Whether a comparison is done after ``blocks_done`` blocks: cancelled, or as
        ``abba.stop_reason`` (the stopping rule) decides on its block-level interval."""
        if s.outcome.cancelled:
            return True
        hw = None
        if self.cfg.protocol.adaptive:
            ratios = stats.pair_ratios(s.outcome.samples)
            hw = stats.compare(ratios, self.cfg.m).half_width
        reason = stop_reason(self.cfg.protocol, blocks_done, hw, elapsed_s)
        if reason is not None:
            s.outcome.stop = reason
        return reason is not None

    def _drop_unsupported(self, plan: list[ComparisonSpec]) -> list[ComparisonSpec]:
        specs = {arm.python for c in plan for arm in (c.a, c.b) if arm.python is not None}
        missing = {sp for sp in specs if not self.calls.python.supported(sp)}
        for sp in sorted(missing, key=lambda x: x.name):
            self.sink.note(
                f"{sp.name} is not supported on this GPU/torch: its comparisons are skipped"
            )
        return [c for c in plan if not {c.a.python, c.b.python} & missing]

    def _geometry(self, c: ComparisonSpec) -> Geometry:
        layouts = c.a.layouts | c.b.layouts
        return geometry(self.shape, c.kernel, c.set, self.cfg.calls, layouts, self.l2)

    def banks_needed(self, cmps: list[ComparisonSpec]) -> set[tuple[str, str]]:
        return {
            (k, lay)
            for c in cmps
            for k in kernels_of(c.kernel)
            for lay in c.a.layouts | c.b.layouts
        }

    def _prepare_banks(self, cmps: list[ComparisonSpec]) -> None:
        """Allocate every bank these comparisons read up front, b3 before b4 per kernel, so the
        memory records compare like with like."""
        need: dict[tuple[str, str], int] = {}
        for c in cmps:
            g = self._geometry(c)
            for k in kernels_of(c.kernel):
                for lay in c.a.layouts | c.b.layouts:
                    need[(k, lay)] = max(need.get((k, lay), 0), g.banks)
        for (k, lay), n in sorted(need.items(), key=lambda kv: (kv[0][0], kv[0][1] != "b3")):
            self.store.get(k, lay, n)

    # ------------------------------------------------------------------ one comparison

    def _start(self, c: ComparisonSpec) -> _CmpState:
        cfg, proto = self.cfg, self.cfg.protocol
        geom = self._geometry(c)
        for n in geom.notes:
            self.sink.note(f"{c.id}: {n}")
        record = {
            "id": c.id, "kernel": c.kernel, "set": c.set, "role": c.role,
            "a": c.a.name, "b": c.b.name, "calls": cfg.calls, "replays": cfg.replays,
            "seed": cfg.seed, "blocks": proto.block_goal, "pairs_per_block": proto.pairs,
            "placement_seed": proto.placement_seed, **geom.to_record(),
        }  # fmt: skip
        if c.role == "calibration":
            record["spin"] = c.b.spin - c.a.spin  # injected cycles per CTA beyond A's own spin
        if c.timing != "events":  # absent: per-replay CUDA events (graphs.TIMINGS)
            record["timing"] = c.timing
        if c.of:  # a method check: the comparison whose arms it times again (§5.11)
            record["of"] = c.of
        self.sink.record("comparison", **record)
        self.sink.emit("comparison", record)
        return _CmpState(c, geom, Outcome(c.id, c.a.name, c.b.name), record)

    def _place(self, active: list[_CmpState], padding: int) -> None:
        """Place the banks these comparisons read anew, behind ``padding`` bytes (§5.5)."""
        self.calls.workloads.clear()  # inputs are re-made behind the padding too
        self.padding = None
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.padding = torch.empty(padding, dtype=torch.uint8, device=DEVICE)
        for key in sorted(self.banks_needed([s.spec for s in active])):
            self.store.relocate(key)
        self.calls.python.relocate()
        torch.cuda.synchronize()

    def _run_block(self, s: _CmpState, block: int, rec: dict[str, Any]) -> None:
        """Block ``block`` of one comparison: capture both arms on this placement, gate them,
        run the block's pairs (journaled as they are measured), then its method checks' pairs
        on the same graphs (a check's failure costs only its own block)."""
        c, r, cfg = s.spec, self.sink, self.cfg
        cycle = Cycle(s.geom.graphs)
        arm_a = arm_b = None
        try:
            with self.timed("capture"):
                arm_a = self._block_arm(s, "a", cycle)
                arm_b = self._block_arm(s, "b", cycle)
            with self.timed("gate"):
                s.gates.append(self.gate(c, arm_a, arm_b, block, s.geom))
            window = self.monitor.window if self.monitor.available else None
            with self.timed("timing"):
                out = run_abba(
                    c.id, arm_a, arm_b, cfg.protocol, record=r.record,
                    window=window, progress=r.progress, cancel=r.cancel, block=block,
                    first_pair=s.outcome.pair_index,
                )  # fmt: skip
            s.outcome.extend(out)
            for chk in (c for c in s.checks if not c.done):
                if r.cancel.is_set():
                    break
                try:
                    self._time_check(chk, arm_a, arm_b, block, s.gates[-1])
                except (NumericsError, BadArgument):
                    raise
                except (WorkbenchError, RuntimeError) as e:
                    self._block_failed(chk, block, e, rec)
        finally:
            for arm in (arm_a, arm_b):
                if arm is not None:
                    arm.close()

    def _time_check(
        self, chk: _CmpState, arm_a: GraphArm, arm_b: GraphArm, block: int, gate: dict[str, Any]
    ) -> None:
        """A method check's pairs in its host's block: the host's captured, gated and warm arms
        timed by the check's method (no capture, gate or warm-up samples of its own; the gate's
        record is journaled for the check too)."""
        c, r = chk.spec, self.sink
        shared = {**gate, "cmp": c.id}
        r.record("gate", **shared)
        chk.gates.append(shared)
        proto = dataclasses.replace(self.cfg.protocol, warmup=0)  # the arms have just run
        with self.timed("timing"):
            out = run_abba(
                c.id, Retimed(arm_a, c.timing), Retimed(arm_b, c.timing), proto,
                record=r.record, window=self.monitor.window if self.monitor.available else None,
                progress=r.progress, cancel=r.cancel, block=block,
                first_pair=chk.outcome.pair_index,
            )  # fmt: skip
        chk.outcome.extend(out)

    def _block_arm(self, s: _CmpState, side: str, cycle: Cycle) -> GraphArm:
        """Every arm, the peer's too, is captured anew on every placement: a graph kept from
        an earlier block gave the tinygemm peer different outputs on the H200 (gate records of
        the 61a63cf sessions), and its own memory is a placement like any other."""
        return self.calls.arm(getattr(s.spec, side), s.spec, s.geom, cycle)

    def gate(
        self,
        c: ComparisonSpec,
        arm_a: GraphArm,
        arm_b: GraphArm,
        block: int | None = None,
        geom: Geometry | None = None,
    ) -> dict[str, Any]:
        """Run both arms once on the measured inputs and compare every call's output
        (workbench.measure.gate)."""
        return numerics_gate(self, c, arm_a, arm_b, block, geom)

    def release(self) -> None:
        self.padding = None
        self.calls.release()
        self.store.release(set())
