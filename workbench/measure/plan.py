"""What a run will measure, decided before any GPU work (torch-free, so bad input fails fast).

* ``ArmSpec``: one side of a comparison, parsed from a command-line arm name: ``b3-coop``,
  ``tinygemm`` or ``triton-moe`` (peers, built-in Python arms), a user's kernel spec file
  ``path/to/variant.toml`` (docs/DESIGN.md §4.1; ``kind = "python"``: a Python arm, §4.8),
  ``w13=b3-coop,w2=b3-scalar`` (per kernel, as ``step`` needs) or a calibration arm
  ``b3-scalar+spin=2000``.
* ``ComparisonSpec``: id, kernel (w13, w2, step), expert set, role, arms A and B.
* ``Geometry``: which banks and experts each call of each captured graph touches. Hot set: one
  bank, the same ``top_k`` experts every call. Rotating set: call ``l`` uses bank ``l`` and its own
  experts; below ``L2_FACTOR`` x L2 the run captures several graphs that use disjoint experts of
  the banks (a bank of E experts holds E // top_k disjoint routings; beyond that, more banks) and
  alternates between them on consecutive replays, so no replay finds the previous one's weights
  in L2.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench.core import defaults
from workbench.core.arms import REFERENCE_ARMS
from workbench.core.errors import BadArgument
from workbench.core.vocab import KERNEL_CHOICES, KERNELS, SETS
from workbench.data.capacity import expert_footprint
from workbench.data.shapes import Shape
from workbench.kernels.pyarm import (
    PythonSpec,
    builtin_python,
    is_python_spec,
    load_python_spec,
)
from workbench.kernels.specs import is_spec_path, load_spec, read_toml
from workbench.kernels.variants import ARMS, PEER_ARMS, Variant, parse_arm

# "method": a main comparison timed again by another method on its captured graphs (§5.11)
ROLES = ("main", "aa", "reference", "confirm", "calibration", "method")
L2_FACTOR = 5  # rotating working set (per cycle of graphs) at least this many times the L2
# A hot set counts as L2-resident only up to this fraction of the L2 (docs/DESIGN.md §5.3): the
# activations, outputs and routed ids share the L2 with it, replacement is not a perfect LRU, and
# on A100/H100/H200 the L2 is two partitions whose far half is reached through the crossbar.
HOT_RESIDENT_FRACTION = 0.5
MAX_GRAPHS = 16  # bound on alternated graphs: tiny custom shapes would otherwise want hundreds
# Largest padding a block allocates before its banks (docs/DESIGN.md §5.5): 64 MiB spans many
# 2 MiB allocator pages and DRAM interleaving periods; paddings of 1 B - 64 MiB moved the H200's
# W13-hot reader ratio over 0.954-0.963.
MAX_PADDING = 64 << 20


@dataclass(frozen=True)
class ArmSpec:
    """One arm: ``parts`` maps kernel -> Variant (both kernels for ``step``); a Python arm (a
    peer, or a user's ``kind = "python"`` spec) has none, but its ``python`` spec."""

    name: str
    parts: tuple[tuple[str, Variant], ...] = ()
    python: PythonSpec | None = None
    spin: int = 0

    @property
    def peer(self) -> str | None:
        """The built-in peer's name (tinygemm, triton-moe), else None."""
        return self.python.name if self.python is not None and self.python.builtin else None

    def identity(self, kernel: str) -> str:
        """Arms of one identity must agree bit for bit (docs/DESIGN.md §4.1)."""
        if self.python is not None:
            return f"{kernel}:{self.python.identical_to or self.python.name}"
        return self.variant(kernel).identity()

    def tolerance(self, kernel: str) -> float:
        """Relative L2 against the float64 reference this arm promises."""
        from workbench.kernels.specs import DEFAULT_TOLERANCE

        if self.python is not None:
            return self.python.tolerance or DEFAULT_TOLERANCE
        return self.variant(kernel).tolerance

    @property
    def gating(self) -> bool:
        """False for a promise that is recorded only (the tinygemm peer's)."""
        return self.python is None or self.python.gated

    def variant(self, kernel: str) -> Variant:
        for k, v in self.parts:
            if k == kernel:
                return v
        raise BadArgument(f"arm {self.name!r} has no variant for kernel {kernel!r}")

    @property
    def variants(self) -> list[Variant]:
        return [v for _, v in self.parts]

    @property
    def layouts(self) -> set[str]:
        """Bank layouts this arm reads (a Python arm: its spec's, b3 for the peers)."""
        if self.python is not None:
            return {self.python.layout}
        return {v.layout for v in self.variants}


def _split_parts(text: str, option: str) -> dict[str, str]:
    """'w13=b3-coop,w2=b3-scalar' -> {'w13': 'b3-coop', 'w2': 'b3-scalar'}; plain -> both."""
    text = text.strip()
    if "=" not in text:
        return {"w13": text, "w2": text}
    parts: dict[str, str] = {}
    for item in text.split(","):
        k, sep, arm = item.partition("=")
        k, arm = k.strip(), arm.strip()
        if not sep or k not in KERNELS or not arm:
            raise BadArgument(
                f"{option} {text!r}: {item!r} is not KERNEL=ARM with KERNEL w13 or w2 "
                "(e.g. w13=b3-coop,w2=b3-scalar)"
            )
        if k in parts:
            raise BadArgument(f"{option} {text!r}: kernel {k} is given twice")
        parts[k] = arm
    return parts


def parse_arm_spec(kernel: str, text: str, option: str = "--a", calib: bool = False) -> ArmSpec:
    """The arm that ``text`` names for ``kernel`` (w13, w2 or step); BadArgument names ``option``.

    For ``step`` both kernels need an arm: a plain name applies to both, or ``w13=..,w2=..``.
    """
    if kernel not in KERNEL_CHOICES:
        raise BadArgument(f"--kernel {kernel!r} is not one of {', '.join(KERNEL_CHOICES)}")
    if not isinstance(text, str) or not text.strip():
        raise BadArgument(f"{option} {text!r} is empty; known arms: {', '.join(ARMS + PEER_ARMS)}")
    parts = _split_parts(text, option)
    kernels = KERNELS if kernel == "step" else (kernel,)
    for k in kernels:
        if k not in parts:
            raise BadArgument(
                f"{option} {text!r} names no arm for {k} (needed by --kernel {kernel})"
            )
    names = {k: parts[k] for k in kernels}
    pythons = [(n, _python(n, option, text)) for n in names.values()]
    pythons = [(n, p) for n, p in pythons if p is not None]
    if pythons:
        name, spec = pythons[0]
        if kernel == "step" or calib:
            raise BadArgument(
                f"{option} {text!r}: the Python arm {name!r} is timed per kernel (w13, w2) only, "
                "not in step or calibration runs"
            )
        if kernel not in spec.kernels:
            raise BadArgument(
                f"{option} {text!r}: Python arm {spec.name} ({spec.origin}) implements "
                f"{', '.join(spec.kernels)}, not {kernel}"
            )
        return ArmSpec(spec.name, (), python=spec)
    try:
        variants = tuple((k, _variant(k, names[k], calib)) for k in kernels)
    except BadArgument as e:
        raise BadArgument(f"{option} {text!r}: {e}") from None
    name = ",".join(f"{k}={v.arm}" for k, v in variants) if kernel == "step" else variants[0][1].arm
    return ArmSpec(name, variants)


def _python(name: str, option: str, text: str) -> PythonSpec | None:
    """The Python arm ``name`` names (a peer, or a spec file of ``kind = "python"``), else None."""
    if name in PEER_ARMS:
        return builtin_python(name)
    if not is_spec_path(name):
        return None
    try:
        if not is_python_spec(read_toml(Path(name.strip()))):
            return None
        return load_python_spec(name.strip())
    except BadArgument as e:
        raise BadArgument(f"{option} {text!r}: {e}") from None


def _variant(kernel: str, name: str, calib: bool) -> Variant:
    """A built-in arm name, or a spec file (.toml) whose op contract must be ``kernel``."""
    if not is_spec_path(name):
        return parse_arm(kernel, name, calib=calib)
    spec = load_spec(name.strip())
    if spec.name in PEER_ARMS:
        raise BadArgument(f"{spec.origin}: name: {spec.name!r} is a peer's name: choose another")
    if spec.kernel != kernel:
        raise BadArgument(
            f"spec {spec.name} ({spec.origin}) implements {spec.kernel}, not {kernel}: "
            f"use --kernel {spec.kernel}"
        )
    return Variant.of_spec(spec, calib=calib)


def with_spin(arm: ArmSpec, spin: int) -> ArmSpec:
    """The calibration build of ``arm`` spinning ``spin`` SM cycles per CTA (named '+spin=N')."""
    if isinstance(spin, bool) or not isinstance(spin, int) or spin < 0:
        raise BadArgument(f"spin={spin!r} must be an integer number of cycles >= 0")
    parts = tuple((k, dataclasses.replace(v, calib=True)) for k, v in arm.parts)
    return ArmSpec(f"{arm.name}+spin={spin}", parts, spin=spin)


@dataclass(frozen=True)
class ComparisonSpec:
    id: str
    kernel: str
    set: str
    role: str
    a: ArmSpec
    b: ArmSpec
    # Comparisons of one kernel and group share their blocks' placements (docs/DESIGN.md §5.5);
    # a calibration trial is its own group, so trials are independent placements.
    group: str = ""
    # how a sample's replays are timed: a name of workbench.measure.graphs.TIMINGS (journaled
    # in the comparison record where it is not the default, per-replay CUDA events)
    timing: str = field(default="events", kw_only=True)
    # a method check (role "method") names the comparison whose captured arms it times again,
    # in that comparison's blocks (docs/DESIGN.md §5.11); journaled where not empty
    of: str = field(default="", kw_only=True)

    @property
    def gated(self) -> bool:
        """Outputs are gated (by bit identity or by each arm's promise), except in calibration."""
        return self.role != "calibration"

    @property
    def bit_identical(self) -> bool:
        """Gated by bit identity: both arms share one identity for every kernel (their specs
        promise the same arm's bits, docs/DESIGN.md §4.1); else each arm is gated by its
        tolerance against the float64 reference."""
        return self.gated and all(
            self.a.identity(k) == self.b.identity(k) for k in kernels_of(self.kernel)
        )

    @property
    def promise_vs_a(self) -> float | None:
        """A bound on the relative L2 of B's outputs against A's that replaces both gates above
        (a tune's candidate whose parameters reorder the sums, docs/DESIGN.md §11.1); None: none.
        workbench.measure.gate applies every kind."""
        return None


def kernels_of(kernel: str) -> tuple[str, ...]:
    return KERNELS if kernel == "step" else (kernel,)


def parse_list(text: str, choices: tuple[str, ...], option: str) -> tuple[str, ...]:
    """'w13,w2' -> ('w13', 'w2'), in the order given, duplicates removed; names ``option``."""
    items = [x.strip() for x in str(text).split(",") if x.strip()]
    if not items:
        raise BadArgument(f"{option} {text!r} is empty; choose from {', '.join(choices)}")
    for x in items:
        if x not in choices:
            raise BadArgument(f"{option} {text!r}: {x!r} is not one of {', '.join(choices)}")
    return tuple(dict.fromkeys(items))


def plan_ab(
    kernels: tuple[str, ...],
    sets: tuple[str, ...],
    a: str,
    b: str,
    reference: bool | tuple[str, ...] = True,
    check: str | None = defaults.CHECK_TIMING,
) -> list[ComparisonSpec]:
    """The comparisons of `workbench ab`, in run order (confirmation comes later, once the
    per-kernel recommendations are known). Reference comparisons put the reference in A and the
    candidate (--b) in B, so their ratio < 1 means the candidate is faster than the reference.
    ``reference``: True for the default reference arms (defaults.REFERENCES), False for none, or
    the names to time (of REFERENCE_ARMS). ``check``: the timing method that times each main
    comparison of w13 or w2 on defaults.CHECK_SETS again ("w13/hot/batch", role "method",
    right after its main one; docs/DESIGN.md §5.11), None for no method check."""
    refs = defaults.REFERENCES if reference is True else () if reference is False else reference
    for ref in refs:
        if ref not in REFERENCE_ARMS:
            raise BadArgument(
                f"--reference {ref!r} is not one of {', '.join(REFERENCE_ARMS)} (or none)"
            )
    out: list[ComparisonSpec] = []
    for kernel in kernels:
        arm_a = parse_arm_spec(kernel, a, "--a")
        arm_b = parse_arm_spec(kernel, b, "--b")
        role = "aa" if arm_a.name == arm_b.name else "main"
        for s in sets:
            out.append(ComparisonSpec(f"{kernel}/{s}", kernel, s, role, arm_a, arm_b))
            if check and role == "main" and kernel in KERNELS and s in defaults.CHECK_SETS:
                out.append(
                    ComparisonSpec(f"{kernel}/{s}/{check}", kernel, s, "method", arm_a, arm_b,
                                   timing=check, of=f"{kernel}/{s}")
                )  # fmt: skip
            if not reference or kernel == "step" or arm_b.peer:
                continue
            for ref in refs:
                if ref in (arm_a.name, arm_b.name):
                    continue
                arm_r = parse_arm_spec(kernel, ref, "reference")
                out.append(
                    ComparisonSpec(f"{kernel}/{s}/{ref}", kernel, s, "reference", arm_r, arm_b)
                )
    return out


def is_reader_comparison(a: ArmSpec, b: ArmSpec) -> bool:
    """True when A is the scalar and B the cooperative reader of one layout, at the same
    parameter values (a recommendation between readers makes sense only then: the reader is the
    one difference; `workbench tune` asks it at the best parameters, docs/DESIGN.md §11)."""
    if a.python or b.python or len(a.parts) != 1 or len(b.parts) != 1:
        return False
    va, vb = a.parts[0][1], b.parts[0][1]
    if va.user or vb.user or va.params != vb.params:
        return False  # users' kernels are no reader pair; parameters must match
    return va.layout == vb.layout and va.reader == "scalar" and vb.reader == "coop"


# ------------------------------------------------------------------------------- geometry


def expert_bytes(shape: Shape, kernels: tuple[str, ...], layout: str) -> int:
    """Bytes of one routed expert's weights + metadata, summed over ``kernels``."""
    return sum(expert_footprint(*shape.dims(k), group=shape.group).total(layout) for k in kernels)


@dataclass(frozen=True)
class Geometry:
    """Where every call of every graph reads: ``slot(g, l) -> (bank, routing slice)``."""

    set: str
    calls: int
    graphs: int
    banks: int
    slices_per_bank: int
    ws_replay: int  # bytes of weights+metadata one replay reads (smallest layout of the arms)
    l2_bytes: int | None
    layout: str  # the layout ws_replay was computed for
    notes: tuple[str, ...] = field(default=())
    ws_largest: int | None = None  # bytes one replay reads in the arms' largest layout

    @property
    def ws_cycle(self) -> int:
        """Bytes touched before a replay's weights are read again (one cycle of the graphs)."""
        return self.ws_replay * self.graphs

    @property
    def ws_ratio(self) -> float | None:
        return self.ws_cycle / self.l2_bytes if self.l2_bytes else None

    @property
    def residency(self) -> str | None:
        """For a hot set: whether its working set can stay in the L2 (`hot_residency`)."""
        ws = self.ws_largest or self.ws_replay
        return hot_residency(ws, self.l2_bytes) if self.set == "hot" else None

    @property
    def label(self) -> str:
        """The set's name as shown: "hot (0.77× L2, may not stay resident)" where it is not
        plainly resident (`set_label`)."""
        return set_label(self.set, self.ws_largest or self.ws_replay, self.l2_bytes)

    def slot(self, graph: int, call: int) -> tuple[int, int]:
        if self.set == "hot":
            return 0, 0
        extra, sl = divmod(graph, self.slices_per_bank)
        return call + self.calls * extra, sl

    def to_record(self) -> dict:
        return {
            "working_set_bytes": self.ws_cycle,
            "working_set_per_replay_bytes": self.ws_replay,
            "l2_bytes": self.l2_bytes,
            "working_set_l2_ratio": self.ws_ratio,
            "graphs": self.graphs,
            "banks": self.banks,
            "set_label": self.label,
            **(
                {"residency": self.residency, "working_set_largest_bytes": self.ws_largest}
                if self.set == "hot"
                else {}
            ),
        }


def hot_residency(ws_bytes: int | None, l2_bytes: int | None) -> str:
    """Whether a hot working set of ``ws_bytes`` can stay in an L2 of ``l2_bytes``: "resident"
    (at most HOT_RESIDENT_FRACTION of it), "marginal" (up to the whole L2), "partly resident"
    (more than the L2: part of every call comes from DRAM), or "unknown"."""
    if not ws_bytes or not l2_bytes:
        return "unknown"
    ratio = ws_bytes / l2_bytes
    if ratio <= HOT_RESIDENT_FRACTION:
        return "resident"
    return "marginal" if ratio <= 1.0 else "partly resident"


def set_label(set_name: str, ws_bytes: int | None, l2_bytes: int | None) -> str:
    """The honest name of an expert set: a hot set that cannot plainly stay in the L2 says so."""
    if set_name != "hot":
        return set_name
    res = hot_residency(ws_bytes, l2_bytes)
    if res == "marginal":
        return f"hot ({ws_bytes / l2_bytes:.2f}× L2, may not stay resident)"
    if res == "partly resident":
        return f"hot ({ws_bytes / l2_bytes:.2f}× L2, partly resident)"
    return "hot"


def geometry(
    shape: Shape, kernel: str, set_name: str, calls: int, layouts: set[str], l2_bytes: int | None
) -> Geometry:
    """Graphs and banks for one (kernel, set) so that the rotating set spans >= L2_FACTOR x L2."""
    if set_name not in SETS:
        raise BadArgument(f"--set {set_name!r} is not one of {', '.join(SETS)}")
    layout = min(layouts, key=lambda lay: expert_bytes(shape, kernels_of(kernel), lay))
    per_expert = expert_bytes(shape, kernels_of(kernel), layout)
    slices = max(1, shape.experts // shape.top_k)
    if set_name == "hot":
        # the same top_k experts every call: L2-resident after the first call where it fits.
        # Residency is judged on the arms' largest layout (the b4 arm of b3-vs-b4 reads more).
        big = max(layouts, key=lambda lay: expert_bytes(shape, kernels_of(kernel), lay))
        ws = shape.top_k * expert_bytes(shape, kernels_of(kernel), big)
        res = hot_residency(ws, l2_bytes)
        notes = []
        if res == "unknown":
            notes.append("L2 size unknown: hot set not checked against L2")
        elif res != "resident":
            what = (
                "more than the whole L2: part of every call is read from DRAM"
                if res == "partly resident"
                else f"more than {HOT_RESIDENT_FRACTION:.0%} of it: it may not stay resident"
            )
            notes.append(
                f"hot set of {ws / 1e6:.2f} MB per call ({big}) is {ws / l2_bytes:.2f}x the "
                f"{l2_bytes / 2**20:.0f} MiB L2, {what}; it is named "
                f"'{set_label('hot', ws, l2_bytes)}'"
            )
        ws_small = shape.top_k * per_expert
        return Geometry(
            "hot", calls, 1, 1, slices, ws_small, l2_bytes, layout, tuple(notes), ws_largest=ws
        )
    ws = calls * shape.top_k * per_expert
    notes: list[str] = []
    graphs = 1
    if l2_bytes is None:
        notes.append("L2 size unknown: one graph, working set not checked against L2")
    elif ws < L2_FACTOR * l2_bytes:
        graphs = math.ceil(L2_FACTOR * l2_bytes / ws)
        if graphs > MAX_GRAPHS:
            notes.append(
                f"working set {ws} B per replay would need {graphs} graphs for "
                f"{L2_FACTOR}x L2; capped at {MAX_GRAPHS}"
            )
            graphs = MAX_GRAPHS
    banks = calls * math.ceil(graphs / slices)
    return Geometry("rotating", calls, graphs, banks, slices, ws, l2_bytes, layout, tuple(notes))


def expert_ids(shape: Shape, seed: int, bank: int, slice_: int, hot: bool = False) -> list[int]:
    """The ``top_k`` distinct experts routed in (bank, slice): a seeded permutation of the bank's
    experts cut into disjoint slices, so different slices never share an expert."""
    rng = np.random.default_rng([seed, 1 if hot else 0, bank])
    perm = rng.permutation(shape.experts)
    k = shape.top_k
    return [int(e) for e in perm[slice_ * k : (slice_ + 1) * k]]


def bank_seed(seed: int, bank: int) -> int:
    """Seed of bank ``bank`` (the same for b4 and b3, so both decode to identical weights)."""
    return seed * 100_003 + bank


PLACEMENT_KINDS = (
    "block",
    "primed",
    "warmup",
)  # counted blocks first: their draws stay as they were


def placement_padding(placement_seed: int, group: int, block: int, kind: str = "block") -> int:
    """Bytes of padding block ``block`` of run group ``group`` allocates before placing its banks
    (1 .. MAX_PADDING, uniform): the same seed gives the same paddings, so a run (and so each
    of its blocks) can be replayed with ``--placement-seed``. ``kind``: a counted block, a
    priming placement or a warm-up block (docs/DESIGN.md §5.5), each drawn from its own stream
    of the same distribution; a counted block's draw is the one sessions before the others had."""
    if kind not in PLACEMENT_KINDS:
        raise ValueError(f"placement kind {kind!r} is not one of {PLACEMENT_KINDS}")
    extra = [PLACEMENT_KINDS.index(kind)] if kind != "block" else []
    rng = np.random.default_rng([placement_seed, group, block, *extra])
    return int(rng.integers(1, MAX_PADDING + 1))
