"""The parameter space of a kernel and its candidates: the one adapter between `workbench tune`
and the kernel specs (docs/DESIGN.md §11.1).

The parameters are the kernel specs' (workbench/kernels/specs.py, docs/DESIGN.md §4.1): each a ``-D``
macro with its allowed values and default. A candidate is one choice of values; its variant is
the spec's with those values (``Variant.of_spec``), so its build name hashes them. Nothing else
in workbench/tune reads the specs.

Numerics: a parameter that changes how a kernel splits its sum over warps changes the FP32
summation order, so such a candidate cannot promise bit-identity with the default; it promises a
tolerance instead (``Candidate.tolerance``). ``work_split`` says which parameters do that.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from workbench.core.errors import BadArgument
from workbench.core.vocab import KERNELS
from workbench.data.shapes import Shape
from workbench.kernels.specs import ARMS, Param, builtin_spec
from workbench.kernels.variants import Variant
from workbench.measure.plan import ArmSpec, ComparisonSpec

# Relative L2 of a candidate's outputs against the default's when its parameters reorder the
# FP32 sums: a reordering moves an output by at most one FP16 ulp (~5e-4 relative), so 1e-3
# is half of the reference tolerance (specs.DEFAULT_TOLERANCE, docs/DESIGN.md §3.6) and still catches
# a wrong result, which moves outputs by far more.
REORDER_REL_L2 = 1e-3
MAX_CANDIDATES = 256  # a sweep beyond this is a typo in --param, not a plan


def params_of(kernel: str, arm: str = "b3-scalar") -> tuple[Param, ...]:
    """The tunable parameters of a built-in kernel: its spec's (docs/DESIGN.md §4.1)."""
    if kernel not in KERNELS:
        raise BadArgument(f"--kernel {kernel!r}: tune knows {', '.join(KERNELS)}")
    return builtin_spec(kernel, arm).params


def non_default(kernel: str, values: dict[str, int]) -> tuple[tuple[str, int], ...]:
    """The values that differ from the defaults, in declaration order (as a variant keeps them)."""
    return tuple((p.name, values[p.name]) for p in params_of(kernel)
                 if p.name in values and values[p.name] != p.default)  # fmt: skip


def label(params: tuple[tuple[str, int], ...]) -> str:
    return ",".join(f"{k}={v}" for k, v in params)


def parse_overrides(kernel: str, items: list[str] | None) -> dict[str, tuple[int, ...]]:
    """``--param NAME=v1,v2`` options -> {name: values}; a bad name or value is a BadArgument
    naming the option, the name and the allowed values."""
    known = {p.name: p for p in params_of(kernel)}
    out: dict[str, tuple[int, ...]] = {}
    for item in items or []:
        name, sep, vals = str(item).partition("=")
        name = name.strip()
        if not sep or name not in known:
            raise BadArgument(
                f"--param {item!r}: not NAME=v1,v2 with NAME one of {', '.join(known)} for {kernel}"
            )
        p = known[name]
        values = []
        for v in vals.split(","):
            v = v.strip()
            if not v.lstrip("-").isdigit() or int(v) not in p.values:
                raise BadArgument(
                    f"--param {item!r}: {v!r} is not an allowed value of {name} "
                    f"({', '.join(map(str, p.values))})"
                )
            values.append(int(v))
        if name in out:
            raise BadArgument(f"--param {item!r}: {name} is given twice")
        out[name] = tuple(dict.fromkeys(values))
    return out


def work_split(kernel: str, params: dict[str, int], shape: Shape) -> tuple[int, ...]:
    """What fixes the FP32 summation order: equal splits give bit-identical outputs.

    W13: warp w sums groups w, w + warps, ... in order, so only the warp count matters.
    W2: warp w sums runs of ``unroll`` units spaced ``unroll · warps`` apart: both matter.
    The warp count is the launcher's (csrc/kernels/awq_meta.cuh warps_for): ceil(items / unroll), capped."""
    k, _ = shape.dims(kernel)
    items = k // shape.group if kernel == "w13" else shape.top_k * (k // shape.group)
    warps = max(1, min(params["max_warps"], math.ceil(items / params["unroll"])))
    return (warps,) if kernel == "w13" else (params["unroll"], warps)


