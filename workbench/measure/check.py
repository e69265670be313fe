"""Correctness of the built variants (issue 3 item 4): the gate every variant passes before timing.

For a shape and a kernel: on fresh random banks (hot: one bank; rotating: further banks with other
routed experts), every arm writes all of its NaN-poisoned output, every arm is bit-identical to the
others, a CUDA-Graph replay equals the eager call, and the output is within the built-ins' relative
L2 (``specs.DEFAULT_TOLERANCE``) of the float64 reference (worst element reported). A user's kernel spec is held to its own promise
(docs/DESIGN.md §4.1): bit-identical to the arm it names, or within its tolerance.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from workbench.core.contract import OPS
from workbench.data.shapes import Shape
from workbench.kernels.specs import DEFAULT_TOLERANCE, KernelSpec
from workbench.kernels.variants import ARMS


@dataclass
class CheckRow:
    shape: str
    kernel: str
    bank: int
    arm: str
    fully_written: bool
    graph_equal: bool
    identical_to_first: bool
    rel_l2: float
    worst: str
    tolerance: float = DEFAULT_TOLERANCE  # the arm's promise against the float64 reference

    @property
    def ok(self) -> bool:
        return (
            self.fully_written
            and self.graph_equal
            and self.identical_to_first
            and self.rel_l2 <= self.tolerance
        )

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def _graph_call(op, inputs: dict, bank, out):
    """Capture one call in a CUDA Graph (side stream, after an eager warm-up) and replay it."""
    import torch

    out.fill_(float("nan"))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _call(op, inputs, bank, out)
    g.replay()
    torch.cuda.synchronize()
    return out


def _call(op, inputs: dict, bank, out) -> None:
    act = inputs[OPS[op.kernel].reads[0]]
    op(act, bank, inputs["ids"], out, rw=inputs.get("rw"))


def reference_output(kernel: str, bank, inputs: dict) -> np.ndarray:
    """The float64 reference of one call (``inputs``: x or inter and rw, ids; any device)."""
    from workbench.data.reference import w2_reference, w13_reference

    ids = inputs["ids"].cpu().tolist()
    w = bank.dequantized(ids)
    if kernel == "w13":
        return w13_reference(inputs["x"].cpu().numpy().reshape(-1), w).inter_exact
    return w2_reference(inputs["inter"].cpu().numpy(), w, inputs["rw"].cpu().numpy()).y.reshape(
        1, -1
    )


def check_kernel(
    shape: Shape,
    kernel: str,
    seed: int = 0,
    banks: int = 2,
    arms=ARMS,
    specs: tuple[KernelSpec, ...] = (),
    source=None,
) -> list[CheckRow]:
    """Rows for every (bank, arm); raises nothing on a mismatch: the caller decides (exit 5).

    ``specs``: users' kernels of this op contract, checked beside the built-in ``arms``. Arms of
    one identity (Variant.identity) must be bit-identical to the first arm of that identity. ``source``: where bank b comes
    from (workbench.measure.banks, e.g. a checkpoint's layers); default synthetic banks seeded
    ``seed * 1000 + b``."""
    import torch

    from workbench.data.reference import rel_l2, worst_element
    from workbench.kernels.ops import KernelOp, make_inputs
    from workbench.kernels.variants import Variant, parse_arm
    from workbench.measure.banks import SyntheticBanks

    variants = [parse_arm(kernel, arm) for arm in arms]
    variants += [Variant.of_spec(s) for s in specs if s.kernel == kernel]
    ops = {v.arm: KernelOp(v, shape) for v in variants}
    layouts = sorted({v.layout for v in variants})
    source = source or SyntheticBanks(shape, lambda b: seed * 1000 + b)
    rows: list[CheckRow] = []
    for b in range(banks):
        by_layout = {lay: source.make(kernel, lay, b) for lay in layouts}
        inputs = make_inputs(shape, kernel, seed=seed * 1000 + 500 + b)
        want = reference_output(kernel, by_layout[layouts[0]], inputs)
        firsts: dict[str, object] = {}  # identity -> the first output of that identity
        for arm, op in ops.items():
            bank = by_layout[op.variant.layout]
            first = firsts.get(op.variant.identity())
            out = inputs["out"].clone()  # NaN-poisoned
            _call(op, inputs, bank, out)
            torch.cuda.synchronize()
            eager = out.clone()
            replayed = _graph_call(op, inputs, bank, out.clone())
            got = eager.float().cpu().numpy()
            w = worst_element(got, want)
            rows.append(
                CheckRow(
                    shape=shape.name,
                    kernel=kernel,
                    bank=b,
                    arm=arm,
                    fully_written=not bool(torch.isnan(eager).any()),
                    graph_equal=torch.equal(eager.view(torch.int16), replayed.view(torch.int16)),
                    identical_to_first=first is None
                    or torch.equal(first.view(torch.int16), eager.view(torch.int16)),
                    rel_l2=rel_l2(got, want),
                    worst=f"{w.index}: {w.got:.6g} vs {w.want:.6g} (abs {w.abs_err:.3g})",
                    tolerance=op.variant.tolerance,
                )
            )
            firsts.setdefault(op.variant.identity(), eager)
    return rows


def check_args(
    kernel: str, layout: str, reader: str, module, device: str = "cuda"
) -> list[tuple[str, bool, str]]:
    """Runs every invalid-argument case against a built module: (case, rejected as expected, message)."""
    from workbench.kernels import argcases

    results = []
    all_cases = argcases.cases(kernel, layout, calibration_build=bool(module.calibration))
    for case in [*all_cases[:-1], *argcases.device_cases(kernel, layout)]:
        a = argcases.valid_args(kernel, layout, device=device)
        case.mutate(a)
        try:
            argcases.call(module, kernel, a)
            results.append((case.name, False, "accepted"))
        except ValueError as e:
            results.append((case.name, case.expect in str(e), str(e).splitlines()[0]))
    return results
