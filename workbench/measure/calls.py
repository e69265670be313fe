"""The calls of an engine's arms (imports torch): what one call of an arm reads, writes and
launches, in one place for the graphs that are timed, the neighbours made before them, and the
numerics gate (workbench.measure.gate).

* workloads: per (kernel, set), each call's inputs (``ops.make_inputs``, seeded per call) and
  the expert ids of every (graph, call) from the plan's geometry;
* one call: the kernels a comparison's kernel runs (``plan.kernels_of``: W13, W2, or a step of
  both, whose W2 reads its own W13's output as the kernels chain in a layer), each with its
  output allocated before capture; the launcher of a built kernel's op, or of a Python arm's
  callable (``pyarm.PythonArms``: the peers, users' ``kind = "python"`` specs);
* arms: ``graphs.GraphArm`` of ``calls`` calls per graph.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from workbench.core.contract import OPS
from workbench.kernels.pyarm import PythonArms
from workbench.measure.bankstore import DEVICE
from workbench.measure.graphs import Cycle, GraphArm
from workbench.measure.plan import ArmSpec, ComparisonSpec, Geometry, expert_ids, kernels_of


def input_seed(seed: int, call: int) -> int:
    """Seed of call ``call``'s activations (distinct per call, like distinct layers)."""
    return seed * 100_003 + 50_000 + call


def _sequence(fns: list[Callable[[], Any]]) -> Callable[[], None]:
    def issue() -> None:
        for f in fns:
            f()

    return issue


