"""The numerics gate of a comparison (docs/DESIGN.md §5.6), run before its arms are timed and
after every placement, the one home of it: arms of one identity must give bit-identical outputs
(the first difference is named); arms of different identities must each stay within their
promised tolerance against the float64 reference, with no output left unwritten (NaN from the
poison); a tune's candidate that reorders the sums stays within its bound against A (§11.1).
A failed gate raises NumericsError (exit 5); a recorded-only promise is journaled and stops
nothing. Every gate is a ``gate`` record of the session's journal.

``engine`` is the worker's `workbench.measure.engine.Engine` (its sink, workloads and banks),
typed loosely: that module imports this one.
"""

from __future__ import annotations

from typing import Any

import torch

from workbench.core.contract import OPS
from workbench.core.errors import NumericsError
from workbench.measure.graphs import GraphArm, first_difference, loose_difference, unwritten
from workbench.measure.plan import ComparisonSpec, Geometry, kernels_of


def numerics_gate(
    engine: Any,
    c: ComparisonSpec,
    arm_a: GraphArm,
    arm_b: GraphArm,
    block: int | None = None,
    geom: Geometry | None = None,
) -> dict[str, Any]:
    """Run both arms once on the measured inputs and compare every call's output."""
    arm_a.run_once()
    arm_b.run_once()
    if c.gated and c.promise_vs_a is not None:
        return _vs_a_gate(engine, c, arm_a, arm_b, block, c.promise_vs_a)
    if c.gated and not c.bit_identical and geom is not None:
        return _tolerance_gate(engine, c, arm_a, arm_b, block, geom)
    diff = first_difference(arm_a, arm_b)
    rec = {
        "cmp": c.id, "block": block, "ok": diff is None, "gated": c.gated,
        "kind": "bit-identical",
        "outputs": sum(len(o) for o in arm_a.outputs), "first_difference": diff,
    }  # fmt: skip
    engine.sink.record("gate", **rec)
    engine.sink.emit("gate", rec)
    if c.gated and not rec["ok"]:
        d = rec["first_difference"]
        what = "was not written (still NaN)" if d["unwritten"] else "differs"
        raise NumericsError(
            f"{c.id}: outputs of {c.a.name} (A) and {c.b.name} (B) are not bit-identical: "
            f"graph {d['graph']} {d['output']}{d['index']} {what}: A={d['a']!r} "
            f"(0x{d['a_bits'] & 0xFFFF:04x}), B={d['b']!r} (0x{d['b_bits'] & 0xFFFF:04x}); "
            f"{d['differing']} of {d['elements']} elements differ in that output. "
            "Nothing was timed."
        )
    return rec


def _vs_a_gate(
    engine: Any, c: ComparisonSpec, arm_a: GraphArm, arm_b: GraphArm, block: int | None,
    tolerance: float,
) -> dict[str, Any]:  # fmt: skip
    """A tune candidate whose parameters reorder the FP32 sums (docs/DESIGN.md §11.1): B's
    outputs within ``tolerance`` relative L2 of A's (NaN, an unwritten output, fails)."""
    d = loose_difference(arm_a, arm_b)
    ok = bool(d["rel_l2"] <= tolerance)
    rec = {"cmp": c.id, "block": block, "ok": ok, "gated": True,
           "kind": f"rel_l2 vs A <= {tolerance:g} (parameters reorder the FP32 sums)", **d}  # fmt: skip
    engine.sink.record("gate", **rec)
    engine.sink.emit("gate", rec)
    if not ok:
        raise NumericsError(
            f"{c.id}: {c.b.name} (B) against {c.a.name} (A): relative L2 {d['rel_l2']:.3g}, "
            f"beyond {tolerance:g} (worst element {d['max_abs_diff']:.3g}). Nothing was timed."
        )
    return rec


