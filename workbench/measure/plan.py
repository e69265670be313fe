"""What a run will measure, decided before any GPU work (torch-free, so bad input fails fast).

* ``ArmSpec``: one side of a comparison, parsed from a command-line arm name: ``b3-coop``,
  ``tinygemm`` or ``triton-moe`` (peers), a user's kernel spec file ``path/to/variant.toml`` (docs/DESIGN.md
  §4.1), ``w13=b3-coop,w2=b3-scalar`` (per kernel, as ``step`` needs) or a calibration arm
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

import numpy as np

from workbench.core.errors import BadArgument
from workbench.data.capacity import expert_footprint
from workbench.data.shapes import Shape
from workbench.kernels.specs import is_spec_path, load_spec
from workbench.kernels.variants import ARMS, PEER_ARMS, Variant, parse_arm

KERNEL_CHOICES = ("w13", "w2", "step")
SETS = ("hot", "rotating")
ROLES = ("main", "aa", "reference", "confirm", "calibration")
L2_FACTOR = 5  # rotating working set (per cycle of graphs) at least this many times the L2
MAX_GRAPHS = 16  # bound on alternated graphs: tiny custom shapes would otherwise want hundreds
REFERENCE_ARMS = ("b4-scalar", "tinygemm", "triton-moe")
# Largest padding a block allocates before its banks (docs/DESIGN.md §5.5): 64 MiB spans many
# 2 MiB allocator pages and DRAM interleaving periods; paddings of 1 B - 64 MiB moved the H200's
# W13-hot reader ratio over 0.954-0.963.
MAX_PADDING = 64 << 20


@dataclass(frozen=True)
class ArmSpec:
    """One arm: ``parts`` maps kernel -> Variant (both kernels for ``step``); a peer has none."""

    name: str
    parts: tuple[tuple[str, Variant], ...] = ()
    peer: str | None = None
    spin: int = 0

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
        """Bank layouts this arm reads (a peer converts from the b3 banks)."""
        return {v.layout for v in self.variants} or {"b3"}


def _split_parts(text: str, option: str) -> dict[str, str]:
    """'w13=b3-coop,w2=b3-scalar' -> {'w13': 'b3-coop', 'w2': 'b3-scalar'}; plain -> both."""
    text = text.strip()
    if "=" not in text:
        return {"w13": text, "w2": text}
    parts: dict[str, str] = {}
    for item in text.split(","):
        k, sep, arm = item.partition("=")
        k, arm = k.strip(), arm.strip()
        if not sep or k not in ("w13", "w2") or not arm:
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
    kernels = ("w13", "w2") if kernel == "step" else (kernel,)
    for k in kernels:
        if k not in parts:
            raise BadArgument(
                f"{option} {text!r} names no arm for {k} (needed by --kernel {kernel})"
            )
    names = {k: parts[k] for k in kernels}
    peers = [n for n in names.values() if n in PEER_ARMS]
    if peers:
        if kernel == "step" or calib:
            raise BadArgument(
                f"{option} {text!r}: the peer {peers[0]!r} is timed per kernel (w13, w2) only, "
                "not in step or calibration runs"
            )
        return ArmSpec(peers[0], (), peer=peers[0])
    try:
        variants = tuple((k, _variant(k, names[k], calib)) for k in kernels)
    except BadArgument as e:
        raise BadArgument(f"{option} {text!r}: {e}") from None
    name = ",".join(f"{k}={v.arm}" for k, v in variants) if kernel == "step" else variants[0][1].arm
    return ArmSpec(name, variants)


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

    @property
    def gated(self) -> bool:
        """Bit-identical outputs are required (not for peers or calibration arms)."""
        return self.role != "calibration" and self.a.peer is None and self.b.peer is None

    @property
    def bit_identical(self) -> bool:
        """Gated by bit identity: both arms share one identity for every kernel (their specs
        promise the same arm's bits, docs/DESIGN.md §4.1); else each arm is gated by its
        tolerance against the float64 reference."""
        return self.gated and all(
            self.a.variant(k).identity() == self.b.variant(k).identity()
            for k in kernels_of(self.kernel)
        )


def kernels_of(kernel: str) -> tuple[str, ...]:
    return ("w13", "w2") if kernel == "step" else (kernel,)


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
    kernels: tuple[str, ...], sets: tuple[str, ...], a: str, b: str, reference: bool = True
) -> list[ComparisonSpec]:
    """The comparisons of `workbench ab`, in run order (confirmation comes later, once the
    per-kernel recommendations are known). Reference comparisons put the reference in A and the
    candidate (--b) in B, so their ratio < 1 means the candidate is faster than the reference."""
    out: list[ComparisonSpec] = []
    for kernel in kernels:
        arm_a = parse_arm_spec(kernel, a, "--a")
        arm_b = parse_arm_spec(kernel, b, "--b")
        role = "aa" if arm_a.name == arm_b.name else "main"
        for s in sets:
            out.append(ComparisonSpec(f"{kernel}/{s}", kernel, s, role, arm_a, arm_b))
            if not reference or kernel == "step" or arm_b.peer:
                continue
            for ref in REFERENCE_ARMS:
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
    if a.peer or b.peer or len(a.parts) != 1 or len(b.parts) != 1:
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

    @property
    def ws_cycle(self) -> int:
        """Bytes touched before a replay's weights are read again (one cycle of the graphs)."""
        return self.ws_replay * self.graphs

    @property
    def ws_ratio(self) -> float | None:
        return self.ws_cycle / self.l2_bytes if self.l2_bytes else None

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
        }


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
        # the same top_k experts every call: L2-resident after the first call by design
        return Geometry("hot", calls, 1, 1, slices, shape.top_k * per_expert, l2_bytes, layout)
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