class Calls:
    """The calls of ``engine``'s arms: its workloads, kernel ops and Python arms, made once and
    kept until the engine lets them go (``clear``, ``release``)."""

    def __init__(self, engine: Any) -> None:
        self.e = engine
        self.ops: dict[tuple[Any, int], Any] = {}
        self.python = PythonArms(note=engine.sink.note)  # arms that are Python callables
        self.workloads: dict[tuple[str, str, int], dict[str, Any]] = {}

    def clear(self) -> None:
        """Drop the workloads and the Python arms' state (converted experts) of the kernels run."""
        self.workloads.clear()
        self.python.clear()

    def release(self) -> None:
        self.clear()
        self.ops.clear()

    def op(self, arm: ArmSpec, kernel: str) -> Any:
        from workbench.kernels.ops import KernelOp

        v = arm.variant(kernel)
        key = (v, arm.spin)
        if key not in self.ops:
            self.ops[key] = KernelOp(v, self.e.shape, device=DEVICE, spin_cycles=arm.spin)
        return self.ops[key]

    def bank(self, arm: ArmSpec, kernel: str, index: int) -> Any:
        layout = arm.python.layout if arm.python else arm.variant(kernel).layout
        return self.e.store.banks[(kernel, layout)][index]

    def workload(self, kernel: str, set_name: str, geom: Geometry) -> dict[str, Any]:
        """Inputs per call and expert ids per (graph, call), shared by every arm of the set."""
        key = (kernel, set_name, geom.graphs)
        if key in self.workloads:
            return self.workloads[key]
        from workbench.kernels.ops import make_inputs

        shape, seed, calls = self.e.shape, self.e.cfg.seed, self.e.cfg.calls
        inputs = []
        for l in range(calls):  # noqa: E741
            d: dict[str, Any] = {}
            for k in kernels_of(kernel):
                made = make_inputs(shape, k, input_seed(seed, l), DEVICE)
                d.update({n: made[n] for n in OPS[k].reads})
            inputs.append(d)
        hot = set_name == "hot"
        id_lists = [
            [expert_ids(shape, seed, *geom.slot(g, l), hot=hot) for l in range(calls)]  # noqa: E741
            for g in range(geom.graphs)
        ]
        ids = [[torch.tensor(x, dtype=torch.int32, device=DEVICE) for x in row] for row in id_lists]
        self.workloads[key] = {"inputs": inputs, "ids": ids, "id_lists": id_lists}
        return self.workloads[key]

    def call(
        self,
        arm: ArmSpec,
        kernel: str,
        work: dict[str, Any],
        g: int,
        l: int,  # noqa: E741
        b: int,
    ) -> tuple[list[Callable[[], Any]], list[tuple[str, torch.Tensor]]]:
        """Call ``l`` of graph ``g`` on bank ``b``: a launcher per kernel that ``kernel`` runs,
        in order, and the outputs they write (allocated now, named ``call<l>.<output>``)."""
        shape, half = self.e.shape, dict(dtype=torch.float16, device=DEVICE)
        ids, inp, experts = work["ids"][g][l], work["inputs"][l], work["id_lists"][g][l]
        fns, outs = [], []
        made: dict[str, torch.Tensor] = {}
        for k in kernels_of(kernel):
            op = OPS[k]
            out = torch.empty(op.rows(shape), shape.dims(k)[1] // op.halve, **half)
            # a step's W2 reads its own W13's output, as the kernels chain in a layer
            act = made.get(op.reads[0], inp.get(op.reads[0]))
            more = {n: inp[n] for n in op.reads[1:]}
            fns.append(self.launcher(arm, k, b, experts, act, ids, out, more))
            made[op.writes] = out
            outs.append((f"call{l}.{op.writes}", out))
        return fns, outs

    def arm(self, arm: ArmSpec, c: ComparisonSpec, geom: Geometry, cycle: Cycle) -> GraphArm:
        """Capture ``geom.graphs`` graphs of ``calls`` calls of ``arm`` (outputs pre-allocated)."""
        work = self.workload(c.kernel, c.set, geom)
        issues, outputs = [], []
        for g in range(geom.graphs):
            fns: list[Callable[[], Any]] = []
            outs: list[tuple[str, torch.Tensor]] = []
            for l in range(self.e.cfg.calls):  # noqa: E741
                f, o = self.call(arm, c.kernel, work, g, l, geom.slot(g, l)[0])
                fns += f
                outs += o
            issues.append(_sequence(fns))
            outputs.append(outs)
        return GraphArm(arm.name, issues, outputs, self.e.cfg.replays, cycle, c.timing)

    def make_ahead(self, arm: ArmSpec, c: ComparisonSpec, geom: Geometry) -> None:
        """Everything ``arm`` holds for ``c``, made now (the group's neighbours): a kernel's op,
        or a Python arm's state, which it makes when its callable first sees a routing: every
        call's launcher is asked for and dropped."""
        if arm.python is None:
            for k in kernels_of(c.kernel):
                self.op(arm, k)
            return
        work = self.workload(c.kernel, c.set, geom)
        for g in range(geom.graphs):
            for l in range(self.e.cfg.calls):  # noqa: E741
                self.call(arm, c.kernel, work, g, l, geom.slot(g, l)[0])

    def launcher(
        self,
        arm: ArmSpec,
        kernel: str,
        b: int,
        experts: list[int],
        act: torch.Tensor,
        ids: torch.Tensor,
        out: torch.Tensor,
        more: dict[str, torch.Tensor] | None = None,
    ) -> Callable[[], Any]:
        """One call of ``arm`` as a callable of no arguments: the built kernel's op on the call's
        tensors (``act``, the bank, ``ids``, ``out``, and ``more`` of the op's inputs by name),
        or the launcher a Python arm's callable returns (the one hook for every arm that is not
        a CUDA spec: workbench.kernels.pyarm)."""
        bank, more = self.bank(arm, kernel, b), more or {}
        if arm.python is not None:
            inputs = {OPS[kernel].reads[0]: act, "ids": ids, **more}
            return self.python.launcher(
                arm.python, kernel, self.e.shape, bank, b, experts, inputs, out
            )
        return functools.partial(self.op(arm, kernel), act, bank, ids, out, **more)