@dataclass(frozen=True)
class Candidate:
    """One point of the space: a build of ``kernel``'s ``arm`` with ``params``."""

    kernel: str
    arm: str
    params: tuple[tuple[str, int], ...]  # every declared parameter, in declaration order
    is_default: bool
    tolerance: float | None = None  # None: bit-identical to the default; else rel L2 bound

    @property
    def name(self) -> str:
        return label(self.params)

    @property
    def variant(self) -> Variant:
        """The default is the plain variant: the very build `workbench ab` times (a variant
        keeps only the values that differ from its spec's defaults)."""
        return Variant.of_spec(builtin_spec(self.kernel, self.arm), params=dict(self.params))

    def arm_spec(self) -> ArmSpec:
        name = self.arm if self.is_default else f"{self.arm}@{self.name}"
        return ArmSpec(name, ((self.kernel, self.variant),))

    def with_arm(self, arm: str) -> Candidate:
        """The same parameters on another reader (the reader verdict at these parameters)."""
        return Candidate(self.kernel, arm, self.params, self.is_default, None)


def defaults(kernel: str) -> dict[str, int]:
    return {p.name: p.default for p in params_of(kernel)}


def candidates(
    kernel: str, arm: str, overrides: dict[str, tuple[int, ...]] | None, shape: Shape
) -> list[Candidate]:
    """Every combination of the parameters' values (``overrides`` narrow a parameter to the
    values given), the default first. Each carries its numerics promise for ``shape``."""
    ps = params_of(kernel)
    if arm not in ARMS:
        raise BadArgument(f"--arm {arm!r} is not one of {', '.join(ARMS)}")
    overrides = overrides or {}
    axes = [overrides.get(p.name, p.values) for p in ps]
    n = math.prod(len(a) for a in axes)
    if n > MAX_CANDIDATES:
        raise BadArgument(f"--param: {n} candidates; narrow the sweep to at most {MAX_CANDIDATES}")
    base = defaults(kernel)
    split0 = work_split(kernel, base, shape)
    out = [Candidate(kernel, arm, tuple(base.items()), True)]
    for combo in itertools.product(*axes):
        values = dict(zip((p.name for p in ps), combo, strict=True))
        if values == base:
            continue
        same = work_split(kernel, values, shape) == split0
        out.append(
            Candidate(kernel, arm, tuple(values.items()), False, None if same else REORDER_REL_L2)
        )
    return out


@dataclass(frozen=True)
class TuneComparison(ComparisonSpec):
    """A comparison of a tune run, gated by the candidate's own promise (workbench.measure.gate):
    ``tolerance`` None: bit-identical to A (the default's summation order); else the bound on
    the relative L2 against A, whatever the arms' names would imply."""

    tolerance: float | None = None

    @property
    def bit_identical(self) -> bool:
        return self.tolerance is None

    @property
    def promise_vs_a(self) -> float | None:
        return self.tolerance


def comparisons(
    phase: str, default: Candidate, cand: Candidate, sets: tuple[str, ...], group: str
) -> list[TuneComparison]:
    """``phase`` "screen" or "tune" (confirmation): the default in A, the candidate in B."""
    return [
        TuneComparison(
            f"{phase}/{cand.name}/{s}",
            cand.kernel,
            s,
            phase,
            default.arm_spec(),
            cand.arm_spec(),
            group,
            cand.tolerance,
        )  # fmt: skip
        for s in sets
    ]


def reader_comparisons(best: Candidate, sets: tuple[str, ...]) -> list[TuneComparison]:
    """Scalar against cooperative reader at the best parameters (role main: the recommendation
    rule of docs/DESIGN.md §7.5 reads it). Same parameters, same sums: bit-identical."""
    layout = best.arm.split("-")[0]
    a, b = best.with_arm(f"{layout}-scalar"), best.with_arm(f"{layout}-coop")
    return [
        TuneComparison(
            f"reader/{best.name}/{s}", best.kernel, s, "main", a.arm_spec(), b.arm_spec(), "reader"
        )
        for s in sets
    ]