def _tolerance_gate(
    engine: Any,
    c: ComparisonSpec,
    arm_a: GraphArm,
    arm_b: GraphArm,
    block: int | None,
    geom: Geometry,
) -> dict[str, Any]:
    """Arms of different identities (docs/DESIGN.md §4.1): every output of every call written
    (no NaN left from the poison), and each arm's outputs of the first call of graph 0
    against the float64 reference, within the arm's promised tolerance. A recorded-only
    promise (the tinygemm peer's) is checked and journaled but stops nothing."""
    from workbench.data.reference import rel_l2

    work = engine.calls.workload(c.kernel, c.set, geom)
    bank_index, _ = geom.slot(0, 0)
    inp, ids = work["inputs"][0], work["ids"][0][0]
    got: dict[str, float] = {}
    limit: dict[str, float] = {}
    gating: dict[str, bool] = {}
    for arm, graph_arm in ((c.a, arm_a), (c.b, arm_b)):
        outs = dict(graph_arm.outputs[0])
        errs, made = [], {}
        for k in kernels_of(c.kernel):
            op = OPS[k]  # what the call reads and writes (core/contract.py)
            # W2 of a step reads this arm's own W13 output, as the timed graph does
            inputs = {"ids": ids, **{n: made.get(n, inp.get(n)) for n in op.reads}}
            want = _reference(engine, c, arm, k, bank_index, inputs)
            out = outs[f"call0.{op.writes}"]
            errs.append(rel_l2(out.float().cpu().numpy().reshape(want.shape), want))
            made[op.writes] = out
        got[arm.name] = float("nan") if unwritten(graph_arm) else max(errs)
        limit[arm.name] = min(arm.tolerance(k) for k in kernels_of(c.kernel))
        gating[arm.name] = arm.gating
    missed = [n for n in got if not got[n] <= limit[n]]  # NaN fails too
    bad = [n for n in missed if gating[n]]
    worst = max(got.values(), key=lambda x: x if x == x else float("inf"))
    rec = {
        "cmp": c.id, "block": block, "ok": not missed, "gated": all(gating.values()),
        "kind": "rel_l2 vs the float64 reference (each arm within its promised tolerance)",
        "rel_l2": worst if worst == worst else None,
        "arms": {n: {"rel_l2": got[n], "tolerance": limit[n], "gated": gating[n]}
                 for n in got},  # fmt: skip
        "a_vs_b": loose_difference(arm_a, arm_b),  # recorded: how far apart the two arms are
    }  # fmt: skip
    engine.sink.record("gate", **rec)
    engine.sink.emit("gate", rec)
    if bad:
        n = bad[0]
        what = (
            "left outputs unwritten (NaN)"
            if got[n] != got[n]
            else f"has relative L2 {got[n]:.3g} against the float64 reference on call 0 of "
            f"graph 0, above its tolerance {limit[n]:g}"
        )
        raise NumericsError(f"{c.id}: {n} misses its numerics promise: it {what}. Timing stopped.")
    return rec


def _reference(engine: Any, c: ComparisonSpec, arm: Any, kernel: str, bank_index: int,
               inputs: dict[str, Any]) -> Any:  # fmt: skip
    """The float64 reference of one call, computed once per run for what it depends on
    (``reference_key``; the workers after the first are handed it). A step's W2 reads the arm's
    own W13 output, so it is computed each time."""
    from workbench.measure.check import reference_output

    bank = engine.calls.bank(arm, kernel, bank_index)
    if c.kernel == "step":
        return reference_output(kernel, bank, inputs)
    layout = arm.python.layout if arm.python else arm.variant(kernel).layout
    key = reference_key(kernel, layout, bank_index, bank.seed, inputs)
    cache = engine.references
    if key not in cache:
        cache[key] = reference_output(kernel, bank, inputs)
        engine.references_computed = getattr(engine, "references_computed", 0) + 1
    return cache[key]


def reference_key(
    kernel: str, layout: str, bank_index: int, bank_seed: int, inputs: dict[str, Any]
) -> tuple[Any, ...]:
    """What a call's float64 reference depends on, by value: the bank (its index and seed; a
    placement moves its bytes, never changes them), the expert ids and the activations' bytes.
    Equal in every worker of a run, so the first worker's references serve the rest
    (workbench.run.setup)."""
    import hashlib

    digest = hashlib.sha256()
    for name in ("ids", "x", "inter", "rw"):
        t = inputs.get(name)
        if t is not None:
            digest.update(name.encode())
            digest.update(t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes())
    return (kernel, layout, int(bank_index), int(bank_seed), digest.hexdigest())
